"""The ratio this machine should give: an arm's step predicted from the step profiles and machine cards alone,
never from the arm's measured times, so that predicted against measured tests the model.

The model (`calibrated`) prices the arm's work at the rates this machine ran the *baseline's* ops, as Habitat
(Yu et al., USENIX ATC 2021) scales a measured op to other hardware by its kind: an op's time is a fixed part
(the card's cost of one op, `tiny_op_us`, plus a parallel region's with more than one thread) plus a part
proportional to its work, FLOPs where the profiler counts them, else bytes read, else calls. The baseline's
profile gives each op's proportional rate; the arm's profile gives only its counts (calls, FLOPs, bytes). Its
terms, seconds a step (docs/timing.md, "The prediction and its pass rule"):

- fixed: calls x the card's per-op cost, plus the time between ops (Python, the framework), which grows
  with the op count, plus the whole time of ops with neither FLOPs nor bytes;
- work: the ops with FLOPs, at the baseline's seconds a FLOP of each (at another thread count scaled by the
  cards' fp32 GEMM ceilings at the two counts);
- memory: the ops without FLOPs, at the baseline's seconds a byte of each (at another thread count scaled by
  the cards' triad bandwidths at the two counts);
- loader: the baseline's data wait a sample (its loader in the training process, not profiled) times the
  samples one rank of the arm loads a step;
- own: ops the baseline never runs (a compiled model's kernels) at the arm's own profiled time: no rate to
  borrow, so this part is measured, not predicted, and a cause that rests on it says so;
- communication: with ranks, the gradients' all-reduce (4 bytes a parameter) at the card's bus bandwidth.

The arm and its baseline are paired by round (the records of one round share a process, or follow each other),
the ratio (samples a step / predicted seconds) over the baseline's taken per round, and the median kept.
`roofline` is the first model, every term at the card's ceilings (FLOPs at the GEMM ceiling, bytes at the triad
bandwidth, calls at the tiny op's cost), and `flops` its work term alone (time proportional to FLOPs): both kept
as models the pass rule must reject (ci/prediction-check.py scores all three).
`cause` names the term that moved most a sample between the two arms, with its share of the baseline's step;
it is given only when the prediction is within CAUSE_WITHIN of the measured ratio, else "not explained".
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Sequence

CAUSE_WITHIN = 0.10  # |predicted / measured - 1| at most this, or no cause is printed
TERMS = ("fixed", "work", "memory", "loader", "own", "communication")
MODELS = ("calibrated", "roofline", "flops")
LABELS = {"fixed": "the fixed part", "work": "the work counted in FLOPs",
          "memory": "the work counted in bytes read (ops without a FLOP count, convolutions among them)",
          "loader": "the data loading", "communication": "the gradients' all-reduce"}  # a term, as a cause says it


@dataclass(frozen=True)
class Terms:
    """One record's predicted step, seconds a term, and the samples the step trains."""

    fixed: float
    work: float
    memory: float
    loader: float
    own: float
    communication: float
    samples: float
    replaced: float = 0.0  # the baseline's ops this step no longer runs, at the baseline's time (beside `own`)

    @property
    def seconds(self) -> float:
        return sum(getattr(self, name) for name in TERMS)

    @property
    def throughput(self) -> float:
        return self.samples / self.seconds

    def share(self, term: str) -> float:
        return getattr(self, term) / self.seconds


def _usable(record: dict[str, Any]) -> bool:
    metrics = record.get("metrics") or {}
    profile = metrics.get("step_profile") or {}
    return bool((record.get("card") or {}).get("measured") and profile.get("total") and metrics.get("samples_per_step"))


def _per_op_s(card: dict[str, Any], threads: int) -> float:
    return (card["tiny_op_us"] + ((card.get("parallel_region_us") or 0.0) if threads > 1 else 0.0)) * 1e-6


def _threads(record: dict[str, Any]) -> int:
    return int((record.get("config") or {}).get("threads") or record["card"].get("threads") or 1)


def _gemm(card: dict[str, Any], threads: int) -> float:
    """The card's fp32 GEMM ceiling at `threads`: its two points, 1 thread and the process's threads."""
    gemm = card["gemm_gflops"]["fp32"]
    return gemm["1_thread"] if threads <= 1 else gemm["all_threads"]


def _ceiling(card: dict[str, Any], threads: int, kind: str) -> float | None:
    """The card's ceiling of `kind` ("work": the fp32 GEMM; "memory": the triad) at `threads`, where the card
    measured that count (1, or its process's threads); else None."""
    if threads != 1 and threads != card.get("threads"):
        return None
    if kind == "work":
        return _gemm(card, threads)
    return card.get("triad_gbs_1_thread") if threads == 1 and card.get("threads") != 1 else card.get("triad_gbs")


