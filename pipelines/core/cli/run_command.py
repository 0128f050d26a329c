"""`accel run ID`, and what run, launch, compare and preflight share: the run options (parsed by this command
alone: click's make_context of `run`), the plans from them (plan_from_params, build_plan, plan_maker), the plan's text,
a comparison at bench scale (bench_rounds, measure_comparison: harness/comparison.py orchestrates it) and
the verdict a run ends with (finish). The other command modules import this one; it imports none of them."""

from __future__ import annotations

import os

import click

from pipelines.core.cli.args import (PathArg, PercentArg, RepeatsArg, allocator_option, complete_variant,
                                     experiment_argument, fail, share_option)
from pipelines.core.config import experiments
from pipelines.core.config.runconfig import DATASETS, DEVICES, SCALES
from pipelines.core.errors import ConfigError


def _key_values(values: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for item in values:
        if "=" not in item:
            raise ConfigError(f"option {item!r} is not KEY=VALUE (e.g. -o bias=false)")
        key, value = item.split("=", 1)
        out[key.strip()] = value
    return out


@click.command()
@experiment_argument
@click.option("--scale", type=click.Choice(SCALES), default="bench", show_default=True,
              help="smoke: a few steps (tests); bench: 5 warm-up steps, then 12 blocks of about 0.5 s per arm and "
                   "process, rounds auto (minutes); book: the book's epochs and settings, full test pass (tens of "
                   "minutes to hours).")
@click.option("--variant", "variants", multiple=True, shell_complete=complete_variant,
              help="Run only this variant (repeatable; `accel show ID` lists them).")
@click.option("--rounds", type=RepeatsArg(),
              help="Bench and book scale: rounds of processes, every arm's process once a round; auto (bench's "
                   "default): rounds until every arm's 95 % interval is within 5 % (from the 4th round), or "
                   "--budget-s is spent (at least 3 rounds).")
@click.option("--repeats", type=RepeatsArg(),
              help="Smoke and book scale: repeats of every arm in this process, interleaved (auto: ABBA repeats "
                   "until precise enough); their verdict cannot judge process-to-process noise.")
@click.option("--budget-s", type=float, help="With --rounds auto (or --repeats auto): seconds for the whole run; "
                                             "no round starts that would overrun it (default: 300).")
@click.option("--halfwidth", type=PercentArg(), help="With --rounds auto (or --repeats auto): the 95 % interval's "
                                                   "half-width, in percent of the ratio, that is precise enough "
                                                   "(default 5).")
@click.option("--steps", type=int, help="Timed steps after warm-up (instead of whole epochs); at bench scale, "
                                        "per arm and process, split over its blocks.")
@click.option("--blocks", type=int, help="Bench scale: blocks per arm in each process, one a cycle (default 12).")
@click.option("--block-s", type=float, help="Bench scale: seconds a block aims at, its steps sized from the "
                                            "arm's warm-up (default 0.5; --steps fixes the steps instead).")
@allocator_option("Bench scale: ")
@share_option("Bench scale: ")
@click.option("--epochs", type=int, help="Epochs to train at book scale (default: the catalog's).")
@click.option("--warmup-steps", type=int, help="Steps timed apart before the measured ones (default: the scale's).")
@click.option("--batch-size", type=int, help="Samples per step and rank (default: the catalog's).")
@click.option("--lr", type=float, help="Learning rate (default: the catalog's, as the original code ran).")
@click.option("--device", type=str, help=f"{' or '.join(DEVICES)} (default: the catalog's).")
@click.option("--model", type=str, help="Override the model, e.g. vit_tiny to smoke-test a ViT entry on CPU.")
@click.option("--dataset", type=str,
              help=f"Override the dataset ({', '.join(DATASETS)}); synthetic for pure throughput.")
@click.option("--data-root", type=PathArg(),
              help="Where datasets are (default: data; `accel data generate|fetch` fills it).")
@click.option("--results-dir", type=PathArg(), help="Where the result file goes (default: results).")
@click.option("--weights", type=PathArg(),
              help="Local state_dict file, or a save_pretrained folder for distilbert (never downloaded).")
@click.option("--tokenizer", type=PathArg(),
              help="Local tokenizer folder for text data (default: train a WordPiece tokenizer on the data).")
@click.option("--seq-len", type=int, help="Tokens per text for token models (default: the model's).")
@click.option("--seed", type=int, help="Base random seed; repeat r uses seed + r (default: 0).")
@click.option("--num-workers", type=int, help="DataLoader worker processes (default: the catalog's).")
@click.option("-o", "--option", "option_items", multiple=True, metavar="KEY=VALUE",
              help="Pipeline option, e.g. -o bias=false (see `accel show ID`).")
@click.option("-q", "--quiet", is_flag=True, help="No progress bars (they are off anyway without a terminal or "
                                                   "under CI).")
@click.option("-v", "--verbose", is_flag=True, help="One line per finished epoch with its loss.")
@click.option("--no-baseline", is_flag=True,
              help="Measure this entry alone, even when its baseline is another entry (no ratio then).")
@click.option("--dry-run", is_flag=True, help="Print the plan (arms, baseline, scale, repeats, processes, "
                                              "estimate) and exit 0; nothing runs, nothing is written.")
@click.option("--json", "as_json", is_flag=True,
              help="End with the verdict as one JSON object on stdout (plan and progress on stderr).")
def run(experiment_id: str, scale: str, variants: tuple[str, ...], option_items: tuple[str, ...],
        quiet: bool, verbose: bool, no_baseline: bool, dry_run: bool, as_json: bool, halfwidth: float | None,
        allocator: str, share: str, **overrides) -> None:
    """Run one experiment by id, after a plan, ending with its verdict; writes results/<id>--<run id>.jsonl
    after every finished repeat. At bench scale, rounds of processes started through the launchers: arms
    that can share a process run in one, interleaved in blocks, and an entry's baseline entry comes along
    (as `accel compare BASELINE ID`); --no-baseline measures the entry alone. Book scale with --rounds runs
    rounds of processes the same way; smoke scale, and book scale without --rounds, run in this process."""
    from pipelines.core.config.runconfig import check_environment

    check_environment()  # before torch loads: libgomp would print its own warning line first
    params = click.get_current_context().params
    plan = plan_from_params(params)  # the one reading of --rounds / --repeats for every plan (check_counts)
    # after the plan: a mistyped id or arm is refused before torch loads (seconds)
    from pipelines.core.distributed import placement
    from pipelines.core.harness import preview, runner
    from pipelines.core.train import progress

    first = plan.configs[0]
    # one rank of a launcher started by hand (launch/torchrun.sh run ID): the launcher's ranks run the plan
    launched = placement.placement().launched
    if in_rounds(first) and not launched:
        bench_rounds(plan, params, no_baseline, dry_run, as_json)
        return
    if launched and in_rounds(first):  # the launcher's ranks are the one process: its rounds are repeats there
        plan = in_one_process(plan)
        first = plan.configs[0]
    choice = preview.baseline_choice(plan.experiment, plan.configs, first.scale, first.results_dir,
                                     refused=no_baseline or launched)
    if dry_run:
        click.echo(single_plan_text(plan, choice, launcher=None))
        return
    quiet_foreign_warnings(first.device)
    announce = None if launched else (lambda: click.echo(single_plan_text(plan, choice, launcher=None), err=True))
    outcome = runner.execute_plan(plan, progress.settings(quiet or as_json, verbose), announce=announce)
    finish([plan], [outcome], as_json)


def finish(plans, outcomes, as_json: bool) -> None:
    """What a run ends with: its repeats' lines and verdict (or the verdict as JSON), once per run: a distributed
    run's rank 0 (the rank that wrote the records) says it."""
    if not any(o.path for o in outcomes) and outcomes[0].launched:
        return
    from pipelines.core.report.views import print_repeats
    from pipelines.core.stats import verdict

    ids = [p.experiment.id for p in plans]
    records = [r for outcome in outcomes for r in outcome.records]
    paths = [o.path for o in outcomes if o.path]
    results_dir = plans[0].configs[0].results_dir
    if as_json:
        click.echo(verdict.as_json(records, ids, paths, results_dir))
        return
    print_repeats(records, None)
    click.echo(verdict.text(records, ids, paths, results_dir))


def bench_rounds(plan, params: dict, no_baseline: bool, dry_run: bool, as_json: bool, command: str = "run") -> None:
    """`accel run` / `accel launch` of an entry at bench scale: its arms (and its baseline entry's) measured in
    rounds of processes (harness/comparison.py), ending with the verdict."""
    from pipelines.core.harness import comparison, preview
    from pipelines.core.harness.launch import refuse

    entry, first = plan.experiment, plan.configs[0]
    refuse(entry, params, os.environ, command)  # what its launcher cannot start here (a GPU, oneCCL, MPI)
    choice = preview.baseline_choice(entry, plan.configs, first.scale, first.results_dir, refused=no_baseline)
    requests = [*([(choice.bring, choice.variants)] if choice.bring else []),
                (entry.id, tuple(cfg.variant for cfg in plan.configs))]
    # the baseline's arms are here for this entry's ratios: shown as its baseline, not judged on their own
    serving = {(choice.bring, arm): f"baseline of {entry.id}" for arm in choice.variants} if choice.bring else {}
    title = f"{entry.id} with its baseline {choice.bring}" if choice.bring else entry.id
    planned = comparison.plan_comparison(
        requests, plan_maker(params, known=plan), dict(os.environ), first.results_dir,
        None if first.auto else first.rounds, first.budget_s or comparison.NO_BUDGET_S,
        params.get("halfwidth"), allocator_choice=params.get("allocator") or "auto",
        share=params.get("share") or "auto", title=title, notes=[choice.note], serving=serving)
    measure_comparison(planned, params, dry_run, as_json, [r[0] for r in requests], serving)


def measure_comparison(planned, params: dict, dry_run: bool, as_json: bool, ids, serving=None) -> None:
    """A planned comparison shown (--dry-run: only shown), refused or prepared, measured, and ended with the
    verdict; a failed round or a signal keeps the finished rounds' records and says so in one line."""
    from pipelines.core.harness import comparison, rounds
    from pipelines.core.stats import verdict
    from pipelines.core.train import progress
    from pipelines.core.train.interrupt import Interrupted

    if dry_run:  # the plan, and a refused one still ends as the run would: one line, exit 2
        click.echo(planned.text)
        if planned.refusal:
            raise ConfigError(planned.refusal)
        return
    comparison.prepare(planned, params, dict(os.environ))
    click.echo(planned.text, err=True)
    try:
        live = progress.settings(bool(params.get("quiet")) or as_json).bars  # the live line: a terminal only
        measured = comparison.measure(planned, echo=lambda m: click.echo(m, err=True), live=live)
    except rounds.RoundFailed as failed:  # a refusal keeps its code (2: a mistake, 3: cannot run here)
        fail(str(failed), rounds.EXIT_INTERRUPTED if failed.summary.stopped_by == "interrupted" else
             failed.code if failed.code in (2, 3) else 1)
    except Interrupted as stop:  # the round's process got the signal too, and wrote its interrupted records
        kept = stop.measured.records if hasattr(stop, "measured") else []
        finished = sum(r["status"] == "ok" for r in kept)
        raise Interrupted(stop.signum, planned.results_dir if kept else None, finished,
                          any(r["status"] == "interrupted" for r in kept)) from None
    click.echo(rounds.summary_line(measured.summary), err=True)
    click.echo(verdict.as_json(measured.records, ids, measured.paths, planned.results_dir, serving) if as_json else
               verdict.text(measured.records, ids, measured.paths, planned.results_dir,
                            method=f"allocator {planned.allocator.text}", serving=serving))


def plan_maker(params: dict, known=None):
    """`make_plan(experiment_id, variants)` for a comparison: every entry's plan from this command's parsed
    options (one parse; each plan built once; `known`: the plan this command built already)."""
    def make_plan(experiment_id: str, variants: tuple[str, ...]):
        if known is not None and known.experiment.id == experiment_id and \
                tuple(c.variant for c in known.configs) == tuple(variants):
            return known
        return plan_from_params({**params, "experiment_id": experiment_id, "variants": tuple(variants)})
    return make_plan


# `accel run` options that shape the command's output or the comparison's rounds, not a plan
NOT_PLANNED = {"no_baseline", "dry_run", "as_json", "quiet", "verbose", "halfwidth", "allocator", "share"}


def quiet_foreign_warnings(device: str) -> None:
    """On a machine without CUDA, torch.compile's import of cpp_extension warns "No CUDA runtime is found"
    once per process, in the middle of the progress bars; the plan already says the run uses the CPU."""
    import logging

    import torch

    if device == "cpu" and not torch.cuda.is_available():
        logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)


