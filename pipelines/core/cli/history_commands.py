"""The history's commands, for "why did my number change?": `accel diff A B` (two result sets side by
side; numbers from stats/diff.py) and `accel history ID` (one experiment over every stored run, with change
points; record/history.py keeps the store, stats/changes.py finds the points)."""

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
@click.option("--relative", is_flag=True,
              help="Judge each arm against the median change of all judged arms (the machine's own shift, "
                   "e.g. a slower host) instead of against no change (with 3 judged arms or more).")
def diff(before: Path, after: Path, fail_above: float | None, relative: bool) -> None:
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
    shift, against = 1.0, ""
    if relative:
        judged = len(diffs.judged(arms))
        if (found := diffs.machine_shift(arms)) is None:
            click.echo(f"\nmachine shift: not measured ({judged} judged arms, {diffs.MIN_ARMS_FOR_SHIFT} "
                       "needed); each arm is judged against no change")
        else:
            shift, against = found, " than the machine's shift"
            click.echo(f"\nmachine shift: {_pct((shift - 1) * 100)} (median change over {judged} judged "
                       "arms); each arm is judged against it")
    if fail_above is not None:
        bad = diffs.regressions(arms, fail_above, shift)
        if bad:
            names = ", ".join(f"{d.experiment} / {d.variant} {_pct(diffs.relative_pct(d.change_pct, shift))}"
                              for d in bad)
            click.echo(f"\naccel: error: significantly slower{against} by more than {fail_above:g} %: {names}",
                       err=True)
            raise SystemExit(1)
        click.echo(f"\nno arm is significantly slower{against} by more than {fail_above:g} %")


@click.command()
@click.argument("experiment_id")
@click.option("--results-dir", type=PathArg(), default=Path("results"), show_default=True,
              help="The results folder whose records (sub-folders too, except reference/) make the history.")
@click.option("--metric", default="throughput_samples_per_s", show_default=True,
              help="The record metric to follow (e.g. step_time_ms_median, peak_rss_mib).")
@click.option("--variant", "variants", multiple=True, help="Only these arms (repeatable; default all).")
@click.option("--rebuild", is_flag=True, help="Make the history store again from the JSON-lines records first.")
def history(experiment_id: str, results_dir: Path, metric: str, variants: tuple[str, ...], rebuild: bool) -> None:
    """A metric over every stored run of one experiment, one line per run and arm, with the change points
    ruptures finds (more than run-to-run noise) and what changed in the environment there."""
    from pipelines.core.record import history as store
    from pipelines.core.config import experiments
    from pipelines.core.stats import changes

    experiments.get(experiment_id)
    if not results_dir.is_dir():
        raise ConfigError(f"--results-dir {results_dir} does not exist; run an experiment first "
                          f"(accel run {experiment_id}) or pass the folder that holds its records")
    skipped = (store.rebuild if rebuild else store.sync)(results_dir)
    for line in skipped:
        click.echo(f"accel history: skipped {line}", err=True)
    by_arm = changes.series(store.repeats(results_dir, experiment_id), metric)
    by_arm = {arm: points for arm, points in by_arm.items() if not variants or arm[0] in variants}
    if not by_arm:
        raise ConfigError(f"no ok records of {experiment_id} with metric {metric} in {results_dir}; run it first "
                          f"(accel run {experiment_id}) or choose another --metric")
    runs = len({p.run_id for points in by_arm.values() for p in points})
    click.echo(f"{experiment_id}: {metric} over {runs} run(s), {len(by_arm)} arm(s) "
               f"(store: {store.store_path(results_dir)})")
    for (variant, scale), points in sorted(by_arm.items()):
        found = _change_points([p.value for p in points])
        at = {c.index: c for c in found}
        click.echo(f"\n{variant} ({scale})")
        lines = []
        for i, p in enumerate(points):
            mark = ""
            if i in at:
                c = at[i]
                moved = [f"{k} {points[i - 1].fingerprint.get(k)} -> {p.fingerprint.get(k)}"
                         for k in ("torch", "cpu", "host", "threads", "openmp", "git", "image")
                         if points[i - 1].fingerprint.get(k) != p.fingerprint.get(k)]
                mark = f"<- change {_pct(c.percent)} ({c.before:.4g} -> {c.after:.4g})" + \
                       (f"; {', '.join(moved)}" if moved else "")
            lines.append([p.run_id, f"{p.value:.4g}", str(p.repeats), "noisy" if p.noisy else "",
                          str(p.fingerprint.get("torch") or ""), str(p.fingerprint.get("git") or ""), mark])
        click.echo(_columns(["run", metric, "n", "machine", "torch", "git", ""], lines))
        if len(points) < 2 * changes.MIN_SEGMENT:
            click.echo(f"(change points need at least {2 * changes.MIN_SEGMENT} runs)")
        elif not found:
            click.echo("no change point: every move is within run-to-run noise")


def _change_points(values: list[float]):
    import importlib.util

    from pipelines.core.errors import NotRunnable
    from pipelines.core.stats import changes

    if importlib.util.find_spec("ruptures") is None:
        raise NotRunnable("accel history needs ruptures for its change points; make venv installs it "
                          "(pip install -e '.[history]')")
    return changes.change_points(values)
