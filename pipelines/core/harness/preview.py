"""The plan every experiment command shows before any work, and what it decides: which arms, against
which baseline, at what scale and repeat rule, on how many ranks and threads, for about how long.

Why a plan: at book scale an experiment runs for tens of minutes to hours, and a user who typed an id
should learn that (and where results go) before a core is busy, not after. `--dry-run` prints this block
and exits 0 having written nothing.

Why the baseline comes along: a ratio needs its baseline measured beside it. When an entry's baseline
is another catalog entry that runs the same way (same launcher, image and requirements), `accel run ID`
and `accel launch ID` measure both in one comparison (core/harness/rounds.py, one process per id and round,
ABBA). Where it cannot (another launcher, image or device, or an arm of another entry), the plan says
why and names the commands that give the verdict. Smoke scale proves a code path, never a ratio, so it
never brings a baseline.

The estimate (harness/estimate.py) multiplies steps by a recorded step time and says where it came from.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from pipelines.core.distributed import affinity
from pipelines.core.record import machine
from pipelines.core.config import experiments
from pipelines.core.stats import stopping
from pipelines.core.config.runconfig import RunConfig
from pipelines.core.config.repeat_rule import DEFAULT_HALFWIDTH, MAX_AUTO_REPEATS

BUSY_WINDOW_S = 0.3  # how long the plan watches the machine for other load before work
DEFAULT_LAUNCHER_RANKS = 2  # launch/torchrun.sh and mpirun.sh: NPROC / NP when unset


@dataclass(frozen=True)
class Baseline:
    """What the command does about the entry's baseline: `bring` an entry id (and its `variants`) to measure
    in the same rounds, or `note` why it does not (empty when the entry's arms compare among themselves)."""

    bring: str | None = None
    variants: tuple[str, ...] = ()
    note: str = ""


def baseline_choice(entry: experiments.Experiment, configs: Sequence[RunConfig], scale: str, results_dir: Path,
                    refused: bool = False, env: Mapping[str, str] | None = None) -> Baseline:
    """Whether, and which arms of, the entry's baseline entry are measured beside it, in the same rounds
    (whatever its launcher: a round starts each slot through its own)."""
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
    if set(base.requires) - set(entry.requires):
        return Baseline(note=f"baseline {entry.baseline} needs {', '.join(sorted(set(base.requires)))}; for the "
                             f"verdict run {verdict_cmd} where it can run")
    names = [v.name for v in base.variants]
    if entry.match_cores and base_arm.startswith("threads="):
        wanted = []
        for cfg in configs:
            shape = layout(entry, cfg, entry.launcher, env)
            wanted.append(f"threads={shape.ranks * shape.threads * shape.nodes}")
        missing = sorted(arm for arm in set(wanted) if base.arm(arm) is None)
        if missing:
            return Baseline(note=f"baseline {base_id} has no arm {', '.join(missing)} (the same total cores); "
                                 f"it has {', '.join(names)}")
        return Baseline(bring=base_id, variants=tuple(dict.fromkeys(wanted)))
    if base_arm:
        return Baseline(bring=base_id, variants=(base_arm,))
    same = [cfg.variant for cfg in configs if base.arm(cfg.variant) is not None]
    return Baseline(bring=base_id, variants=tuple(dict.fromkeys(same)) or (names[0],))


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
                f"{'s' if self.threads > 1 else ''}{nodes} on {self.usable} usable "
                f"core{'s' if self.usable > 1 else ''}")
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
        nodes = _whole((env.get("NNODES") or entry.knobs.get("NNODES") or "").split(":")[-1]) or 1  # MIN:MAX
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
    else:  # the launcher's own default (distributed/knobs.py threads): the smallest core slice per rank
        threads = knob("THREADS") or affinity.threads_per_rank(ranks)
    return Layout(ranks, threads, usable, nodes)


# ---- the plan's text -----------------------------------------------------------------------------------------

def repeat_rule(cfg: RunConfig, rounds: int | None = None, comparison: bool = False,
                halfwidth: float = DEFAULT_HALFWIDTH) -> str:
    unit = "rounds (one process per slot below, ABBA)" if comparison else "repeats of every arm (in turn, ABBA)"
    if (rounds is None and comparison) or (not comparison and cfg.auto):
        return (f"auto: {unit} until every 95 % interval is within ±{halfwidth * 100:g} %, "
                f"at least {stopping.MIN_ROUNDS}, at most {MAX_AUTO_REPEATS}, budget {cfg.budget_s or 0:g} s")
    count = rounds if comparison else cfg.repeats
    few = f" (a verdict needs {stopping.MIN_ROUNDS}+)" if count < stopping.MIN_ROUNDS else ""
    return f"{count} {unit}{few}"