def single_plan_text(plan, choice, launcher: str | None, env=None) -> str:
    """The plan of one entry run by one command (this process, or the launcher it is about to start)."""
    import torch

    from pipelines.core.harness import preview
    from pipelines.core.harness.estimate import estimate

    entry, first = plan.experiment, plan.configs[0]
    layouts = [preview.layout(entry, cfg, launcher, env, in_process_threads=torch.get_num_threads())
               for cfg in plan.configs]
    repeats = None if first.auto else first.repeats
    how = f"{entry.id} under launch/{launcher}.sh" if launcher and launcher != "local" else entry.id
    return preview.plan_text(how, [(cfg, preview.against_text(entry, cfg.variant)) for cfg in plan.configs], layouts,
                         preview.repeat_rule(first), estimate(plan.configs, first.results_dir, repeats,
                                                                      first.budget_s if repeats is None else None,
                                                                      layouts[0].ranks * layouts[0].nodes),
                         first.results_dir, [choice.note])


def in_rounds(first) -> bool:
    """Whether a command measures in rounds of processes: bench scale, and book scale with --rounds."""
    return first.rounds is not None


def in_one_process(plan):
    """The plan with its rounds run as repeats of this process (`auto` stays the rule's): for one rank of a
    launcher started by hand, whose ranks are the only process the command has."""
    import dataclasses

    return dataclasses.replace(plan, configs=[dataclasses.replace(cfg, repeats=cfg.rounds, rounds=None)
                                              for cfg in plan.configs])


