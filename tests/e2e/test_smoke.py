"""Every ready catalog entry, end to end through the real CLI at smoke scale on generated data."""

import importlib.util

import pytest
import torch

from conftest import accel, records
from pipelines.core.config import experiments

READY = [e for e in experiments.all_experiments().values() if e.status == "ready" and e.launcher == "local"]


def first_of_each_path(entries) -> set[str]:
    """The first entry of each (pipeline, launcher knobs, requirements): the others differ only in their model
    options (bias, batch size, compile mode, sparsity), which run through the same code; `make test` runs the
    first and `make test-all` every one."""
    seen: dict[tuple, str] = {}
    for entry in entries:
        seen.setdefault((entry.pipeline, tuple(sorted(entry.knobs.items())), tuple(sorted(entry.requires))), entry.id)
    return set(seen.values())


FIRST_OF_PATH = first_of_each_path(READY)
CANARY = "ch2-baseline"  # make test-fast's one smoke run: the book's first timed entry


def _marks(entry):
    marks = [pytest.mark.slow] + ([] if entry.id in FIRST_OF_PATH else [pytest.mark.long])
    if entry.id == CANARY:
        marks.append(pytest.mark.canary)
    if "gpu" in entry.requires:
        marks.append(pytest.mark.gpu)
        marks.append(pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"))
    if "ipex" in entry.requires:
        marks.append(pytest.mark.ipex)
        marks.append(pytest.mark.skipif(importlib.util.find_spec("intel_extension_for_pytorch") is None,
                                        reason="needs IPEX (tests/e2e/test_cpu_libs.py runs it in .venv-ipex)"))
    return marks


@pytest.mark.parametrize("entry", [pytest.param(e, id=e.id, marks=_marks(e)) for e in READY])
def test_ready_entry_runs_at_smoke_scale(entry, data_root, tmp_path):
    # Entries are started the way `make <id>` starts them: through their launcher with their knobs.
    run = accel("launch", entry.id, "--scale", "smoke", "--data-root", str(data_root), "--results-dir", str(tmp_path),
                env=dict(entry.knobs))
    assert run.returncode == 0, run.stderr[-3000:]
    recs = records(tmp_path)
    assert {r["variant"] for r in recs} == {a.name for a in entry.variants}
    for rec in recs:
        if rec["status"] == "skipped":  # a variant this device cannot run: the record must say why
            assert rec["notes"] and rec["experiment"] == entry.id
            continue
        assert rec["status"] == "ok" and rec["experiment"] == entry.id
        assert rec["config"]["data_source"] == "generated" and rec["config"]["scale"] == "smoke"
        if "OMP_RUNTIME" in entry.knobs:
            assert rec["env"]["openmp_runtime"] == entry.knobs["OMP_RUNTIME"]
        if entry.knobs.get("OMP_BIND") == "pinned":  # every thread was bound to a single core
            assert all(cores.isdigit() for cores in rec["env"]["thread_affinity"]), rec["env"]["thread_affinity"]
        if entry.knobs.get("ALLOCATOR", "default") != "default":
            assert rec["env"]["allocator"] == entry.knobs["ALLOCATOR"]
        metrics = rec["metrics"]
        if rec["pipeline"] == "profiling":  # eager ops in eager mode; CompiledFunction in compiled mode
            assert "profile_table" in rec["artifacts"]
            compiled = rec["config"]["options"]["compile"]
            assert (metrics["share_mkldnn_convolution_pct"] > 0) or compiled
            assert (metrics["share_CompiledFunction_pct"] > 0) == compiled
            assert (metrics["share_CompiledFunctionBackward_pct"] > 0) == (compiled and rec["variant"] != "profile")
            continue
        if rec["config"]["options"].get("profile"):  # a timing entry that also records the book's profile
            assert metrics["op_share_pct"] and "profile_table" in rec["artifacts"]
            if rec["pipeline"] == "torch_compile":  # a forward pass: CompiledFunction only where compiled
                assert (metrics["share_CompiledFunction_pct"] > 0) == rec["config"]["options"]["compile"]
        if rec["pipeline"] == "compiled_inference":  # same predictions, timed apart from compilation
            assert metrics["argmax_agreement_pct"] == 100 and metrics["max_abs_diff_vs_eager"] < 1e-4
            assert metrics["measured_steps"] == 3 and metrics["throughput_samples_per_s"] > 0
            continue
        if rec["pipeline"] == "batch_size_finder":
            assert metrics["chosen_batch_size"] >= 2 and rec["artifacts"]["curve"]
            assert metrics["samples_per_step"] == metrics["chosen_batch_size"]  # then trained at that size
        if rec["pipeline"] == "onnx_export":  # the exported file is where the record says, and onnxruntime agreed
            from pathlib import Path

            from pipelines.core.data.files import digest

            onnx_file = rec["artifacts"]["onnx_file"]
            assert Path(onnx_file["path"]).is_file() and digest(Path(onnx_file["path"])) == onnx_file["sha256"]
            assert metrics["onnx_checker"] == "passed" and metrics["onnx_max_abs_diff"] <= 1e-4
        assert metrics["measured_steps"] == 3 and metrics["warmup_steps"] == 1
        assert metrics["throughput_samples_per_s"] > 0 and 0 <= metrics["test_accuracy_pct"] <= 100
        weights_cast = rec["config"]["options"].get("precision") in ("16-true", "bf16-true", "64-true")
        assert (metrics["flops_per_step"] or 0) > 0 or weights_cast  # FLOPs are counted on fp32 weights
        assert metrics["peak_rss_mib"] > 0


def test_bench_scale_learns_on_generated_data(data_root, tmp_path):
    """Generated data carries a real signal: a short bench run beats chance (10 %) clearly."""
    run = accel("run", "ch2-bs256", "--scale", "bench", "--rounds", "1", "--steps", "30", "--lr", "1e-3",
                "--no-baseline", "--data-root", str(data_root), "--results-dir", str(tmp_path))
    assert run.returncode == 0, run.stderr
    (rec,) = records(tmp_path)
    assert rec["metrics"]["test_accuracy_pct"] > 30


def test_book_scale_reports_epochs(data_root, tmp_path):
    run = accel("run", "ch3-compile-cnn-cpu", "--variant", "eager", "--scale", "book", "--epochs", "2",
                "--data-root", str(data_root), "--results-dir", str(tmp_path))
    assert run.returncode == 0, run.stderr
    (rec,) = records(tmp_path)
    m = rec["metrics"]
    assert m["epochs_completed"] == 2 and m["first_epoch_s"] > 0 and m["median_epoch_s"] > 0
    assert m["measured_steps"] == 2 * 9  # 540 train images / bs 64, two epochs, no warm-up at book scale
    assert rec["config"]["test_samples_available"] == m["test_samples"]  # full test pass at book scale
