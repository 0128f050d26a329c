"""The catalog: every reference id present, entries well formed, figures equal to the published facts,
and every published ratio recomputable from the published times of the arm and of its baseline.

tests/published_reference.csv is a full copy of the reference pack's published.csv (all 572 rows, its
columns and header), kept in the repository so that no test reads files outside it. The catalog and the
CSV are checked in both directions:

- catalog -> CSV: every figure an entry publishes (other than a ratio or a "derived" figure) is a value of
  that entry's rows, or of the rows its source compares it with (baseline_id);
- CSV -> catalog: every row is either carried, i.e. a figure of the entry with the row's id, of the same
  kind (`carries`: a self_cpu_pct row is its op's share_*_pct, a param_count row is parameters, a
  fraction is a percentage, a stated speed-up is a ratio) and the same value within the rounding of the
  CSV's printed decimals, or explained by a rule of pipelines/catalog/not_carried.py with a one-line
  reason. A row that is neither fails, and so does a rule that matches no row (stale).

Ratios are recomputed from the catalog's own times: `ratio` from the arm's and its declared baseline's
total times, `steady_ratio` from their median epoch times, and each ratio against another run
(OTHER_BASELINES) from that run's times.
"""

import csv
import math
import re

import pytest

from conftest import REPO
from pipelines.core.spec import experiments
from pipelines.core.run import runner
from pipelines.core.spec import options
from pipelines.core.run.pipeline import Measurement, TrainingPipeline
from pipelines.catalog.book_tables import share_metric
from pipelines.catalog.not_carried import NOT_CARRIED, explain
from pipelines.core.stats.pairing import TIME_METRICS, applies, declared_baseline, published_times

# Every id of the reference pack's summary (experiments.md section 0); s004-* expands to its 9 techniques.
REFERENCE_IDS = """
ch1-profile-ops ch1-params-extra-fc ch2-baseline ch2-nobias ch2-bs128 ch2-bs256 ch2-iomp ch2-both-layers
ch3-compile-cnn-cpu ch3-compile-densenet-gpu ch3-backends-densenet-gpu ch4-gomp-default-cnn
ch4-gomp-pinned-cnn ch4-iomp-cnn ch4-ipex-densenet ch5-pipeline ch6-prune ch7-amp ch8-ddp-template
ch9-cpu-threads ch9-cpu-gloo ch9-cpu-oneccl ch10-gpu-nccl ch11-multinode-mpi-nccl ch11-mpi-backend-cpu
vit-scratch vit-finetune vit-compile vit-fabric-baseline vit-bf16-mixed vit-ddp-4gpu vit-fsdp-4gpu
vit-fsdp-4gpu-sched dlf-u9-amp dlf-u9-multigpu dlf-u9-compile dlf-u9-bsfinder dlf-u9-ex1
s004-amp s004-gradaccum s004-ckpt s004-dp-vs-ddp s004-pp s004-tp s004-fsdp s004-deepspeed s004-dataloader
""".split()

ENTRIES = experiments.all_experiments()


def test_every_reference_id_is_catalogued():
    assert not set(REFERENCE_IDS) - set(ENTRIES)


PUBLISHED_CSV = REPO / "tests" / "published_reference.csv"


