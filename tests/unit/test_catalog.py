"""The catalog: every reference id present, entries well formed, figures equal to the published facts,
and every published ratio recomputable from the published times of the arm and of its baseline.

tests/published_reference.csv is the reference pack's published.csv (its 572 rows, columns and header) plus
the rows it lacks (the talk's per-batch losses in logs.md, the note's precision table and its
"+ CPU offload" row), kept in the repository so that no test reads files outside it. The catalog and the
CSV are checked in both directions:

- catalog -> CSV: every figure an entry publishes (other than a ratio or a "derived" figure) is a value of
  that entry's rows, or of the rows its source compares it with (baseline_id);
- CSV -> catalog: every row is either carried, i.e. a figure of the entry with the row's id, of the same
  kind (`carries`: a self_cpu_pct row is its op's share_*_pct, a param_count row is parameters, a
  fraction is a percentage, a stated speed-up is a ratio, an epoch's time names its epoch) and the same
  value within the rounding of the CSV's printed digits ("67.0 M" is 67,000,000 to the nearest 100,000), a
  stated range ("2-3") the figure's own low and high, the note's symbol N the entry's fixed NPROC; or
  explained by a rule of pipelines/catalog/not_carried.py with a one-line reason. A row that is neither
  fails, and so does a rule that matches no row (stale).

Ratios are recomputed from the catalog's own times: `ratio` from the arm's and its declared baseline's
total times, `steady_ratio` from their median epoch times, and each ratio against another run
(OTHER_BASELINES) from that run's times.
"""

import csv
import math
import re

import pytest

from conftest import REPO
from pipelines.core.config import experiments
from pipelines.core.harness import plan as planning
from pipelines.core.config import options
from pipelines.core.harness.pipeline import Measurement, TrainingPipeline
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
        assert re.search(r"(_s|_pct|_min|ratio|_x|parameters|_size|_gb|_mib|_value|steps_per_epoch)$",
                         fig.metric), fig.metric
        assert fig.variant is None or fig.variant in names
    if entry.status == "planned":
        assert entry.planned_reason
        return
    pipeline = planning.load_pipeline(entry.pipeline)
    assert isinstance(pipeline, (TrainingPipeline, Measurement))
    for arm in entry.variants:  # every option the catalog sets is one the pipeline declares, well typed
        options.build(pipeline.Options, entry.options, arm.options)


def csv_value(row: dict[str, str]) -> tuple[float, int] | None:
    """(value, decimals printed) of a row as the catalog would carry it, decimals negative for a rounded
    large number ("67.0" M params: 67,000,000 to -5 decimals; "3.4e38": to -37); None for words ("slower")
    and ranges ("2-3", see csv_range). A fraction (torchmetrics' 0-1 accuracy) is carried as a percentage
    with two decimals. The note's 'N' / '~N' (the number of GPUs) is the entry's fixed NPROC: the figure for
    that N is the one that applies to its runs."""
    text = row["value"]
    if text.lstrip("~") == "N" and "N = number of GPUs" in row["notes"]:
        nproc = str(ENTRIES[row["id"]].knobs.get("NPROC", ""))
        return (float(nproc), 0) if nproc.isdigit() else None
    try:
        value = float(text)
    except ValueError:
        return None
    if row["unit"] == "fraction":
        return round(100 * value, 2), 2
    mantissa, _, exponent = text.lower().partition("e")
    decimals = len(mantissa.partition(".")[2]) - int(exponent or 0)
    if row["unit"] == "M params":
        return value * 1e6, decimals - 6
    return value, decimals


def csv_range(row: dict[str, str]) -> tuple[float, float] | None:
    """(low, high) of a stated range ("2-3"), else None."""
    match = re.fullmatch(r"~?(\d+(?:\.\d+)?)-(\d+(?:\.\d+)?)", row["value"])
    return (float(match.group(1)), float(match.group(2))) if match else None


