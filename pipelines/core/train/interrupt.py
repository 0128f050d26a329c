"""Ctrl-C (SIGINT) and SIGTERM (SLURM's preemption and time limit, `kill`) end a run without losing work.

`signals_raise()` turns both signals into `Interrupted`, raised in the main thread like KeyboardInterrupt.
It derives from BaseException, so no `except Exception` in a pipeline swallows it: it unwinds to the
runner, which records the repeat in flight as `interrupted` beside the finished records, and then to the
CLI, which prints one line and exits 128 + the signal number (130, 143), as shells expect. After the first
signal the default handlers are back, so a second Ctrl-C forces the exit while the record is written.

Inside training (`deferred()`, entered by the process that trains), a signal is only noted, and acted on
at a safe point (`check()`: before every step, between repeats and evaluation batches). Raising wherever
the signal lands is fragile: landing inside a fork of DataLoader workers (logging's at-fork lock release)
Python printed "Exception ignored" and dropped it, and the run went on for minutes. A safe point is
reached within one step; a step that does not end within GRACE_S seconds (EfficientNet-B7 at batch 2048 on
a CPU, DataLoader workers starting) is interrupted where it is by a timer, which fires again every RETRY_S
seconds until the interruption is under way (`as_interrupted`): a raise that lands inside a fork's hook is
dropped. A run acts on a signal within about 2 seconds.

SIGUSR1 (REQUEUE: SLURM's warning before a time limit, `--signal=B:USR1@N`, which launch/slurm.sbatch
passes to the ranks) is only noted: the checkpoint hooks act on it at their next save, which every rank
reaches at the same step, and the run stops there as `Interrupted` with `checkpoint` set, exit 75
(EXIT_CHECKPOINTED), so the batch script can requeue the job. An exception raised after a signal arrived
(DataLoader workers killed by the same signal of the process group, a peer rank gone) is part of that
interruption (`as_interrupted`), not an error with a traceback; so are the failures of multiprocessing's
helper threads on the way out (helper_threads.py, whose hooks `signals_raise()` installs).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from pipelines.core.train import helper_threads

SIGNALS = (signal.SIGINT, signal.SIGTERM)
REQUEUE = signal.SIGUSR1  # SLURM's warning before a time limit (--signal=B:USR1@N): checkpoint, then stop
EXIT_CHECKPOINTED = 75  # stopped after a checkpoint for a requeue: resumable (EX_TEMPFAIL, "try again")


class Interrupted(BaseException):
    """The run was stopped by a signal. `path`: the result file that keeps `finished` records and, when a
    repeat was in flight, its `interrupted` record (None: nothing written); `main`: this process is rank 0
    (which reports); `launched`: it is one rank of a distributed run."""

    def __init__(self, signum: int, path: Path | None = None, finished: int = 0, in_flight: bool = False,
                 main: bool = True, launched: bool = False, checkpoint: str | None = None):
        super().__init__(signal.Signals(signum).name)
        self.signum, self.path, self.finished, self.in_flight = signum, path, finished, in_flight
        self.main, self.launched = main, launched
        self.checkpoint = checkpoint  # stopped for a requeue, right after this checkpoint (its path and place)

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        return EXIT_CHECKPOINTED if self.checkpoint else 128 + self.signum

    def message(self) -> str:
        if self.checkpoint:
            kept = f"; {self.finished} finished record(s) kept in {self.path}" if self.path else ""
            return (f"checkpointed on {self.name} for a requeue: {self.checkpoint}; the same command with the same "
                    f"checkpoint_dir resumes there{kept}")
        if self.path is None:
            return f"interrupted by {self.name} before any record was written; nothing written"
        stopped = " and the interrupted repeat's record" if self.in_flight else ""
        return f"interrupted by {self.name}; {self.finished} finished record(s){stopped} kept in {self.path}"


GRACE_S = 1.0  # the longest a noted signal waits for a safe point before the step is interrupted where it is
RETRY_S = 0.5  # then again this often, until the interruption is under way (a raise inside a fork's hook is lost)

_pending: int | None = None  # the signal noted inside deferred(), not acted on yet
_received: int | None = None  # the signal that ended this block, deferred or not
_deferring = 0
_second_forces = True  # signals_raise's choice: whether a second signal ends the process at once


def as_interrupted(exc: BaseException) -> Interrupted:
    """The interruption `exc` belongs to: itself; the pending signal's (an exception a signal caused, e.g.
    "DataLoader worker ... is killed by signal: Terminated"); or SIGINT for a KeyboardInterrupt (the runner
    used as a library, without our handler)."""
    signal.setitimer(signal.ITIMER_REAL, 0)  # the interruption is under way: no retry lands in its clean-up
    if isinstance(exc, Interrupted):
        return exc
    return Interrupted(_pending if _pending is not None else signal.SIGINT)


def workers_are_part_of_it() -> None:
    """After an interruption, DataLoader workers that die (of the same signal, or stopped by the loader's
    shutdown) are expected: torch's SIGCHLD handler would raise "DataLoader worker ... is killed by signal"
    wherever it lands, even in multiprocessing's exit hook, as a traceback after the run's one line."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)


