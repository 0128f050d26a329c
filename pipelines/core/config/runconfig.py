"""RunConfig: the one resolved configuration of a run, written verbatim into every result.

Settings (RunConfig fields) come from three layers, later ones winning: the scale's defaults, the
catalog's book settings (experiment, then variant), and the user's command-line overrides. The
pipeline's own knobs are one typed, frozen Options instance (`pipelines/core/config/options.py`) held in
`options`. Resolution happens once, in `resolve`; nothing downstream re-reads the catalog or the
command line, so a config has exactly one home.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Mapping, TypeVar

SCALES = ("smoke", "bench", "book")
DATASETS = ("fashion_mnist", "cifar10", "imdb", "synthetic")
DEVICES = ("cpu", "cuda")
# The sources' own splits (core/data/splits.py holds the rules), and the datasets each describes: the dataset's
# own files; the CVPR 2023 talk's CIFAR-10 holdout; the course's pooled IMDB split. Synthetic tensors take any.
SPLITS = {"dataset": None, "cvpr2023": ("cifar10", "synthetic"), "dlf-imdb": ("imdb", "synthetic")}


from pipelines.core.config import repeat_rule
from pipelines.core.config.arm import Arm
from pipelines.core.errors import ConfigError
from pipelines.core.config.options import NoOptions


@dataclass(frozen=True)
class ScaleDefaults:
    """How long a scale runs. `steps=None` means whole epochs (the book's protocol)."""

    steps: int | None
    warmup_steps: int
    rounds: int | str | None  # rounds of processes: a count, or "auto" (core/stats/stopping.py: until
    # precise, or the budget is spent); None: the command measures in its own process
    repeats: int  # repeats of every arm inside that process
    eval_batches: int | None  # None: the whole test set
    blocks: int | None = None  # a round's process: cycles, one block per arm each (core/train/interleave.py)
    block_s: float | None = None  # seconds a block aims at (steps sized from warm-up); None: `steps` split


# smoke: prove the path works; bench: fixed timed steps after a timed warm-up, repeated until every arm's
# interval is narrow or the budget is spent; book: the book's epochs and settings, one run, full test pass.
SCALE_DEFAULTS = {
    "smoke": ScaleDefaults(steps=3, warmup_steps=1, rounds=None, repeats=1, eval_batches=2),
    "bench": ScaleDefaults(steps=40, warmup_steps=5, rounds=repeat_rule.AUTO, repeats=1, eval_batches=5, blocks=12,
                           block_s=0.5),
    "book": ScaleDefaults(steps=None, warmup_steps=0, rounds=None, repeats=1, eval_batches=None),
}


# Upper bounds: far beyond any book or bench setting, so a typo (1e20 epochs, an extra zero or five) is
# refused before work instead of running for years. Values are (lowest, highest).
BOUNDS = {"batch_size": (1, 1 << 20), "epochs": (1, 100_000), "rounds": (1, 1000), "repeats": (1, 1000),
          "steps": (1, 10**9),
          "blocks": (1, 10_000),
          "warmup_steps": (0, 10**9), "num_workers": (0, 1024), "seed": (0, 2**32 - 1),
          "image_size": (8, 8192), "prefetch_factor": (1, 1024)}


O = TypeVar("O")  # the pipeline's Options dataclass (core/config/options.py); NoOptions when it has none


@dataclass(frozen=True)
class RunConfig(Generic[O]):
    experiment: str
    pipeline: str
    variant: str
    model: str
    dataset: str
    scale: str = "bench"
    data_root: Path = Path("data")
    results_dir: Path = Path("results")
    batch_size: int = 64
    epochs: int = 1
    steps: int | None = None
    warmup_steps: int = 0
    # --rounds: rounds of processes the command runs (bench scale, book scale with --rounds: harness/rounds.py);
    # None: the command measures in its own process, and so does a worker, which measures one round
    rounds: int | None = None
    repeats: int = 1  # --repeats: repeats of every arm in this process (smoke and book scale)
    auto: bool = False  # the count is the stopping rule's (rounds, or repeats without rounds); the field its most
    budget_s: float | None = None  # with auto: the time budget of the whole run (seconds)
    eval_batches: int | None = None
    # bench scale, a round's process (core/train/interleave.py): cycles, every arm one block each, each block about
    # block_s seconds of the arm's steps (None: `steps` split evenly over the blocks, as with --steps)
    blocks: int | None = None
    block_s: float | None = None
    lr: float = 1e-5
    weight_decay: float = 0.005
    device: str = "cpu"
    seed: int | None = 0
    weights: Path | None = None
    num_workers: int = 0
    pin_memory: bool = False
    persistent_workers: bool = False
    prefetch_factor: int | None = None
    shuffle: bool = False
    drop_last: bool = False
    image_size: int | None = None
    seq_len: int | None = None  # token models: tokens per text (None: the model's own, e.g. 512 for DistilBERT)
    tokenizer: Path | None = None  # a local tokenizer folder; None: train one on the training texts
    head_classes: int = 10  # the book keeps torchvision's 1000-class heads on DenseNet/EfficientNet
    # whose train / validation / test split (core/data/splits.py): the dataset's own files, the talk's
    # CIFAR-10 holdout (cvpr2023) or the course's pooled IMDB split (dlf-imdb)
    split: str = "dataset"
    # a workload that stands in for the published one (a GPU entry's declared CPU form): what it replaces,
    # in one sentence the plan shows and the record keeps
    stand_in: str = ""
    options: O = field(default_factory=NoOptions)  # the pipeline's typed Options instance (frozen)

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        _choice("scale", self.scale, SCALES)
        _choice("dataset", self.dataset, DATASETS)
        _choice("device", self.device, DEVICES)
        _split_fits(self.split, self.dataset)
        for name, (low, high) in BOUNDS.items():
            value = getattr(self, name)
            if value is not None and not low <= value <= high:
                flag = f"--{name.replace('_', '-')}"
                raise ConfigError(f"{flag} must be {'0 or more' if low == 0 else f'at least {low}'}, got {value}"
                                  if value < low else f"{flag} must be at most {high:,}, got {value:,}")
        if self.budget_s is not None:
            repeat_rule.check_budget(self.budget_s)
            if not self.auto:
                raise ConfigError(f"--budget-s {self.budget_s:g} applies to --rounds auto (or --repeats auto) only; "
                                  "drop it, or pass --rounds auto (bench scale's default)")
        if self.block_s is not None and not (math.isfinite(self.block_s) and 0.01 <= self.block_s <= 600):
            raise ConfigError(f"--block-s must be between 0.01 and 600 seconds, got {self.block_s:g}")
        if self.prefetch_factor is not None and self.num_workers == 0:
            raise ConfigError("--prefetch-factor needs --num-workers of 1 or more")
        if not math.isfinite(self.lr) or self.lr <= 0:
            raise ConfigError(f"--lr must be a positive finite number, got {self.lr}")
        if not math.isfinite(self.weight_decay) or self.weight_decay < 0:
            raise ConfigError(f"weight_decay must be a finite number of 0 or more, got {self.weight_decay}")
        if self.weights is not None and not Path(self.weights).exists():
            raise ConfigError(f"weights file {self.weights} does not exist; pass --weights with a "
                              "local state_dict file or model folder (nothing is downloaded at run time)")
        if self.seq_len is not None and self.seq_len < 8:
            raise ConfigError(f"--seq-len must be at least 8 tokens, got {self.seq_len}")
        if self.tokenizer is not None and not Path(self.tokenizer).is_dir():
            raise ConfigError(f"tokenizer folder {self.tokenizer} does not exist; pass --tokenizer with a local "
                              "folder holding a saved tokenizer, or leave it out to train one on the training texts")

    @property
    def arm(self) -> Arm:
        return Arm(self.experiment, self.variant)

    def to_record(self) -> dict[str, Any]:
        """JSON-ready form, as written into results."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["options"] = dataclasses.asdict(self.options)
        for key in ("data_root", "results_dir", "weights", "tokenizer"):
            out[key] = None if out[key] is None else str(out[key])
        return out

    @classmethod
    def from_record(cls, record: Mapping[str, Any], options_type: type) -> "RunConfig":
        """The config `to_record` wrote, rebuilt (a worker's request carries its configs this way): paths as
        Paths, lists as the tuples they were, the Options as `options_type`; validated again on the way in."""
        values = {f.name: record[f.name] for f in dataclasses.fields(cls) if f.name in record}
        for key in ("data_root", "results_dir", "weights", "tokenizer"):
            if values.get(key) is not None:
                values[key] = Path(values[key])
        raw = dict(record.get("options") or {})
        values["options"] = options_type(**{k: tuple(v) if isinstance(v, list) else v for k, v in raw.items()})
        return cls(**values)


def _split_fits(split: str, dataset: str) -> None:
    """Refuse a split on a dataset it does not describe (the talk's holdout of IMDB, the course's of CIFAR-10)."""
    _choice("split", split, tuple(SPLITS))
    allowed = SPLITS[split]
    if allowed is not None and dataset not in allowed:
        raise ConfigError(f"split {split} (the entry's) is a split of {allowed[0]}, not of {dataset}; run the entry "
                          f"on --dataset {allowed[0]} (or synthetic)")


def _choice(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(f"unknown {name} {value!r}; choose one of: {', '.join(allowed)}")


def check_environment(env: Mapping[str, str] | None = None) -> None:
    """Refuse an environment the run's libraries would silently misread, before any work.

    OMP_NUM_THREADS: libgomp prints "Invalid value for environment variable OMP_NUM_THREADS" for anything
    but a positive whole number (or a comma list of them, one per nesting level, e.g. "4,2") and then
    runs with its default, and torch's own parse falls back the same way. The run then finishes "ok" with
    a thread count the user did not ask for, recorded as if chosen. So the value is checked as libgomp's
    grammar (digits only: torch ignores a padded " 4"), and a bad one is a ConfigError naming it.
    Called by `resolve`, so `accel run`, every launcher's preflight and every rank refuse it; a command
    should also call it before importing torch, or libgomp's own warning line comes first.
    """
    env = os.environ if env is None else env
    value = env.get("OMP_NUM_THREADS")
    if value is None:
        return
    if not all(item.isdigit() and item.isascii() and int(item) > 0 for item in value.split(",")):
        raise ConfigError(f"OMP_NUM_THREADS={value!r} is not a positive whole number (or a comma list of "
                          "them, one per nesting level); unset it or set e.g. OMP_NUM_THREADS=2")


def resolve(settings: Mapping[str, Any], options: Any, overrides: Mapping[str, Any],
            *, experiment: str, pipeline: str, variant: str, scale: str) -> RunConfig:
    """Merge scale defaults < catalog entry < user overrides into one frozen RunConfig (after
    `check_environment`: the environment is part of what a run is configured by)."""
    check_environment()
    _choice("scale", scale, SCALES)
    defaults = SCALE_DEFAULTS[scale]
    merged: dict[str, Any] = dict(settings)
    merged.update(steps=defaults.steps, warmup_steps=defaults.warmup_steps,
                  rounds=defaults.rounds, repeats=defaults.repeats, eval_batches=defaults.eval_batches,
                  blocks=defaults.blocks,
                  block_s=defaults.block_s)
    if overrides.get("steps") is not None and overrides.get("block_s") is None:
        merged["block_s"] = None  # --steps N: N timed steps an arm and process, split over its blocks
    if scale == "book":  # the book's own step budget, if an entry states one, wins at book scale
        merged["steps"] = settings.get("steps")
    merged.update({k: v for k, v in overrides.items() if v is not None})
    if counts := [count for count in ("rounds", "repeats") if merged[count] == repeat_rule.AUTO]:
        merged.update({count: repeat_rule.MAX_AUTO_REPEATS for count in counts}, auto=True)
        if merged.get("budget_s") is None:
            merged["budget_s"] = repeat_rule.DEFAULT_BUDGET_S
    known = {f.name for f in dataclasses.fields(RunConfig)}
    unknown = sorted(set(merged) - known)
    if unknown:
        raise ConfigError(f"unknown setting(s) {', '.join(unknown)}")
    return RunConfig(experiment=experiment, pipeline=pipeline, variant=variant, scale=scale,
                     options=options, **{k: v for k, v in merged.items()
                                         if k not in ("experiment", "pipeline", "variant", "scale")})
