"""A comparison measured in rounds of processes, until its intervals are narrow or a budget runs out.

Every round starts one process per *slot*: a slot is the arms that share a process (core/harness/sharing.py
decides; its process measures them in interleaved blocks, core/train/interleave.py), or one arm whose
process environment is its own (another OpenMP runtime, thread count, launcher). Slots run in ABBA order
(reversed every round, so a linear drift costs every slot the same). Several rounds sample the
process-to-process noise that no number of steps inside one process can (Kalibera & Jones); the report
pairs the arms within a process (by cycle) or within a round (core/stats/record_pairing.py).

Each process is a worker: the slot's launcher script, its knobs checked once before round 1
(harness/comparison.py), ending in `python -m pipelines --worker FILE`. This module writes FILE, the
worker's request (config/request.py: the slot's configs as planned, one repeat, the round's pairing and a
run id), so the records' files are known before the process starts; they are read back from there, never
searched for. No process started here runs a command of the `accel` CLI.

Stopping: a fixed number of rounds, or `auto`, core/stats/stopping.py's rule (the one `--repeats auto` applies
to repeats inside a process): after `PRECISION_ROUNDS`, stop once every measured arm's 95 % interval has a
half-width of at most `halfwidth` (5 % by default), or before a round that would overrun the time
budget. The summary file (comparison--<id>.json) says which rule stopped it, with the half-widths;
every record carries its `pairing` (comparison, round, process).

What the terminal shows: one line per round (each process's time, the budget spent and left); every
process's own output (launcher lines, its per-repeat lines) goes to comparison--<id>.log beside the
records, and a failing process's `accel: error:` line is repeated on the terminal.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

from pipelines.core.config import request as requests
from pipelines.core.harness import child
from pipelines.core.config.repeat_rule import DEFAULT_HALFWIDTH, MAX_AUTO_REPEATS, check_budget, check_halfwidth
from pipelines.core.errors import ConfigError
from pipelines.core.harness import worker
from pipelines.core.harness.live import process_line
from pipelines.core.harness.plan import Plan
from pipelines.core.record import atomic, results
from pipelines.core.stats import rows, stopping
from pipelines.core.stats.orders import abba

EXIT_INTERRUPTED = 130


@dataclass(frozen=True)
class StopRule:
    rounds: int | None  # a fixed count; None: auto (precision or budget)
    budget_s: float
    halfwidth: float = DEFAULT_HALFWIDTH

    def __post_init__(self) -> None:
        if self.rounds is not None and self.rounds < 1:
            raise ConfigError(f"--rounds {self.rounds} must be at least 1 (or auto)")
        check_budget(self.budget_s)
        check_halfwidth(self.halfwidth)


def parse_rounds(text: str) -> int | None:
    """`auto` -> None, else a positive integer (ConfigError naming the value otherwise)."""
    if text == "auto":
        return None
    if not text.isdigit() or int(text) < 1:
        raise ConfigError(f"--rounds {text!r} is not a positive integer or auto (e.g. --rounds 5)")
    return int(text)


@dataclass
class Summary:
    comparison: str  # its id, a run id: the records' pairing.comparison
    experiments: list[str]
    rounds: int = 0
    stopped_by: str = ""  # "rounds" | "precision" | "budget" | "failure" | "interrupted"
    elapsed_s: float = 0.0
    halfwidths: dict[str, float | None] = field(default_factory=dict)  # "id [arm]" -> relative half-width
    rule: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Slot:
    """One process of every round: the arms it measures (a label for the terminal, their plans), the
    launcher script that starts it and that script's whole environment (its knobs already checked)."""

    label: str
    ids: tuple[str, ...]
    plans: tuple[Plan, ...]
    script: Path
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass
class Measured:
    """What the rounds wrote: their summary, and the records read back from the files the requests named."""

    summary: Summary
    records: list[dict] = field(default_factory=list)
    paths: list[Path] = field(default_factory=list)

    def add(self, files: Sequence[Path]) -> None:
        for path in files:
            if not path.is_file():
                continue
            self.records += [item for item in results.read_tolerant(path) if not isinstance(item, results.Skipped)]
            self.paths.append(path)


def worker_command(slot: Slot, results_dir: Path, pairing: requests.Pairing) -> tuple[list[str], list[Path]]:
    """One round's process of `slot`: its request written (one repeat of its configs, this round's pairing),
    then the launcher's command line ending in the worker, and the record files the worker will write."""
    run_id = results.new_run_id()
    request = worker.request_of(list(slot.plans), run_id, pairing=pairing, one_repeat=True)
    path = worker.write_request(request, results_dir)
    return [str(slot.script), requests.FLAG, str(path)], worker.record_paths(request)


def halfwidths(records: Sequence[dict], ids: Sequence[str]) -> dict[str, float | None]:
    """Relative 95 % half-width of every measured arm of this comparison (None: no interval yet)."""
    return rows.arm_halfwidths(list(records), list(ids))


def log_path(results_dir: Path, comparison: str) -> Path:
    return Path(results_dir) / f"comparison--{comparison}.log"


