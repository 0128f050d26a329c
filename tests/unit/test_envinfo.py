import subprocess

import pytest

from conftest import REPO, accel, records
from pipelines.core.record import envinfo


def test_fingerprint_reads_the_running_process():
    import torch

    env = envinfo.fingerprint()
    assert env["torch"] == torch.__version__ and env["logical_cpus"] >= 1
    assert env["openmp_runtime"] == "gnu" and "libgomp" in env["openmp_library"]
    assert env["thread_affinity"] and env["usable_cpus"]
    assert env["packages"]["torch"].split("+")[0] == torch.__version__.split("+")[0]


def test_recorded_vars_include_runtime_knobs(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("KMP_BLOCKTIME", "0")
    monkeypatch.setenv("UNRELATED_SECRET", "x")
    recorded = envinfo.fingerprint()["vars"]
    assert recorded["OMP_NUM_THREADS"] == "1" and recorded["KMP_BLOCKTIME"] == "0"
    assert "UNRELATED_SECRET" not in recorded


@pytest.mark.slow  # a real subprocess (accel, a CI script) or a full report: end to end
def test_intel_openmp_really_loads_through_the_launcher(tmp_path, data_root):
    """launch/local.sh OMP_RUNTIME=intel preloads libiomp5; the record proves it served torch."""
    run = subprocess.run(["launch/local.sh", "run", "ch2-iomp", "--scale", "smoke", "--data-root", str(data_root),
                          "--results-dir", str(tmp_path)], cwd=REPO, capture_output=True, text=True,
                         timeout=300, env={"PATH": "/usr/bin:/bin", "OMP_RUNTIME": "intel"})
    assert run.returncode == 0, run.stderr
    (record,) = records(tmp_path)
    env = record["env"]
    assert env["openmp_runtime"] == "intel" and env["openmp_library"].endswith("libiomp5.so")
    assert env["vars"]["KMP_BLOCKTIME"] == "0" and "libiomp5.so" in env["vars"]["LD_PRELOAD"]
    assert "launch: OMP_RUNTIME=intel" in run.stderr


@pytest.mark.slow  # a real subprocess (accel, a CI script) or a full report: end to end
def test_intel_experiment_refuses_a_gnu_process(tmp_path, data_root):
    run = accel("run", "ch2-iomp", "--scale", "smoke", "--data-root", str(data_root), "--results-dir", str(tmp_path))
    assert run.returncode == 3
    assert "needs the intel OpenMP runtime but gnu is loaded" in run.stderr
    assert not tmp_path.exists() or not list(tmp_path.iterdir())
