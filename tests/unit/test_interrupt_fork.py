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
