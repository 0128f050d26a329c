"""What every `accel` command shares: exit codes, the one-line failure, a path argument that refuses
an empty value and the repeats argument (a count or `auto`)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

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
    """A repeat count (its bounds are RunConfig's), or `auto` (core/stats/stopping.py: until every arm is
    precise enough, or the budget is spent)."""

    name = "N|auto"

    def convert(self, value, param, ctx):
        if isinstance(value, int) or value == "auto":
            return value
        try:
            return int(value)
        except ValueError:
            self.fail(f"{value!r} is not a whole number or auto (e.g. --repeats 5, --repeats auto)",
                      param, ctx)


def fail(message: str, code: int = EXIT_USAGE) -> None:
    """`accel: error: MESSAGE` on stderr, then exit CODE (2: a user mistake)."""
    click.echo(f"accel: error: {message}", err=True)
    sys.exit(code)