def data_text(cfg: RunConfig) -> str:
    """The plan's data line; data that is not there is a line of the plan (a real run refuses it)."""
    from pipelines.core.data import files

    from pipelines.core.data.splits import PLAN_TEXT

    if cfg.dataset == "synthetic":
        return "synthetic tensors (throughput only)"
    split = f"; {PLAN_TEXT[cfg.split]}" if cfg.split in PLAN_TEXT else ""
    if files.present(cfg.dataset, cfg.data_root):
        return f"{cfg.dataset} under {cfg.data_root}{split}"
    return (f"{cfg.dataset} under {cfg.data_root}: NOT THERE, a real run is refused until it is; "
            f"{files.fix_hint(cfg.dataset, cfg.data_root)}{split}")


def scale_text(cfg: RunConfig, interleaved: bool = False) -> str:
    if interleaved and cfg.blocks:
        if cfg.block_s:  # rounded up to whole periods of the process's order (stats/orders.py cycles)
            size = f"at least {cfg.blocks} blocks of about {cfg.block_s:g} s"
        else:  # --steps: that many timed steps over at most that many blocks (interleave.steps_per_block;
            # not imported, it brings torch into a plan that needs none)
            count = min(cfg.blocks, cfg.steps or cfg.blocks)
            size = f"{count} blocks of {max(1, math.ceil((cfg.steps or 1) / count))} timed step(s)"
        return (f"{cfg.scale} scale: {cfg.warmup_steps} warm-up steps, then {size} per arm and "
                f"process, batch {cfg.batch_size}")
    if cfg.steps:
        return (f"{cfg.scale} scale: {cfg.warmup_steps} warm-up + {cfg.steps} timed steps a repeat, "
                f"batch {cfg.batch_size}")
    return f"{cfg.scale} scale: {cfg.epochs} epoch(s) a repeat, batch {cfg.batch_size}, full test pass"


def device_text(devices: set[str]) -> str:
    """The plan's device line: the devices the arms ask for, and on CPU whether a GPU was there to use."""
    import torch  # the plan is shown before work: torch is imported by then, and only where a plan is shown

    if devices == {"cpu"} and not torch.cuda.is_available():
        return "cpu (no CUDA GPU visible here)"
    return ", ".join(sorted(devices))


def plan_text(title: str, arms: Sequence[tuple[RunConfig, str]], layouts: Sequence[Layout], rule: str,
          estimate_text: str, results_dir: Path, notes: Sequence[str] = (),
          extra: Sequence[tuple[str, Sequence[str]]] = ()) -> str:
    """The plan as lines: `arms` are (config, 'baseline' or 'vs <id [arm]>'); `extra` are (heading, lines)
    shown after the processes (how the arms share processes, the allocator)."""
    first = arms[0][0]
    width = max(len(str(c.arm)) for c, _ in arms)
    arm_lines = [f"{c.experiment + ' [' + c.variant + ']':<{width}}  {against}" for c, against in arms]
    processes = sorted({lay.text() for lay in layouts})
    lines = [f"plan: {title}", f"  scale:     {scale_text(first, bool(extra))}",
             *_lines("workload", [first.stand_in] if first.stand_in else []),
             *_lines("data", [data_text(first)]),
             "  arms:      " + arm_lines[0], *("             " + line for line in arm_lines[1:]),
             *_lines("rounds" if extra else "repeats", [rule]),
             "  processes: " + processes[0], *("             " + p for p in processes[1:]),
             *(line for heading, texts in extra for line in _lines(heading, texts)),
             *_lines("estimate", [estimate_text]),
             f"  results:   {results_dir}/",
             f"  device:    {device_text({c.device for c, _ in arms})}"]
    if first.scale != "smoke" and (busy := machine.busy_now(BUSY_WINDOW_S)):  # smoke numbers are never judged
        lines.append(f"  WARNING:   this machine is busy before work: {busy}; repeats that stay this busy are "
                     "flagged noisy (see accel doctor --bench)")
    lines += [f"  note:      {note}" for note in notes if note]
    return "\n".join(lines)


PLAN_WIDTH = 110  # a plan line wraps here, its continuation indented under the text


def _lines(heading: str, texts: Sequence[str]) -> list[str]:
    import textwrap

    out = []
    for i, text in enumerate(texts):
        wrapped = textwrap.wrap(text, PLAN_WIDTH - 13, subsequent_indent="  ") or [""]
        out += [f"  {(heading + ':') if i == 0 and j == 0 else '':<11}{part}" for j, part in enumerate(wrapped)]
    return out


def against_text(entry: experiments.Experiment, variant: str) -> str:
    from pipelines.core.stats.pairing import declared_baseline

    base = declared_baseline(entry, variant)
    if base is None:
        return "baseline arm"
    if entry.match_cores and base[1].startswith("threads="):  # the arm of this machine's cores, not the source's
        return f"vs {base[0]} [threads=<ranks x threads>] (same total cores)"
    return f"vs {base[0]} [{base[1]}]"
