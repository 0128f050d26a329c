"""multiprocessing's helper threads after a signal: their failures are part of the interruption.

A run that ends on SIGINT or SIGTERM (core/train/interrupt.py) prints one line. The signal reaches the
DataLoader workers too, and the interruption is raised in the main thread wherever it is, so the helper
threads multiprocessing runs beside them can fail on the way out and print a traceback after that line. The
two hooks here keep such failures quiet once `signalled()` says a signal arrived; everything else still
reaches the hook they wrap.
"""

from __future__ import annotations

import threading
import traceback
from pathlib import Path
from typing import Callable


def quiet_failures(previous_hook, signalled: Callable[[], bool]):
    """A sys.excepthook. multiprocessing's resource sharer (a daemon thread that hands tensor file descriptors
    to DataLoader workers) reports a worker killed by the process group's signal mid-handshake through
    sys.excepthook. After a signal, a helper thread's failure from multiprocessing is quiet. A broken pipe in
    the resource sharer is quiet even before the main thread has run its handler (the group's signal reaches
    the worker first, while the main thread waits in C): a worker that dies for any other reason is reported
    by the DataLoader in the main thread."""
    def hook(kind, value, tb) -> None:
        frames = traceback.extract_tb(tb)
        helper = threading.current_thread() is not threading.main_thread() and frames \
            and "multiprocessing" in Path(frames[0].filename).parts
        peer_gone = issubclass(kind, (BrokenPipeError, ConnectionResetError)) and \
            any(Path(frame.filename).name == "resource_sharer.py" for frame in frames)
        if helper and (signalled() or peer_gone):
            return
        previous_hook(kind, value, tb)
    return hook


def quiet_failed_starts(previous_hook, signalled: Callable[[], bool]):
    """A sys.unraisablehook. The interruption can land while the main thread starts a helper thread (a
    DataLoader queue's QueueFeederThread); that thread's own start-up can then fail in threading's
    bookkeeping (a KeyError from `del _limbo[self]`), which Python reports as "Exception ignored in thread
    started by ...". After a signal, the failed start of a thread whose target is multiprocessing's is
    quiet."""
    def hook(unraisable) -> None:
        thread = getattr(unraisable.object, "__self__", None)  # the object is the thread's bound _bootstrap
        target = getattr(thread, "_target", None)
        helper = isinstance(thread, threading.Thread) and \
            (getattr(target, "__module__", None) or "").startswith("multiprocessing")
        if helper and signalled():
            return
        previous_hook(unraisable)
    return hook
