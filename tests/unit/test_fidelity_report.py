"""Verdicts compare like with like: each published figure on its basis (same work, time to result, end to
end with compilation, memory), with both the steady-state and the end-to-end ratio shown."""

import pytest

from pipelines.core.config import experiments
from pipelines.core.stats import rows as stats_rows, intervals
from pipelines.core.record.results import Loaded, load
from pipelines.core.config.experiments import Experiment, Published as P, Variant

ENTRY = Experiment(
    id="x-compile", compares="eager -> compiled", pipeline="torch_compile", settings={},
    variants=(Variant("eager"), Variant("compiled")),
    published=(P("ratio", 0.84, "book:ch3", "118/140 s, compilation inside epoch 1", "compiled", basis="end-to-end"),
               P("memory_ratio", 2.0, "lecture", "stated", "compiled", basis="memory")))


@pytest.fixture
def catalog(monkeypatch):
    entries = dict(experiments.all_experiments())
    entries[ENTRY.id] = ENTRY
    monkeypatch.setattr(experiments, "_ENTRIES", entries)


def record(variant: str, scale: str, repeat: int, step_s: float, warmup_s: float, peak_mib: float) -> dict:
    steps = [step_s * (1 + 0.01 * ((repeat + i) % 3 - 1)) for i in range(20)]
    return {"schema": "accel.result/1", "status": "ok", "experiment": ENTRY.id, "variant": variant, "scale": scale,
            "repeat": repeat, "run_id": "r", "notes": [], "dist": {"world_size": 1},
            "env": {"cpu_model": "cpu", "logical_cpus": 2, "torch": "2.14.1", "gpus": []},
            "config": {"experiment": ENTRY.id, "variant": variant, "batch_size": 64, "steps": 20, "device": "cpu",
                       "data_source": "synthetic"},
            "metrics": {"step_times_s": steps, "samples_per_step": 64, "measured_steps": 20, "warmup_steps": 5,
                        "throughput_samples_per_s": 64 / (sum(steps) / 20), "train_s": sum(steps),
                        "warmup_s": warmup_s, "variant_peak_mib": peak_mib}}


def rows(records):
    return {(r.experiment, r.variant): r for r in stats_rows.build(Loaded(records, [], 1))}


def arms(scale: str, compile_s: float):
    """Eager 20 ms steps; compiled 16 ms steps (1.25x steady state) after `compile_s` of compilation."""
    return [rec for i in range(4) for rec in (record("eager", scale, i, 0.020, 0.1, 800.0 + i),
                                              record("compiled", scale, i, 0.016, compile_s, 400.0 + i))]


def test_an_end_to_end_figure_is_not_judged_by_a_few_bench_steps(catalog):
    row = rows(arms("bench", compile_s=20.0))[(ENTRY.id, "compiled")]
    assert row.ratio == pytest.approx(1.25, rel=0.02)  # steady state, shown
    assert row.e2e_ratio < 0.1 and row.e2e_ci_low is not None  # compilation dominates 20 steps, shown too
    assert row.verdict == "not comparable" and "end-to-end figure" in row.why and "--scale book" in row.why


def test_at_book_scale_the_end_to_end_ratio_is_the_one_judged(catalog):
    row = rows(arms("book", compile_s=0.13))[(ENTRY.id, "compiled")]
    # (0.1 + 0.4) / (0.13 + 0.32) s: the end-to-end ratio and its interval are what the verdict judges
    assert row.judged == "end-to-end" and row.ratio == pytest.approx(row.e2e_ratio)
    assert row.ratio == pytest.approx(0.5 / 0.45, rel=0.02)
    assert row.verdict == intervals.verdict(row.interval, intervals.Interval(*ENTRY.published[0].band()))


