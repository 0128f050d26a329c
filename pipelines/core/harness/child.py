"""One process of a round: started in a session of its own, and never left running after the round.

harness/rounds.py starts each slot's process here. The session keeps a terminal's Ctrl-C from reaching
the process directly: the orchestrator hands the signal on to the whole session once, waits for the
interrupted records, and kills what is left. The kernel's parent-death signal covers the case where the
orchestrator itself is killed outright and can hand nothing on.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
from pathlib import Path
from typing import Callable, Mapping

CHILD_WAIT_S = 120.0  # how long an interrupted round's process may take to write its interrupted records


def run(argv: list[str], env: Mapping[str, str], log: Path) -> int:
    """One process, its output appended to the comparison's log (the terminal gets one line per round).

    It runs in a session of its own (the launcher, its worker or ranks, their DataLoader workers), so a
    terminal's Ctrl-C reaches this process only, which hands the signal on to that whole group at once:
    the loader workers stop with it, and the worker, which a second signal never forces out (a SLURM step
    signals every process itself too; cli/main.py worker_main), writes its interrupted records. What is
    still running after CHILD_WAIT_S is killed: nothing is left running either way.

    A session of its own is out of reach of a signal to this process's group, so this process may die
    without handing anything on (SIGKILL; `timeout -k`, which kills the group it started): the child is
    then told by the kernel instead (`_parent_death_signal`), and the launcher it execs into (Python,
    torchrun, mpirun) ends its own children as it does on a terminal's signal."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a") as out:
        out.write(f"$ {' '.join(argv)}\n")
        out.flush()
        child = subprocess.Popen(argv, env=dict(env), stdout=out, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, start_new_session=True,
                                 preexec_fn=_parent_death_signal(signal.SIGTERM))
        try:
            return child.wait()
        except BaseException as stop:  # Interrupted (SIGINT, SIGTERM) or KeyboardInterrupt: the child too
            _stop_child(child, getattr(stop, "signum", signal.SIGINT))
            raise


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _parent_death_signal(signum: int) -> Callable[[], None] | None:
    """A function for Popen's preexec_fn (run in the child between fork and exec): the kernel sends the
    child `signum` when this process ends, however it ends. The setting survives exec. Only the prctl
    call runs in the forked child (its C function looked up here, before the fork). None where the C
    library has no prctl (not Linux): the child then outlives a killed parent, as any child would."""
    prctl = getattr(ctypes.CDLL(None, use_errno=True), "prctl", None)
    if prctl is None:
        return None
    parent = os.getpid()

    def set_signal() -> None:
        prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0)
        if os.getppid() != parent:  # this process died before the call: nobody is left to send it
            os.kill(os.getpid(), signum)
    return set_signal


def _stop_child(child: subprocess.Popen, signum: int) -> None:
    _signal_group(child, signum)
    try:
        child.wait(timeout=CHILD_WAIT_S)
    except subprocess.TimeoutExpired:
        _signal_group(child, signal.SIGKILL)
        child.wait()


def _signal_group(child: subprocess.Popen, signum: int) -> None:
    try:
        os.killpg(child.pid, signum)  # the child leads its session's one process group
    except ProcessLookupError:
        pass
