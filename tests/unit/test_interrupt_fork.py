"""A DataLoader worker is a fork of the run: it must not carry the run's signal handlers, or a signal sent to
every process of a SLURM step is noted in the worker too and raised there by the grace timer, as a
traceback after the run's one line (core/train/interrupt.py)."""

from __future__ import annotations

import signal

import torch

from pipelines.core.train import interrupt


class Handlers(torch.utils.data.Dataset):
    """Each item: whether the process that reads it has the default handlers for TERM and INT."""

    def __len__(self) -> int:
        return 2

    def __getitem__(self, index: int) -> torch.Tensor:
        default = (signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
                   and signal.getsignal(signal.SIGINT) is signal.default_int_handler)
        return torch.tensor(default and interrupt._deferring == 0 and interrupt.pending() is None)


def test_a_dataloader_worker_forked_inside_training_has_the_default_handlers():
    with interrupt.signals_raise(), interrupt.deferred():
        assert signal.getsignal(signal.SIGTERM) is interrupt._raise  # the run's, in the run's process
        loader = torch.utils.data.DataLoader(Handlers(), batch_size=2, num_workers=1,
                                             multiprocessing_context="fork")
        assert bool(next(iter(loader)).all())


def _stubborn() -> None:
    """A worker that ignores TERM, as one stuck where no handler runs would."""
    import time

    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(60)


def test_an_interrupted_process_ends_every_fork_before_it_leaves():
    """A process that leaves with os._exit first ends its forks, the ones multiprocessing tracks and one it
    does not (a worker whose start the interruption cut short): none may outlive the run holding its
    stderr. One that ignores TERM is killed after the grace."""
    import multiprocessing
    import os
    import time

    tracked = multiprocessing.get_context("fork").Process(target=_stubborn, daemon=True)
    tracked.start()
    untracked = os.fork()
    if untracked == 0:
        time.sleep(60)
        os._exit(0)
    chld = signal.getsignal(signal.SIGCHLD)
    try:
        started = time.monotonic()
        interrupt.end_forked_children(grace_s=0.5)
        assert time.monotonic() - started < 5
    finally:
        signal.signal(signal.SIGCHLD, chld)
    for pid in (tracked.pid, untracked):
        assert not os.path.exists(f"/proc/{pid}"), f"fork {pid} outlived end_forked_children"
