"""The requeue guard of launch/slurm.sbatch (core/distributed/requeue.py): a job is requeued only after a
checkpoint taken for a requeue, only when it is further on than the last requeue's, and at most MAX_REQUEUES
times; every refusal is one line, and the ledger changes only on a requeue."""

from __future__ import annotations

import json

import pytest

from pipelines.core.distributed import requeue


def marked(folder, epoch: int, batch: int, asked: bool = True):
    folder.mkdir(exist_ok=True)
    (folder / requeue.NEWEST_MARKER).write_text(json.dumps({"epoch": epoch, "batch": batch, "requeue": asked}))


def test_the_folder_comes_from_the_accel_arguments(tmp_path):
    assert requeue.checkpoint_dir(["run", "x", "-o", f"checkpoint_dir={tmp_path}", "-o", "a=1"]) == tmp_path
    assert requeue.checkpoint_dir(["run", "x", "--option", "checkpoint_dir=d"]).name == "d"
    assert requeue.checkpoint_dir(["run", "x", "-o", "checkpoint_every=1"]) is None


def test_a_checkpoint_for_a_requeue_further_on_each_time_is_requeued_up_to_the_limit(tmp_path):
    for count, place in enumerate(((0, 3), (0, 6), (1, 0)), start=1):
        marked(tmp_path, *place)
        ok, line = requeue.decide(tmp_path, most=3)
        assert ok and line.startswith(f"requeue {count} of at most 3: the ranks checkpointed at epoch {place[0]}")
    marked(tmp_path, 1, 3)
    assert requeue.decide(tmp_path, most=3) == (False, "not requeued: 3 requeues made already (MAX_REQUEUES=3)")


@pytest.mark.parametrize("case,needle", [
    ("no folder", "names no -o checkpoint_dir=DIR"),
    ("no marker", "holds no marked checkpoint to resume from"),
    ("not for a requeue", "was not taken for a requeue"),
    ("no progress", "no progress since the last requeue (both at epoch 0, batch 3)"),
])
def test_a_job_that_cannot_resume_or_made_no_progress_is_not_requeued(tmp_path, case, needle):
    folder = None if case == "no folder" else tmp_path / "ckpt"
    if case == "not for a requeue":
        marked(folder, 0, 3, asked=False)
    if case == "no progress":
        marked(folder, 0, 3)
        assert requeue.decide(folder, most=3)[0]
    before = (folder / requeue.LEDGER).read_text() if folder and (folder / requeue.LEDGER).exists() else None
    ok, line = requeue.decide(folder, most=3)
    assert not ok and needle in line and line.startswith("not requeued: ")
    after = (folder / requeue.LEDGER).read_text() if folder and (folder / requeue.LEDGER).exists() else None
    assert before == after  # nothing counted


def test_the_marker_name_is_the_checkpoint_s(tmp_path):
    from pipelines.core.train import checkpoint

    assert checkpoint.marker_of(tmp_path / checkpoint.FILENAME).name == requeue.NEWEST_MARKER
