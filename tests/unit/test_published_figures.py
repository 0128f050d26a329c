"""Published figures say what they were measured on and how they are judged: the device count the source
states (no verdict across different counts), and a stated range as its own band. The counts are read from
the reference table's own config text, so a figure moved to another arm, or an arm that loses its `ranks`,
fails here."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from pipelines.core.config import experiments
from pipelines.core.stats import pairing

TABLE = Path(__file__).resolve().parents[1] / "published_reference.csv"
COUNT_PATTERNS = (  # how the sources write a device count in the reference table's config column
    (re.compile(r"devices=\[([0-9,]+)\]"), lambda m: len(m.group(1).split(","))),
    (re.compile(r"devices=(\d+)\b"), lambda m: int(m.group(1))),
    (re.compile(r"\bgpus=(\d+)$|\bgpus=(\d+);"), lambda m: int(m.group(1) or m.group(2))),
    (re.compile(r"= (\d+) GPUs"), lambda m: int(m.group(1))),
)


def stated_count(config: str) -> int | None:
    for pattern, count in COUNT_PATTERNS:
        if match := pattern.search(config):
            return count(match)
    return None


def carried_value(metric: str, value: float) -> tuple[str, float]:
    return ("test_accuracy_pct", round(value * 100, 2)) if metric == "test_accuracy_frac" else (metric, value)


def test_a_figure_carries_the_device_count_its_source_states():
    entries = experiments.all_experiments()
    checked = 0
    with TABLE.open(newline="") as handle:
        for row in csv.DictReader(handle):
            wanted, entry = stated_count(row["config"]), entries.get(row["id"])
            if wanted is None or entry is None:
                continue
            metric, value = carried_value(row["metric"], float(row["value"]))
            for fig in entry.published:
                if fig.metric == metric and abs(fig.value - value) <= 1e-9 * max(1.0, abs(value)):
                    devices = fig.devices or entry.published_devices(fig.variant or entry.variants[0].name)
                    assert devices == wanted, f"{entry.id} {metric} {value}: {devices} device(s), the source {wanted}"
                    checked += 1
    assert checked >= 30  # Table 10.2, the course's strategies, the talk's 4-GPU steps, chapter 11


def test_a_count_the_catalog_cannot_state_is_none_and_a_bad_count_is_refused():
    assert experiments.get("ch11-multinode-mpi-nccl").published_devices("default") == 16
    assert experiments.get("ch2-baseline").published_devices("baseline") == 1
    with pytest.raises(ValueError, match="devices must be at least 1"):
        experiments.Published("ratio", 2.0, "x", devices=0)


def test_a_stated_range_is_the_band_itself():
    """The note's '~2-3x': 2.4 [2.1, 2.9] reproduces it, 3.3 [3.1, 3.5] saves more; a point figure keeps
    the effect rule's band (2.0: x/1.15, the cap)."""
    from pipelines.core.stats import intervals

    ranged = experiments.Published("stated_memory_factor_x", 2.5, "note", low=2, high=3)
    assert ranged.band() == (2, 3) and ranged.rule_text() == "the source's stated range"
    assert experiments.Published("ratio", 2.0, "x").band() == pytest.approx((2 / 1.15, 2 * 1.15))
    band = intervals.Interval(*ranged.band())
    assert intervals.verdict(intervals.Interval(2.1, 2.9), band) == intervals.REPRODUCED
    assert intervals.verdict(intervals.Interval(3.1, 3.5), band) == intervals.FASTER
    point = intervals.Interval(*experiments.Published("x_factor_x", 2.5, "note").band())
    assert intervals.verdict(intervals.Interval(2.1, 2.9), point) == intervals.INCONCLUSIVE  # 2.5 x/1.15
    with pytest.raises(ValueError, match="low <= value <= high"):
        experiments.Published("stated_memory_factor_x", 4, "note", low=2, high=3)


def test_each_checkpointing_claim_is_on_the_arm_it_describes():
    entry = experiments.get("s004-ckpt")
    figures = {(fig.variant, fig.metric): fig for fig in entry.published}
    assert figures[("checkpointed", "stated_memory_factor_x")].band() == (2, 3)
    assert figures[("checkpointed", "stated_speed_factor_x")].value == 0.7
    assert figures[("amp-checkpointed", "stated_memory_factor_x")].value == 4
    assert entry.arm("amp-checkpointed").options == {"precision": "bf16"}
    # the recipe table's row adds checkpointing to "1 GPU mixed precision": judged against the amp arm
    assert pairing.declared_baseline(entry, "amp-checkpointed") == ("s004-ckpt", "amp")
    assert pairing.declared_baseline(entry, "checkpointed") == ("s004-ckpt", "plain")
    assert entry.arm("amp").options == {"checkpoint": False, "precision": "bf16"}


