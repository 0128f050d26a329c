"""What every `accel` command shares: exit codes, the one-line failure, a path argument that refuses
an empty value, the repeats argument (a count or `auto`), the percent argument and the experiment-id
argument, whose ids (and --variant's arms) complete in the shell from the catalog, which imports without
torch."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click
from click.shell_completion import CompletionItem

from pipelines.core.config import experiments
from pipelines.core.record.version import REPO  # noqa: F401  (re-exported to the commands)

EXIT_USAGE, EXIT_NOT_RUNNABLE = 2, 3


class PathArg(click.Path):
    """click.Path that refuses an empty value, which `Path('')` would silently turn into the current folder."""

    def __init__(self, **kwargs) -> None:
        super().__init__(path_type=Path, **kwargs)

    def convert(self, value, param, ctx):
        if isinstance(value, str) and not value.strip():
            self.fail("is empty; pass a path (e.g. results, data)", param, ctx)
        return super().convert(value, param, ctx)


class RepeatsArg(click.ParamType):
    """A count of rounds or repeats (its bounds are RunConfig's), or `auto` (core/stats/stopping.py: until every arm is
    precise enough, or the budget is spent)."""

    name = "N|auto"

    def convert(self, value, param, ctx):
        if isinstance(value, int) or value == "auto":
            return value
        try:
            return int(value)
        except ValueError:
            flag = param.opts[0] if param is not None else "--rounds"
            self.fail(f"{value!r} is not a whole number or auto (e.g. {flag} 5, {flag} auto)", param, ctx)


class PercentArg(click.ParamType):
    """A relative amount in percent, the unit of every such option (`diff --fail-above` too), handed to the
    code as a fraction. Below MIN_PCT it is refused: `--halfwidth 0.05` meant as a fraction would ask for
    an interval of ±0.05 %, which no run reaches, and spend the whole budget silently."""

    name = "PCT"
    MIN_PCT = 0.5

    def convert(self, value, param, ctx):
        try:
            pct = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of percent (e.g. 5 for ±5 %)", param, ctx)
        if not (self.MIN_PCT <= pct < 100):
            self.fail(f"{pct:g} is in percent and must be from {self.MIN_PCT:g} to below 100 "
                      f"(e.g. 5 for ±5 %{'; 0.05 is 0.05 %, not 5 %' if 0 < pct < self.MIN_PCT else ''})",
                      param, ctx)
        return pct / 100


def fail(message: str, code: int = EXIT_USAGE) -> None:
    """`accel: error: MESSAGE` on stderr, then exit CODE (2: a user mistake)."""
    click.echo(f"accel: error: {message}", err=True)
    sys.exit(code)


def _complete_id(_ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Shell completion of experiment ids (the catalog imports without torch: instant)."""
    return [CompletionItem(e.id, help=e.compares) for e in experiments.all_experiments().values()
            if e.id.startswith(incomplete)]


def complete_variant(ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Shell completion of --variant: the arms of the experiment id already typed. While an option waits for
    its value click parses nothing (ctx.params is empty), so the words every shell script of click passes
    (COMP_WORDS) are searched for the id too."""
    entries = experiments.all_experiments()
    typed = [ctx.params.get("experiment_id"), *os.environ.get("COMP_WORDS", "").split()]
    entry = next((entries[word] for word in typed if word in entries), None)
    return [CompletionItem(v.name) for v in entry.variants if v.name.startswith(incomplete)] if entry else []


def experiment_argument(command):
    """The EXPERIMENT_ID argument every command that takes one shares, completed from the catalog."""
    return click.argument("experiment_id", metavar="ID", shell_complete=_complete_id)(command)


def allocator_option(prefix: str):
    """--allocator, as run and compare take it (`prefix`: where it applies, e.g. "Bench scale: ")."""
    return click.option("--allocator", type=click.Choice(["auto", "pinned", "default"]), default="auto",
                        show_default=True, help=f"{prefix}pinned glibc thresholds for every arm (auto, unless an "
                        "arm compares allocators) or glibc's default, as the sources ran.")


def share_option(prefix: str):
    """--share, as run and compare take it."""
    return click.option("--share", type=click.Choice(["auto", "none"]), default="auto", show_default=True,
                        help=f"{prefix}arms with one process environment share a process, interleaved in blocks "
                        "(auto), or every arm gets its own process each round (none).")
