"""The experiment catalog: id -> pipeline, settings, baseline, container target, launcher, published figures.

Entries live in `pipelines/catalog/*.py`, one module per source (book chapters, talk, course, notes),
so the data is plain Python that needs no parser and imports without torch. This module holds the
entry types and the lookup; it knows no chapter by name.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import sys
from dataclasses import InitVar, dataclass, field
from typing import Any, Mapping, NamedTuple

from pipelines.core.config.published import BASES, COUNT_METRICS, Published  # noqa: F401 (the catalog's names)

TARGETS = ("cpu", "cpu-intel", "cuda", "mpi")
LAUNCHERS = ("local", "torchrun", "mpirun", "srun")
STATUSES = ("ready", "planned")


@dataclass(frozen=True)
class Variant:
    """One arm of an experiment (eager vs compiled, a sparsity, a thread count).

    Variants of one experiment run interleaved in one invocation (repeat 0 of every variant, then
    repeat 1, ...), so slow drift of the machine affects all arms alike.
    """

    name: str
    settings: Mapping[str, Any] = field(default_factory=dict)  # RunConfig fields this variant changes
    options: Mapping[str, Any] = field(default_factory=dict)  # pipeline options this variant changes
    # the arm of this entry it is compared with, where the source compares it with another than the first
    # (s004-ckpt's amp-checkpointed against amp); "" is the entry's baseline rule (stats/pairing.py)
    baseline: str = ""


@dataclass(frozen=True)
class Experiment:
    id: str
    compares: str  # one line: baseline -> variant, as the README map shows it
    pipeline: str | None  # module name under pipelines/, e.g. "grad_accum"
    status: str = "ready"
    baseline: str | None = None
    target: str = "cpu"
    launcher: str = "local"
    settings: Mapping[str, Any] = field(default_factory=dict)  # RunConfig fields at book scale
    options: Mapping[str, Any] = field(default_factory=dict)  # pipeline options
    knobs: Mapping[str, str] = field(default_factory=dict)  # launcher env knobs, e.g. OMP_RUNTIME
    requires: tuple[str, ...] = ()  # capabilities: "gpu", "ipex", "ccl", "mpi-backend", "multi-gpu"
    published: tuple[Published, ...] = ()
    hardware: str = ""  # the hardware of the published run
    # The physical cores of the source's CPU host where it states them (the book's chapters 4 and 9: 16): a CPU
    # verdict on another count says so, since the size of a threading or batch speed-up follows the cores.
    source_cores: int | None = None
    expect: str = ""  # what to expect on other hardware, and why (shown by the report)
    decisions: tuple[str, ...] = ()  # known defects of the original and what we chose
    reproduces: str = ""  # the source's table / figure / slide / unit this entry reproduces (the map's column)
    cpu_smoke: tuple[str, ...] = ()  # extra `accel run` args for a quick CPU smoke run (e.g. a tiny stand-in)
    # A GPU entry's workload for `--device cpu` at bench or book scale (settings over `settings`; the user's
    # own flags still win): a stand-in a CPU finishes, named as such in the plan, the record and the verdict
    cpu_form: Mapping[str, Any] = field(default_factory=dict)
    planned_reason: str = ""  # for status "planned": what delivers it
    variants: tuple[Variant, ...] = ()  # the arms; when empty, one Variant named by `variant`
    # Compare each arm with the arm of the baseline experiment that ran on the same total cores (ranks x
    # threads) here, not with the declared baseline arm: the published ratio holds at equal total cores.
    match_cores: bool = False
    # Samples in one of the source's epochs (the book's Fashion-MNIST split: 54,000): with the entry's epochs,
    # the work an end-to-end figure timed, which a bench run projects its compile time and steady steps to.
    source_epoch_samples: int | None = None
    # An option whose every whole value of at least 1 is an arm, `<open_arm>=N`, declared or not: the card's
    # `make cpu-ddp NPROC=3` runs ranks=3 (with no published figure, its ratio is "measured").
    open_arm: str = ""
    variant: InitVar[str] = "default"  # shorthand for a single-variant experiment: its variant's name

    def __post_init__(self, variant: str) -> None:
        if not self.variants:
            object.__setattr__(self, "variants", (Variant(variant),))

    def arm(self, name: str) -> Variant | None:
        """The arm of that name: a declared one, or `<open_arm>=N` for any whole N >= 1; None otherwise."""
        for declared in self.variants:
            if declared.name == name:
                return declared
        key, equals, value = name.partition("=")
        if self.open_arm and equals and key == self.open_arm and value.isdigit() and name == f"{key}={int(value)}" \
                and int(value) >= 1:
            return Variant(name, options={key: int(value)})
        return None

    def published_devices(self, name: str) -> int | None:
        """The devices (GPUs, or CPU processes) the source ran arm `name` on: a figure's stated count, else
        the arm's `ranks` option (ch9's ranks=4, ch10's gpus=4), else the NPROC knob of a torchrun entry, else
        1 for a single-process launcher; None where nothing says (mpirun across hosts without a figure)."""
        for applies in (lambda fig: fig.variant == name, lambda fig: fig.variant is None):
            stated = {fig.devices for fig in self.published if fig.devices and applies(fig)}
            if len(stated) == 1:
                return stated.pop()
        arm = self.arm(name)
        ranks = arm.options.get("ranks") if arm else None
        if isinstance(ranks, int) and ranks > 0 and self.launcher != "local":
            return ranks
        if self.launcher == "torchrun" and str(self.knobs.get("NPROC", "")).isdigit():
            return int(self.knobs["NPROC"])
        return 1 if self.launcher == "local" else None

    def unknown_arm(self, name: str) -> str:
        """One line for an arm this entry does not have, with the fix."""
        if self.open_arm and name.partition("=")[0] == self.open_arm:
            return (f"{name} is not an arm of {self.id}: {self.open_arm} must be a whole number of at least 1 "
                    f"(e.g. {self.open_arm}=2)")
        return f"unknown variant {name} of {self.id}; it has: {', '.join(v.name for v in self.variants)}"

    @property
    def has_variants(self) -> bool:
        """True when the experiment compares several variants of its own (not only against a baseline id)."""
        return len(self.variants) > 1

    def published_value(self, metric: str, variant: str | None = None) -> float | None:
        for fig in self.published:
            if fig.metric == metric and fig.variant == variant:
                return fig.value
        return None


def cpu_smoke_args(entry: Experiment) -> list[str]:
    """`accel run` arguments that run a GPU entry's code path on a CPU at smoke scale: what the no-GPU hints
    suggest (tests/refusals/test_hints.py runs each one). NCCL has no CPU side, so Gloo stands in for it."""
    args = ["--device", "cpu", "--scale", "smoke"]
    if entry.options.get("backend") == "nccl":
        args += ["-o", "backend=gloo"]
    return [*args, *entry.cpu_smoke]


class UnknownExperiment(KeyError):
    pass


class Row(NamedTuple):
    """One arm of a source machine's table: what a fit of its step times needs."""

    experiment: str
    arm: str
    steps: int  # of the whole timed run
    samples: int  # a step
    flops: float  # a step


