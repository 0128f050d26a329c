import os
import shlex
import shutil
import subprocess
import sys

import pytest

from conftest import REPO

SCRIPTS = sorted(str(p.relative_to(REPO)) for p in [*REPO.glob("launch/*.sh"), *REPO.glob("launch/*.sbatch"),
                                                     *REPO.glob("ci/*.sh"), REPO / ".ci" / "run"])


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed (make test installs it)")
def test_scripts_are_shellcheck_clean():
    run = subprocess.run(["shellcheck", "-x", "-S", "style", *SCRIPTS], cwd=REPO, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout


def _local(*args, **env):
    return subprocess.run(["launch/local.sh", *args], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", **env})


@pytest.mark.parametrize("env,needle", [
    ({"THREADS": "0"}, "THREADS=0 is not a positive integer"),
    ({"THREADS": "abc"}, "THREADS=abc is not a positive integer"),
    ({"OMP_RUNTIME": "llvm"}, "OMP_RUNTIME=llvm is not gnu or intel"),
    ({"OMP_RUNTIME": "intel", "PYTHON": "/usr/bin/python3"}, "libiomp5.so does not exist"),
])
def test_local_launcher_rejects_bad_knobs(env, needle):
    run = _local("list", **env)
    assert run.returncode == 2 and needle in run.stderr and "Traceback" not in run.stderr


def test_local_launcher_echoes_knobs_and_runs():
    run = _local("list", "--status", "ready", THREADS="1")
    assert run.returncode == 0, run.stderr
    assert "launch: OMP_NUM_THREADS=1" in run.stderr and "ch2-baseline" in run.stdout


def test_launch_without_args_prints_usage():
    run = _local()
    assert run.returncode == 2 and "usage: launch/local.sh" in run.stderr


# ---------------------------------------------------------------- accel launch ID --print

def _printed(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipelines", "launch", *args, "--print"], cwd=REPO,
                          capture_output=True, text=True, timeout=120, env={**os.environ, **env})


def test_print_shows_the_torchrun_command_and_starts_nothing(tmp_path):
    results = tmp_path / "results"
    run = _printed("ch9-cpu-gloo", "--variant", "ranks=2", "--results-dir", str(results), MASTER_PORT="29611")
    assert run.returncode == 0, run.stderr
    (line,) = run.stdout.splitlines()
    words = shlex.split(line)
    assert "NPROC=2" in words and "MASTER_PORT=29611" in words and "OMP_NUM_THREADS=" in line
    agent = words.index("pipelines.core.distributed.agent")
    assert words[agent - 1] == "-m" and "--nproc-per-node" in words
    assert words[words.index("run"):][:4] == ["run", "ch9-cpu-gloo", "--variant", "ranks=2"]
    assert not results.exists()  # nothing written, not even the log folder the run would make
    assert "Traceback" not in run.stderr


def test_print_and_dry_run_show_what_they_would_do_and_name_missing_data_as_a_line(tmp_path):
    """Both look-before-you-run commands answer without the dataset: the command line (or the plan), and
    the missing data as one line with its fix; only a real run refuses it."""
    empty = tmp_path / "no-data"
    empty.mkdir()
    run = _printed("ch9-cpu-gloo", "--variant", "ranks=2", "--data-root", str(empty),
                   "--results-dir", str(tmp_path / "r"), MASTER_PORT="29612")
    assert run.returncode == 0, run.stderr
    assert "run ch9-cpu-gloo --variant ranks=2" in run.stdout and len(run.stdout.splitlines()) == 1
    assert run.stderr.strip() == (f"note: cifar10 under {empty}: NOT THERE, a real run is refused until it is; "
                                  f"run `accel data fetch cifar10 --root {empty}` (needs internet) or `accel data "
                                  f"generate cifar10 --root {empty}` (offline, generated data)")
    plan = subprocess.run([sys.executable, "-m", "pipelines", "run", "ch9-cpu-gloo", "--variant", "ranks=2",
                           "--data-root", str(empty), "--dry-run"], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert plan.returncode == 0 and "data:      cifar10 under" in plan.stdout
    assert "NOT THERE, a real run is refused until it is" in " ".join(plan.stdout.split())
    assert not (tmp_path / "r").exists()


def test_print_with_an_image_shows_the_container_command(tmp_path):
    run = _printed("ch9-cpu-gloo", "--variant", "ranks=2", "--results-dir", str(tmp_path / "r"),
                   IMAGE="podman:x")
    assert run.returncode == 0, run.stderr
    words = shlex.split(run.stdout.strip())
    assert words[:3] == ["podman", "run", "--rm"] and "x" in words
    inner = words[words.index("x") + 1:]
    assert inner[:3] == ["python3", "-m", "pipelines.core.distributed.agent"]  # torchrun's agent, inside the image
    assert "ACCEL_PRINT=1" not in run.stdout


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun not installed (make test installs it)")
def test_print_shows_the_mpirun_command():
    run = _printed("ch11-mpi-backend-cpu", "--scale", "smoke", "-o", "backend=gloo", NP="2", MASTER_PORT="29612")
    assert run.returncode == 0, run.stderr
    words = shlex.split(run.stdout.strip())
    start = words.index("mpirun")
    assert words[start + 1:start + 3] == ["-np", "2"] and "pipelines" in words


def test_print_still_refuses_a_bad_knob_in_one_line():
    run = _printed("ch9-cpu-gloo", "--variant", "ranks=2", NPROC="0")
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.strip().splitlines()[-1].endswith("NPROC=0 is not a positive integer")