# CSV metric -> the catalog metrics that carry it (by default the same name)
CARRIED_AS = {"param_count": ("parameters", "baseline_parameters"),
              "param_count_millions": ("parameters",),  # Lightning's "67.0 M", to its rounding
              "epoch_time_median_s": ("median_epoch_s",),
              "wall_time_s": ("train_time_s",),  # ch2-both-layers: %%time, carried as its time (noted)
              "test_accuracy_frac": ("test_accuracy_pct",),
              "stated_memory_saving_x": ("stated_memory_factor_x",)}  # the note's "~2-3x" memory saving


def same_kind(row: dict[str, str], fig: experiments.Published) -> bool:
    if row["metric"] == "self_cpu_pct":  # the op's own share, not any share of that value
        op = re.search(r"op=([^\s;]+)", row["config"])
        return op is not None and fig.metric == share_metric(op.group(1))
    if row["metric"] == "stated_speedup_x":  # the source's "N times", a speed-up: any ratio figure
        return fig.metric.endswith("ratio")
    if row["metric"] == "epoch_time_s":  # one epoch of a printed run: the figure names the same epoch
        epoch = re.search(r"; epoch=(\d+)$", row["config"])
        return fig.metric == "epoch_time_s" and epoch is not None and \
            re.match(rf"epoch {epoch.group(1)}\b", fig.note) is not None
    return fig.metric in CARRIED_AS.get(row["metric"], (row["metric"],))


def carries(row: dict[str, str]) -> experiments.Published | None:
    """The figure of the row's entry that carries the row: same kind, same value to the printed decimals.
    Figures of different values that round alike are a coincidence unless the row's config names the arm
    (ch9's "almost two times" rounds like both 1.62 and 1.97): then none carries the row."""
    parsed, entry = csv_value(row), ENTRIES.get(row["id"])
    stated = csv_range(row)
    if entry is not None and stated is not None:  # a range is carried as a figure with that very range
        return next((fig for fig in entry.published if same_kind(row, fig)
                     and (getattr(fig, "low", None), getattr(fig, "high", None)) == stated), None)
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
    ranges: dict[str, set[tuple[float, float]]] = {}
    for row in reference_rows():
        parsed = csv_value(row)
        if parsed is not None:
            values.setdefault(row["id"], set()).add(parsed[0])
        if csv_range(row) is not None:
            ranges.setdefault(row["id"], set()).add(csv_range(row))
        if row["baseline_id"]:
            base_id = row["baseline_id"].partition("@")[0]
            values.setdefault(row["id"], set()).update(values.get(base_id, set()))
    checked = 0
    for entry in ENTRIES.values():
        for fig in entry.published:
            if fig.metric.endswith("ratio") or fig.source == "derived":
                continue
            # a stated range: the CSV's range, its middle as value; a printed figure's rounding ("67.0 M" is
            # 66.95-67.05 M) is a range around the CSV's value itself
            if getattr(fig, "low", None) is not None and fig.value not in values.get(entry.id, set()):
                assert (fig.low, fig.high) in ranges.get(entry.id, set()), f"{entry.id} {fig.metric} range"
            else:
                assert fig.value in values.get(entry.id, set()), f"{entry.id} {fig.metric}={fig.value} not in CSV"
            checked += 1
    assert checked > 200


def test_every_reference_row_is_carried_or_explained():
    """CSV -> catalog: a row no figure carries needs a reason in not_carried.py (the first rule that matches;
    an explicit rule wins over a coincidence of value, e.g. the repo log's cudagraphs median of 45 s is not
    Table 3.1's eager median)."""
    rows = reference_rows()
    assert len(rows) == 572 + 333  # published.csv's 572 rows + 333 added: 328 talk losses, 3 formats, 2 words
    orphans = [f"{row['id']} {row['metric']}={row['value']} ({row['source'][:40]}; {row['config'][:60]})"
               for row in rows if explain(row) is None and carries(row) is None]
    assert not orphans, "neither carried nor explained:\n" + "\n".join(orphans)
    carried = sum(explain(row) is None for row in rows)
    assert carried >= 288  # the reasons explain the rest: learning curves, other runs, wording


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