def _scaling(card: dict[str, Any], threads: int, base_card: dict[str, Any], base_threads: int, kind: str) -> float:
    """How much faster the arm's threads run work of `kind` than the baseline's: the ratio of the two ceilings,
    from one card where one measured both counts (no process-to-process noise), else across the two cards;
    1 where the counts are equal or no card measured them."""
    if threads == base_threads:
        return 1.0
    for one in (card, base_card):
        high, low = _ceiling(one, threads, kind), _ceiling(one, base_threads, kind)
        if high and low:
            return high / low
    high, low = _ceiling(card, threads, kind), _ceiling(base_card, base_threads, kind)
    return high / low if high and low else 1.0


def _communication(record: dict[str, Any]) -> float:
    card, metrics = record["card"], record["metrics"]
    world = (record.get("dist") or {}).get("world_size") or 1
    if world > 1 and card.get("allreduce_gbs"):
        return 4 * (metrics.get("parameters") or 0) / (card["allreduce_gbs"] * 1e9)
    return 0.0


def roofline(record: dict[str, Any]) -> Terms | None:
    """The record's step at the card's ceilings alone: calls at the per-op cost, FLOPs at the GEMM ceiling of
    the process's threads, bytes at the triad bandwidth; None without a measured card or a step profile."""
    if not _usable(record):
        return None
    card, metrics = record["card"], record["metrics"]
    total = metrics["step_profile"]["total"]
    per_op = (card["tiny_op_us"] + (card.get("parallel_region_us") or 0.0)) * 1e-6
    return Terms(fixed=total["calls"] * per_op, work=total["flops"] / (_gemm(card, 2) * 1e9),
                 memory=total["bytes"] / (card["triad_gbs"] * 1e9), loader=0.0, own=0.0,
                 communication=_communication(record), samples=float(metrics["samples_per_step"]))


def flops_alone(record: dict[str, Any]) -> Terms | None:
    """The roofline's work term alone: a step's time proportional to its FLOPs (a pure GEMM-ceiling model)."""
    found = roofline(record)
    return None if found is None else Terms(fixed=0.0, work=found.work, memory=0.0, loader=0.0, own=0.0,
                                            communication=0.0, samples=found.samples)


def _ops(profile: dict[str, Any]) -> dict[str, dict[str, float]]:
    ops = {row["op"]: row for row in profile.get("ops") or []}
    rest = profile.get("rest") or {}
    if rest.get("calls"):
        ops["(rest)"] = {"calls": rest["calls"], "self_ms": rest["self_ms"], "flops": rest.get("flops", 0),
                         "bytes": 0}
    return ops


def calibrated(record: dict[str, Any], base: dict[str, Any]) -> Terms | None:
    """`record`'s step priced at the rates `base` (its baseline, of the same round) ran each op at; None where
    either lacks a measured card or a step profile. `calibrated(base, base)` is the baseline's own step."""
    if not (_usable(record) and _usable(base)):
        return None
    profile, base_profile = record["metrics"]["step_profile"], base["metrics"]["step_profile"]
    threads, base_threads = _threads(record), _threads(base)
    per_op, base_per_op = _per_op_s(record["card"], threads), _per_op_s(base["card"], base_threads)
    # the arm's thread count against its baseline's: the ceilings at the two counts
    work_scaling, memory_scaling = (_scaling(record["card"], threads, base["card"], base_threads, kind)
                                    for kind in ("work", "memory"))
    known = _ops(base_profile)
    fixed = work = memory = own = 0.0
    calls = 0.0
    ran = _ops(profile)
    for name, op in ran.items():
        calls += op["calls"]
        rate = known.get(name)
        if rate is None:
            own += op["self_ms"] * 1e-3
            continue
        fixed += op["calls"] * per_op
        beyond = max(rate["self_ms"] * 1e-3 - rate["calls"] * base_per_op, 0.0)
        if rate["flops"] and op["flops"]:
            work += beyond * op["flops"] / rate["flops"] / work_scaling
        elif rate["bytes"] and op["bytes"]:
            memory += beyond * op["bytes"] / rate["bytes"] / memory_scaling
        else:
            fixed += beyond * op["calls"] / rate["calls"]
    base_calls = base_profile["total"]["calls"] or 1.0
    fixed += base_profile.get("between_ops_ms", 0.0) * 1e-3 * calls / base_calls
    base_metrics, metrics = base["metrics"], record["metrics"]
    waited = (base_metrics.get("data_wait_s") or 0.0) / max(base_metrics.get("measured_steps") or 1, 1)
    # each rank loads its own share, side by side: the loader's time follows a rank's samples, not the world's
    loader = waited / _local_samples(base) * _local_samples(record)
    replaced = sum(rate["self_ms"] for name, rate in known.items() if name not in ran) * 1e-3
    return Terms(fixed=fixed, work=work, memory=memory, loader=loader, own=own,
                 communication=_communication(record), samples=float(metrics["samples_per_step"]),
                 replaced=replaced)