def test_table_3_2_s_cumulative_accuracies_are_context_not_a_delta(tmp_path):
    """The book trained one model on across its backends; an arm here starts fresh: the published accuracy
    is shown as context, and no 'delta vs published' is printed for it."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from recordutil import record, rows_for, steps, write
    from pipelines.core.report import tables
    from pipelines.core.stats import verdict

    def book(variant):
        rec = record("ch3-backends-densenet-gpu", variant, step_times=steps(1.0), accuracy=70.0)
        rec["scale"] = "book"
        rec["config"].update(scale="book", data_source="real", device="cuda")
        return rec

    write(tmp_path, "ch3", [book("eager"), book("cudagraphs")])
    row = rows_for(tmp_path)[("ch3-backends-densenet-gpu", "cudagraphs")]
    assert row.published_accuracy == 77.57 and row.accuracy_context.startswith("cumulative")
    assert verdict._accuracy(row).startswith("70.00 % (published 77.57 %: context only, cumulative")
    view = tables.book_accuracy_view([row])
    assert view["Δ vs published (pp)"][0] == "-" and view["note"][0].startswith("context only: cumulative")


def test_counts_and_settings_have_bases_of_their_own_and_are_checked_exactly(tmp_path):
    """No parameter count or batch size is judged as 'same-work throughput': a count matches or differs. The
    batch-size finder's sizes are where an A100-40GB ran out of memory: context, shown, never judged."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from recordutil import record, rows_for, steps, write

    for entry in experiments.all_experiments().values():
        for fig in entry.published:
            if "parameters" in fig.metric or fig.metric.endswith("batch_size") or fig.metric == "param_ratio":
                wanted = ("context",) if entry.id == "dlf-u9-bsfinder" else ("count", "setting")
                assert fig.basis_name in wanted, f"{entry.id} {fig.metric}: {fig.basis_name}"
    assert experiments.Published("param_ratio", 1.079, "x").matches(1758858 / 1630090)
    assert not experiments.Published("param_ratio", 1.079, "x").matches(1.08)
    baseline = record("ch2-baseline", "baseline", step_times=steps(1.0))
    baseline["metrics"]["parameters"] = 1630090
    nobias = record("ch2-nobias", "nobias", step_times=steps(1.0))
    nobias["metrics"]["parameters"] = 1630091
    write(tmp_path, "r", [baseline, nobias])
    rows = rows_for(tmp_path)
    from pipelines.core.stats.bases import counts

    assert rows[("ch2-baseline", "baseline")].outcomes[counts.NAME] == [("parameters", 1630090, 1630090, "matches")]
    assert rows[("ch2-nobias", "nobias")].outcomes[counts.NAME] == [("parameters", 1629472, 1630091, "differs")]


def test_the_note_s_rules_of_thumb_are_for_no_hardware_and_judged_on_cpu_and_gpu_alike(tmp_path):
    """A GPU run of s004-ckpt said "published on CPU (unstated)": the note states no machine at all."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from recordutil import record, rows_for, steps, write
    from pipelines.core.stats import pairing

    assert {pairing.hardware_class(e) for e in experiments.all_experiments().values() if e.id.startswith("s004-")} \
        == {"any"}
    for device in ("cpu", "cuda"):
        recs = [record("s004-ckpt", arm, repeat=i, step_times=steps(ratio)) for i in range(3)
                for arm, ratio in (("plain", 1.0), ("checkpointed", 0.7))]
        for rec in recs:
            rec["config"]["device"] = device
        write(tmp_path / device, "r", recs)
        row = rows_for(tmp_path / device)[("s004-ckpt", "checkpointed")]
        assert row.verdict == "reproduced" and "hardware" not in row.why, (device, row.why)


def test_a_per_device_step_count_is_compared_only_on_the_figure_s_device_count():
    """The talk's 703 steps an epoch are per device on 4 GPUs: a 1-rank run of vit-ddp-4gpu takes 2,812 and is
    not 'differs' but 'other devices', with both counts; on 4 ranks the count is checked."""
    from pipelines.core.stats.bases import counts

    entry = experiments.get("vit-ddp-4gpu")
    arm = entry.variants[0].name

    def recs(world_size, steps):
        return [{"metrics": {"steps_per_epoch": steps}, "dist": {"world_size": world_size}}]

    (check,) = [c for c in counts.checks(entry, arm, recs(1, 2812)) if c[0] == "steps_per_epoch"]
    assert check == ("steps_per_epoch", 703, 2812, "other devices: published on 4, run on 1")
    (check,) = [c for c in counts.checks(entry, arm, recs(4, 703)) if c[0] == "steps_per_epoch"]
    assert check[3] == counts.MATCHES
    (check,) = [c for c in counts.checks(entry, arm, recs(4, 700)) if c[0] == "steps_per_epoch"]
    assert check[3] == counts.DIFFERS
