"""multiprocessing's helper threads after a signal (core/train/helper_threads.py). The resource sharer (the daemon
thread that hands tensor file descriptors to DataLoader workers) meets a worker the group's signal killed
mid-handshake: its BrokenPipeError is part of the interruption and stays quiet even before the main thread has
run its handler. A queue's feeder thread whose start the interruption cut short fails in threading's
bookkeeping: quiet after a signal. Any other helper failure still reaches the previous hook."""

from __future__ import annotations

import sys
import threading

from pipelines.core.train import helper_threads

SHARER = "/usr/lib/python3.11/multiprocessing/resource_sharer.py"


def reported(kind: type[BaseException]) -> list[str]:
    """What reaches the previous hook when a helper thread raises `kind` from inside the resource sharer."""
    seen: list[str] = []
    hook = helper_threads.quiet_failures(lambda k, v, tb: seen.append(k.__name__), signalled=lambda: False)
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
    assert reported(BrokenPipeError) == [] and reported(ConnectionResetError) == []


def test_any_other_helper_failure_is_still_reported():
    assert reported(ValueError) == ["ValueError"]


def failed_start_reaches_previous_hook(target, signalled: bool, monkeypatch) -> list[str]:
    """Start a real thread whose own start-up fails as a start cut short by the interruption leaves it (its entry
    gone from threading's `_limbo` before it removes it: a KeyError, reported through sys.unraisablehook as
    "Exception ignored in thread started by"), and say what reached the previous hook."""
    seen: list[str] = []
    monkeypatch.setattr(sys, "unraisablehook", helper_threads.quiet_failed_starts(
        lambda unraisable: seen.append(unraisable.exc_type.__name__), signalled=lambda: signalled))
    thread = threading.Thread(target=target, args=("quiet",), daemon=True)
    with threading._active_limbo_lock:  # the new thread waits here after it reports itself started
        thread.start()
        del threading._limbo[thread]
    thread.join()
    return seen


def test_a_multiprocessing_helper_thread_whose_start_failed_after_a_signal_is_quiet(monkeypatch):
    import multiprocessing.util

    assert failed_start_reaches_previous_hook(multiprocessing.util.debug, True, monkeypatch) == []


def test_a_failed_thread_start_is_still_reported_before_a_signal_or_outside_multiprocessing(monkeypatch):
    import multiprocessing.util

    assert failed_start_reaches_previous_hook(multiprocessing.util.debug, False, monkeypatch) == ["KeyError"]
    assert failed_start_reaches_previous_hook(print, True, monkeypatch) == ["KeyError"]
