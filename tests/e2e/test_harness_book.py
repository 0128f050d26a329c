"""ci/harness-overhead.py --scale book: the shared loop (as `accel run ch2-baseline --scale book` runs it) against
the book's own chapter-2 loop, on a tiny generated Fashion-MNIST. Checks that both arms did the same work and
that the records are written for the report; never a speed."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from pipelines.core.data import datasets, generator
from pipelines.core.report import tables
from pipelines.core.record.results import load

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def harness():
    spec = importlib.util.spec_from_file_location("harness_overhead_book", REPO / "ci" / "harness-overhead.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_book_loops_indices_are_the_loaders(harness):
    """The book arm's split, written as the book's build_data_loader, is the one pipelines/core/data/datasets.py
    trains on."""
    for n in (300, 6000, 60000):
        assert harness.book_train_indices(n) == datasets.book_fmnist_train_indices(n)


def test_book_mode_runs_both_arms_on_the_same_work_and_writes_records(harness, tmp_path, capsys):
    root, out = tmp_path / "data", tmp_path / "results"
    generator.generate("fashion_mnist", root, train=300, test=50, seed=0)
    code = harness.main(["--scale", "book", "--epochs", "1", "--repeats", "2", "--data-root", str(root),
                         "--results-dir", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    assert "shared / book loop" in printed and "spread (CV of training time)" in printed and "ratio" in printed

    recs = load(out).records
    assert sorted(r["variant"] for r in recs) == ["hand-loop", "hand-loop", "shared-loop", "shared-loop"]
    assert {r["experiment"] for r in recs} == {"harness-overhead"} and len({r["run_id"] for r in recs}) == 1
    # alternated: repeat 0 shared first, repeat 1 the book loop first (the file keeps the run order)
    assert [r["variant"] for r in recs] == ["shared-loop", "hand-loop", "hand-loop", "shared-loop"]
    train_images = len(datasets.book_fmnist_train_indices(300))  # 270: 4 full batches of 64 and one of 14
    for rec in recs:
        config, metrics = rec["config"], rec["metrics"]
        assert config["scale"] == "book" and config["dataset"] == "fashion_mnist" and config["epochs"] == 1
        assert config["model"] == "cnn_fmnist" and config["batch_size"] == 64 and config["harness_mode"] == "book"
        assert config["data_source"] == "generated" and config["train_samples"] == train_images
        assert metrics["measured_steps"] == 5 and metrics["samples_seen"] == train_images
        assert metrics["epochs_completed"] == 1 and metrics["train_s"] > 0
        assert metrics["throughput_samples_per_s"] > 0 and metrics["minor_faults_per_step"] >= 0
    shared = [r["metrics"] for r in recs if r["variant"] == "shared-loop"]
    assert all(m["steps_counted"] == 5 and len(m["step_times_s"]) == 5 for m in shared)  # the loop's own count
    # the report's harness section reads these records (one workload row; its verdict is not asserted)
    table = tables.harness(recs)
    assert table is not None and list(table["n (each loop)"]) == ["2/2"]


def test_book_mode_refuses_bench_settings_and_a_missing_data_set(harness, tmp_path, capsys):
    with pytest.raises(SystemExit):
        harness.main(["--scale", "book", "--steps", "5"])
    assert "--steps and --warmup are bench settings" in capsys.readouterr().err
    assert harness.main(["--scale", "book", "--data-root", str(tmp_path / "none"),
                         "--results-dir", str(tmp_path / "r")]) == 2
    assert "fashion_mnist" in capsys.readouterr().err and not (tmp_path / "r").exists()
