"""Progress of a run: bars over the run (variants x repeats) and over the steps of the repeat in flight.

A book-scale run trains for minutes to hours, so a terminal shows tqdm bars with rate and ETA. They are
drawn on rank 0 only, and only when both stdout and stderr are terminals, CI is unset and `--quiet` was
not given: a log file, a pipe or a CI job gets no bar characters at all. `--verbose` adds one line per
finished epoch with its last loss (written above the bars, or plainly without them).

The step bar is a `loop.Hooks`: the loop calls `step_end` after the step's clock stopped, and tqdm's
`update` is O(1) (it redraws at most every MIN_INTERVAL_S), so bars never sit inside a timed step. The
same hook always counts steps and epochs, with or without a bar: an interrupted repeat's record says
how far it got.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from typing import Any, Mapping, TextIO

from tqdm import tqdm

from pipelines.core.train.loop import Hooks

MIN_INTERVAL_S = 0.5  # at most two redraws a second
PROGRESS_FILE_ENV = "ACCEL_PROGRESS_FILE"  # where a worker notes its last finished block (harness/live.py)


def note_block(arm: str, done: int, total: int) -> None:
    """For the orchestrator's live line (harness/live.py): `done` of the process's `total` blocks finished, the
    last by `arm`. Called between blocks, never inside a timed one; a no-op unless the orchestrator asked."""
    path = os.environ.get(PROGRESS_FILE_ENV)
    if path:
        try:
            with open(path, "w") as out:
                out.write(f"{done} {total} {arm}\n")
        except OSError:  # the orchestrator's folder is gone (it ended): nothing to tell
            pass


class _Bar(tqdm):
    monitor_interval = 0  # no monitor thread beside a timed run


@dataclass(frozen=True)
class Settings:
    bars: bool = False  # tqdm bars (a terminal on rank 0)
    verbose: bool = False  # one line per finished epoch


OFF = Settings()


def terminal(env: Mapping[str, str] | None = None, streams: tuple[TextIO, ...] | None = None) -> bool:
    """True when bars can be seen: stdout and stderr are terminals and no CI variable is set."""
    env = os.environ if env is None else env
    streams = (sys.stdout, sys.stderr) if streams is None else streams
    return not env.get("CI") and all(stream.isatty() for stream in streams)


def settings(quiet: bool = False, verbose: bool = False) -> Settings:
    """What the user asked for (`--quiet`, `--verbose`) on what this process writes to."""
    return Settings(bars=not quiet and terminal(), verbose=verbose and not quiet)


class RepeatProgress(Hooks):
    """Counts one repeat's steps and epochs (always) and draws its step bar (when asked)."""

    def __init__(self, label: str, epochs: int, steps: int | None, settings: Settings, position: int = 1):
        """`steps`: the run's step budget (warm-up included), or None for whole `epochs`."""
        self.label, self.settings, self.position = label, settings, position
        self.epochs_planned = None if steps else epochs  # a step budget ends wherever an epoch is
        self.steps_planned = steps  # None: whole epochs, counted once the loader is known
        self.steps = self.epochs = 0
        self.started = time.perf_counter()
        self.bar: tqdm | None = None

    def train_start(self, trainable, loaders) -> None:
        if self.steps_planned is None and self.epochs_planned:
            self.steps_planned = self.epochs_planned * len(loaders.train)
        if self.settings.bars:
            self.bar = _Bar(total=self.steps_planned, desc=self.label, unit="step", leave=False,
                            position=self.position, mininterval=MIN_INTERVAL_S, dynamic_ncols=True,
                            file=sys.stderr)
        return None

    def step_end(self, done: int) -> None:
        self.steps = done
        if self.bar is not None:
            self.bar.update(1)

    def epoch_end(self, epoch: int, last_loss: float) -> None:
        self.epochs += 1
        of = f"/{self.epochs_planned}" if self.epochs_planned else ""
        if self.bar is not None:
            self.bar.set_postfix(epoch=f"{self.epochs}{of}", loss=f"{last_loss:.4g}", refresh=False)
        if self.settings.verbose:
            say(f"{self.label}: epoch {self.epochs}{of} loss {last_loss:.4g} "
                f"({time.perf_counter() - self.started:.1f} s)")

    def train_end(self, trainable, epoch: int) -> None:
        self.close()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def how_far(self) -> dict[str, Any]:
        """The metrics of an interrupted repeat: steps and epochs done of those planned."""
        return {"steps_done": self.steps, "steps_planned": self.steps_planned, "epochs_done": self.epochs,
                "epochs_planned": self.epochs_planned}


class RunProgress:
    """The outer bar: one unit per record the run will write (variant x repeat, skipped ones too).

    With `--repeats auto` (a `rule`, core/stats/stopping.AutoStop) the number of repeats is not known
    beforehand, so the bar counts the time budget instead: its total is the budget in seconds, its position the
    time spent, its label the repeat and the most repeats allowed; tqdm's ETA is then the budget left, which the
    rule never overruns (it may stop earlier, when every interval is narrow enough)."""

    def __init__(self, label: str, units: int | None, settings: Settings, rule: Any = None):
        self.settings, self.label, self.rule = settings, label, rule
        self.began = time.monotonic()
        if not settings.bars:
            self.bar = None
        elif rule is not None:
            self.bar = _Bar(total=round(rule.budget_s), desc=self._round_label(), unit="s", position=0,
                            mininterval=MIN_INTERVAL_S, dynamic_ncols=True, file=sys.stderr,
                            bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.0f}/{total:.0f} s budget "
                                       "[{elapsed}<{remaining}{postfix}]")
        else:
            self.bar = _Bar(total=units, desc=label, unit="run", position=0, mininterval=MIN_INTERVAL_S,
                            dynamic_ncols=True, file=sys.stderr)

    def _round_label(self) -> str:
        return f"{self.label} repeat {self.rule.rounds + 1} (at most {self.rule.max_rounds})"

    def repeat(self, label: str, epochs: int, steps: int | None) -> RepeatProgress:
        return RepeatProgress(label, epochs, steps, self.settings)

    def finished(self, record: Mapping[str, Any]) -> None:
        if self.bar is None:
            return
        self.bar.set_postfix_str(f"{record['variant']} #{record['repeat']} {record['status']}", refresh=False)
        if self.rule is None:
            self.bar.update(1)
            return
        self.bar.set_description_str(self._round_label(), refresh=False)
        self.bar.update(min(self.bar.total, time.monotonic() - self.began) - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def say(line: str) -> None:
    """One log line on stderr that does not break the bars (tqdm.write clears and redraws them)."""
    tqdm.write(line, file=sys.stderr)
