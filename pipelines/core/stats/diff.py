"""`accel diff A B`: two sets of results side by side (before and after an upgrade, laptop and cluster,
last week and today), per arm, with what in the environment may explain a change.

Per arm present on both sides (experiment, variant, scale): B's throughput over A's with the same
two-level bootstrap the report uses for unpaired arms (repeats, then steps within a repeat, at least
Welch's t; stats/intervals.py), as a change in percent with its 95 % interval. A change is significant only
when the interval excludes zero and each side has at least `MIN_REPEATS_FOR_VERDICT` processes: with
fewer, run-to-run noise is unseen.
Only the same work is judged: an arm whose batch, model, dataset, device or world size differ between
the sides, or whose timed steps differ by more than a factor of `STEPS_FACTOR`, is shown with that
difference and never gated. Throughput is per step, so 20 timed steps compare with 30 (CI against the
committed reference); 2 do not, because the first steps after a short warm-up still pay start-up costs
(a 2-step run of CI's own test measured 22-52 % below the 30-step reference on the same machine, where
20 steps stayed within 4-33 %).
`regressions(diffs, pct)` are the significant slow-downs of more than `pct` percent: what
`--fail-above PCT` gates on, for users and for CI's drift check against the committed reference.

`machine_shift(diffs)` is the median change over the judged arms: how much faster or slower the machine
B ran on as a whole. Two VMs of one class (same CPU model, same image) ran CI's reference set 4-33 % and
23-45 % below the committed reference, arm by arm, on quiet machines: the host, not the code. With
`--relative`, each arm is judged against that shift instead of against zero, so a code change that
slows some arms still fails the gate, and a slower host does not. A change that slows every arm alike
is for the harness-overhead check (the shared loop against a plain loop, in the same run: `make
harness-overhead` and the committed references; CI's drift gate leaves it out, as on 2 cores its interval
of about ±15 % could not see such a change).

The fingerprint diff lists the recorded environment fields whose values differ between the two sides
(torch, threads, OpenMP runtime, ISA, image digest, commit, ...), with the machine state around the
repeats (load, noisy repeats) when the records carry it.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from pipelines.core.errors import ConfigError
from pipelines.core.record import results
from pipelines.core.stats import intervals, record_pairing

ArmKey = tuple[str, str, str]  # experiment, variant, scale


@dataclass(frozen=True)
class ArmDiff:
    experiment: str
    variant: str
    scale: str
    repeats: tuple[int, int]  # A's, B's
    throughput: tuple[float, float]  # samples/s, A's and B's
    change_pct: float
    interval_pct: tuple[float, float] | None  # None: no per-step times on a side
    significant: bool
    note: str  # "", or why the change is not judged

    @property
    def word(self) -> str:
        if not self.significant:
            return self.note or "no significant change"
        return "faster" if self.change_pct > 0 else "slower"


def read(path: Path) -> list[dict[str, Any]]:
    """The ok records of a results folder (sub-folders too) or of one .jsonl file."""
    path = Path(path)
    if path.is_file():
        found = [item for item in results.read_tolerant(path) if not isinstance(item, results.Skipped)]
    elif path.is_dir():
        found = results.load(path).records
    else:
        raise ConfigError(f"{path} does not exist; give a results folder or a .jsonl file "
                          "(e.g. accel diff results/reference/<run> results)")
    ok = [r for r in found if r.get("status") == "ok"]
    if not ok:
        raise ConfigError(f"{path} holds no finished records; run an experiment into it first "
                          "(accel run ID --results-dir ...)")
    return ok


def by_arm(records: list[dict[str, Any]]) -> dict[ArmKey, list[dict[str, Any]]]:
    arms: dict[ArmKey, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        arms[(record["experiment"], record["variant"], record.get("scale", ""))].append(record)
    return arms


def _throughputs(records: list[dict[str, Any]]) -> list[float]:
    return [r["metrics"]["throughput_samples_per_s"] for r in records
            if isinstance(r["metrics"].get("throughput_samples_per_s"), (int, float))]


WORK_FIELDS = ("batch_size", "model", "dataset", "device")
STEPS_FACTOR = 2.0


def _work(record: dict[str, Any]) -> dict[str, Any]:
    config = record.get("config") or {}
    return {**{name: config.get(name) for name in WORK_FIELDS},
            "world size": (record.get("dist") or {}).get("world_size")}


def _steps(records: list[dict[str, Any]]) -> list[int]:
    return sorted({s for r in records if isinstance(s := (r.get("config") or {}).get("steps"), int) and s > 0})


def work_difference(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> str:
    """'' when both sides did the same work per step, else what differs ('steps 30 vs 2')."""
    differs = []
    for name in (*WORK_FIELDS, "world size"):
        a = sorted({str(_work(r)[name]) for r in before})
        b = sorted({str(_work(r)[name]) for r in after})
        if a != b:
            differs.append(f"{name} {'/'.join(a)} vs {'/'.join(b)}")
    a, b = _steps(before), _steps(after)
    if a and b and max(max(a), max(b)) > STEPS_FACTOR * min(min(a), min(b)):
        differs.append(f"timed steps {'/'.join(map(str, a))} vs {'/'.join(map(str, b))} (more than "
                       f"{STEPS_FACTOR:g}x apart)")
    return "; ".join(differs)


def compare_arm(key: ArmKey, before: list[dict[str, Any]], after: list[dict[str, Any]]) -> ArmDiff | None:
    first, second = _throughputs(before), _throughputs(after)
    if not first or not second:
        return None
    steps = [intervals.repeat_of(r) for r in before], [intervals.repeat_of(r) for r in after]
    if all(s is not None for s in steps[0] + steps[1]):
        ratio, interval = intervals.ratio_interval(steps[1], steps[0])
    else:  # a side without per-step times: whole repeats only
        ratio, interval = intervals.mean_ratio_interval(second, first)
    low, high = (interval.low - 1) * 100, (interval.high - 1) * 100
    fewest = min(record_pairing.processes(before), record_pairing.processes(after))
    enough = fewest >= intervals.MIN_REPEATS_FOR_VERDICT
    note = "" if enough else f"too few processes to judge (fewer than {intervals.MIN_REPEATS_FOR_VERDICT} a side)"
    if other_work := work_difference(before, after):
        enough, note = False, f"not the same work: {other_work}"
    return ArmDiff(*key, repeats=(len(first), len(second)),
                   throughput=(sum(first) / len(first), sum(second) / len(second)),
                   change_pct=(ratio - 1) * 100, interval_pct=(low, high),
                   significant=enough and (low > 0 or high < 0), note=note)


def compare(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> tuple[list[ArmDiff], list[ArmKey],
                                                                                 list[ArmKey]]:
    """(per-arm diffs, arms only in A, arms only in B)."""
    a, b = by_arm(before), by_arm(after)
    diffs = [d for key in sorted(a.keys() & b.keys()) if (d := compare_arm(key, a[key], b[key]))]
    return diffs, sorted(a.keys() - b.keys()), sorted(b.keys() - a.keys())


MIN_ARMS_FOR_SHIFT = 3  # a median of fewer arms is one arm's own change, not the machine's


def judged(diffs: list[ArmDiff]) -> list[ArmDiff]:
    """The arms that did the same work with enough repeats on both sides (no note)."""
    return [d for d in diffs if not d.note]


def machine_shift(diffs: list[ArmDiff]) -> float | None:
    """B's throughput over A's, the median over the judged arms; None when fewer than
    `MIN_ARMS_FOR_SHIFT` arms are judged."""
    ratios = [1 + d.change_pct / 100 for d in judged(diffs)]
    return statistics.median(ratios) if len(ratios) >= MIN_ARMS_FOR_SHIFT else None


def relative_pct(value_pct: float, shift: float) -> float:
    """A change in percent, judged against the machine's shift (1.0: against no change)."""
    return ((1 + value_pct / 100) / shift - 1) * 100


