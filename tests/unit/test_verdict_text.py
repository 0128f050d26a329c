"""The verdict a command ends with (core/stats/verdict.py): an arm skipped here has no table line, so the
verdict names it after the table with the reason its record holds, in the text and in --json."""

from __future__ import annotations

import json
from pathlib import Path

from recordutil import record, steps

from pipelines.core.stats import verdict


def test_a_skipped_arm_is_named_after_the_table_with_its_reason():
    ran = [record("ch7-amp", arm, repeat=i, step_times=steps(ratio)) for i in range(3)
           for arm, ratio in (("fp32", 1.0), ("bf16", 1.2))]
    skipped = record("ch7-amp", "fp16")
    skipped.update(status="skipped", notes=["fp16 runs with --device cuda: accel run ch7-amp --variant fp16"])
    records = [*ran, skipped]
    text = verdict.text(records, ["ch7-amp"], [], Path("results"))
    table, after = text.split("not run here:", 1)
    assert "ch7-amp [bf16]" in table and "ch7-amp [fp16]" not in table
    assert after.startswith(" ch7-amp [fp16]: fp16 runs with --device cuda: accel run ch7-amp --variant fp16\n")
    shown = json.loads(verdict.as_json(records, ["ch7-amp"], [], Path("results")))
    assert shown["not_run"] == [{"arm": "ch7-amp [fp16]", "why": skipped["notes"][0]}]
    assert "not run here" not in verdict.text(ran, ["ch7-amp"], [], Path("results"))


def test_a_repeat_resumed_from_a_checkpoint_is_noted_beside_its_verdict():
    records = [record("ch7-amp", arm, repeat=i, step_times=steps(ratio)) for i in range(3)
               for arm, ratio in (("fp32", 1.0), ("bf16", 1.2))]
    records[1]["metrics"]["resumed_from"] = {"checkpoint": "ckpt/checkpoint.pt", "epoch": 1, "batch": 3}
    line = next(line for line in verdict.text(records, ["ch7-amp"], [], Path("results")).splitlines()
                if line.startswith("ch7-amp [bf16]"))
    assert line.endswith("(resumed from a checkpoint: 1 of 3 repeats)")
    assert "resumed" not in verdict.text(records[2:], ["ch7-amp"], [], Path("results"))


def test_a_repeat_resumed_at_another_world_size_gives_no_verdict():
    records = [record("ch7-amp", arm, repeat=i, step_times=steps(ratio)) for i in range(3)
               for arm, ratio in (("fp32", 1.0), ("bf16", 1.2))]
    for r in records:
        r["dist"] = {"world_size": 2}
    records[1]["metrics"]["resumed_from"] = {"checkpoint": "ckpt/checkpoint.pt", "epoch": 1, "batch": 3,
                                             "world_size": 4}  # an elastic run that lost a node
    text = verdict.text(records, ["ch7-amp"], [], Path("results"))
    line = next(line for line in text.splitlines() if line.startswith("ch7-amp [bf16]"))
    assert "not comparable" in line and line.endswith("(resumed from a checkpoint: 1 of 3 repeats, 1 at another "
                                                       "world size: no ratio)")
    assert "repeat 0 of ch7-amp [bf16] resumed from a checkpoint of 4 ranks on 2 (checkpoint_any_world)" in text
    records[1]["metrics"]["resumed_from"]["world_size"] = 2  # the same world size: judged as before
    assert "checkpoint_any_world" not in verdict.text(records, ["ch7-amp"], [], Path("results"))