RATIOS = [(entry, fig) for entry in ENTRIES.values() for fig in entry.published
          if fig.metric == "ratio" and fig.basis != "context"]


def test_the_finder_s_cross_notebook_ratio_is_shown_never_judged():
    """The course compares the finder's 4.92 min with unit 9.1's 16-mixed 7.24 min only across notebooks and
    batch sizes: carried as context (`accel show`), and no arm's ratio is judged against it."""
    from pipelines.core.stats.pairing import ratio_figure

    finder = ENTRIES["dlf-u9-bsfinder"]
    context = [fig for fig in finder.published if fig.metric == "ratio"]
    assert len(context) == 1 and context[0].basis == "context"
    assert context[0].value == pytest.approx(arm_seconds("dlf-u9-amp", "16-mixed") / arm_seconds(finder.id, "default"))
    assert ratio_figure(finder, "default") is None


@pytest.mark.parametrize("entry, fig", RATIOS, ids=[f"{e.id}@{f.variant or '-'}" for e, f in RATIOS])
def test_every_published_ratio_is_the_baseline_time_over_the_arm_time(entry, fig):
    """Recomputed from the catalog's own times, against the arm the report compares with: a ratio typed
    against another run than the declared baseline (ch9-cpu-oneccl's 73/35 against Gloo) fails here."""
    arm = fig.variant or entry.variants[0].name
    base = declared_baseline(entry, arm)
    expected = 1.0 if base is None else arm_seconds(*base) / arm_seconds(entry.id, arm)
    assert fig.value == pytest.approx(expected, rel=1e-12), f"{entry.id} [{arm}]: {fig.value} vs {expected:.4f}"


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
    # a compiled arm's headline is end-to-end (compilation in its first epoch); ch5's, with no one-off cost,
    # is a same-work ratio of whole runs, and its steady ratio the median epochs beside it
    assert headline.basis_name == ("end-to-end" if compiles(entry, arm) else "same-work throughput")
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
    pipeline = planning.load_pipeline(entry.pipeline)
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
    assert backends.published_value("ratio", "inductor") == pytest.approx(1.61, abs=0.005)
    inductor = next(f for f in backends.published if f.metric == "ratio" and f.variant == "inductor")
    assert "vs eager" in inductor.note and "cudagraphs" in inductor.note
    assert backends.published_value("vs_cudagraphs_ratio", "inductor") == pytest.approx(1.63, abs=0.005)
    assert backends.published_value("test_accuracy_pct") == 74.68  # aot_ts_nvfuser: no arm, so no variant
    assert ENTRIES["ch3-compile-densenet-gpu"].published_value("steady_ratio", "compiled") == \
        pytest.approx(1.73, abs=0.005)
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
        pytest.approx([1.65, 2.61, 3.34, 4.26, 4.26], abs=0.005)
    gloo = ENTRIES["ch9-cpu-gloo"]
    assert [gloo.published_value("ratio", f"ranks={n}") for n in (2, 4, 8)] == \
        pytest.approx([1.26, 1.62, 1.97], abs=0.005)
    gpus = ENTRIES["ch10-gpu-nccl"]
    assert [arm.name for arm in gpus.variants] == [f"gpus={n}" for n in range(1, 9)]
    assert [gpus.published_value("ratio", f"gpus={n}") for n in range(2, 9)] == \
        pytest.approx([1.80, 2.56, 3.40, 4.11, 4.98, 5.80, 6.49], abs=0.005)
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
    from pipelines.core.harness import plan as plans
    gloo = experiments.get("ch9-cpu-gloo")
    assert gloo.arm("ranks=4") is gloo.variants[1]  # a declared arm keeps its published figures
    assert gloo.arm("ranks=3").options == {"ranks": 3} and experiments.get("ch9-cpu-threads").arm("threads=3")
    for bad in ("ranks=0", "ranks=x", "ranks=03", "ranks=-1", "threads=2"):
        assert gloo.arm(bad) is None
    assert gloo.unknown_arm("ranks=0") == ("ranks=0 is not an arm of ch9-cpu-gloo: ranks must be a whole number "
                                           "of at least 1 (e.g. ranks=2)")
    assert ("unknown variant threads=2 of ch9-cpu-gloo; it has: ranks=2, ranks=4, ranks=8"
            == gloo.unknown_arm("threads=2"))
    assert experiments.get("ch2-baseline").arm("ranks=3") is None  # closed entries stay closed
    made = plans.plan(gloo, "smoke", {}, {}, only=("ranks=3",))
    assert [c.variant for c in made.configs] == ["ranks=3"] and made.configs[0].options.ranks == 3


