"""The catalog: every reference id present, entries well formed, figures equal to the published facts,
and every published ratio recomputable from the published times of the arm and of its baseline.

tests/published_reference.csv holds the rows of the reference pack's published.csv (id, metric, value,
unit, baseline_id, source, config) for the metrics the catalog carries, copied into the repository so
that no test reads files outside it.
"""

import csv
import importlib
import math
import re

import pytest

from conftest import REPO
from pipelines.core import experiments
from pipelines.core import options, runner
from pipelines.core.pipeline import Measurement, TrainingPipeline
from pipelines.core.report_compare import TIME_METRICS, declared_baseline, published_times

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
        assert re.search(r"(_s|_pct|_min|ratio|_x|parameters|_size)$", fig.metric), fig.metric
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


def test_published_figures_match_the_reference_csv():
    """A figure is the entry's own or one of the rows its source compares it with (baseline_id)."""
    values: dict[str, set[float]] = {}
    for row in reference_rows():
        values.setdefault(row["id"], set()).add(float(row["value"]))
        if row["baseline_id"]:
            base_id = row["baseline_id"].partition("@")[0]
            values.setdefault(row["id"], set()).update(values.get(base_id, set()))
    checked = 0
    for entry in ENTRIES.values():
        for fig in entry.published:
            if fig.metric == "ratio" or fig.source == "derived" or fig.metric.startswith(("share_", "param")):
                continue
            assert fig.value in values.get(entry.id, set()), f"{entry.id} {fig.metric}={fig.value} not in CSV"
            checked += 1
    assert checked > 60


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
