import shutil
import subprocess

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
