"""Ctrl-C (SIGINT) and SIGTERM (SLURM's preemption and time limit, `kill`) end a run without losing work.

`signals_raise()` turns both signals into `Interrupted`, raised in the main thread like KeyboardInterrupt.
It derives from BaseException, so no `except Exception` in a pipeline swallows it: it unwinds to the
runner, which records the repeat in flight as `interrupted` beside the finished records, and then to the
CLI, which prints one line and exits 128 + the signal number (130, 143), as shells expect. After the first
signal the default handlers are back, so a second Ctrl-C forces the exit while the record is written.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(BaseException):
    """The run was stopped by a signal. `path`: the result file that keeps `finished` records and, when a
    repeat was in flight, its `interrupted` record (None: nothing written); `main`: this process is rank 0
    (which reports); `launched`: it is one rank of a distributed run."""

    def __init__(self, signum: int, path: Path | None = None, finished: int = 0, in_flight: bool = False,
                 main: bool = True, launched: bool = False):
        super().__init__(signal.Signals(signum).name)
        self.signum, self.path, self.finished, self.in_flight = signum, path, finished, in_flight
        self.main, self.launched = main, launched

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    def message(self) -> str:
        if self.path is None:
            return f"interrupted by {self.name} before any record was written; nothing written"
        stopped = " and the interrupted repeat's record" if self.in_flight else ""
        return f"interrupted by {self.name}; {self.finished} finished record(s){stopped} kept in {self.path}"


def as_interrupted(exc: BaseException) -> Interrupted:
    """KeyboardInterrupt (SIGINT without our handler, e.g. the runner used as a library) is SIGINT."""
    return exc if isinstance(exc, Interrupted) else Interrupted(signal.SIGINT)


def _raise(signum: int, frame) -> None:
    for number in SIGNALS:  # the second signal forces the exit (default handlers)
        signal.signal(number, signal.default_int_handler if number == signal.SIGINT else signal.SIG_DFL)
    raise Interrupted(signum)


@contextmanager
def signals_raise() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM raise Interrupted; the previous handlers come back after it.
    Signal handlers belong to the main thread: elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {number: signal.getsignal(number) for number in SIGNALS}
    for number in SIGNALS:
        signal.signal(number, _raise)
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