def reference_rows() -> list[dict[str, str]]:
    with open(PUBLISHED_CSV, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_reference_ids_are_catalogued():
    ids = {row["id"] for row in reference_rows()}
    assert ids and ids <= set(REFERENCE_IDS)


@pytest.mark.parametrize("entry", ENTRIES.values(), ids=list(ENTRIES))
def test_entry_is_well_formed(entry):
    assert entry.target in experiments.TARGETS and entry.launcher in experiments.LAUNCHERS
    assert entry.status in experiments.STATUSES and entry.compares
    if entry.baseline:
        base_id, _, variant = entry.baseline.partition("@")
        assert base_id in ENTRIES, f"{entry.id}: baseline {base_id} is not in the catalog"
        if variant:
            assert variant in {a.name for a in ENTRIES[base_id].variants}
    names = [arm.name for arm in entry.variants]
    assert len(names) == len(set(names))
    for fig in entry.published:
        assert isinstance(fig.value, (int, float)) and math.isfinite(fig.value), fig
        assert re.fullmatch(r"(book|talk|repo|derived|lecture)[\w:.()\- /@]*", fig.source), fig.source
        assert re.search(r"(_s|_pct|_min|ratio|_x|parameters|_size|_gb|_mib)$", fig.metric), fig.metric
        assert fig.variant is None or fig.variant in names
    if entry.status == "planned":
        assert entry.planned_reason
        return
    pipeline = runner.load_pipeline(entry.pipeline)
    assert isinstance(pipeline, (TrainingPipeline, Measurement))
    for arm in entry.variants:  # every option the catalog sets is one the pipeline declares, well typed
        options.build(pipeline.Options, entry.options, arm.options)


def test_unknown_id_suggests_neighbours():
    with pytest.raises(experiments.UnknownExperiment, match="did you mean: ch2-baseline"):
        experiments.get("ch2-baselin")


def csv_value(row: dict[str, str]) -> tuple[float, int] | None:
    """(value, decimals printed) of a row as the catalog would carry it; None for a symbol ("N", "2-3").
    A fraction (torchmetrics' 0-1 accuracy) is carried as a percentage with two decimals."""
    try:
        value = float(row["value"])
    except ValueError:
        return None
    if row["unit"] == "fraction":
        return round(100 * value, 2), 2
    _, _, decimals = row["value"].partition(".")
    return value, len(decimals)


# CSV metric -> the catalog metrics that carry it (by default the same name)
CARRIED_AS = {"param_count": ("parameters", "baseline_parameters"),
              "epoch_time_median_s": ("median_epoch_s",),
              "wall_time_s": ("train_time_s",),  # ch2-both-layers: %%time, carried as its time (noted)
              "test_accuracy_frac": ("test_accuracy_pct",)}


def same_kind(row: dict[str, str], fig: experiments.Published) -> bool:
    if row["metric"] == "self_cpu_pct":  # the op's own share, not any share of that value
        op = re.search(r"op=([^\s;]+)", row["config"])
        return op is not None and fig.metric == share_metric(op.group(1))
    if row["metric"] == "stated_speedup_x":  # the source's "N times", a speed-up: any ratio figure
        return fig.metric.endswith("ratio")
    return fig.metric in CARRIED_AS.get(row["metric"], (row["metric"],))


def carries(row: dict[str, str]) -> experiments.Published | None:
    """The figure of the row's entry that carries the row: same kind, same value to the printed decimals.
    Figures of different values that round alike are a coincidence unless the row's config names the arm
    (ch9's "almost two times" rounds like both 1.62 and 1.97): then none carries the row."""
    parsed, entry = csv_value(row), ENTRIES.get(row["id"])
    if parsed is None or entry is None:
        return None
    value, decimals = parsed
    found = [fig for fig in entry.published
             if same_kind(row, fig) and round(fig.value, decimals) == round(value, decimals)]
    named = [fig for fig in found if fig.variant and fig.variant.lower() in row["config"].lower()]
    if len({fig.value for fig in found}) <= 1:
        return (named or found or [None])[0]
    return named[0] if len(named) == 1 else None


def test_published_figures_match_the_reference_csv():
    """catalog -> CSV: a figure is the entry's own row or one of the rows its source compares it with
    (baseline_id); ratios and figures marked "derived" are computed, and checked by the ratio tests."""
    values: dict[str, set[float]] = {}
    for row in reference_rows():
        parsed = csv_value(row)
        if parsed is not None:
            values.setdefault(row["id"], set()).add(parsed[0])
        if row["baseline_id"]:
            base_id = row["baseline_id"].partition("@")[0]
            values.setdefault(row["id"], set()).update(values.get(base_id, set()))
    checked = 0
    for entry in ENTRIES.values():
        for fig in entry.published:
            if fig.metric.endswith("ratio") or fig.source == "derived":
                continue
            assert fig.value in values.get(entry.id, set()), f"{entry.id} {fig.metric}={fig.value} not in CSV"
            checked += 1
    assert checked > 200


def test_every_reference_row_is_carried_or_explained():
    """CSV -> catalog: a row no figure carries needs a reason in not_carried.py (the first rule that matches;
    an explicit rule wins over a coincidence of value, e.g. the repo log's cudagraphs median of 45 s is not
    Table 3.1's eager median)."""
    rows = reference_rows()
    assert len(rows) == 572  # published.csv: a header and 572 rows
    orphans = [f"{row['id']} {row['metric']}={row['value']} ({row['source'][:40]}; {row['config'][:60]})"
               for row in rows if explain(row) is None and carries(row) is None]
    assert not orphans, "neither carried nor explained:\n" + "\n".join(orphans)
    carried = sum(explain(row) is None for row in rows)
    assert carried >= 220  # the reasons explain the rest: learning curves, other runs, wording, noise


def test_no_not_carried_rule_is_stale():
    rows = reference_rows()
    for rule in NOT_CARRIED:
        assert rule.ids == ("*",) or set(rule.ids) <= set(ENTRIES), rule.ids
        assert rule.reason.strip() and "\n" not in rule.reason
        assert any(rule.matches(row) for row in rows), f"stale rule (matches no row): {rule}"


def arm_seconds(entry_id: str, arm: str) -> float:
    entry = ENTRIES[entry_id]
    times = published_times(entry, arm)
    assert times, f"{entry_id} [{arm}] has a ratio but no published time ({', '.join(TIME_METRICS)})"
    return times[0][1]


RATIOS = [(entry, fig) for entry in ENTRIES.values() for fig in entry.published if fig.metric == "ratio"]


@pytest.mark.parametrize("entry, fig", RATIOS, ids=[f"{e.id}@{f.variant or '-'}" for e, f in RATIOS])
def test_every_published_ratio_is_the_baseline_time_over_the_arm_time(entry, fig):
    """Recomputed from the catalog's own times, against the arm the report compares with: a ratio typed
    against another run than the declared baseline (ch9-cpu-oneccl's 73/35 against Gloo) fails here."""
    arm = fig.variant or entry.variants[0].name
    base = declared_baseline(entry, arm)
    expected = 1.0 if base is None else arm_seconds(*base) / arm_seconds(entry.id, arm)
    assert abs(fig.value - expected) <= 0.005 + 1e-9, f"{entry.id} [{arm}]: {fig.value} vs {expected:.4f}"


def epoch_seconds(entry_id: str, arm: str, metric: str) -> float:
    entry = ENTRIES[entry_id]
    values = [fig.value for fig in entry.published if fig.metric == metric and applies(entry, fig, arm)]
    assert len(values) == 1, f"{entry_id} [{arm}]: {metric} {values}"
    return values[0]


STEADY = [(entry, fig) for entry in ENTRIES.values() for fig in entry.published
          if fig.metric == "steady_ratio"]


@pytest.mark.parametrize("entry, fig", STEADY, ids=[f"{e.id}@{f.variant or '-'}" for e, f in STEADY])
def test_every_steady_ratio_is_the_baseline_median_epoch_over_the_arms(entry, fig):
    """The steady-state companion of an end-to-end ratio: median epochs (after the first, which holds the
    compilation), on the same-work basis, against the same baseline arm as the ratio."""
    arm = fig.variant or entry.variants[0].name
    base = declared_baseline(entry, arm)
    assert base is not None, f"{entry.id} [{arm}] is a reference arm"
    expected = epoch_seconds(*base, "median_epoch_s") / epoch_seconds(entry.id, arm, "median_epoch_s")
    assert abs(fig.value - expected) <= 0.005 + 1e-9, f"{entry.id} [{arm}]: {fig.value} vs {expected:.4f}"
    assert fig.basis == "same-work throughput" and fig.note.startswith("median epoch (steady state)")
    headline = next(f for f in entry.published if f.metric == "ratio" and f.variant == fig.variant)
    assert headline.basis == "end-to-end"
    assert epoch_seconds(entry.id, arm, "first_epoch_s") > epoch_seconds(entry.id, arm, "median_epoch_s")


# Ratios against another run than the declared baseline: (entry, metric, variant) -> (experiment, arm)
OTHER_BASELINES = {
    ("ch4-iomp-cnn", "vs_default_ratio", None): ("ch4-gomp-default-cnn", "gomp-default"),
    ("ch3-backends-densenet-gpu", "vs_cudagraphs_ratio", "inductor"):
        ("ch3-backends-densenet-gpu", "cudagraphs"),
    ("vit-fsdp-4gpu", "overall_ratio", "fabric-fsdp"): ("vit-fabric-baseline", "fabric-32-true"),
}
DERIVED_RATIOS = {"ratio", "steady_ratio", "param_ratio"}  # checked elsewhere (param_ratio: counts, below)


def test_every_other_ratio_is_recomputed_against_the_run_it_names():
    found = {(e.id, f.metric, f.variant): f for e in ENTRIES.values() for f in e.published
             if f.metric.endswith("ratio") and f.metric not in DERIVED_RATIOS}
    assert set(found) == set(OTHER_BASELINES)
    for (entry_id, metric, variant), base in OTHER_BASELINES.items():
        arm = variant or ENTRIES[entry_id].variants[0].name
        expected = arm_seconds(*base) / arm_seconds(entry_id, arm)
        assert abs(found[entry_id, metric, variant].value - expected) <= 0.005 + 1e-9, (entry_id, metric)
    extra_fc = ENTRIES["ch1-params-extra-fc"]
    assert extra_fc.published_value("param_ratio") == round(
        extra_fc.published_value("parameters") / extra_fc.published_value("baseline_parameters"), 3)


def compiles(entry: experiments.Experiment, arm: str) -> bool:
    """Whether the arm runs torch.compile (the pipeline's defaults with the entry's and the arm's options)."""
    pipeline = runner.load_pipeline(entry.pipeline)
    variant = next(v for v in entry.variants if v.name == arm)
    opts = options.build(pipeline.Options, entry.options, variant.options)
    return getattr(opts, "compile", False) is True or getattr(opts, "optimize", None) == "compile"


def test_a_published_ratio_of_a_compiled_arm_is_end_to_end():
    """The sources time whole runs, so a compiled arm's published time holds its compilation (ch3's first
    epochs, vit-compile's 18.01 min): its ratio is judged end-to-end, never as a steady-state figure."""
    compiled = [(e, f) for e in ENTRIES.values() if e.status == "ready" for f in e.published
                if f.metric.endswith("ratio") and f.metric != "steady_ratio"
                and compiles(e, f.variant or e.variants[0].name)]
    assert {e.id for e, _ in compiled} == {"ch3-compile-cnn-cpu", "ch3-compile-densenet-gpu",
                                           "ch3-backends-densenet-gpu", "vit-compile"}
    assert all(f.basis == "end-to-end" for _, f in compiled), [(e.id, f.metric) for e, f in compiled
                                                               if f.basis != "end-to-end"]


def test_the_issue_s_figures_are_carried_with_what_they_compare():
    backends = ENTRIES["ch3-backends-densenet-gpu"]
    assert backends.published_value("ratio", "inductor") == 1.61
    inductor = next(f for f in backends.published if f.metric == "ratio" and f.variant == "inductor")
    assert "vs eager" in inductor.note and "cudagraphs" in inductor.note
    assert backends.published_value("vs_cudagraphs_ratio", "inductor") == 1.63
    assert backends.published_value("test_accuracy_pct") == 74.68  # aot_ts_nvfuser: no arm, so no variant
    assert ENTRIES["ch3-compile-densenet-gpu"].published_value("steady_ratio", "compiled") == 1.73
    assert ENTRIES["ch3-compile-cnn-cpu"].published_value("share_CompiledFunction_pct", "compiled") == 55.50
    densenets = ("ch3-compile-densenet-gpu", "ch3-backends-densenet-gpu", "ch4-ipex-densenet", "ch5-pipeline")
    for entry_id in densenets:
        assert ENTRIES[entry_id].published_value("parameters") == 7978856
    steps = (("vit-ddp-4gpu", None), ("vit-fsdp-4gpu", "fabric-fsdp"), ("vit-fsdp-4gpu-sched", "fabric-fsdp"))
    assert [ENTRIES[i].published_value("test_accuracy_pct", v) for i, v in steps] == [95.73, 96.22, 96.43]
    overall = next(f for f in ENTRIES["vit-fsdp-4gpu"].published if f.metric == "overall_ratio")
    assert overall.value == 8.29 and overall.basis == "same-work throughput" and "quarter of" in overall.note


def test_intermediate_points_of_the_scaling_tables_are_carried():
    threads = ENTRIES["ch9-cpu-threads"]
    assert [threads.published_value("ratio", f"threads={n}") for n in (2, 4, 8, 12, 16)] == \
        [1.65, 2.61, 3.34, 4.26, 4.26]
    gloo = ENTRIES["ch9-cpu-gloo"]
    assert [gloo.published_value("ratio", f"ranks={n}") for n in (2, 4, 8)] == [1.26, 1.62, 1.97]
    gpus = ENTRIES["ch10-gpu-nccl"]
    assert [arm.name for arm in gpus.variants] == [f"gpus={n}" for n in range(1, 9)]
    assert [gpus.published_value("ratio", f"gpus={n}") for n in range(2, 9)] == \
        [1.80, 2.56, 3.40, 4.11, 4.98, 5.80, 6.49]
    assert all(arm.options == {"ranks": n} for n, arm in enumerate(gpus.variants, start=1))
    assert ENTRIES["ch11-multinode-mpi-nccl"].baseline == "ch10-gpu-nccl@gpus=8"
    assert ENTRIES["ch9-cpu-gloo"].match_cores


@pytest.mark.parametrize("entry", ENTRIES.values(), ids=list(ENTRIES))
def test_entry_names_what_it_reproduces(entry):
    """The map's `reproduces` column: every entry names its book table / text, talk step, course unit or note
    section, and agrees with its published figures' sources (a Table 9.2 figure means `Table 9.2`)."""
    assert entry.reproduces.strip(), f"{entry.id} does not say what it reproduces"
    for fig in entry.published:
        table = re.search(r"table(\d+\.\d+)", fig.source)
        if table:
            assert f"Table {table.group(1)}" in entry.reproduces, (entry.id, fig.source, entry.reproduces)
        if fig.source.startswith("book:ch"):
            chapter = fig.source.split(":")[1]
            assert entry.reproduces.startswith(f"book {chapter}"), (entry.id, fig.source, entry.reproduces)
        if fig.source.startswith("talk"):
            assert entry.reproduces.startswith("talk step"), (entry.id, entry.reproduces)


def test_an_open_arm_takes_any_whole_count_and_names_the_fix_for_a_bad_one():
    """ch9's rank and thread arms are open: `make cpu-ddp NPROC=3` runs ranks=3 though Table 9.2 has no row for
    it; a count that is not a whole number of at least 1 gets one line naming the option."""
    from pipelines.core.run import plan as plans
    gloo = experiments.get("ch9-cpu-gloo")
    assert gloo.arm("ranks=4") is gloo.variants[1]  # a declared arm keeps its published figures
    assert gloo.arm("ranks=3").options == {"ranks": 3} and experiments.get("ch9-cpu-threads").arm("threads=3")
    for bad in ("ranks=0", "ranks=x", "ranks=03", "ranks=-1", "threads=2"):
        assert gloo.arm(bad) is None
    assert gloo.unknown_arm("ranks=0") == ("ranks=0 is not an arm of ch9-cpu-gloo: ranks must be a whole number "
                                           "of at least 1 (e.g. ranks=2)")
    assert "unknown variant threads=2 of ch9-cpu-gloo; it has: ranks=2, ranks=4, ranks=8" == gloo.unknown_arm("threads=2")
    assert experiments.get("ch2-baseline").arm("ranks=3") is None  # closed entries stay closed
    made = plans.plan(gloo, "smoke", {}, {}, only=("ranks=3",))
    assert [c.variant for c in made.configs] == ["ranks=3"] and made.configs[0].options.ranks == 3
