import csv
import importlib
import math
import re

import pytest

from conftest import SHARED_REFERENCE
from pipelines.core import experiments
from pipelines.core import options, runner
from pipelines.core.pipeline import Measurement, TrainingPipeline

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


@pytest.mark.skipif(not (SHARED_REFERENCE / "experiments.md").is_file(),
                    reason="the reference pack (../shared/reference) is not beside this checkout")
def test_reference_summary_matches_the_hard_coded_list():
    summary = (SHARED_REFERENCE / "experiments.md").read_text().split("## Conventions")[0]
    ids = set(re.findall(r"^\| ([a-z0-9]+(?:-[a-z0-9]+)+) \|", summary, re.M))
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


@pytest.mark.skipif(not (SHARED_REFERENCE / "published.csv").is_file(),
                    reason="the reference pack (../shared/reference) is not beside this checkout")
def test_published_figures_match_the_reference_csv():
    values: dict[str, set[float]] = {}
    with open(SHARED_REFERENCE / "published.csv", newline="") as handle:
        for row in csv.DictReader(handle):
            try:
                values.setdefault(row["id"], set()).add(float(row["value"]))
            except ValueError:
                continue
    checked = 0
    for entry in ENTRIES.values():
        for fig in entry.published:
            if fig.metric == "ratio" or fig.source == "derived" or fig.metric.startswith(("share_", "param")):
                continue
            assert fig.value in values.get(entry.id, set()), f"{entry.id} {fig.metric}={fig.value} not in CSV"
            checked += 1
    assert checked > 40
