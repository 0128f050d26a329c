"""`accel run ID`, and what run, launch, compare and preflight share: the run options (parsed by this command
alone: `run.make_context`), the plan from them (plan_from_args, build_plan), the plan's text, and the options
passed on to the processes of a comparison's rounds (bench_rounds, cli/rounds.py).
The other command modules import this one; it imports none of them."""

from __future__ import annotations

import os

import click

from pipelines.core.cli.args import (PLAN_SHOWN_ENV, PathArg, RepeatsArg, allocator_option, complete_variant,
                                     experiment_argument, share_option)
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
              help="smoke: a few steps (tests); bench: 5 warm-up + 40 timed steps, repeats auto (minutes); "
                   "book: the book's epochs and settings, full test pass (tens of minutes to hours).")
@click.option("--variant", "variants", multiple=True, shell_complete=complete_variant,
              help="Run only this variant (repeatable; `accel show ID` lists them).")
@click.option("--repeats", type=RepeatsArg(),
              help="Repeats of every variant, interleaved; auto (bench's default): rounds until every arm's 95 % "
                   "interval is within 5 %, or --budget-s is spent (at least 3 rounds).")
@click.option("--budget-s", type=float, help="With --repeats auto: seconds for the whole run; no round starts "
                                             "that would overrun it (default: 300).")
@click.option("--halfwidth", type=float, help="With --repeats auto: the relative 95 % interval half-width that is "
                                              "precise enough (default 0.05).")
@click.option("--steps", type=int, help="Timed steps after warm-up (instead of whole epochs); at bench scale, "
                                        "per arm and process, split over its blocks.")
@click.option("--blocks", type=int, help="Bench scale: block rounds per arm in each process (default 12).")
@click.option("--block-s", type=float, help="Bench scale: seconds a block aims at, its steps sized from the "
                                            "arm's warm-up (default 0.5; --steps fixes the steps instead).")
@allocator_option("Bench scale: ")
@share_option("Bench scale: ")
@click.option("--with", "with_arms", multiple=True, hidden=True, metavar="ID@ARM",
              help="A round's process: also measure this arm of another entry, interleaved with this one's.")
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
        allocator: str, share: str, with_arms: tuple[str, ...], **overrides) -> None:
    """Run one experiment by id, after a plan, ending with its verdict; writes results/<id>--<run id>.jsonl
    after every finished repeat. At bench scale, rounds of processes started through the launchers: arms
    that can share a process run in one, interleaved in blocks, and an entry's baseline entry comes along
    (as `accel compare BASELINE ID`); --no-baseline measures the entry alone. Smoke and book scale run here."""
    from pipelines.core.config.runconfig import check_environment

    check_environment()  # before torch loads: libgomp would print its own warning line first
    from pipelines.core.distributed import ranks
    from pipelines.core.harness import preview, runner
    from pipelines.core.harness.execute import ALTERNATION_ENV
    from pipelines.core.harness.pipeline import TrainingPipeline
    from pipelines.core.train import progress
    from pipelines.core.report.summary import print_run_summary

    plan = build_plan(experiment_id, scale, variants, option_items, overrides)
    first = plan.configs[0]
    launched = ranks.placement().launched  # one rank of a launcher's run: the launcher showed the plan
    in_round = bool(os.environ.get(ALTERNATION_ENV))  # one process of a comparison's round
    if first.scale == "bench" and not launched and not in_round:
        bench_rounds(plan, click.get_current_context(), no_baseline, dry_run, as_json)
        return
    choice = preview.baseline_choice(plan.experiment, plan.configs, first.scale, first.results_dir,
                                     refused=no_baseline or launched or in_round)
    if dry_run:
        click.echo(single_plan_text(plan, choice, launcher=None))
        return
    # `accel launch` and a comparison show the plan before they start this process; a rank shows none
    show_plan = not os.environ.get(PLAN_SHOWN_ENV) and not launched
    quiet_foreign_warnings(first.device)
    announce = (lambda: click.echo(single_plan_text(plan, choice, launcher=None), err=True)) if show_plan else None
    plans = [plan, *(plan_from_args(arm.partition("@")[0], _with_args(arm)) for arm in with_arms)]
    if in_round and not launched and first.scale == "bench" and all(
            isinstance(p.pipeline, TrainingPipeline) for p in plans):
        outcomes = runner.run_interleaved(plans, announce)
    else:  # one plan after the other (a rank runs its own plan only: --with is a round's single process)
        shown = progress.settings(quiet or as_json, verbose)
        outcomes = [runner.execute_plan(p, shown, announce=announce if i == 0 else None)
                    for i, p in enumerate(plans if not launched else plans[:1])]
    ids = [p.experiment.id for p in plans]
    records = [r for outcome in outcomes for r in outcome.records]
    if any(o.path for o in outcomes) or not outcomes[0].launched:  # one summary per run: rank 0 of a distributed one
        from pipelines.core.stats import verdict

        paths = [o.path for o in outcomes if o.path]
        if as_json:
            click.echo(verdict.as_json(records, ids, paths, first.results_dir))
            return
        print_run_summary(records, None)
        click.echo(verdict.text(records, ids, paths, first.results_dir))