# ---- figures that weak rules would hide are carried; every rule holds for its rows ----


def test_a_rule_hides_no_figure_the_catalog_carries():
    """A rule wins over a figure only where the figure is a coincidence of rounding the rule names: the
    article's rounded minutes and accuracy (the logs' exact ones are carried) and the pack's medians
    computed from a saved log (the table's are carried). A rule that hid a carried figure (the old
    'epoch_time_s' catch-all over ch5's printed epochs) fails here."""
    hidden = [(row, rule) for row in reference_rows() if (rule := explain(row)) and carries(row)]
    assert hidden  # the coincidences exist, so the check below is exercised
    for row, rule in hidden:
        assert rule.source.startswith("talk-article") or rule.config == "computed from saved log", \
            (row["id"], row["metric"], row["value"], rule.reason[:60])


def test_every_printed_profile_share_is_carried():
    """All 67 printed shares (ch1 20, ch3 eager 16 and compiled 11, ch4 10 + 10), the small ones too, each
    as its own op's figure on the arm it was printed for."""
    rows = [row for row in reference_rows() if row["metric"] == "self_cpu_pct" and row["source"].startswith("book")]
    assert len(rows) == 67
    for row in rows:
        fig = carries(row)
        assert explain(row) is None and fig is not None, (row["id"], row["config"])
        arm = "compiled" if row["config"].startswith("compiled") else "eager" if row["config"].startswith("eager") \
            else None
        if row["id"] == "ch3-compile-cnn-cpu":
            assert fig.variant == arm, (row["config"], fig.variant)
        assert fig.basis_name == "profile share"
    small = [row for row in rows if float(row["value"]) < 1.0]
    assert len(small) == 33  # 15 in ch1, 11 in ch3 eager, 7 in ch3 compiled: the ones the old floor hid
    metrics = [fig.metric for fig in ENTRIES["ch3-compile-cnn-cpu"].published if fig.variant == "compiled"]
    assert "share_autograd_detach_pct" in metrics and "share_detach_pct" in metrics  # `detach` vs aten::detach


def test_ch5_printed_epochs_are_carried_with_the_steady_ratio_beside_the_published_one():
    entry = ENTRIES["ch5-pipeline"]
    book = [row for row in reference_rows() if row["id"] == "ch5-pipeline" and row["metric"] == "epoch_time_s"
            and row["source"] == "book:ch5"]
    assert len(book) == 20
    for row in book:
        fig = carries(row)
        assert explain(row) is None and fig is not None
        epoch = int(row["config"].rpartition("epoch=")[2])
        assert fig.note.startswith(f"epoch {epoch} of 10") and fig.variant == (
            "w8-pin" if "num_workers=8" in row["config"] else "baseline")
    for arm, first, median in (("baseline", 187, 186), ("w8-pin", 86, 84)):
        epochs = [fig.value for fig in entry.published if fig.metric == "epoch_time_s" and fig.variant == arm]
        assert epochs[0] == first == entry.published_value("first_epoch_s", arm)
        assert sorted(epochs[1:])[4] == median == entry.published_value("median_epoch_s", arm)  # of epochs 2-10
        assert first / median < 1.03  # the first epoch carries no one-off cost: the median is the steady state
    assert entry.published_value("ratio", "w8-pin") == pytest.approx(1892 / 846)
    assert entry.published_value("steady_ratio", "w8-pin") == pytest.approx(2.21, abs=0.005)


