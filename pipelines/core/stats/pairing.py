"""Which arm a reproduced arm is compared with, which published figures belong to it, and whether two
sets of records may be compared at all, and how two arms' records pair up (`paired_units`).

The catalog is the only source: an entry's `baseline` ("id" or "id@variant"), or, without one, the
entry's own first arm. A baseline id without "@variant" means the arm of that experiment with the same
name when there is one (oneCCL ranks=4 against Gloo ranks=4), else its first arm. With `match_cores`,
the arm of the baseline experiment that ran on the same total cores is used instead of the declared one
(the book's 2x8 against 1x16 becomes 2x1 against 1x2 on a 2-core machine). Records are compared only
when machine, torch and image agree (`envinfo.machine_key`); the report says which of them differ.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from pipelines.core.config import experiments
from pipelines.core.record.envinfo import machine_key
from pipelines.core.stats import intervals

MACHINE_FIELDS = ("CPU model", "CPU family/model", "CPU vector units", "logical CPUs", "torch", "image target",
                  "image lock", "GPUs")
TIME_METRICS = {"train_time_s": 1.0, "train_time_min": 60.0, "fit_time_min": 60.0}  # metric -> s per unit

Records = list[dict[str, Any]]


def applies(entry: experiments.Experiment, fig: experiments.Published, variant: str) -> bool:
    """A figure belongs to an arm when it names it, or names none in a single-arm experiment."""
    return fig.variant == variant or (fig.variant is None and not entry.has_variants)


def published_figure(entry: experiments.Experiment, metric: str, variant: str) -> experiments.Published | None:
    return next((fig for fig in entry.published if fig.metric == metric and applies(entry, fig, variant)), None)


def published(entry: experiments.Experiment, metric: str, variant: str) -> float | None:
    """The figure's value on the basis a throughput measurement has: same work (see Published.same_work_value)."""
    fig = published_figure(entry, metric, variant)
    return None if fig is None else fig.same_work_value


def published_times(entry: experiments.Experiment, variant: str) -> list[tuple[str, float]]:
    """(as printed, seconds) of an arm's published training times."""
    return [(f"{fig.value:g} {fig.metric.rsplit('_', 1)[-1]}", fig.value * TIME_METRICS[fig.metric])
            for fig in entry.published if fig.metric in TIME_METRICS and applies(entry, fig, variant)]


def declared_baseline(entry: experiments.Experiment, variant: str) -> tuple[str, str] | None:
    """(experiment, arm) the catalog compares `variant` with; None for a reference arm."""
    if entry.baseline:
        base_id, _, base_variant = entry.baseline.partition("@")
        if base_variant:
            return base_id, base_variant
        base = experiments.all_experiments().get(base_id)
        names = [arm.name for arm in base.variants] if base else ["default"]
        return base_id, variant if variant in names or (base and base.arm(variant)) else names[0]
    first = entry.variants[0].name
    return None if variant == first else (entry.id, first)


def total_cores(record: dict[str, Any]) -> int:
    """Parallel workers of a run: GPUs (ranks) on CUDA, ranks x torch threads on the CPU."""
    ranks = int((record.get("dist") or {}).get("world_size") or 1)
    if record["config"].get("device") == "cuda":
        return ranks
    return ranks * int(record["env"].get("torch_threads") or 1)


def baseline_arm(entry: experiments.Experiment, variant: str, records: Records,
                 ran: Mapping[tuple[str, str], Records]) -> tuple[str, str, str] | None:
    """(experiment, arm, why this arm) to compare with; `ran` holds the ok records of this scale by arm."""
    declared = declared_baseline(entry, variant)
    if declared is None or not entry.match_cores or not records:
        return None if declared is None else (*declared, "")
    cores = total_cores(records[0])
    base = experiments.all_experiments().get(declared[0])
    arms = [arm.name for arm in base.variants] if base else []
    arms += sorted(name for exp, name in ran if exp == declared[0] and name not in arms)  # open arms (threads=3)
    for name in arms:
        recs = ran.get((declared[0], name))
        if recs and total_cores(recs[0]) == cores:
            return declared[0], name, f"same total cores: {cores}"
    return (*declared, f"no {declared[0]} arm ran on the same total cores: {cores}")