def regressions(diffs: list[ArmDiff], fail_above_pct: float, shift: float = 1.0) -> list[ArmDiff]:
    """Judged arms whose whole 95 % interval is below `shift` and whose change, taken against `shift`,
    is a slow-down of more than `fail_above_pct` percent. With `shift` 1.0: the significant slow-downs."""
    return [d for d in judged(diffs) if d.interval_pct is not None
            and relative_pct(d.interval_pct[1], shift) < 0 and relative_pct(d.change_pct, shift) < -fail_above_pct]


def _vars(name: str) -> Callable[[dict[str, Any]], Any]:
    return lambda env: (env.get("vars") or {}).get(name)


FINGERPRINT: dict[str, Callable[[dict[str, Any]], Any]] = {
    "torch": lambda env: env.get("torch"),
    "python": lambda env: env.get("python"),
    "CPU": lambda env: env.get("cpu_id") or env.get("cpu_model"),
    "ISA": lambda env: env.get("cpu_isa"),
    "usable CPUs": lambda env: len(env.get("usable_cpus") or []) or None,
    "torch threads": lambda env: env.get("torch_threads"),
    "OMP_NUM_THREADS": _vars("OMP_NUM_THREADS"),
    "OpenMP runtime": lambda env: env.get("openmp_runtime"),
    "allocator": lambda env: env.get("allocator"),
    "image": lambda env: (env.get("image") or {}).get("digest") or (env.get("image") or {}).get("target"),
    "commit": lambda env: env.get("git_commit"),
    "GPUs": lambda env: ", ".join(g.get("name", "?") for g in env.get("gpus") or []) or None,
}


def _values(records: list[dict[str, Any]], read_one: Callable[[dict[str, Any]], Any]) -> str:
    found = sorted({str(read_one(r.get("env") or {})) for r in records})
    return " | ".join(found)


def _machine(records: list[dict[str, Any]]) -> dict[str, str]:
    states = [r["machine"] for r in records if isinstance(r.get("machine"), dict)]
    if not states:
        return {"load at start": "not recorded", "noisy repeats": "not recorded"}
    loads = [s["load_avg_start"][0] for s in states if s.get("load_avg_start")]
    noisy = sum(1 for s in states if s.get("noisy"))
    return {"load at start": f"{min(loads):.2f}-{max(loads):.2f}" if loads else "not recorded",
            "noisy repeats": f"{noisy} of {len(states)}"}


def fingerprint_diff(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """(field, A's values, B's values) for every fingerprint field that differs, then the machine state."""
    out = [(name, _values(before, read_one), _values(after, read_one)) for name, read_one in FINGERPRINT.items()]
    changed = [row for row in out if row[1] != row[2]]
    mine, theirs = _machine(before), _machine(after)
    return changed + [(name, mine[name], theirs[name]) for name in mine]
