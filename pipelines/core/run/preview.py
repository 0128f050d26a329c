"""The plan every experiment command shows before any work, and what it decides: which arms, against
which baseline, at what scale and repeat rule, on how many ranks and threads, for about how long.

Why a plan: at book scale an experiment runs for tens of minutes to hours, and a user who typed an id
should learn that (and where results go) before a core is busy, not after. `--dry-run` prints this block
and exits 0 having written nothing.

Why the baseline comes along: a ratio needs its baseline measured beside it. When an entry's baseline
is another catalog entry that runs the same way (same launcher, image and requirements), `accel run ID`
and `accel launch ID` measure both in alternation (core/stats/alternate.py, one process per id and round,
ABBA). Where it cannot (another launcher, image or device, or an arm of another entry), the plan says
why and names the commands that give the verdict. Smoke scale proves a code path, never a ratio, so it
never brings a baseline.

The estimate multiplies steps by a recorded step time: this folder's earlier records, or a committed
reference (results/reference/*), preferring one from this machine's CPU; it says which, and that process
start-up is not in it. Without a recorded step time it says so; `--repeats auto`'s budget bounds the run.
"""

from __future__ import annotations

import json
import math
import os
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from pipelines.core.dist import affinity
from pipelines.core.record import envinfo, machine
from pipelines.core.record.version import REPO
from pipelines.core.spec import experiments
from pipelines.core.stats import stopping
from pipelines.core.spec.config import RunConfig

REFERENCE_DIR = REPO / "results" / "reference"
BUSY_WINDOW_S = 0.3  # how long the plan watches the machine for other load before work
DEFAULT_LAUNCHER_RANKS = 2  # launch/torchrun.sh and mpirun.sh: NPROC / NP when unset


@dataclass(frozen=True)
class Baseline:
    """What the command does about the entry's baseline: `bring` an entry id to alternate with, or `note`
    why it does not (empty when the entry's arms compare among themselves)."""

    bring: str | None = None
    note: str = ""


def baseline_choice(entry: experiments.Experiment, variants: Sequence[str], scale: str, results_dir: Path,
                    refused: bool = False) -> Baseline:
    """Whether the entry's baseline entry can be measured beside it here, in alternation."""
    if not entry.baseline:
        return Baseline()
    base_id, _, base_arm = entry.baseline.partition("@")
    base = experiments.all_experiments().get(base_id)
    arm = "threads=<ranks x threads>" if entry.match_cores and base_arm.startswith("threads=") else base_arm
    verdict_cmd = (f"accel launch {base_id}{f' --variant {arm}' if arm else ''} --results-dir "
                   f"{results_dir} (then accel report --results-dir {results_dir})")
    if refused:
        return Baseline(note=f"--no-baseline: {entry.baseline} is not measured; for a verdict run {verdict_cmd}")
    if scale == "smoke":
        return Baseline(note=f"smoke scale proves the code path only: {entry.baseline} is not run, and no "
                             "ratio is judged")
    if base is None or base.status != "ready":
        return Baseline(note=f"baseline {entry.baseline} is not a ready catalog entry")
    why = ("it is one arm of another entry" if base_arm else
           f"it runs under another launcher ({base.launcher}, this one {entry.launcher})"
           if base.launcher != entry.launcher else
           f"it runs in another image ({base.target}, this one {entry.target})" if base.target != entry.target else
           "it needs other hardware" if set(base.requires) != set(entry.requires) else
           f"it has no arm named {', '.join(sorted(set(variants) - {v.name for v in base.variants}))}"
           if set(variants) - {v.name for v in base.variants} else "")
    if why:
        return Baseline(note=f"baseline {entry.baseline} is not run by this command ({why}); for the verdict "
                             f"run {verdict_cmd}")
    return Baseline(bring=base_id)


@dataclass(frozen=True)
class Layout:
    """Processes and threads of one arm on this node, against the cores this process may use."""

    ranks: int  # processes on this node
    threads: int  # intra-op threads per process
    usable: int
    nodes: int = 1

    @property
    def oversubscribed(self) -> bool:
        return self.ranks * self.threads > self.usable

    def text(self) -> str:
        nodes = f" per node on {self.nodes} nodes" if self.nodes > 1 else ""
        line = (f"{self.ranks} rank{'s' if self.ranks > 1 else ''} x {self.threads} thread"
                f"{'s' if self.threads > 1 else ''}{nodes} on {self.usable} usable core{'s' if self.usable > 1 else ''}")
        if self.oversubscribed:
            line += (f"  WARNING: oversubscribed ({self.ranks * self.threads} threads > {self.usable} cores): "
                     "ranks wait for each other's cores and the times measure the contention")
        return line