def end_forked_children(grace_s: float = 2.0) -> None:
    """Before a process leaves without interpreter teardown (`os._exit`), its forked children (DataLoader
    workers) are ended and reaped: TERM, up to `grace_s` to go (torch's worker leaves at once when its
    parent sends it), then KILL. A worker forked after the process group's signal never received it, and one
    whose start the interruption cut short is not even in multiprocessing's list: left alone, it could
    outlive the run holding its stdout and stderr, so that whoever reads them to the end waits for it."""
    import multiprocessing

    workers_are_part_of_it()  # a worker ended here is no "DataLoader worker killed by signal" error
    pids = {child.pid for child in multiprocessing.active_children() if child.pid} | _forks_in_proc()
    for pid in pids:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while pids and time.monotonic() < deadline:
        pids = {pid for pid in pids if not _reaped(pid)}
        time.sleep(0.02)
    for pid in pids:
        _signal(pid, signal.SIGKILL)
        _reaped(pid, block=True)


def _forks_in_proc() -> set[int]:
    """This process's children that run its own command line: forks, not programs it started (Linux's
    /proc; elsewhere none, and multiprocessing's list alone)."""
    me = os.getpid()
    try:
        own = Path(f"/proc/{me}/cmdline").read_bytes()
        entries = list(Path("/proc").iterdir())
    except OSError:
        return set()
    forks = set()
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if ppid == me and (entry / "cmdline").read_bytes() == own:
                forks.add(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile, or not readable
    return forks


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def _reaped(pid: int, block: bool = False) -> bool:
    try:
        return os.waitpid(pid, 0 if block else os.WNOHANG)[0] != 0
    except ChildProcessError:  # reaped already (multiprocessing's own poll)
        return True


def caused_by_signal(exc: BaseException) -> bool:
    """True when `exc` ends the run because of a signal: an interruption, or any failure after one arrived."""
    return isinstance(exc, (Interrupted, KeyboardInterrupt)) or _pending is not None


def pending() -> int | None:
    return _pending


_requeue_asked = False


def requeue_asked() -> bool:
    """Whether REQUEUE arrived: the checkpoint hooks stop the run at their next save (train/resume.py)."""
    return _requeue_asked


def _note_requeue(signum: int, frame) -> None:
    global _requeue_asked
    _requeue_asked = True


def check() -> None:
    """A safe point: act on a noted signal now."""
    if _pending is not None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        raise Interrupted(_pending)


def _overdue(signum: int, frame) -> None:
    if _pending is not None:  # the grace ran out inside one step (or a loader's start): interrupt it where it is
        signal.setitimer(signal.ITIMER_REAL, RETRY_S)  # and again, should this raise land where it is dropped
        raise Interrupted(_pending)


def _default(signum: int):
    """Python's own handler for the signal: KeyboardInterrupt for SIGINT, the OS default (the end) for TERM."""
    return signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL


def _raise(signum: int, frame) -> None:
    global _pending, _received
    if _received is not None and not _second_forces:  # a worker told twice (its group, and its orchestrator)
        return
    _received = signum
    if _second_forces:  # the second signal forces the exit (default handlers)
        for number in SIGNALS:
            signal.signal(number, _default(number))
    if _deferring:
        _pending = signum
        signal.signal(signal.SIGALRM, _overdue)
        signal.setitimer(signal.ITIMER_REAL, GRACE_S)
        return
    raise Interrupted(signum)


@contextmanager
def deferred() -> Iterator[None]:
    """Within the block (training), a signal is noted and acted on at the next `check()`."""
    global _deferring
    _deferring += 1
    try:
        yield
        check()  # a signal noted after the last safe point still ends the run as interrupted
    finally:
        _deferring -= 1


@contextmanager
def signals_raise(second_forces: bool = True) -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM raise Interrupted; the previous handlers come back after it.
    `second_forces`: a second signal ends the process at once (a person's second Ctrl-C). A worker passes
    False: its orchestrator and its process group may both signal it, and the orchestrator ends what is
    still running after its own wait. Signal handlers belong to the main thread: elsewhere this does nothing."""
    global _pending, _received, _second_forces
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _pending = _received = None
    _second_forces = second_forces
    previous = {number: signal.getsignal(number) for number in (*SIGNALS, REQUEUE)}
    previous_hook, previous_unraisable = sys.excepthook, sys.unraisablehook
    for number in SIGNALS:
        signal.signal(number, _raise)
    signal.signal(REQUEUE, _note_requeue)  # only noted: its default would end the process at once
    sys.excepthook = helper_threads.quiet_failures(previous_hook, signalled=_signal_arrived)
    sys.unraisablehook = helper_threads.quiet_failed_starts(previous_unraisable, signalled=_signal_arrived)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)  # a grace timer still running belongs to this block
        for number, handler in previous.items():
            signal.signal(number, handler)
        if _received is None:  # after a signal the process is ending: its helper threads stay quiet to the end
            sys.excepthook, sys.unraisablehook = previous_hook, previous_unraisable


def _signal_arrived() -> bool:
    """Whether SIGINT or SIGTERM arrived inside `signals_raise()`: the helper-thread hooks go quiet from then."""
    return _received is not None


def _forked_child_is_not_the_run() -> None:
    """A forked child (a DataLoader worker) inherits the run's handlers and its `deferred()` depth, so a
    signal sent to every process (SLURM's TERM, a process group's Ctrl-C) would be noted there and raised a
    second later by the grace timer, as a traceback from the worker. The child gets the defaults instead: TERM
    ends it (the run reads the worker's death as part of its interruption, `as_interrupted`), and SIGINT
    raises KeyboardInterrupt, which torch's worker loop ends quietly."""
    global _pending, _received, _deferring
    _pending = _received = None
    _deferring = 0
    for number in SIGNALS:
        if signal.getsignal(number) is _raise:
            signal.signal(number, _default(number))


os.register_at_fork(after_in_child=_forked_child_is_not_the_run)