def measure_rounds(slots: Sequence[Slot], results_dir: Path, rule: StopRule,
        start: Callable[[list[str], Mapping[str, str]], int] | None = None,
        clock: Callable[[], float] = time.monotonic, echo: Callable[[str], None] = print,
        live: bool = False) -> Measured:
    """Rounds of one process per slot until the rule stops; returns the summary (also written) and the
    records. A failure or a signal carries what was measured so far on the exception (`measured`).

    `start(argv, env) -> exit code` runs one process (a real subprocess by default). `live`: a line redrawn in
    place while each process runs (harness/live.py; a terminal only)."""
    comparison = results.new_run_id()
    log = log_path(results_dir, comparison)
    start = start or (lambda argv, env: child.run(argv, env, log))
    ids = list(dict.fromkeys(i for slot in slots for i in slot.ids))
    summary = Summary(comparison, ids, rule=asdict(rule))
    measured = Measured(summary)
    auto = None if rule.rounds is not None else stopping.AutoStop(rule.budget_s, rule.halfwidth)
    began = clock()
    try:
        _rounds(slots, results_dir, rule, start, clock, echo, measured, auto, began, log, live)
        return measured
    except BaseException as stop:  # a signal (or a failed round): the summary is kept, and travels with it
        if not summary.stopped_by:
            summary.stopped_by = "interrupted"
            summary.elapsed_s = clock() - began
            _write(results_dir, summary)
        stop.measured = measured
        raise


def _rounds(slots, results_dir, rule, start, clock, echo, measured: Measured, auto, began, log, live) -> None:
    longest_round = 0.0
    summary = measured.summary
    ids = summary.experiments
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
            round_began, took = clock(), []
            for index, slot in abba(list(enumerate(slots)), summary.rounds):
                pairing = requests.Pairing(summary.comparison, summary.rounds, index)
                argv, files = worker_command(slot, results_dir, pairing)
                began_one = clock()
                round_text = f"round {summary.rounds + 1}" + (f"/{rule.rounds}" if rule.rounds else "")
                try:
                    with process_line(live, round_text, slot.label, began, None if rule.rounds else rule.budget_s,
                                      clock) as extra:
                        code = start(argv, {**slot.env, **extra})
                finally:  # what the process wrote before a failure or a signal is the run's too
                    measured.add(files)
                took.append(f"{slot.label} {clock() - began_one:.0f} s")
                if code != 0:
                    summary.stopped_by = "interrupted" if code in (130, 143, -2, -15) else "failure"
                    summary.elapsed_s = clock() - began
                    _write(results_dir, summary)
                    raise RoundFailed(slot.label, code, summary, _error_lines(log))
            summary.rounds += 1
            longest_round = max(longest_round, clock() - round_began)
            summary.halfwidths = halfwidths(measured.records, ids)
            if auto is not None:
                auto.after_round(summary.halfwidths, clock() - round_began)
            echo(round_line(summary, rule, took, clock() - began))
    finally:
        summary.elapsed_s = clock() - began
    _write(results_dir, summary)


class RoundFailed(Exception):
    def __init__(self, label: str, code: int, summary: Summary, said: str = ""):
        because = f": {said}" if said else ""
        super().__init__(f"{label} exited with code {code} in round {summary.rounds + 1}{because}; the "
                         f"finished rounds' records are kept")
        self.code, self.summary = code, summary


def round_line(summary: Summary, rule: StopRule, took: list[str], elapsed_s: float) -> str:
    """One line per round: which round of how many (auto: as many as the budget left holds at this pace, no
    round starting that would overrun it), each process's time, the budget spent and left."""
    if rule.rounds is not None:
        most = f"/{rule.rounds}"
    else:
        pace = elapsed_s / max(summary.rounds, 1)
        more = int(max(0.0, rule.budget_s - elapsed_s) // pace) if pace > 0 else MAX_AUTO_REPEATS
        most = f" (of about {min(summary.rounds + more, MAX_AUTO_REPEATS)} the budget holds)"
    budget = (f"{elapsed_s:.0f} s of {rule.budget_s:g} s budget spent, {max(0.0, rule.budget_s - elapsed_s):.0f} s "
              "left" if rule.rounds is None else f"{elapsed_s:.0f} s")
    widths = stopping.widths_text(summary.halfwidths) if summary.rounds >= 2 else "intervals after round 2"
    return f"round {summary.rounds}{most}: {', '.join(took)}; {budget}; {widths}"


def _error_lines(log: Path) -> str:
    """What a failing process said to the user: its `accel: error:` lines (else its last line), from its log."""
    try:
        lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    said = [line.removeprefix("accel: error: ") for line in lines if line.startswith("accel: error:")]
    return "; ".join(dict.fromkeys(said)) if said else (lines[-1][:300] if lines else "")


def summary_line(summary: Summary) -> str:
    """The comparison's last line before its verdict: rounds, time, what stopped it, the half-widths."""
    widths = stopping.widths_text(summary.halfwidths)
    return (f"comparison {summary.comparison}: {summary.rounds} round(s) of {', '.join(summary.experiments)} in "
            f"{summary.elapsed_s:.0f} s, stopped by {summary.stopped_by}; 95 % half-widths: {widths}")


def _write(results_dir: Path, summary: Summary) -> Path:
    path = Path(results_dir) / f"comparison--{summary.comparison}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text(path, json.dumps(asdict(summary), indent=1, allow_nan=False) + "\n")
    return path
