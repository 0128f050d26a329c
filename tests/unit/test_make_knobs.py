"""The Makefile's knobs as a user types them: a near-miss of a known name is refused with that name, and ARGS
that choose the repeats themselves are not contradicted by the target's own --rounds (`make -n`: nothing
runs; the check is make's own parse)."""

from __future__ import annotations

import subprocess

import pytest

from conftest import REPO


def dry(*words: str) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "-n", "--no-print-directory", *words], cwd=REPO, capture_output=True, text=True)


@pytest.mark.parametrize("typo,meant", [("NPROCS", "NPROC"), ("NTHREADS", "THREADS"), ("HOST", "HOSTS")])
def test_a_mistyped_knob_is_refused_with_the_nearest_name(typo, meant):
    out = dry("cpu-ddp", f"{typo}=4")
    assert out.returncode == 2 and not out.stdout
    assert len(out.stderr.strip().splitlines()) == 1
    assert f"{typo} is not a variable this Makefile or its launchers read; did you mean {meant}?" in out.stderr


@pytest.mark.parametrize("workers", ["abc", "-1", "2.5"])
def test_a_test_tier_s_workers_must_be_a_count(workers):
    out = dry("test-fast", f"TEST_WORKERS={workers}")
    assert out.returncode == 2 and not out.stdout and len(out.stderr.strip().splitlines()) == 1
    assert f"TEST_WORKERS={workers} is not a number of pytest workers: pass a whole number" in out.stderr


@pytest.mark.parametrize("workers,option", [("0", ""), ("3", "-n 3 --dist loadgroup")])
def test_a_test_tier_takes_its_workers_from_the_knob(workers, option):
    out = dry("test-fast", f"TEST_WORKERS={workers}")
    pytest_line = next(line for line in out.stdout.splitlines() if " -m pytest " in line)
    assert out.returncode == 0 and (option in pytest_line if option else " -n " not in pytest_line), out.stdout


def test_a_variable_meant_for_the_processes_passes():
    out = dry("cpu-ddp", "NPROC=4", "OMP_DISPLAY_ENV=true")
    assert out.returncode == 0, out.stderr
    assert "--variant ranks=4 --rounds 3" in out.stdout


@pytest.mark.parametrize("args", ["--scale smoke", "--scale=book --repeats 2", "--rounds 5"])
def test_args_that_choose_the_repeats_drop_the_target_s_rounds(args):
    out = dry("cpu-ddp", f"ARGS={args}")
    assert out.returncode == 0, out.stderr
    command = out.stdout.strip().splitlines()[-1]
    assert command.count("--rounds") == args.count("--rounds") and command.endswith(args)
