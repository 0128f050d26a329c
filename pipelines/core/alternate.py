"""Arms measured in alternation across processes, until their intervals are narrow or a budget runs out.

Why processes: some arms cannot share one (the OpenMP runtime, the allocator, the thread count and the
rank count are fixed when a process starts), and experiments that are separate catalog entries (the
book's chapter 2 ladder: baseline, no bias, batch 256) each have their own launcher and knobs. Run one
after the other, slow drift of the machine (another tenant, thermal state) lands in their ratio. Here
every experiment runs one repeat per round, in ABBA order (the order reverses every round, so a linear
drift costs every arm the same), each through `accel launch` with `--repeats 1`; the report pools the
rounds' records (one folder, one experiment id) exactly as it pools the repeats of one process.

Stopping: a fixed number of rounds, or `auto`, core/stopping.py's rule (the one `accel run --repeats auto`
applies inside a process): after `MIN_ROUNDS`, stop once every measured arm's 95 % interval has a
half-width of at most `halfwidth` (5 % by default), or before a round that would overrun the time
budget. The summary file (alternation--<time>.json) says which rule stopped
it, with the half-widths; every record carries ACCEL_ALTERNATION (group:round) in its env.vars.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from pipelines.core import atomic, report_rows, results, stopping
from pipelines.core.errors import ConfigError
from pipelines.core.stopping import DEFAULT_HALFWIDTH, MIN_ROUNDS, order  # noqa: F401  (this module's rule)

EXIT_INTERRUPTED = 130


@dataclass(frozen=True)
class StopRule:
    rounds: int | None  # a fixed count; None: auto (precision or budget)
    budget_s: float
    halfwidth: float = DEFAULT_HALFWIDTH

    def __post_init__(self) -> None:
        if self.rounds is not None and self.rounds < 1:
            raise ConfigError(f"--rounds {self.rounds} must be at least 1 (or auto)")
        stopping.check_budget(self.budget_s)
        stopping.check_halfwidth(self.halfwidth)


def parse_rounds(text: str) -> int | None:
    """`auto` -> None, else a positive integer (ConfigError naming the value otherwise)."""
    if text == "auto":
        return None
    if not text.isdigit() or int(text) < 1:
        raise ConfigError(f"--rounds {text!r} is not a positive integer or auto (e.g. --rounds 5)")
    return int(text)


@dataclass
class Summary:
    group: str
    experiments: list[str]
    rounds: int = 0
    stopped_by: str = ""  # "rounds" | "precision" | "budget" | "failure" | "interrupted"
    elapsed_s: float = 0.0
    halfwidths: dict[str, float | None] = field(default_factory=dict)  # "id [arm]" -> relative half-width
    rule: dict = field(default_factory=dict)


def halfwidths(results_dir: Path, ids: Sequence[str]) -> dict[str, float | None]:
    """Relative 95 % half-width of every measured arm of these experiments (None: no interval yet)."""
    return report_rows.arm_halfwidths(report_rows.load(results_dir).records, list(ids))


def launch_command(experiment_id: str, passthrough: Sequence[str], results_dir: Path) -> list[str]:
    return [sys.executable, "-m", "pipelines", "launch", experiment_id, *passthrough, "--repeats", "1",
            "--results-dir", str(results_dir)]


def run(ids: Sequence[str], passthrough: Sequence[str], results_dir: Path, rule: StopRule,
        start: Callable[[list[str], dict], int] | None = None, clock: Callable[[], float] = time.monotonic,
        echo: Callable[[str], None] = print) -> Summary:
    """Rounds of one repeat per experiment until the rule stops; returns (and writes) the summary.

    `start(argv, extra_env) -> exit code` runs one process (a real subprocess by default)."""
    start = start or _subprocess
    group = results.new_run_id()
    summary = Summary(group, list(ids), rule=asdict(rule))
    auto = None if rule.rounds is not None else stopping.AutoStop(rule.budget_s, rule.halfwidth)
    began, longest_round = clock(), 0.0
    try:
        while True:
            elapsed = clock() - began
            if auto is not None:
                if not auto.should_start(elapsed):
                    summary.stopped_by = auto.stopped_by
                    break
            elif summary.rounds >= rule.rounds:
                summary.stopped_by = "rounds"
                break
            elif summary.rounds and elapsed + longest_round > rule.budget_s:
                summary.stopped_by = "budget"
                break
            round_began = clock()
            for experiment_id in order(ids, summary.rounds):
                echo(f"== round {summary.rounds + 1}: {experiment_id}")
                env = {"ACCEL_ALTERNATION": f"{group}:{summary.rounds}"}
                code = start(launch_command(experiment_id, passthrough, results_dir), env)
                if code != 0:
                    summary.stopped_by = "interrupted" if code in (130, 143, -2, -15) else "failure"
                    summary.elapsed_s = clock() - began
                    _write(results_dir, summary)
                    raise RoundFailed(experiment_id, code, summary)
            summary.rounds += 1
            longest_round = max(longest_round, clock() - round_began)
            summary.halfwidths = halfwidths(results_dir, ids)
            if auto is not None:
                auto.after_round(summary.halfwidths, clock() - round_began)
    finally:
        summary.elapsed_s = clock() - began
    _write(results_dir, summary)
    return summary


class RoundFailed(Exception):
    def __init__(self, experiment_id: str, code: int, summary: Summary):
        super().__init__(f"{experiment_id} exited with code {code} in round {summary.rounds + 1}; the finished "
                         f"rounds' records are kept")
        self.code, self.summary = code, summary


def describe(summary: Summary) -> str:
    widths = stopping.describe_widths(summary.halfwidths)
    return (f"alternation {summary.group}: {summary.rounds} round(s) of {', '.join(summary.experiments)} in "
            f"{summary.elapsed_s:.0f} s, stopped by {summary.stopped_by}; 95 % half-widths: {widths}")


def _write(results_dir: Path, summary: Summary) -> Path:
    path = Path(results_dir) / f"alternation--{summary.group}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text(path, json.dumps(asdict(summary), indent=1, allow_nan=False) + "\n")
    return path


def _subprocess(argv: list[str], extra_env: dict) -> int:
    return subprocess.run(argv, env={**os.environ, **extra_env}).returncode