@dataclass(frozen=True)
class Table:
    """One published table of a source's machine, for a fit of its step times (stats/source_machine.py)."""

    source: str  # the published figures' source, as the catalog names it
    label: str  # how a verdict line names it
    rows: tuple[Row, ...]  # the arms the fit is made on, the baseline first
    others: tuple[Row, ...] = ()  # arms predicted from the fit, never fitted on


@dataclass(frozen=True)
class SourceMachine:
    """A source's machine as its tables pin it down (a catalog module's SOURCE_MACHINES)."""

    name: str
    software: str  # what a fit of its tables cannot separate from its hardware
    tables: tuple[Table, ...]


def _load() -> dict[str, Experiment]:
    """Every module's EXPERIMENTS (and SOURCE_MACHINES, kept for source_machines()); a module may name what
    its entries reproduce in one REPRODUCES table (id -> text) instead of per entry."""
    global _MACHINES
    machines: list[SourceMachine] = []
    package = importlib.import_module("pipelines.catalog")  # its modules import this one: loaded on demand
    entries: dict[str, Experiment] = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        table = getattr(module, "REPRODUCES", {})
        machines += getattr(module, "SOURCE_MACHINES", ())
        for entry in getattr(module, "EXPERIMENTS", ()):
            if entry.id in entries:
                raise ValueError(f"experiment id {entry.id!r} is defined twice")
            if not entry.reproduces and entry.id in table:
                entry = dataclasses.replace(entry, reproduces=table[entry.id], variants=entry.variants)
            entries[entry.id] = entry
    _MACHINES = tuple(machines)
    return entries


_ENTRIES: dict[str, Experiment] | None = None
_MACHINES: tuple[SourceMachine, ...] = ()


def source_machines() -> tuple[SourceMachine, ...]:
    """The sources' machines the catalog models (loaded with the entries)."""
    all_experiments()
    return _MACHINES


def all_experiments() -> dict[str, Experiment]:
    global _ENTRIES
    if _ENTRIES is None:
        _ENTRIES = _load()
    return _ENTRIES


def _nearest_ids(typed: str, ids, limit: int = 6) -> list[str]:
    """The catalog ids nearest to a mistyped one, nearest first, at most `limit`.

    Ranked by difflib's similarity ratio (2*matches/total length), so a one-letter slip in an id puts
    that id first instead of whichever id of the same prefix the catalog lists first. Two nudges of
    0.15 each, about what one typo costs in the ratio of an id this long: an id of the same first
    dash-separated token (the user most likely named the source right) and an id the typed text
    begins. Ids of the same token are always candidates, so a bare token lists its ids; others need a
    ratio of 0.5 (half their characters in common) to appear.
    """
    import difflib

    token = typed.split("-")[0]
    scored = []
    for entry in ids:
        ratio = difflib.SequenceMatcher(None, typed, entry).ratio()
        same_token = entry.split("-")[0] == token
        if same_token or ratio >= 0.5:
            scored.append((ratio + 0.15 * same_token + 0.15 * entry.startswith(typed), entry))
    scored.sort(key=lambda item: (-item[0], item[1]))
    return [entry for _, entry in scored[:limit]]


def get(experiment_id: str) -> Experiment:
    entries = all_experiments()
    if experiment_id not in entries:
        close = _nearest_ids(experiment_id, entries)
        hint = f" (did you mean: {', '.join(close)}?)" if close else ""
        raise UnknownExperiment(f"unknown experiment id {experiment_id!r}{hint}; "
                                "`accel list` shows every id")
    return entries[experiment_id]


def main() -> None:
    """`python -m pipelines.core.config.experiments ids|ready|gpu`: id lists for the Makefile and the CI scripts,
    without torch. `gpu`: the ready entries whose target image is cuda (ci/gpu-reference.sh runs them)."""
    which = sys.argv[1] if len(sys.argv) > 1 else "ids"
    for entry in all_experiments().values():
        if which == "ids" or entry.status == which or (which == "gpu" and entry.status == "ready"
                                                       and entry.target == "cuda"):
            print(entry.id)


if __name__ == "__main__":
    main()
