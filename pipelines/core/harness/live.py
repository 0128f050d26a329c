"""The live line of a comparison's rounds: while a round's process runs, where it is, redrawn in place.

A bench run prints one line per round (harness/rounds.py); a round takes from seconds to minutes, so on a
terminal one more line, redrawn twice a second with tqdm, says what is going on meanwhile: the round, the
process (its arms), the block its last arm finished of the process's blocks, the time the process and the
run have taken, and the budget left. The worker says which block it finished through a small file
(`progress.PROGRESS_FILE_ENV`, written between blocks, never inside a timed one: train/interleave.py); the
line reads it. It is drawn only where bars are (train/progress.py `terminal`: stdout and stderr terminals,
CI unset, no --quiet or --json), and it is cleared before the round's own line, so a log, a pipe or a CI
job gets the round lines alone. It has no colour, so NO_COLOR changes nothing.
"""

from __future__ import annotations

import contextlib
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

from tqdm import tqdm

from pipelines.core.train import progress

REDRAW_S = 0.5


def block_text(path: Path) -> str:
    """'block 7 of 24 (ID [ARM])' from the worker's file, or "not at its blocks yet" before its first."""
    try:
        done, total, arm = path.read_text().split(" ", 2)
    except (OSError, ValueError):  # not written yet, or caught mid-write: the next redraw reads it
        return "not at its blocks yet"
    return f"block {done} of {total} ({arm.strip()})"


@contextlib.contextmanager
def process_line(enabled: bool, round_text: str, label: str, began: float, budget_s: float | None,
                 clock: Callable[[], float] = time.monotonic) -> Iterator[dict[str, str]]:
    """The live line for one process of a round; yields the environment the process needs for it ({} when
    the line is off)."""
    if not enabled:
        yield {}
        return
    with tempfile.TemporaryDirectory(prefix="accel-live-") as folder:
        path = Path(folder) / "block"
        started, stop = clock(), threading.Event()
        bar = tqdm(total=0, bar_format="{desc}", leave=False, dynamic_ncols=True)

        def text() -> str:
            spent = clock() - began
            left = "" if budget_s is None else f", {max(0.0, budget_s - spent):.0f} s of the budget left"
            return (f"{round_text}: {label}: {block_text(path)}; {clock() - started:.0f} s this process, "
                    f"{spent:.0f} s in all{left}")

        def redraw() -> None:
            while not stop.wait(REDRAW_S):
                bar.set_description_str(text())

        ticker = threading.Thread(target=redraw, name="accel-live-line", daemon=True)
        bar.set_description_str(text())
        ticker.start()
        try:
            yield {progress.PROGRESS_FILE_ENV: str(path)}
        finally:
            stop.set()
            ticker.join()
            bar.close()
