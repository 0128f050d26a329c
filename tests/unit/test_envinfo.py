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


def test_a_run_s_own_results_do_not_make_its_commit_dirty(tmp_path):
    """A reference run replaces its committed records while it measures: files under results/ are output,
    not code, so they leave git_dirty False; any other tracked change sets it."""
    from pipelines.core.record import version
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "r.jsonl").write_text("{}\n")
    (tmp_path / "code.py").write_text("x = 1\n")
    for step in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "c"]):
        subprocess.run([*git, *step], check=True)
    assert version.git_commit(tmp_path)["git_dirty"] is False
    (tmp_path / "results" / "r.jsonl").unlink()
    assert version.git_commit(tmp_path)["git_dirty"] is False
    (tmp_path / "code.py").write_text("x = 2\n")
    assert version.git_commit(tmp_path)["git_dirty"] is True
