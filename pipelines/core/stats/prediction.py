"""The ratio this machine should give: an arm's step time predicted from its step profile and its process's
machine card alone, never from its measured times, so that predicted against measured tests the model.

A step's time is split into four terms (docs/timing.md, "The prediction and its pass rule"):

- fixed: every op of the step pays the card's tiny-op cost, and with more than one thread a parallel
  region's too: `calls x (tiny_op_us + parallel_region_us)`;
- work: the step's FLOPs at the card's fp32 GEMM ceiling at the process's threads;
- memory: the step's bytes read at the card's triad bandwidth;
- communication: with ranks, the gradients' all-reduce (4 bytes a parameter) at the card's bus bandwidth.

The terms add (no overlap), as in the roofline model's worst case. An arm's predicted ratio to its baseline
is (samples a step / predicted time) over the baseline's, from the records that carry a profile (round 0).
`cause` names the term that moved most between the two arms, with its share of the baseline's step; it is
given only when the prediction is within CAUSE_WITHIN of the measured ratio, else the arm is "not explained".
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Sequence

CAUSE_WITHIN = 0.10  # |predicted / measured - 1| at most this, or no cause is printed
TERMS = ("fixed", "work", "memory", "communication")


@dataclass(frozen=True)
class Terms:
    """One record's predicted step, seconds a term, and the samples the step trains."""

    fixed: float
    work: float
    memory: float
    communication: float
    samples: float

    @property
    def seconds(self) -> float:
        return self.fixed + self.work + self.memory + self.communication

    @property
    def throughput(self) -> float:
        return self.samples / self.seconds

    def share(self, term: str) -> float:
        return getattr(self, term) / self.seconds


def terms(record: dict[str, Any]) -> Terms | None:
    """The record's step split into the four terms; None without a measured card or a step profile."""
    card, metrics = record.get("card") or {}, record.get("metrics") or {}
    profile = metrics.get("step_profile") or {}
    total = profile.get("total")
    if not card.get("measured") or not total or not metrics.get("samples_per_step"):
        return None
    per_op_s = (card["tiny_op_us"] + (card.get("parallel_region_us") or 0.0)) * 1e-6
    gemm = card["gemm_gflops"]["fp32"]["all_threads"] * 1e9
    bandwidth = card["triad_gbs"] * 1e9
    world = (record.get("dist") or {}).get("world_size") or 1
    communication = 0.0
    if world > 1 and card.get("allreduce_gbs"):
        communication = 4 * (metrics.get("parameters") or 0) / (card["allreduce_gbs"] * 1e9)
    return Terms(fixed=total["calls"] * per_op_s, work=total["flops"] / gemm, memory=total["bytes"] / bandwidth,
                 communication=communication, samples=float(metrics["samples_per_step"]))


def _median_terms(records: Sequence[dict[str, Any]]) -> Terms | None:
    found = [t for t in map(terms, records) if t is not None]
    if not found:
        return None
    return Terms(*(statistics.median(getattr(t, name) for t in found) for name in (*TERMS, "samples")))


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
        seconds = getattr(self.baseline, term)
        return (f"predicted {self.ratio:.2f} ({100 * error:+.0f} %): mostly the {term} part, "
                f"{1e3 * seconds:.1f} ms a step, {100 * self.baseline.share(term):.0f} % of the baseline's step, "
                f"{'less' if per_sample[term] > 0 else 'more'} a sample in the arm")


def predict(records: Sequence[dict[str, Any]], base_records: Sequence[dict[str, Any]]) -> Prediction | None:
    """The arm's predicted ratio to its baseline from the records with a card and a profile; None without."""
    arm, baseline = _median_terms(records), _median_terms(base_records)
    if arm is None or baseline is None:
        return None
    return Prediction(arm.throughput / baseline.throughput, arm, baseline)