def test_the_note_s_n_is_the_entry_s_nproc_on_the_arm_it_describes():
    """The recipe table's 'N' / '~N' (DDP speed, FSDP memory and speed): the entries run at a fixed NPROC, so
    the figure for that N is carried, with N as its device count; a change of NPROC breaks this test."""
    rows = [row for row in reference_rows() if row["value"].lstrip("~") == "N"]
    assert {(row["id"], row["metric"]) for row in rows} == {
        ("s004-dp-vs-ddp", "stated_speed_factor_x"), ("s004-fsdp", "stated_memory_factor_x"),
        ("s004-fsdp", "stated_speed_factor_x")}
    for row in rows:
        entry = ENTRIES[row["id"]]
        fig = carries(row)
        assert explain(row) is None and fig is not None, (row["id"], row["metric"])
        assert fig.value == int(entry.knobs["NPROC"]) == fig.devices
    assert carries(rows[0]).variant == "ddp"  # DDP's speed, not DataParallel's


def test_lightning_s_rounded_parameter_count_is_carried_to_its_rounding():
    row = next(r for r in reference_rows() if r["metric"] == "param_count_millions")
    fig = carries(row)
    assert explain(row) is None and fig is not None and fig.metric == "parameters" and fig.value == 67_000_000
    assert csv_value(row) == (67_000_000.0, -5)  # "67.0" M: to the nearest 100,000
    assert round(66_955_010, -5) == fig.value  # the exact DistilBERT (2 labels) count rounds to it
    assert round(66_940_000, -5) != fig.value  # and a count 0.06 M off does not


def test_the_note_s_precision_table_is_torch_finfo():
    """fp16 +-65504, fp32 and bf16 +-3.4e38, to the digits the note prints: torch.finfo agrees."""
    import torch

    dtypes = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
    rows = [row for row in reference_rows() if row["metric"] == "max_finite_value"]
    assert len(rows) == 3
    for row in rows:
        fig = carries(row)
        assert explain(row) is None and fig is not None and fig.variant in dtypes
        value, decimals = csv_value(row)
        assert round(torch.finfo(dtypes[fig.variant]).max, decimals) == fig.value == value, fig.variant
    assert torch.finfo(torch.float16).max == 65504


def test_a_percent_faster_row_is_the_ratio_the_entry_carries():
    """The RATIO_WORDING rule holds row by row: each 'N % faster' is (ratio - 1) x 100 of a ratio the entry
    carries, to the book's rounding (its 'around 11 %' for 1.12, '548 %' for 6.49)."""
    from pipelines.catalog.not_carried import RATIO_WORDING

    rows = [row for row in reference_rows() if (rule := explain(row)) and rule.reason == RATIO_WORDING]
    assert len(rows) == 16
    for row in rows:
        ratios = [fig.value for fig in ENTRIES[row["id"]].published if fig.metric.endswith("ratio")]
        assert any(abs((r - 1) * 100 - float(row["value"])) <= 1.5 for r in ratios), (row["id"], row["value"])