def _whole(text: str | None) -> int | None:
    return int(text) if text and text.isdigit() and int(text) > 0 else None


def usable_cores() -> int:
    return len(os.sched_getaffinity(0))


def layout(entry: experiments.Experiment, cfg: RunConfig, launcher: str | None,
           env: Mapping[str, str] | None = None, in_process_threads: int | None = None) -> Layout:
    """`launcher` None: this process runs the arm (accel run); else the launcher script that will start it,
    with its knobs from the environment or the catalog (the scripts' own defaults otherwise)."""
    env = os.environ if env is None else env
    knob = lambda name: _whole(env.get(name) or entry.knobs.get(name))  # noqa: E731
    usable = usable_cores()
    nodes = 1
    if launcher in (None, "local"):
        ranks = 1
    elif launcher == "torchrun":
        arm_ranks = getattr(cfg.options, "ranks", None)  # a ranks=N arm is run with NPROC=N (make cpu-ddp)
        ranks = (_whole(env.get("NPROC")) or (arm_ranks if isinstance(arm_ranks, int) and arm_ranks > 0 else None)
                 or knob("NPROC") or DEFAULT_LAUNCHER_RANKS)
        nodes = knob("NNODES") or 1
    elif launcher == "mpirun":
        total = knob("NP") or DEFAULT_LAUNCHER_RANKS
        hosts = [h for h in (env.get("HOSTS") or "").split(",") if h]
        nodes = max(1, len(hosts))
        ranks = max(1, math.ceil(total / nodes))
    else:  # srun
        nodes = knob("NODES") or 1
        ranks = max(1, math.ceil((knob("NTASKS") or 1) / nodes))
    arm_threads = getattr(cfg.options, "threads", None)
    if isinstance(arm_threads, int) and arm_threads > 0:
        threads = arm_threads
    elif launcher is None:  # this process: what OpenMP was told, else what torch runs
        threads = _whole((env.get("OMP_NUM_THREADS") or "").split(",")[0]) or in_process_threads or usable
    else:  # the launcher's own default (dist/launchers.py): the smallest core slice per rank
        threads = knob("THREADS") or affinity.threads_per_rank(ranks)
    return Layout(ranks, threads, usable, nodes)


# ---- estimate ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class StepTime:
    ms: float  # one training step at the recorded batch size
    batch_size: int
    train_samples: int | None
    source: str  # "results (this CPU)" ...


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
                       reference_dir: Path = REFERENCE_DIR) -> StepTime | None:
    """The median recorded step time of this arm: this CPU's records first (results, then references),
    then any machine's; None when nothing was recorded."""
    here = (envinfo.cpu_model(), envinfo.cpu_class()["cpu_id"])  # a VM's model name alone can hide a generation
    found: list[tuple[int, str, dict[str, Any]]] = []
    for rank, (folder, label) in enumerate(((Path(results_dir), "earlier records in " + str(results_dir)),
                                            (reference_dir, "the committed reference"))):
        for rec in _records(folder):
            if rec.get("experiment") == experiment and rec.get("variant") == variant and \
                    (rec.get("metrics") or {}).get("step_time_ms_median"):
                env = rec.get("env") or {}
                same_cpu = (env.get("cpu_model"), env.get("cpu_id")) == here
                found.append((0 if same_cpu else 2 + rank, f"{label} ({'this CPU' if same_cpu else 'another machine'})",
                              rec))
    if not found:
        return None
    best = min(k for k, _, _ in found)
    chosen = [(label, rec) for k, label, rec in found if k == best]
    ms = statistics.median(rec["metrics"]["step_time_ms_median"] for _, rec in chosen)
    cfg = chosen[-1][1].get("config") or {}
    return StepTime(ms, int(cfg.get("batch_size") or 1), cfg.get("train_samples"), chosen[-1][0])


def repeat_seconds(cfg: RunConfig, step: StepTime, ranks: int = 1) -> float | None:
    """One repeat of one arm: its steps (warm-up included) x the recorded step time, scaled to this batch."""
    per_step = step.ms / 1000 * cfg.batch_size / max(step.batch_size, 1)
    if cfg.steps:
        return (cfg.warmup_steps + cfg.steps) * per_step
    if not step.train_samples:
        return None
    return cfg.epochs * math.ceil(step.train_samples / (cfg.batch_size * ranks)) * per_step


STARTUP_S = 3.0  # one `accel launch` process to its first step on a 2-core machine (python, torch, data): measured 2.5-3 s


