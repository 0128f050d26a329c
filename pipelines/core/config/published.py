"""One published figure of the catalog: what it measures (its basis), its value on the same work as a measured
ratio, and the band a measurement reproduces it in (its stated range, its own margin with the reason, or the
effect rule of config/effect.py). Imports without torch, as the catalog does."""

from __future__ import annotations

from dataclasses import dataclass

from pipelines.core.config import effect


# What a published figure measures, so that a verdict compares like with like (a measured throughput ratio is
# judged against a same-work figure, or against a time-to-result one converted to the same work).
# "context": shown beside the measurement, never compared with it (Table 3.2's accuracies come from one model
# trained on across the book's sequence of backends; an arm here starts from fresh weights).
# "count": a number the run computes exactly (parameters, steps per epoch, a format's largest value) and
# "setting": a value the run is configured with (a batch size): the verdict is "matches" or "differs".
BASES = ("same-work throughput", "time-to-result", "end-to-end", "memory", "accuracy", "profile share", "context",
         "count", "setting")
COUNT_METRICS = ("parameters", "baseline_parameters", "unpruned_parameters", "param_ratio", "steps_per_epoch",
                 "max_finite_value")


@dataclass(frozen=True)
class Published:
    """One published figure. `metric` ends in its unit (train_time_s, test_accuracy_pct, ratio).

    `basis`: one of BASES; empty means the metric's usual one (a ratio: same-work throughput). A
    time-to-result ratio compares runs that did different work (the talk's 10 scratch epochs against 3
    fine-tuning ones); `work_ratio` is the baseline's work over the arm's (10/3 there), so the figure's
    same-work equivalent, the one a throughput measurement can be judged against, is value / work_ratio.

    `devices`: the GPUs (or CPU processes) the figure's arm ran on, where the source states them (the
    course's strategies on 4 A100s); a run on another count is "not comparable", never judged. Unset, the
    arm's own `ranks` option, the entry's NPROC knob or a single process stands for it
    (Experiment.published_devices)."""

    metric: str
    value: float
    source: str  # "book:ch2", "talk-slides", "repo-output:rasbt/cvpr2023", ...
    note: str = ""
    variant: str | None = None  # which variant of the experiment the figure belongs to
    basis: str = ""
    work_ratio: float = 1.0
    devices: int | None = None
    # A range the source states ("memory ~2-3x"): the band a measurement is judged against is the range
    # itself, not the effect rule's (config/effect.py); `value` is its middle, shown where one number is printed.
    low: float | None = None
    high: float | None = None
    # A margin of this figure's own (a fraction: 0.25 judges within x/1.25), in place of the effect rule's, and
    # why: a rule of thumb stated to one digit is judged more loosely than a timed table. Refused without a reason.
    margin: float | None = None
    margin_reason: str = ""
    # The float32 matmul precision the figure's baseline ran at, where the ratio depends on it ("highest": true
    # fp32, against which bf16's gain is larger than against TF32): a baseline run at another is not comparable.
    baseline_matmul: str = ""

    def __post_init__(self) -> None:
        if (self.low is None) != (self.high is None) or (self.low is not None and not
                                                          self.low <= self.value <= self.high):
            raise ValueError(f"a range needs low <= value <= high (got {self.low}, {self.value}, {self.high})")
        if self.devices is not None and self.devices < 1:
            raise ValueError(f"devices must be at least 1, not {self.devices}")
        if self.basis and self.basis not in BASES:
            raise ValueError(f"basis {self.basis!r} is not one of {', '.join(BASES)}")
        if self.work_ratio != 1.0 and self.basis != "time-to-result":
            raise ValueError("work_ratio applies to a time-to-result figure only")
        if (self.margin is None) != (not self.margin_reason):
            raise ValueError(f"a figure's own margin needs its reason, and a reason its margin (got margin "
                             f"{self.margin!r}, reason {self.margin_reason!r})")
        if self.margin is not None and (self.low is not None or not 0 < self.margin < 1):
            raise ValueError(f"a margin is a fraction between 0 and 1 on a figure without a stated range "
                             f"(got {self.margin!r})")

    @property
    def basis_name(self) -> str:
        if self.basis:
            return self.basis
        if self.metric == "ratio":
            return "same-work throughput"
        if self.metric in COUNT_METRICS:
            return "count"
        if self.metric.endswith("batch_size"):
            return "setting"
        if self.metric.endswith("_pct") and "accuracy" in self.metric:
            return "accuracy"
        if "memory" in self.metric or self.metric.endswith(("_gb", "_mib", "_bytes")):
            return "memory"
        if self.metric.startswith(("self_cpu", "self_cuda")) or "share" in self.metric:
            return "profile share"
        return "end-to-end" if "time" in self.metric else "same-work throughput"

    def band(self) -> tuple[float, float]:
        """Where a measurement reproduces this figure: its stated range, else the effect rule's band around the
        same-work value (config/effect.py), with this figure's own margin where it has one."""
        if self.low is not None and self.high is not None:
            return self.low, self.high
        return tuple(effect.band(self.same_work_value, self.margin))

    def rule_text(self) -> str:
        """Why the band is where it is, in words (the stated range, the figure's own margin, or the rule's part)."""
        if self.low is not None and self.high is not None:
            return "the source's stated range"
        return effect.rule_text(self.same_work_value, self.margin, self.margin_reason)

    def matches(self, measured: float) -> bool:
        """A count or setting equals the figure: inside its stated range (Lightning's "67.0 M": 66.95 to
        67.05 M), else equal at the figure's printed precision (1.079 matches 1.0790, not 1.08)."""
        if self.low is not None and self.high is not None:
            return self.low <= measured <= self.high
        decimals = len(repr(float(self.value)).partition(".")[2].rstrip("0")) if "e" not in repr(self.value) else None
        if decimals is None:  # 3.4e+38: its printed significant digits
            digits = len(repr(self.value).partition("e")[0].replace(".", "").replace("-", ""))
            return float(f"{measured:.{digits - 1}e}") == self.value
        return round(measured, decimals) == self.value

    @property
    def same_work_value(self) -> float:
        """The figure on the same-work basis (a time-to-result ratio divided by the work it did more)."""
        return self.value / self.work_ratio
