"""The lab notebook's command `accel diff A B`: why did my number change? The numbers come from
stats/diff.py."""

from __future__ import annotations

from pathlib import Path

import click

from pipelines.core.cli.args import PathArg
from pipelines.core.errors import ConfigError

WIDE = 100


def _pct(value: float) -> str:
    return f"{value:+.1f} %"


def _columns(headers: list[str], lines: list[list[str]]) -> str:
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(headers)]
    out = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()]
    out.append("  ".join("-" * w for w in widths))
    out += ["  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in lines]
    return "\n".join(out)


@click.command()
@click.argument("before", type=PathArg())
@click.argument("after", type=PathArg())
@click.option("--fail-above", "fail_above", type=click.FloatRange(min=0, max=100, min_open=True), default=None,
              metavar="PCT", help="Exit 1 when an arm is significantly slower by more than PCT percent.")
def diff(before: Path, after: Path, fail_above: float | None) -> None:
    """Two result sets side by side (folders or .jsonl files): per arm, B's throughput against A's with
    a 95 % interval, and the environment fields that differ and may explain it."""
    from pipelines.core.stats import diff as diffs

    first, second = diffs.read(before), diffs.read(after)
    arms, only_first, only_second = diffs.compare(first, second)
    if not arms:
        raise ConfigError(f"{before} and {after} share no arm (experiment, variant and scale); "
                          "compare results of the same experiments")
    click.echo(f"A: {before} ({len(first)} records)   B: {after} ({len(second)} records)\n")
    lines = [[f"{d.experiment} / {d.variant}", d.scale, f"{d.repeats[0]}/{d.repeats[1]}",
              f"{d.throughput[0]:.1f} -> {d.throughput[1]:.1f}", _pct(d.change_pct),
              "[" + ", ".join(_pct(v) for v in d.interval_pct) + "]" if d.interval_pct else "n/a",
              d.word] for d in arms]
    click.echo(_columns(["arm", "scale", "n A/B", "samples/s", "change", "95 % interval", "judged"], lines))
    for label, keys in (("only in A", only_first), ("only in B", only_second)):
        if keys:
            click.echo(f"\n{label}: " + ", ".join(f"{e} / {v} ({s})" for e, v, s in keys))
    fields = diffs.fingerprint_diff(first, second)
    click.echo("\nWhat differs between A and B (may explain a change):")
    click.echo(_columns(["field", "A", "B"], [[name, a, b] for name, a, b in fields]))
    if fail_above is not None:
        bad = diffs.regressions(arms, fail_above)
        if bad:
            names = ", ".join(f"{d.experiment} / {d.variant} {_pct(d.change_pct)}" for d in bad)
            click.echo(f"\naccel: error: significantly slower by more than {fail_above:g} %: {names}", err=True)
            raise SystemExit(1)
        click.echo(f"\nno arm is significantly slower by more than {fail_above:g} %")
