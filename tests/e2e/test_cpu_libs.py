"""Chapter 4: launcher knobs (binding, allocators), the records that prove them, and IPEX for real."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import IPEX_PYTHON, REPO, accel, needs_ipex_venv, records
from pipelines.core.report import shares
from pipelines.core.train import ipex
from pipelines.core.distributed import affinity



def _local(*args, **env):
    return subprocess.run(["launch/local.sh", *args], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "PYTHON": sys.executable, **env})


def test_pinned_knob_sets_gnu_binding_from_usable_cores():
    run = _local("list", "--status", "ready", OMP_BIND="pinned", THREADS="1")
    assert run.returncode == 0, run.stderr
    assert "launch: OMP_PROC_BIND=TRUE" in run.stderr and "launch: OMP_SCHEDULE=STATIC" in run.stderr
    assert f"launch: GOMP_CPU_AFFINITY={affinity.gomp_list(1)}\n" in run.stderr


@pytest.mark.parametrize("env,needle", [
    ({"OMP_BIND": "tight"}, "OMP_BIND=tight is not none or pinned"),
    ({"OMP_BIND": "pinned", "OMP_RUNTIME": "intel"}, "Intel OpenMP binds with KMP_AFFINITY"),
    ({"ALLOCATOR": "mimalloc"}, "ALLOCATOR=mimalloc is not default, pinned, tcmalloc or jemalloc"),
    ({"ALLOCATOR": "tcmalloc", "ALLOCATOR_PATH": "/nonexistent"}, "apt-get install libtcmalloc-minimal4"),
    ({"ALLOCATOR": "jemalloc", "ALLOCATOR_PATH": "/nonexistent"}, "apt-get install libjemalloc2"),
])
def test_bad_or_missing_knobs_are_one_line_errors(env, needle):
    run = _local("list", **env)
    assert run.returncode == 2 and needle in run.stderr and "Traceback" not in run.stderr


def test_allocator_entry_refuses_without_its_launcher(tmp_path, data_root):
    """`accel run` of an allocator entry without the preload: exit 3, never a silent glibc run."""
    run = accel("run", "ch4-alloc-tcmalloc-cnn", "--scale", "smoke", "--data-root", str(data_root),
                "--results-dir", str(tmp_path))
    assert run.returncode == 3 and "needs the tcmalloc allocator but libc is loaded" in run.stderr
    assert not list(tmp_path.iterdir())


def test_ipex_version_pairing():
    assert ipex.version_pair_problem("2.8.0+cpu", "2.8.0+cu128") is None
    assert ipex.version_pair_problem("2.7.0", "2.7.1") is None
    assert "needs torch 2.8.x but torch 2.14.1" in ipex.version_pair_problem("2.8.0", "2.14.1")
    assert "not installed" in ipex.version_pair_problem(None, "2.8.0")


@pytest.mark.skipif(ipex.ipex_problem() is None, reason="IPEX can run in this environment")
def test_ipex_variant_refuses_where_ipex_cannot_run(tmp_path, data_root):
    run = accel("launch", "ch4-ipex-densenet", "--scale", "smoke", "--data-root", str(data_root),
                "--results-dir", str(tmp_path))
    assert run.returncode == 3, run.stderr[-2000:]
    line = run.stderr.strip().splitlines()[-1]
    assert line.startswith("accel: error: ch4-ipex-densenet variant ipex-fp32") and "make ipex-venv" in line
    assert not list(tmp_path.iterdir())


def test_bad_optimize_option_is_a_usage_error(tmp_path, data_root):
    run = accel("launch", "ch4-ipex-densenet", "--scale", "smoke", "--variant", "baseline", "-o",
                "optimize=openvino", "--data-root", str(data_root), "--results-dir", str(tmp_path))
    assert run.returncode == 2 and "optimize='openvino' is unknown" in run.stderr
    assert not list(tmp_path.iterdir())


@pytest.mark.slow
def test_non_ipex_variant_runs_with_current_torch(tmp_path, data_root):
    """The baseline arm needs no IPEX: it runs here under Intel OpenMP, as the entry's knobs ask."""
    run = accel("launch", "ch4-ipex-densenet", "--scale", "smoke", "--variant", "baseline",
                "--data-root", str(data_root), "--results-dir", str(tmp_path))
    assert run.returncode == 0, run.stderr[-3000:]
    (rec,) = records(tmp_path)
    assert rec["config"]["model"] == "densenet_tiny" and rec["env"]["openmp_runtime"] == "intel"


def _ipex_venv_versions() -> dict:
    code = ("import json, torch; from importlib.metadata import version; "
            "from pipelines.core.train import ipex; print(json.dumps("
            "{'torch': torch.__version__, 'ipex': version('intel-extension-for-pytorch'), "
            "'bf16': ipex.ipex_has_bf16_kernels()}))")
    out = subprocess.run([str(IPEX_PYTHON), "-c", code],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.ipex
@pytest.mark.slow
@needs_ipex_venv
def test_ipex_optimize_runs_for_real_in_the_ipex_venv(tmp_path, data_root):
    """torch 2.8 + IPEX 2.8 from PyPI: ipex.optimize in fp32 and bf16 beside the plain baseline.

    IPEX's bf16 prepack needs AVX-512 (or avx_ne_convert): on a CPU without it (this project's CI
    machines are AMD without AVX-512) the bf16 arm must be a `skipped` record naming why, not a crash.
    """
    versions = _ipex_venv_versions()
    assert ipex.version_pair_problem(versions["ipex"], versions["torch"]) is None
    run = subprocess.run(
        [str(IPEX_PYTHON), "-m", "pipelines", "launch", "ch4-ipex-densenet", "--scale", "smoke",
         "--variant", "baseline", "--variant", "ipex-fp32", "--variant", "ipex-bf16",
         "--data-root", str(data_root), "--results-dir", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHON": str(IPEX_PYTHON)})
    assert run.returncode == 0, run.stderr[-3000:]
    recs = {r["variant"]: r for r in records(tmp_path)}
    assert set(recs) == {"baseline", "ipex-fp32", "ipex-bf16"}
    if not versions["bf16"]:
        skipped = recs.pop("ipex-bf16")
        assert skipped["status"] == "skipped" and "avx512" in skipped["notes"][0]
    for variant, rec in recs.items():
        assert rec["status"] == "ok" and rec["metrics"]["measured_steps"] == 3
        assert rec["env"]["packages"]["intel-extension-for-pytorch"] == versions["ipex"]
        assert rec["env"]["openmp_runtime"] == "intel"
        assert Path(rec["env"]["executable"]).parent == IPEX_PYTHON.parent
        has_note = any("intel-extension-for-pytorch" in note for note in rec.get("notes", []))
        assert has_note == variant.startswith("ipex")
        # the book's training profiles: one training step profiled when the timed steps end, said in the notes
        assert rec["metrics"]["op_share_pct"] and any(n.startswith("profile: one more training step")
                                                      for n in rec["notes"])
    assert any(op.startswith("torch_ipex::") for op in recs["ipex-fp32"]["metrics"]["op_share_pct"])
    judged = shares.share_rows(list(recs.values()))
    assert {r.variant for r in judged} == {"baseline", "ipex-fp32"} and len(judged) == 20  # top 10 each