def estimate(configs: Sequence[RunConfig], results_dir: Path, rounds: int | None, budget_s: float | None,
             ranks: int = 1, processes_per_round: int = 0, reference_dir: Path = REFERENCE_DIR) -> str:
    """'about N s' with how it was made; `rounds` None: the auto rule (at least MIN_ROUNDS, at most the budget).
    `processes_per_round`: an alternation starts that many processes a round, STARTUP_S each."""
    round_s, sources, missing = processes_per_round * STARTUP_S, set(), []
    for cfg in configs:
        step = recorded_step_time(cfg.experiment, cfg.variant, results_dir, reference_dir)
        seconds = repeat_seconds(cfg, step, ranks) if step else None
        if seconds is None:
            missing.append(f"{cfg.experiment} [{cfg.variant}]")
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
        high = min(budget_s, stopping.MAX_AUTO_REPEATS * round_s) if budget_s else None
        span = f"{_seconds(low)} to {_seconds(high)}" if high and high > low else f"about {_seconds(low)}"
        return f"{span}: {_seconds(round_s)} a round, at least {stopping.MIN_ROUNDS} rounds, {made}"
    return f"about {_seconds(rounds * round_s)}: {rounds} x {_seconds(round_s)} a round, {made}"


def _seconds(value: float) -> str:
    if value >= 5400:
        return f"{value / 3600:.1f} h"
    return f"{value / 60:.0f} min" if value >= 600 else f"{value:.0f} s"


# ---- the block ---------------------------------------------------------------------------------------------

def repeat_rule(cfg: RunConfig, rounds: int | None = None, alternation: bool = False) -> str:
    unit = "rounds (one process per id, ABBA)" if alternation else "repeats of every arm (interleaved, ABBA)"
    if (rounds is None and alternation) or (not alternation and cfg.repeats_auto):
        return (f"auto: {unit} until every 95 % interval is within ±{stopping.DEFAULT_HALFWIDTH * 100:g} %, "
                f"at least {stopping.MIN_ROUNDS}, at most {stopping.MAX_AUTO_REPEATS}, budget {cfg.budget_s or 0:g} s")
    count = rounds if alternation else cfg.repeats
    few = f" (a verdict needs {stopping.MIN_ROUNDS}+)" if count < stopping.MIN_ROUNDS else ""
    return f"{count} {unit}{few}"


def scale_text(cfg: RunConfig) -> str:
    if cfg.steps:
        return f"{cfg.scale} scale: {cfg.warmup_steps} warm-up + {cfg.steps} timed steps a repeat, batch {cfg.batch_size}"
    return f"{cfg.scale} scale: {cfg.epochs} epoch(s) a repeat, batch {cfg.batch_size}, full test pass"


def block(title: str, arms: Sequence[tuple[RunConfig, str]], layouts: Sequence[Layout], rule: str,
          estimate_text: str, results_dir: Path, notes: Sequence[str] = (), device_note: str = "") -> str:
    """The plan as lines: `arms` are (config, 'baseline' or 'vs <id [arm]>')."""
    first = arms[0][0]
    width = max(len(f"{c.experiment} [{c.variant}]") for c, _ in arms)
    arm_lines = [f"{c.experiment + ' [' + c.variant + ']':<{width}}  {against}" for c, against in arms]
    processes = sorted({lay.text() for lay in layouts})
    lines = [f"plan: {title}", f"  scale:     {scale_text(first)}",
             f"  data:      {first.dataset} under {first.data_root}" if first.dataset != "synthetic" else
             "  data:      synthetic tensors (throughput only)",
             "  arms:      " + arm_lines[0], *("             " + line for line in arm_lines[1:]),
             f"  repeats:   {rule}",
             "  processes: " + processes[0], *("             " + p for p in processes[1:]),
             f"  estimate:  {estimate_text}",
             f"  results:   {results_dir}/"]
    if device_note:
        lines.append(f"  device:    {device_note}")
    if first.scale != "smoke" and (busy := machine.busy_now(BUSY_WINDOW_S)):  # smoke numbers are never judged
        lines.append(f"  WARNING:   this machine is busy before work: {busy}; repeats that stay this busy are "
                     "flagged noisy (see accel doctor --bench)")
    lines += [f"  note:      {note}" for note in notes if note]
    return "\n".join(lines)


def against_text(entry: experiments.Experiment, variant: str) -> str:
    from pipelines.core.stats.pairing import declared_baseline

    base = declared_baseline(entry, variant)
    if base is None:
        return "baseline arm"
    suffix = " (same total cores)" if entry.match_cores else ""
    return f"vs {base[0]} [{base[1]}]{suffix}"
