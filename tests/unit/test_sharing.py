"""Which arms share a process (core/harness/sharing.py), the allocator a comparison runs under, and the plan's
words for both: decided from the catalog and the pipelines' declarations, before any process starts."""

from __future__ import annotations

import pytest

from pipelines.core.harness import plan as planning, sharing
from pipelines.core.config import experiments


def arms(*ids: str, scale: str = "bench", **overrides) -> list[planning.Plan]:
    """One plan per ID or ID@ARM, as a comparison builds them."""
    out = []
    for spec in ids:
        experiment_id, _, variant = spec.partition("@")
        out.append(planning.plan(experiments.get(experiment_id), scale, overrides, {}, (variant,) if variant else ()))
    return out


def labels(groups) -> list[list[str]]:
    return [group.labels for group in groups]


def test_the_chapter_2_ladder_shares_one_process_and_intel_openmp_does_not():
    """Intel OpenMP runs alone, so its baseline gets a process of its own too (a solo slot, measured as the
    lone arm is); the ladder's arms keep pairing with the baseline of their shared process."""
    groups = sharing.groups(arms("ch2-baseline", "ch2-nobias", "ch2-bs256", "ch2-iomp"))
    assert labels(groups) == [["ch2-baseline [baseline]", "ch2-nobias [nobias]", "ch2-bs256 [bs256]"],
                              ["ch2-iomp [iomp]"], ["ch2-baseline [baseline]"]]
    assert groups[0].shared and not groups[1].shared and groups[2].key[0] == "solo"
    assert groups[2].serves == ["ch2-iomp [iomp]"]
    assert sharing.differences(groups[1], groups) == "OMP_RUNTIME intel (vs gnu)"


def test_a_baseline_alone_already_gets_no_solo_slot():
    groups = sharing.groups(arms("ch2-baseline", "ch2-iomp"))
    assert labels(groups) == [["ch2-baseline [baseline]"], ["ch2-iomp [iomp]"]]


def test_a_process_wide_option_keeps_arms_apart():
    """torch.set_num_threads holds for the whole process: Table 9.1's thread counts never share one."""
    groups = sharing.groups(arms("ch9-cpu-threads@threads=1", "ch9-cpu-threads@threads=2"))
    assert labels(groups) == [["ch9-cpu-threads [threads=1]"], ["ch9-cpu-threads [threads=2]"]]
    assert sharing.differences(groups[1], groups) == "threads 2 (vs 1)"


def test_arms_of_one_entry_share_unless_their_environment_differs():
    assert labels(sharing.groups(arms("ch3-compile-cnn-cpu"))) == [
        ["ch3-compile-cnn-cpu [eager]", "ch3-compile-cnn-cpu [compiled]"]]
    assert len(sharing.groups(arms("ch6-prune"))) == 1


@pytest.mark.parametrize("entry,why", [
    ("s004-amp", "its memory figure is a process peak"),  # the note's "2x memory": one process's peak each
    ("dlf-u9-compile", "DataLoader worker processes"),  # 4 workers beside the main process
])
def test_what_a_shared_process_cannot_give_keeps_an_arm_alone(entry, why):
    groups = sharing.groups(arms(entry))
    assert all(len(group.members) == 1 for group in groups)
    assert why in sharing.why_apart(groups[0].members[0])


def test_memory_measured_per_arm_may_still_share():
    """Activation checkpointing measures autograd's saved tensors per arm, whatever else the process holds."""
    assert len(sharing.groups(arms("s004-ckpt"))) == 1


def test_a_launcher_s_ranks_are_processes_of_their_own():
    groups = sharing.groups(arms("ch9-cpu-threads@threads=2", "ch9-cpu-gloo@ranks=2"))
    assert [g.key[0] for g in groups] == ["shared", "launch"]
    assert "launch/torchrun.sh" in sharing.why_apart(groups[1].members[0])


def test_share_none_gives_every_training_arm_its_own_process():
    assert len(sharing.groups(arms("ch2-baseline", "ch2-nobias"), share=False)) == 2


def test_the_user_s_runtime_knobs_count_as_the_catalog_s_would():
    knobs = sharing.runtime_knobs(experiments.get("ch2-baseline"), {"OMP_RUNTIME": "intel"})
    assert knobs["OMP_RUNTIME"] == "intel" and knobs["KMP_BLOCKTIME"] == "0"


@pytest.mark.parametrize("ids,choice,scale,env,knob,words", [
    (("ch2-baseline", "ch2-nobias"), "auto", "bench", {}, "pinned", "pinned (glibc: mmap_threshold 32 MiB"),
    (("ch4-gomp-default-cnn", "ch4-alloc-tcmalloc-cnn"), "auto", "bench", {}, "default", "compare(s) allocators"),
    (("ch2-baseline", "ch2-nobias"), "auto", "bench", {"ALLOCATOR": "jemalloc"}, None, "from your environment"),
    (("ch2-baseline", "ch2-nobias"), "default", "bench", {}, "default", "as the sources ran"),
    (("ch2-baseline", "ch2-nobias"), "auto", "book", {}, None, "as the source ran"),
])
def test_the_allocator_setting(ids, choice, scale, env, knob, words):
    setting = sharing.allocator_setting(arms(*ids, scale=scale), choice, scale, env)
    assert setting.knob == knob and words in setting.text