RANK_KNOB = {"torchrun": "NPROC", "mpirun": "NP", "srun": "NP"}  # the launcher knob that sets a process count


def device_count_difference(entry: experiments.Experiment, variant: str, base: tuple[str, str],
                            records: Records, base_records: Records) -> str:
    """'' when the arm and its baseline ran on the devices (GPUs, or CPU processes) the source ran them on,
    else "published on 4 devices, measured on 2" with the command that matches: the course's strategies on
    4 A100s at NPROC=2, or vit-ddp-4gpu on one GPU against vit-bf16-mixed, measure another speed-up than
    the published one. A count the catalog cannot state (None) is not checked."""
    base_entry = experiments.all_experiments().get(base[0])
    parts = []
    for who, exp, arm, recs in (("", entry, variant, records), ("its baseline ", base_entry, base[1], base_records)):
        wanted = exp.published_devices(arm) if exp else None
        ran = _world_sizes(recs)
        if wanted is None or ran == [wanted]:
            continue
        knob = RANK_KNOB.get(exp.launcher)
        fix = f"make {exp.id} {knob}={wanted}" if knob else f"accel run {exp.id} --variant {arm} (one process)"
        parts.append(f"{who}published on {wanted} device(s), measured on {'/'.join(map(str, ran))}; "
                     f"the source's count: {fix}")
    return "; ".join(parts)


def _world_sizes(records: Records) -> list[int]:
    return sorted({int((r.get("dist") or {}).get("world_size") or 1) for r in records})


def machine_difference(records: Records) -> str:
    """'' when every record ran on one machine/torch/image, else what differs."""
    keys = {machine_key(r["env"]) for r in records}
    if len(keys) < 2:
        return ""
    parts = []
    for index, name in enumerate(MACHINE_FIELDS):
        values = sorted({str(k[index]) for k in keys})
        if len(values) > 1:
            parts.append(f"{name} {' vs '.join(values)}")
    return "runs differ in " + "; ".join(parts)


def hardware_class(entry: experiments.Experiment) -> str:
    """"gpu" or "cpu", where the source ran; "any" for a rule of thumb stated for no hardware (the notes)."""
    if entry.hardware.startswith("generic"):
        return "any"
    return "gpu" if entry.target == "cuda" or "gpu" in entry.requires else "cpu"


def run_class(records: Records) -> str:
    return "gpu" if any(r["config"].get("device") == "cuda" for r in records) else "cpu"


def machine_class(record: dict[str, Any]) -> tuple:
    """What a committed reference must share with a run to be compared: CPU model, family/model and vector
    units (a VM's generic model name can hide another generation), logical CPUs, GPUs."""
    env = record["env"]
    return (env.get("cpu_model"), env.get("cpu_id"), env.get("cpu_isa"), env.get("logical_cpus"),
            tuple(g.get("name") for g in env.get("gpus") or ()))


def class_text(key: tuple) -> str:
    model, cpu_id, isa, cpus, gpus = key
    return f"{model} ({cpu_id or 'family/model not recorded'}, {isa or 'vector units not recorded'}; " \
           f"{cpus} logical CPUs, {', '.join(gpus) or 'no GPU'})"


@dataclass
class Pairing:
    """How an arm's records pair with its baseline's: `kind` "process" (blocks of one process, paired by block
    round), "round" (the arms' processes of one alternation round) or "" (not paired: the arms were measured
    apart, and the interval resamples them as independent). `units`: what stats/intervals.py resamples."""

    kind: str = ""
    units: list[intervals.Unit] = field(default_factory=list)
    dropped: int = 0  # block pairs left out: a recompile inside either block
    processes: int = 0  # the fewest processes either arm's paired records came from (the verdict's gate)

    def text(self) -> str:
        if self.kind == "process":
            pairs = sum(len(u) for u in self.units)
            dropped = f", {self.dropped} with a recompile left out" if self.dropped else ""
            return f"same process: {len(self.units)} processes, {pairs} block pairs{dropped}"
        if self.kind == "round":
            within = "" if self.processes >= len(self.units) else \
                f" in {self.processes} process{'es' if self.processes != 1 else ''}"
            return f"same round: {len(self.units)} rounds{within}"
        return "unpaired"


def _mark(record: dict[str, Any]) -> dict[str, Any]:
    return record.get("pairing") or {}