def _local_samples(record: dict[str, Any]) -> float:
    """The samples one rank trains a step (a record's samples_per_step counts every rank's)."""
    world = (record.get("dist") or {}).get("world_size") or 1
    return record["metrics"]["samples_per_step"] / world


@dataclass(frozen=True)
class Prediction:
    ratio: float  # predicted throughput ratio, arm / baseline
    arm: Terms
    baseline: Terms

    def error(self, measured: float) -> float:
        """predicted / measured - 1."""
        return self.ratio / measured - 1.0

    def cause(self, measured: float) -> str:
        """One line: the term that moved most a sample between baseline and arm, and its share of the
        baseline's step; or why the model does not explain the arm."""
        error = self.error(measured)
        if abs(error) > CAUSE_WITHIN:
            return (f"not explained: the model predicts {self.ratio:.2f}, {100 * error:+.0f} % from the measured "
                    f"{measured:.2f} (a cause needs {100 * CAUSE_WITHIN:.0f} % or closer)")
        per_sample = {name: getattr(self.baseline, name) / self.baseline.samples
                      - getattr(self.arm, name) / self.arm.samples for name in TERMS}
        term = max(per_sample, key=lambda name: abs(per_sample[name]))
        if term == "own":
            return (f"predicted {self.ratio:.2f} ({100 * error:+.0f} %): mostly ops the baseline does not run, "
                    f"{1e3 * self.arm.own:.1f} ms a step ({100 * self.arm.share('own'):.0f} % of the arm's step) in "
                    f"place of {1e3 * self.arm.replaced:.1f} ms of the baseline's ops the arm does not run "
                    "(their time is the arm's own profile's: measured, not predicted)")
        seconds = getattr(self.baseline, term)
        return (f"predicted {self.ratio:.2f} ({100 * error:+.0f} %): mostly {LABELS[term]}, "
                f"{1e3 * seconds:.1f} ms a step, {100 * self.baseline.share(term):.0f} % of the baseline's step, "
                f"{'less' if per_sample[term] > 0 else 'more'} a sample in the arm")


def _by_round(records: Sequence[dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    """The first usable record of each round (a round's records of one arm are its ranks' or repeats')."""
    found: dict[Any, dict[str, Any]] = {}
    for record in records:
        if _usable(record):
            found.setdefault(str((record.get("pairing") or {}).get("round", record.get("repeat"))), record)
    return found


def predict(records: Sequence[dict[str, Any]], base_records: Sequence[dict[str, Any]],
            model: str = "calibrated") -> Prediction | None:
    """The arm's predicted ratio to its baseline: per round, the arm's predicted throughput over the baseline's,
    and the median over rounds (its terms those of the median round); None where no round has both profiled."""
    if model not in MODELS:
        raise ValueError(f"model {model!r} is none of {', '.join(MODELS)}")
    arms, bases = _by_round(records), _by_round(base_records)
    rounds = [(arms[key], bases[key]) for key in sorted(set(arms) & set(bases))]
    if not rounds and arms and bases:  # no round in common (records without rounds): one of each
        rounds = [(next(iter(arms.values())), next(iter(bases.values())))]
    pairs = []
    for arm, base in rounds:
        if model == "calibrated":
            arm_terms, base_terms = calibrated(arm, base), calibrated(base, base)
        else:
            price = roofline if model == "roofline" else flops_alone
            arm_terms, base_terms = price(arm), price(base)
        if arm_terms is not None and base_terms is not None:
            pairs.append(Prediction(arm_terms.throughput / base_terms.throughput, arm_terms, base_terms))
    if not pairs:
        return None
    ratio = statistics.median(p.ratio for p in pairs)
    chosen = min(pairs, key=lambda p: abs(p.ratio - ratio))  # the median round's terms (of two, the nearer)
    return Prediction(ratio, chosen.arm, chosen.baseline)