def test_the_coverage_holes_are_in_the_table_and_explained():
    """The talk's per-batch losses (logs.md, every 300 batches; the slides show some of
    these lines), the note's '+ CPU offload' row; each explained by a rule that names its rows."""
    rows = reference_rows()
    losses = [row for row in rows if row["metric"] == "batch_loss"]
    assert len(losses) == 328 and all(row["source"] == "repo:rasbt/cvpr2023@6d0753f:logs.md" for row in losses)
    assert {explain(row).metric for row in losses} == {"batch_loss"}
    per_step = {}
    for row in losses:
        per_step[row["id"]] = per_step.get(row["id"], 0) + 1
    assert per_step == {"vit-scratch": 100, "vit-finetune": 30, "vit-compile": 30, "vit-fabric-baseline": 30,
                        "vit-bf16-mixed": 30, "vit-ddp-4gpu": 36, "vit-fsdp-4gpu": 36, "vit-fsdp-4gpu-sched": 36}
    offload = [row for row in rows if "+ CPU offload" in row["config"]]
    assert {row["value"] for row in offload} == {"even larger", "slower"}
    assert all(explain(row) is not None and "offload arms" in explain(row).reason for row in offload)
    assert {"deepspeed-3-offload", "fsdp2-zero-3-offload"} <= {arm.name for arm in ENTRIES["s004-deepspeed"].variants}


def test_a_rule_that_says_the_result_is_carried_holds_for_each_of_its_rows():
    """'... test accuracy is carried' / '... time and test accuracy are carried' is checked row by row: the
    row's entry carries that figure (a learning-curve rule over an entry without one would explain it away)."""
    checked = 0
    for row in reference_rows():
        rule = explain(row)
        if rule is None or "test accuracy" not in rule.reason or "carried" not in rule.reason:
            continue
        metrics = {fig.metric for fig in ENTRIES[row["id"]].published}
        assert "test_accuracy_pct" in metrics, (row["id"], rule.reason[:60])
        if "time and test accuracy" in rule.reason:
            assert metrics & set(TIME_METRICS), row["id"]
        checked += 1
    assert checked >= 390  # the talk's losses and per-epoch accuracies, the course's accuracies


def _pipeline_names() -> list[str]:
    """Every pipeline the catalog names (technique files, and the harness's self-checks as selfcheck.<name>)."""
    return sorted({e.pipeline for e in ENTRIES.values() if e.pipeline})


def test_every_technique_file_is_named_by_the_catalog_and_every_name_is_a_file():
    files = {p.stem for p in (REPO / "pipelines").glob("*.py") if not p.stem.startswith("_")}
    files |= {f"selfcheck.{p.stem}" for p in (REPO / "pipelines" / "selfcheck").glob("*.py")
              if not p.stem.startswith("_") and "\nPIPELINE = " in p.read_text()}  # not ci's harness overhead
    assert files == set(_pipeline_names())


@pytest.mark.parametrize("name", _pipeline_names())
def test_a_pipeline_declares_what_it_supports_and_its_options_type(name):
    """The runner reads `supports`, never the option groups an Options inherits: so a group must be backed by
    a declaration and a declaration by its group, or a setting would be accepted and silently not used. The
    pipeline's class names its Options type (TrainingPipeline[Options]), which is the type of cfg.options."""
    import typing

    from pipelines.core.config import options
    from pipelines.core.harness.plan import load_pipeline

    pipeline = load_pipeline(name)
    cls, opts = type(pipeline), type(pipeline).Options
    assert bool(pipeline.supports.backends) == issubclass(opts, options.DistOptions), name
    assert pipeline.supports.checkpoints == issubclass(opts, options.CheckpointOptions), name
    every_backend = typing.get_args(typing.get_type_hints(options.DistOptions)["backend"])
    assert set(pipeline.supports.backends) <= set(every_backend)
    assert set(pipeline.supports.devices) <= {"cpu", "cuda"} and pipeline.supports.devices
    if opts is not options.NoOptions:
        assert [typing.get_args(base) for base in cls.__orig_bases__] == [(opts,)], \
            f"{name}: declare the class as {cls.__mro__[1].__name__}[Options]"