def _with_args(arm: str) -> list[str]:
    """`--with ID@ARM`: the run arguments of that arm, the rest of this run's options."""
    ctx = click.get_current_context()
    variant = arm.partition("@")[2]
    return [*_passthrough(ctx, per_slot=True), *(["--variant", variant] if variant else []),
            "--results-dir", str(ctx.params["results_dir"] or "results")]


def bench_rounds(plan, ctx: click.Context, no_baseline: bool, dry_run: bool, as_json: bool,
                 command: str = "run") -> None:
    """`accel run` / `accel launch` of an entry at bench scale: its arms (and its baseline entry's) measured in
    rounds of processes (cli/rounds.py), ending with the verdict."""
    from pipelines.core.cli import rounds
    from pipelines.core.harness import preview
    from pipelines.core.harness.launch import refuse

    entry, first = plan.experiment, plan.configs[0]
    refuse(entry, ctx.params, os.environ, command)  # what its launcher cannot start here (a GPU, oneCCL, MPI)
    choice = preview.baseline_choice(entry, plan.configs, first.scale, first.results_dir, refused=no_baseline)
    requests = [*([(choice.bring, choice.variants)] if choice.bring else []),
                (entry.id, tuple(cfg.variant for cfg in plan.configs))]
    # the baseline's arms are here for this entry's ratios: shown as its baseline, not judged on their own
    serving = {(choice.bring, arm): f"baseline of {entry.id}" for arm in choice.variants} if choice.bring else {}
    title = f"{entry.id} with its baseline {choice.bring}" if choice.bring else entry.id
    params = ctx.params
    rounds.measure(requests, plan_from_args, _passthrough(ctx, per_slot=True), first.results_dir,
                   None if first.repeats_auto else first.repeats, first.budget_s or rounds.NO_BUDGET_S,
                   params.get("halfwidth"), allocator_choice=params.get("allocator") or "auto",
                   share=params.get("share") or "auto", dry_run=dry_run, as_json=as_json, title=title,
                   notes=[choice.note], serving=serving)


NOT_PASSED_ON = {"experiment_id", "repeats", "results_dir", "budget_s", "no_baseline", "dry_run", "as_json",
                 "quiet", "verbose", "halfwidth", "allocator", "share", "with_arms"}
PER_SLOT = {"variants"}  # a round's processes each get their own arms


def _passthrough(ctx: click.Context, per_slot: bool = False) -> list[str]:
    """The run options the user gave, as arguments again, for the processes of the rounds (repeats, results
    folder and budget become the rounds' own rule; `per_slot`: the arms too, which each process names)."""
    argv = []
    for param in ctx.command.params:
        if not isinstance(param, click.Option) or param.name in NOT_PASSED_ON or (per_slot and param.name in PER_SLOT):
            continue
        if ctx.get_parameter_source(param.name) not in (click.core.ParameterSource.COMMANDLINE,
                                                        click.core.ParameterSource.ENVIRONMENT):
            continue
        value, flag = ctx.params[param.name], param.opts[-1] if param.opts[-1].startswith("--") else param.opts[0]
        if param.is_flag:
            argv += [flag] if value else []
        elif param.multiple:
            for item in value:
                argv += [flag, str(item)]
        elif value is not None:
            argv += [flag, str(value)]
    return argv


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
    rounds = None if first.repeats_auto else first.repeats
    how = f"{entry.id} under launch/{launcher}.sh" if launcher and launcher != "local" else entry.id
    return preview.block(how, [(cfg, preview.against_text(entry, cfg.variant)) for cfg in plan.configs], layouts,
                         preview.repeat_rule(first), estimate(plan.configs, first.results_dir, rounds,
                                                                      first.budget_s if rounds is None else None,
                                                                      layouts[0].ranks * layouts[0].nodes),
                         first.results_dir, [choice.note])


def plan_from_args(experiment_id: str, args: list[str]):
    """A runner plan from `accel run` arguments (what an alternation's processes will receive)."""
    return plan_from_params(run.make_context("run", [experiment_id, *args]).params)


def plan_from_params(parsed: dict):
    """A runner plan from `accel run`'s parsed parameters (the options that only shape the command's output
    or the comparison's rounds are not the plan's)."""
    params = dict(parsed)
    for shown in NOT_PASSED_ON - {"experiment_id", "repeats", "results_dir", "budget_s"}:
        params.pop(shown)
    return build_plan(params.pop("experiment_id"), params.pop("scale"), params.pop("variants"),
                      params.pop("option_items"), params)


def build_plan(experiment_id: str, scale: str, variants: tuple[str, ...], option_items: tuple[str, ...], overrides):
    from pipelines.core.harness import plan as planning

    return planning.plan(experiments.get(experiment_id), scale, overrides, _key_values(option_items), variants)
