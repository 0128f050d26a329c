"""How a user's command becomes processes (harness/comparison.py, harness/rounds.py, harness/worker.py): one
orchestrator parses the command and builds its plans once; every process it starts is a launcher script
ending in `python -m pipelines --worker FILE`, never another command of the `accel` CLI. Each interpreter
start is counted with a `sitecustomize.py` on PYTHONPATH that appends its command line to a file, the way
docs/design.md measures it."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from conftest import accel, records
from pipelines.core.cli.main import cli
from pipelines.core.config import request as requests

COMMANDS = set(cli.commands)  # every command of the `accel` CLI, hidden ones included


def _counting(tmp_path: Path) -> tuple[dict, Path]:
    """PYTHONPATH with a sitecustomize that logs every interpreter's argv (sys.orig_argv) as a JSON line."""
    site, log = tmp_path / "site", tmp_path / "starts.jsonl"
    site.mkdir()
    (site / "sitecustomize.py").write_text(textwrap.dedent(f"""
        import json, sys
        with open({str(log)!r}, "a") as out:
            out.write(json.dumps(sys.orig_argv) + "\\n")
    """))
    return {"PYTHONPATH": str(site)}, log


def _starts(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def _cli_command(argv: list[str]) -> str | None:
    """The `accel` command an interpreter ran (`python -m pipelines CMD ...`), or None (a worker, an agent)."""
    if "-m" not in argv or argv[argv.index("-m") + 1] != "pipelines":
        return None
    rest = argv[argv.index("-m") + 2:]
    return rest[0] if rest and rest[0] in COMMANDS else None


def _check_one_orchestrator(starts: list[list[str]], command: str) -> list[list[str]]:
    """The first start is the user's command; no later one runs any `accel` command; the workers'."""
    assert _cli_command(starts[0]) == command, starts[0]
    assert [s for s in starts[1:] if _cli_command(s)] == [], "an accel process started an accel CLI command"
    workers = [s for s in starts if "-m" in s and s[s.index("-m") + 1:][:2] == ["pipelines", requests.FLAG]]
    for argv in workers:  # each worker reads a request the orchestrator wrote
        assert requests.read(argv[argv.index(requests.FLAG) + 1]).plans
    return workers


@pytest.mark.slow
def test_run_at_bench_scale_is_one_orchestrator_and_one_worker_a_round(tmp_path):
    env, log = _counting(tmp_path)
    out = accel("run", "ch2-nobias", "--dataset", "synthetic", "--rounds", "3", "--blocks", "2", "--block-s", "0.05",
                "--warmup-steps", "1", "--results-dir", str(tmp_path / "r"), env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    starts = _starts(log)
    workers = _check_one_orchestrator(starts, "run")
    assert len(workers) == 3 and len(starts) == 4, starts  # the orchestrator, then one worker a round
    # the records the rounds wrote are those the requests named: both arms, every round
    assert len(records(tmp_path / "r")) == 6


@pytest.mark.slow
def test_compare_at_bench_scale_starts_only_workers(tmp_path):
    env, log = _counting(tmp_path)
    out = accel("compare", "ch2-baseline", "ch2-nobias", "--rounds", "2", "--results-dir", str(tmp_path / "r"),
                "--dataset", "synthetic", "--blocks", "2", "--block-s", "0.05", "--warmup-steps", "1", env=env,
                timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    starts = _starts(log)
    assert len(_check_one_orchestrator(starts, "compare")) == 2 and len(starts) == 3, starts


@pytest.mark.slow
def test_launch_of_ranks_with_its_baseline_counts_its_processes(tmp_path):
    """`make cpu-ddp NPROC=2`'s shape: per round the baseline's worker, torchrun's agent and the 2 ranks."""
    env, log = _counting(tmp_path)
    out = accel("launch", "ch9-cpu-gloo", "--variant", "ranks=2", "--rounds", "2", "--steps", "2",
                "--warmup-steps", "1", "--dataset", "synthetic", "--results-dir", str(tmp_path / "r"),
                env={**env, "NPROC": "2"}, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    starts = _starts(log)
    workers = _check_one_orchestrator(starts, "launch")
    agents = [s for s in starts if "pipelines.core.distributed.agent" in s]
    assert len(agents) == 2 and len(workers) == 2 * (1 + 2) and len(starts) == 1 + 2 * (1 + 1 + 2), starts
    recs = records(tmp_path / "r")
    assert sorted(r["experiment"] for r in recs) == ["ch9-cpu-gloo"] * 2 + ["ch9-cpu-threads"] * 2
    assert {r["dist"]["world_size"] for r in recs if r["experiment"] == "ch9-cpu-gloo"} == {2}