def processes(records: Records) -> int:
    """How many processes measured these records: repeats of one process share its state (where its threads
    landed, its allocator, the minute), most of a shared machine's noise, so the verdict counts processes, not
    records. A record without a process mark counts as a process of its own."""
    return len({_mark(r).get("process") or id(r) for r in records})


def blocks_of(record: dict[str, Any]) -> list[tuple[int, int, float, bool, float]]:
    """An interleaved record's blocks as (round, steps, seconds, recompiled, samples); samples count every
    rank's. Blocks written before the samples column count full batches."""
    metrics = record["metrics"]
    ranks = int((record.get("dist") or {}).get("world_size") or 1)
    out = []
    for block in metrics.get("blocks") or ():
        steps, seconds = int(block[1]), float(block[2])
        recompiled = bool(block[5]) if len(block) > 5 else False
        samples = block[6] * ranks if len(block) > 6 else steps * (metrics.get("samples_per_step") or 0)
        out.append((int(block[0]), steps, seconds, recompiled, float(samples)))
    return out


def _block_throughputs(record: dict[str, Any]) -> dict[int, tuple[float, bool]]:
    """Block round -> (samples/s of the block, a recompile inside it)."""
    return {index: (samples / seconds, recompiled) for index, steps, seconds, recompiled, samples in blocks_of(record)
            if steps and seconds > 0 and samples}


def _by_process(records: Records) -> dict[str, dict[str, Any]]:
    return {_mark(r).get("process"): r for r in records if _mark(r).get("process")}


def total_log_ratios(records: Records, base_records: Records) -> list[float]:
    """Per process that ran both arms in blocks: log(arm's samples / seconds) - log(baseline's), each side
    summed over the block rounds both ran without a recompile (the ratio of totals, untrimmed, unweighted by
    block: a second estimate beside the paired one, stats/sensitivity.py)."""
    mine, theirs = _by_process(records), _by_process(base_records)
    out = []
    for process in [p for p in mine if p in theirs and mine[p] is not theirs[p]]:
        a = {b[0]: b for b in blocks_of(mine[process]) if b[1] and b[2] > 0 and b[4] and not b[3]}
        b = {b[0]: b for b in blocks_of(theirs[process]) if b[1] and b[2] > 0 and b[4] and not b[3]}
        both = sorted(set(a) & set(b))
        if both:
            out.append(math.log(sum(a[k][4] for k in both) / sum(a[k][2] for k in both))
                       - math.log(sum(b[k][4] for k in both) / sum(b[k][2] for k in both)))
    return out


def paired_units(records: Records, base_records: Records) -> Pairing:
    """Pair an arm's records with its baseline's: by process and block round where both ran blocks in the
    same processes, else by alternation round (group and round), else not at all."""
    mine, theirs = _by_process(records), _by_process(base_records)
    shared = [p for p in mine if p in theirs and mine[p]["metrics"].get("blocks") and theirs[p]["metrics"].get("blocks")
              and mine[p] is not theirs[p]]
    if shared:
        units, dropped = [], 0
        for process in shared:
            a, b = _block_throughputs(mine[process]), _block_throughputs(theirs[process])
            logs = []
            for index in sorted(set(a) & set(b)):
                if a[index][1] or b[index][1]:
                    dropped += 1
                    continue
                logs.append(math.log(a[index][0]) - math.log(b[index][0]))
            if logs:
                units.append(logs)
        if units:
            return Pairing("process", units, dropped, len(units))
    by_round = lambda recs: {(_mark(r).get("group"), _mark(r).get("round")): r for r in recs  # noqa: E731
                             if _mark(r).get("group") is not None and _mark(r).get("round") is not None}
    mine_r, theirs_r = by_round(records), by_round(base_records)
    units, used = [], []
    for key in mine_r:
        if key in theirs_r and mine_r[key] is not theirs_r[key]:
            variant, baseline = intervals.repeat_of(mine_r[key]), intervals.repeat_of(theirs_r[key])
            if variant is not None and baseline is not None:
                units.append((variant, baseline))
                used.append((mine_r[key], theirs_r[key]))
    if not units:
        return Pairing()
    return Pairing("round", units, processes=min(processes([m for m, _ in used]), processes([t for _, t in used])))
