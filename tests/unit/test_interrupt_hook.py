"""multiprocessing's resource sharer (the daemon thread that hands tensor file descriptors to DataLoader workers)
meets a worker the group's signal killed mid-handshake: its BrokenPipeError is part of the interruption and
stays quiet even before the main thread has run its handler; any other helper failure still reaches the
previous hook (core/train/interrupt.py)."""

from __future__ import annotations

import sys
import threading

from pipelines.core.train import interrupt

SHARER = "/usr/lib/python3.11/multiprocessing/resource_sharer.py"


def reported(kind: type[BaseException]) -> list[str]:
    """What reaches the previous hook when a helper thread raises `kind` from inside the resource sharer."""
    seen: list[str] = []
    hook = interrupt._helper_threads_quiet_after_a_signal(lambda k, v, tb: seen.append(k.__name__))
    # the sharer's own loop catches the error and hands it to sys.excepthook, as Python's _serve does
    serve = ("def _serve(hook):\n"
             "    try:\n"
             f"        raise {kind.__name__}('peer gone')\n"
             "    except BaseException:\n"
             "        hook(*sys.exc_info())\n")
    namespace = {"sys": sys}
    exec(compile(serve, SHARER, "exec"), namespace)
    thread = threading.Thread(target=namespace["_serve"], args=(hook,))
    thread.start()
    thread.join()
    return seen


def test_a_broken_pipe_in_the_resource_sharer_is_quiet_before_the_signal_is_handled():
    assert interrupt._received is None
    assert reported(BrokenPipeError) == [] and reported(ConnectionResetError) == []


def test_any_other_helper_failure_is_still_reported():
    assert reported(ValueError) == ["ValueError"]
