"""`accel compare ID[@ARM]...`: experiments measured together in rounds of processes (harness/comparison.py),
every entry's plan built once from the run options, parsed once by run_command.py's `run`."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import click

from pipelines.core.cli.args import PathArg, PercentArg, allocator_option, share_option
from pipelines.core.cli.run_command import measure_comparison, plan_maker, run
from pipelines.core.config import experiments
from pipelines.core.errors import ConfigError


@click.command(context_settings={"ignore_unknown_options": True})
@click.argument("items", nargs=-1, required=True, type=click.UNPROCESSED, metavar="ID[@ARM]... [RUN OPTIONS]")
@click.option("--rounds", default="auto", show_default=True,
              help="Rounds of one process per slot, or auto: until every arm's 95 % interval is within "
                   "--halfwidth, or the budget runs out.")
@click.option("--budget-s", type=float, default=300, show_default=True,
              help="Time budget in seconds; no round starts that would overrun it.")
@click.option("--halfwidth", type=PercentArg(), default=5, show_default=True,
              help="With --rounds auto: the 95 % interval's half-width, in percent of the ratio, that is precise "
                   "enough.")
@allocator_option("")
@share_option("")
@click.option("--results-dir", type=PathArg(), default=Path("results"), show_default=True,
              help="Folder for every round's records; the verdict counts this comparison's records only.")
@click.option("--dry-run", is_flag=True, help="Print the plan and exit 0; nothing runs, nothing is written.")
@click.option("--json", "as_json", is_flag=True, help="End with the verdict as one JSON object on stdout.")
def compare(items: tuple[str, ...], rounds: str, budget_s: float, halfwidth: float, allocator: str, share: str,
            results_dir: Path, dry_run: bool, as_json: bool) -> None:
    """Experiments measured together in rounds of processes: arms that can share a process run in one,
    interleaved in blocks; the others in processes of their own, in ABBA order. Ends with the verdict.

    ID@ARM measures one arm of an entry. Options after the ids (--scale, --steps, --data-root ...) go to
    every process."""
    from pipelines.core.config.runconfig import check_environment

    check_environment()  # before torch loads: libgomp would warn first
    named = [item for item in itertools.takewhile(lambda a: not a.startswith("-"), items)]
    passthrough = list(items[len(named):])
    if len(named) < 2:
        raise ConfigError("compare needs two or more experiment ids (e.g. accel compare BASELINE-ID "
                          "VARIANT-ID --results-dir results/ladder; `accel list` shows the ids)")
    requests: dict[str, list[str]] = {}
    for item in named:
        experiment_id, _, arm = item.partition("@")
        entry = experiments.get(experiment_id)
        if arm and entry.arm(arm) is None:
            raise ConfigError(entry.unknown_arm(arm))
        requests.setdefault(experiment_id, []).append(arm)
    if twice := sorted(i for i in named if named.count(i) > 1):
        raise ConfigError(f"compare names {', '.join(dict.fromkeys(twice))} more than once; an experiment compared "
                          "with itself measures nothing (accel compare BASELINE-ID VARIANT-ID)")
    if any(a in ("--repeats", "--results-dir", "--no-baseline", "--variant") or
           a.startswith(("--repeats=", "--results-dir=", "--variant=")) for a in passthrough):
        raise ConfigError("compare sets --repeats 1 per round, --results-dir and the arms itself; use --rounds, "
                          "and ID@ARM for one arm of an entry")
    asked = [(experiment_id, () if "" in arms else tuple(arms)) for experiment_id, arms in requests.items()]
    from pipelines.core.harness import comparison, rounds as rounding  # torch: after the ids are checked

    params = run.make_context("run", [named[0].partition("@")[0], *passthrough]).params  # parsed once
    params.update(results_dir=results_dir, allocator=allocator, share=share)
    planned = comparison.plan_comparison(asked, plan_maker(params), dict(os.environ), results_dir,
                                         rounding.parse_rounds(rounds), budget_s, halfwidth, allocator_choice=allocator,
                                         share=share, title=" vs ".join(named))
    measure_comparison(planned, params, dry_run, as_json, [experiment_id for experiment_id, _ in asked])