def check_counts(scale: str, rounds, repeats) -> None:
    """`--rounds` counts rounds of processes (bench and book scale), `--repeats` repeats inside this process
    (smoke and book scale): one of them, on a scale that has it (RunConfig checks their bounds)."""
    if rounds is not None and repeats is not None:
        raise ConfigError(f"--rounds {rounds} and --repeats {repeats} both given: --rounds counts rounds of processes, "
                          "--repeats repeats inside one process; pass one")
    if scale == "bench" and repeats is not None:
        raise ConfigError(f"--repeats {repeats} counts repeats inside one process; at bench scale every round is a "
                          f"process of its own: pass --rounds {repeats}")
    if scale == "smoke" and rounds is not None:
        raise ConfigError(f"--rounds {rounds} runs rounds of processes, and smoke scale runs in this process: pass "
                          f"--repeats {rounds}, or --scale bench")


def plan_from_params(parsed: dict):
    """A runner plan from `accel run`'s parsed parameters (the options that only shape the command's output
    or the comparison's rounds are not the plan's)."""
    params = dict(parsed)
    for shown in NOT_PLANNED:
        params.pop(shown, None)
    check_counts(params["scale"], params.get("rounds"), params.get("repeats"))
    return build_plan(params.pop("experiment_id"), params.pop("scale"), params.pop("variants"),
                      params.pop("option_items"), params)


def build_plan(experiment_id: str, scale: str, variants: tuple[str, ...], option_items: tuple[str, ...], overrides):
    from pipelines.core.harness import plan as planning

    return planning.plan(experiments.get(experiment_id), scale, overrides, _key_values(option_items), variants)
