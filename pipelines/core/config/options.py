"""Typed pipeline options: each pipeline declares a frozen dataclass `Options`; this module builds it.

Values come in layers (the dataclass defaults < the catalog entry < the catalog variant < the user's
`-o key=value`), as Python values or as strings from the command line. Every value, whatever its layer,
goes through the click type its field's annotation names, so types, choices and ranges are checked in
one place and a typo is an error, never a silently ignored setting:

    bool / int / float / str       click.BOOL / INT / FLOAT / STRING (floats must be finite)
    Literal["a", "b"]              click.Choice(["a", "b"])
    Annotated[int, IntRange(...)]  that click type, e.g. Annotated[int, click.IntRange(min=1)]

Three option groups belong to the library, not to a pipeline: `DistOptions` (backend and timeout of a
distributed run, read by the runner), `CheckpointOptions` (read by the runner's checkpoint hooks) and
`BookkeepingOptions` (a source loop's validation pass and per-batch bookkeeping, core/train/bookkeeping.py).
A pipeline that supports them inherits them into its own Options; core reads only these groups' fields.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Mapping

import click

from pipelines.core.errors import ConfigError

_PLAIN = {bool: click.BOOL, int: click.INT, float: click.FLOAT, str: click.STRING}


@dataclass(frozen=True)
class NoOptions:
    """For pipelines whose technique lives entirely in RunConfig settings (batch size, loader, ...)."""


@dataclass(frozen=True)
class DistOptions:
    """How a multi-process run talks: the collective backend and how long any rank waits for a peer."""

    backend: Literal["gloo", "ccl", "nccl", "mpi"] = "gloo"
    timeout_s: Annotated[float, click.FloatRange(min=1, max=86400)] = 120.0


@dataclass(frozen=True)
class CheckpointOptions:
    """Checkpoints written by rank 0 into a folder every N epochs (0: only at the end) and, with
    `checkpoint_every_steps`, after every N batches of an epoch; a run resumes from it, inside the epoch.
    `checkpoint_any_world`: resume a checkpoint of another world size too (an elastic run that lost a node);
    such a repeat gives no verdict."""

    checkpoint_dir: str = ""
    checkpoint_every: Annotated[int, click.IntRange(min=0)] = 1
    checkpoint_every_steps: Annotated[int, click.IntRange(min=0)] = 0
    checkpoint_any_world: bool = False


@dataclass(frozen=True)
class BookkeepingOptions:
    """What a source's own loop did around the step inside its timed region (core/train/bookkeeping.py):
    `validate`, a validation pass after every epoch when the run's split has a validation part (the talk's,
    the course's); `train_accuracy`, a train accuracy updated from every batch's argmax (the talk's);
    `loss_every`, the loss read to the host and formatted every N batches of an epoch (the talk's 300; 0:
    never). A pipeline that offers them inherits the group and builds them with bookkeeping.source_loop."""

    validate: bool = True
    train_accuracy: bool = False
    loss_every: Annotated[int, click.IntRange(min=0)] = 0


def param_type(annotation: Any) -> click.ParamType:
    """The click type that converts and checks one field's values."""
    if typing.get_origin(annotation) is Annotated:
        return typing.get_args(annotation)[1]
    if typing.get_origin(annotation) is Literal:
        return click.Choice([str(choice) for choice in typing.get_args(annotation)])
    if annotation in _PLAIN:
        return _PLAIN[annotation]
    raise TypeError(f"option type {annotation!r} has no click type; use bool, int, float, str, Literal or "
                    "Annotated[T, click.ParamType]")


def fields(options_type: type) -> dict[str, click.ParamType]:
    """Field name -> click type, in declaration order."""
    hints = typing.get_type_hints(options_type, include_extras=True)
    return {f.name: param_type(hints[f.name]) for f in dataclasses.fields(options_type)}


def range_text(kind: click.IntRange | click.FloatRange) -> str:
    """'at least 1', 'between 0 and 1 (exclusive)', ...: what a range type allows, in words."""
    low, high = kind.min, kind.max
    if low is not None and high is not None:
        bounds = "exclusive" if kind.min_open and kind.max_open else "inclusive" if not (
            kind.min_open or kind.max_open) else "lower open" if kind.min_open else "upper open"
        return f"between {low:g} and {high:g} ({bounds})"
    if low is not None:
        return f"more than {low:g}" if kind.min_open else f"at least {low:g}"
    return f"less than {high:g}" if kind.max_open else f"at most {high:g}"


def convert(name: str, value: Any, kind: click.ParamType) -> Any:
    """One value through its click type; a bad value is a ConfigError naming it and what is allowed."""
    ranged = isinstance(kind, (click.IntRange, click.FloatRange))
    base = (click.INT if isinstance(kind, click.IntRange) else click.FLOAT) if ranged else kind
    try:
        converted = base.convert(value, None, None)
    except click.BadParameter:
        if isinstance(kind, click.Choice):
            raise ConfigError(f"option {name}={value!r} is unknown; choose one of: "
                              f"{', '.join(map(str, kind.choices))}") from None
        raise ConfigError(f"option {name}={value!r} is not a valid {base.name}") from None
    if isinstance(converted, float) and not math.isfinite(converted):
        raise ConfigError(f"option {name}={value!r} must be a finite number")
    if ranged:
        try:
            converted = kind.convert(converted, None, None)
        except click.BadParameter:
            raise ConfigError(f"option {name} must be {range_text(kind)}, got {converted:g}") from None
    return converted


def build(options_type: type, *layers: Mapping[str, Any]):
    """The Options instance from the layers in order (later wins); unknown keys are errors."""
    kinds = fields(options_type)
    values: dict[str, Any] = {}
    for layer in layers:
        for key, value in layer.items():
            if key not in kinds:
                allowed = ", ".join(kinds) or "none"
                raise ConfigError(f"unknown option {key!r}; this pipeline accepts: {allowed}")
            values[key] = convert(key, value, kinds[key])
    return options_type(**values)