def test_memory_saving_factor_has_an_interval_and_a_verdict(catalog):
    row = rows(arms("bench", compile_s=20.0))[(ENTRY.id, "compiled")].data()  # the CSV line: the bases' keys
    assert row["memory_metric"] == "variant_peak_mib" and row["memory_ratio"] == pytest.approx(801.5 / 401.5)
    assert row["memory_ci_low"] <= row["memory_ratio"] <= row["memory_ci_high"]
    assert row["published_memory_ratio"] == 2.0 and row["memory_verdict"] == intervals.REPRODUCED
    from pipelines.core.stats import bases

    built = stats_rows.build(Loaded(arms("bench", compile_s=20.0), [], 1), [ENTRY.id])
    ((title, _, table),) = bases.report_sections(built)  # the report's Memory section
    assert title == "Memory" and [(line["variant"], line["published"]) for line in table] == [("compiled", "2.00")]
    assert [line["verdict"] for line in table] == [intervals.REPRODUCED]


def test_a_time_to_result_figure_is_judged_on_its_same_work_equivalent():
    fig = experiments.get("vit-finetune").published
    ratio = next(f for f in fig if f.metric == "ratio")
    assert (ratio.value, ratio.basis_name) == (61.48 / 18.70, "time-to-result")
    assert ratio.same_work_value == pytest.approx(0.99, abs=0.005)  # (61.48/10) / (18.70/3)
    from pipelines.core.stats import pairing

    same_work = (61.48 / 10) / (18.70 / 3)
    assert pairing.published(experiments.get("vit-finetune"), "ratio", "finetune") == pytest.approx(same_work)


def test_a_basis_outside_the_list_is_refused():
    with pytest.raises(ValueError, match="basis"):
        P("ratio", 1.0, "book:ch2", basis="vibes")
    with pytest.raises(ValueError, match="work_ratio"):
        P("ratio", 1.0, "book:ch2", work_ratio=2.0)


@pytest.mark.slow
def test_a_real_checkpointing_run_gets_a_memory_verdict_with_an_interval(tmp_path):
    """s004-ckpt on CPU: autograd's saved activations per arm, in 3 rounds of processes (a verdict counts
    processes); checkpointing alone judged on the note's own range ~2-3x (the band is the range),
    checkpointing + bf16 on the recipe table's 4x, against bf16 without checkpointing (the row it adds to)."""
    from conftest import accel

    out = accel("compare", "s004-ckpt@plain", "s004-ckpt@checkpointed", "s004-ckpt@amp", "s004-ckpt@amp-checkpointed",
                "--scale", "smoke", "--dataset", "synthetic", "--rounds", "3", "--results-dir", str(tmp_path),
                "--allocator", "pinned", timeout=600)  # pinned: the four arms share one process a round
    assert out.returncode == 0, out.stderr[-2000:]
    built = {(r.experiment, r.variant): r for r in stats_rows.build(load(tmp_path))}
    ckpt = built[("s004-ckpt", "checkpointed")].data()  # the CSV line: the memory basis's keys
    assert ckpt["memory_metric"] == "saved_for_backward_mib" and ckpt["memory_ratio"] > 1  # it saves memory
    assert ckpt["memory_ci_low"] is not None and ckpt["published_memory_ratio"] == 2.5
    low, high = ckpt["memory_ci_low"], ckpt["memory_ci_high"]
    expected = "saves more than published" if low > 3 else "saves less than published" if high < 2 else \
        intervals.REPRODUCED if 2 <= low <= high <= 3 else intervals.INCONCLUSIVE
    assert ckpt["memory_verdict"] == expected  # the range [2, 3] itself, not 2.5 x (1 +- 15 %)
    amp = built[("s004-ckpt", "amp-checkpointed")].data()
    assert amp["baseline"] == "s004-ckpt [amp]" and amp["published_memory_ratio"] == 4
    assert amp["memory_ratio"] > 1  # checkpointing saves bf16 activations too
    assert built[("s004-ckpt", "amp")].data()["published_memory_ratio"] is None  # a baseline arm: no figure
    report = accel("report", "--results-dir", str(tmp_path), "--out", str(tmp_path / "o"), timeout=300)
    assert report.returncode == 0 and "## Memory" in (tmp_path / "o" / "report.md").read_text()
