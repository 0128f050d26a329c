"""How long a plan will take: steps times a recorded step time, and where that time came from.

The step time is this arm's median recorded one: this folder's earlier records, else a committed reference
(results/reference/*), preferring this machine's CPU and the same model (another model's step scaled by
batch size is a rough guess, and says so). Without any, the estimate says so; `--rounds auto`'s budget
bounds the run anyway. A comparison in rounds (harness/comparison.py) adds each process's start-up and, for arms
interleaved in blocks, their warm-up, blocks and dropped steps; its fewest rounds decide whether a budget
can hold a verdict at all.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from pipelines.core.record import envinfo
from pipelines.core.record.version import REPO
from pipelines.core.config.runconfig import RunConfig
from pipelines.core.config.repeat_rule import MAX_AUTO_REPEATS
from pipelines.core.stats import orders, stopping

REFERENCE_DIR = REPO / "results" / "reference"


@dataclass(frozen=True)
class StepTime:
    ms: float  # one training step at the recorded batch size
    batch_size: int
    train_samples: int | None
    source: str  # "results (this CPU)" ...
    warmup_s: float | None = None  # the longest recorded warm-up (compilation inside it), for the same batch


def _records(folder: Path) -> Iterable[dict[str, Any]]:
    if not folder.is_dir():
        return
    for path in folder.glob("**/*.jsonl"):
        try:
            lines = path.read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and record.get("status") == "ok":
                yield record


def recorded_step_time(experiment: str, variant: str, results_dir: Path,
                       reference_dir: Path = REFERENCE_DIR, model: str | None = None,
                       device: str | None = None) -> StepTime | None:
    """The median recorded step time of this arm: this CPU's records first (results, then references),
    then any machine's, each preferring records of the same model (another model's step, scaled by batch
    size, is a rough guess and says so); None when nothing was recorded."""
    here = (envinfo.cpu_model(), envinfo.cpu_class()["cpu_id"])  # a VM's model name alone can hide a generation
    found: list[tuple[int, str, dict[str, Any]]] = []
    for rank, (folder, label) in enumerate(((Path(results_dir), "earlier records in " + str(results_dir)),
                                            (reference_dir, "the committed reference"))):
        for rec in _records(folder):
            if rec.get("experiment") == experiment and rec.get("variant") == variant and \
                    (rec.get("metrics") or {}).get("step_time_ms_median") and \
                    device in (None, (rec.get("config") or {}).get("device")):  # a GPU's step is no CPU's
                env = rec.get("env") or {}
                same_cpu = (env.get("cpu_model"), env.get("cpu_id")) == here
                other = (rec.get("config") or {}).get("model")
                same_model = model is None or other == model
                where = f"{label} ({'this CPU' if same_cpu else 'another machine'}" + \
                    ("" if same_model else f"; {other}'s steps, not {model}'s") + ")"
                found.append(((0 if same_cpu else 2 + rank) + (0 if same_model else 10), where, rec))
    if not found:
        return None
    best = min(k for k, _, _ in found)
    chosen = [(label, rec) for k, label, rec in found if k == best]
    ms = statistics.median(rec["metrics"]["step_time_ms_median"] for _, rec in chosen)
    warm = [rec["metrics"].get("warmup_s") for _, rec in chosen if rec["metrics"].get("warmup_s")]
    cfg = chosen[-1][1].get("config") or {}
    return StepTime(ms, int(cfg.get("batch_size") or 1), cfg.get("train_samples"), chosen[-1][0],
                    max(warm) if warm else None)


def repeat_seconds(cfg: RunConfig, step: StepTime, ranks: int = 1) -> float | None:
    """One repeat of one arm: its steps (warm-up included) x the recorded step time, scaled to this batch."""
    per_step = step.ms / 1000 * cfg.batch_size / max(step.batch_size, 1)
    if cfg.steps:
        return (cfg.warmup_steps + cfg.steps) * per_step
    if not step.train_samples:
        return None
    return cfg.epochs * math.ceil(step.train_samples / (cfg.batch_size * ranks)) * per_step


# one `accel launch` process to its first step on a 2-core machine (python, torch, data): measured 2.5-3 s
STARTUP_S = 3.0


def estimate(configs: Sequence[RunConfig], results_dir: Path, rounds: int | None, budget_s: float | None,
             ranks: int = 1, processes_per_round: int = 0, reference_dir: Path = REFERENCE_DIR) -> str:
    """'about N s' with how it was made; `rounds` None: the auto rule (at least MIN_ROUNDS, at most the budget).
    `processes_per_round`: a comparison starts that many processes a round, STARTUP_S each."""
    round_s, sources, missing = processes_per_round * STARTUP_S, set(), []
    for cfg in configs:
        step = recorded_step_time(cfg.experiment, cfg.variant, results_dir, reference_dir, cfg.model, cfg.device)
        seconds = repeat_seconds(cfg, step, ranks) if step else None
        if seconds is None:
            missing.append(str(cfg.arm))
            continue
        round_s += seconds
        sources.add(step.source)
    cap = f"; the budget stops it by {budget_s:g} s" if budget_s else ""
    if missing:
        return (f"unknown: no recorded step time for {', '.join(missing)}{cap} (the first round will tell; "
                "`accel run ... --steps 10` measures one quickly)")
    started = (f"plus {STARTUP_S:g} s start-up per process" if processes_per_round else
               "process start-up not included")
    made = f"from recorded step times ({'; '.join(sorted(sources))}), {started}"
    if rounds is None:
        low = stopping.MIN_ROUNDS * round_s
        high = min(budget_s, MAX_AUTO_REPEATS * round_s) if budget_s else None
        span = f"{duration(low)} to {duration(high)}" if high and high > low else f"about {duration(low)}"
        return f"{span}: {duration(round_s)} a round, at least {stopping.MIN_ROUNDS} rounds, {made}"
    return f"about {duration(rounds * round_s)}: {rounds} x {duration(round_s)} a round, {made}"


def process_seconds(configs: Sequence[RunConfig], results_dir: Path, interleaved: bool,
                    reference_dir: Path = REFERENCE_DIR) -> tuple[float | None, set[str], list[str]]:
    """One process of a round: start-up plus, per arm, its warm-up and blocks (interleaved) or its repeat;
    (seconds or None, where the step times came from, arms without a recorded step time)."""
    seconds, sources, missing = STARTUP_S, set(), []
    for cfg in configs:
        step = recorded_step_time(cfg.experiment, cfg.variant, results_dir, reference_dir, cfg.model, cfg.device)
        if step is None:
            missing.append(str(cfg.arm))
            continue
        sources.add(step.source)
        per_step = step.ms / 1000 * cfg.batch_size / max(step.batch_size, 1)
        if interleaved and cfg.blocks:
            block = max(1, round(cfg.block_s / per_step)) if cfg.block_s else math.ceil((cfg.steps or 1) / cfg.blocks)
            warm = step.warmup_s * cfg.batch_size / max(step.batch_size, 1) if step.warmup_s else \
                cfg.warmup_steps * per_step  # a recorded warm-up holds compilation; steps alone do not
            cycles = orders.cycles(cfg.blocks, cfg.block_s, cfg.steps, len(configs))
            seconds += warm + cycles * (block + (len(configs) > 1)) * per_step
        else:
            seconds += repeat_seconds(cfg, step) or 0.0
    return (None if missing else seconds), sources, missing


def rounds_estimate(processes: Sequence[tuple[Sequence[RunConfig], bool]], results_dir: Path, rounds: int | None,
                    budget_s: float | None, reference_dir: Path = REFERENCE_DIR) -> tuple[str, float | None]:
    """The estimate line of a comparison in rounds, and the seconds its fewest rounds take (None: unknown).
    `processes`: each slot's configs and whether its arms are interleaved in blocks."""
    round_s, sources, missing = 0.0, set(), []
    for configs, interleaved in processes:
        seconds, found, lacking = process_seconds(configs, results_dir, interleaved, reference_dir)
        sources |= found
        missing += lacking
        round_s += seconds or 0.0
    cap = f"; the budget stops it by {budget_s:g} s" if budget_s else ""
    if missing:
        return (f"unknown: no recorded step time for {', '.join(missing)}{cap} (the first round will tell; "
                "`accel run ... --steps 10` measures one quickly)"), None
    made = f"from recorded step times ({'; '.join(sorted(sources))}), {STARTUP_S:g} s start-up per process"
    if rounds is None:
        low = stopping.MIN_ROUNDS * round_s
        high = min(budget_s, MAX_AUTO_REPEATS * round_s) if budget_s else None
        span = f"{duration(low)} to {duration(high)}" if high and high > low else f"about {duration(low)}"
        return f"{span}: {duration(round_s)} a round, at least {stopping.MIN_ROUNDS} rounds, {made}", low
    return f"about {duration(rounds * round_s)}: {rounds} x {duration(round_s)} a round, {made}", rounds * round_s


def duration(value: float) -> str:
    if value >= 5400:
        return f"{value / 3600:.1f} h"
    return f"{value / 60:.0f} min" if value >= 600 else f"{value:.0f} s"
