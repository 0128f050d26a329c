"""A budget that cannot hold the rounds a verdict needs is refused before any work, in one line that names
what fits; raising --budget-s is how a user accepts a long run."""

from __future__ import annotations

import re


def test_a_gpu_workload_on_the_cpu_with_a_minute_of_budget_is_refused_before_work(accel_in_process, tmp_path):
    # synthetic data: the refusal is about the work, and a fresh clone has no CIFAR-10 (that refusal comes first)
    out = accel_in_process("run", "ch7-amp", "--device", "cpu", "--budget-s", "60", "--dataset", "synthetic",
                           "--results-dir", str(tmp_path))
    assert out.returncode == 2, out.stderr
    line = out.stderr.strip()
    assert len(line.splitlines()) == 1 and "Traceback" not in line
    assert "the 3 rounds a verdict needs take about" in line and "more than --budget-s 60" in line
    assert re.search(r"accept it with --budget-s \d+", line) and "--scale smoke" in line
    assert not list(tmp_path.iterdir())  # nothing started, nothing written


def test_the_dry_run_shows_the_plan_and_ends_refused_as_the_run_would(accel_in_process, tmp_path):
    """A script that checks a plan with --dry-run learns from the exit code that the run would be refused."""
    out = accel_in_process("run", "ch7-amp", "--device", "cpu", "--budget-s", "60", "--dry-run",
                           "--results-dir", str(tmp_path))
    assert out.returncode == 2, out.stderr
    plan = " ".join(out.stdout.split())
    assert plan.startswith("plan: ch7-amp, in rounds of processes ") and "ch7-amp [fp32] baseline arm" in plan
    assert "budget 60 s" in plan and re.search(r"estimate: about \d+ s", plan)
    line = out.stderr.strip()
    assert len(line.splitlines()) == 1 and re.search(
        r"^accel: error: the 3 rounds a verdict needs take about \d+ s here .*"
        r"more than --budget-s 60; accept it with --budget-s \d+", line), out.stderr
    assert not tmp_path.exists() or not list(tmp_path.iterdir())  # a dry run starts and writes nothing


def test_fixed_rounds_are_the_user_s_rule_and_are_not_refused(accel_in_process, tmp_path):
    out = accel_in_process("run", "ch7-amp", "--device", "cpu", "--rounds", "3", "--dry-run",
                           "--results-dir", str(tmp_path))
    assert out.returncode == 0 and "REFUSED" not in out.stdout and "3 rounds" in out.stdout
