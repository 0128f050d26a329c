"""`accel`: list, show, run, launch, report, compare (data and doctor: data_commands.py; diff and history:
notebook.py). Shared options become one RunConfig via the runner.

Over 300 lines on purpose: run, launch, compare and preflight share the run options, the plan text and the
alternation helpers below; split by command, each module would import the others' private helpers.

User mistakes print one line (`accel: error: ...`) and exit 2; an experiment that cannot run on this
machine (planned, no GPU, wrong OpenMP runtime) exits 3; a genuine failure keeps its traceback. Ctrl-C
and SIGTERM keep what finished and exit 130 / 143 with one `accel: interrupted ...` line.
Experiment ids complete in the shell: `eval "$(_ACCEL_COMPLETE=bash_source accel)"` (zsh_source, fish_source).

Commands import what they need inside their functions on purpose: torch, torchvision and matplotlib take
seconds to load, and `accel list`, `show`, `--help` and shell completion must answer at once.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import sys
from pathlib import Path

import click
from click.shell_completion import CompletionItem

from pipelines.core.record import version
from pipelines.core.config import experiments
from pipelines.core.cli.args import EXIT_NOT_RUNNABLE, EXIT_USAGE, REPO, PathArg, RepeatsArg, fail as _fail
from pipelines.core.cli.data_commands import data, doctor
from pipelines.core.cli.notebook import diff, history
from pipelines.core.config.runconfig import DATASETS, DEVICES, SCALES
from pipelines.core.errors import ConfigError, DistError, NotRunnable, WriteError
from pipelines.core.train.interrupt import Interrupted, signals_raise


def _show_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(version.text())
        ctx.exit()


def _complete_id(_ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Shell completion of experiment ids (the catalog imports without torch: instant)."""
    return [CompletionItem(e.id, help=e.compares) for e in experiments.all_experiments().values()
            if e.id.startswith(incomplete)]


def _complete_variant(ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[CompletionItem]:
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


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_show_version,
              help="Print the package version and git commit, then exit.")
def cli() -> None:
    """Reproducible PyTorch training-acceleration experiments, one catalog entry per published figure.

    Start with `accel list`, then `accel show ID` and `accel run ID --scale smoke`.
    """


def catalog_row(e: experiments.Experiment) -> dict[str, str]:
    """One experiment as `accel list` shows it (the table's columns, the --json objects' keys)."""
    from pipelines.core.report.summary import published_ratio_text

    return {"id": e.id, "status": e.status, "target": e.target, "launcher": e.launcher,
            "reproduces": e.reproduces, "published_ratio": published_ratio_text(e), "compares": e.compares}


LIST_WIDTH = 100  # `accel list` fits this many columns (or the terminal, when narrower)


@cli.command("list")
@click.option("--status", type=click.Choice(experiments.STATUSES), help="Only ready or only planned entries.")
@click.option("--markdown", is_flag=True, help="The map table of docs/experiments.md.")
@click.option("--json", "as_json", is_flag=True, help="One JSON array of objects, for scripts.")
@click.option("--wide", is_flag=True, help="Every column (status, source), however wide.")
def list_cmd(status: str | None, markdown: bool, as_json: bool, wide: bool) -> None:
    """Every experiment id: container target, launcher, published ratio, what it compares (`accel show ID`
    and `--wide` for the rest)."""
    import shutil

    from tabulate import tabulate

    from pipelines.core.report.summary import map_markdown

    if markdown:
        click.echo(map_markdown())
        return
    rows = [catalog_row(e) for e in experiments.all_experiments().values() if status in (None, e.status)]
    if as_json:
        click.echo(json.dumps(rows, indent=1))
        return
    if wide:
        headers = {key: key.replace("_", " ") for key in rows[0]} if rows else "keys"
        click.echo(tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True))
        return
    width = min(LIST_WIDTH, shutil.get_terminal_size((LIST_WIDTH, 24)).columns)
    narrow = [{"id": r["id"], "target": r["target"], "launcher": r["launcher"],
               "published": _clip(r["published_ratio"], 14), "compares": r["compares"]} for r in rows]
    fixed = max(map(len, tabulate([{k: v for k, v in r.items() if k != "compares"} for r in narrow],
                                   headers="keys", tablefmt="simple", disable_numparse=True).splitlines())) + 2
    for row in narrow:
        row["compares"] = _clip(row["compares"], max(12, width - fixed))
    click.echo(tabulate(narrow, headers="keys", tablefmt="simple", disable_numparse=True))


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 3].rstrip() + "..."


def _key_values(values: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for item in values:
        if "=" not in item:
            raise ConfigError(f"option {item!r} is not KEY=VALUE (e.g. -o bias=false)")
        key, value = item.split("=", 1)
        out[key.strip()] = value
    return out


@cli.command()
@experiment_argument
@click.option("--scale", type=click.Choice(SCALES), default="bench", show_default=True,
              help="smoke: a few steps (tests); bench: 5 warm-up + 40 timed steps, repeats auto (minutes); "
                   "book: the book's epochs and settings, full test pass (tens of minutes to hours).")
@click.option("--variant", "variants", multiple=True, shell_complete=_complete_variant,
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
@click.option("--allocator", type=click.Choice(["auto", "pinned", "default"]), default="auto", show_default=True,
              help="Bench scale: pinned glibc thresholds for every arm (auto, unless an arm compares allocators) "
                   "or glibc's default, as the sources ran.")
@click.option("--share", type=click.Choice(["auto", "none"]), default="auto", show_default=True,
              help="Bench scale: arms with one process environment share a process, interleaved in blocks "
                   "(auto), or every arm gets its own process each round (none).")
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
    from pipelines.core.run import preview, runner
    from pipelines.core.run.execute import ALTERNATION_ENV
    from pipelines.core.run.pipeline import TrainingPipeline
    from pipelines.core.train import progress
    from pipelines.core.report.summary import print_run_summary

    plan = _plan(experiment_id, scale, variants, option_items, overrides)
    first = plan.configs[0]
    launched = ranks.placement().launched  # one rank of a launcher's run: the launcher showed the plan
    in_round = bool(os.environ.get(ALTERNATION_ENV))  # one process of a comparison's round
    if first.scale == "bench" and not launched and not in_round:
        _bench_rounds(plan, click.get_current_context(), no_baseline, dry_run, as_json)
        return
    choice = preview.baseline_choice(plan.experiment, plan.configs, first.scale, first.results_dir,
                                     refused=no_baseline or launched or in_round)
    given = os.environ.get(PLAN_ENV)  # the plan `accel launch` made, with its launcher's ranks and threads
    if dry_run:
        click.echo(given or _single_plan_text(plan, choice, launcher=None))
        return
    show_plan = not os.environ.get("ACCEL_PLAN_SHOWN") and bool(given or not launched)
    _quiet_foreign_warnings(first.device)
    announce = (lambda: click.echo(given or _single_plan_text(plan, choice, launcher=None), err=True)) \
        if show_plan else None  # a round's process: its comparison showed the plan
    plans = [plan, *(_plan_from_args(arm.partition("@")[0], _with_args(arm)) for arm in with_arms)]
    if in_round and not launched and first.scale == "bench" and all(
            isinstance(p.pipeline, TrainingPipeline) for p in plans):
        outcomes = runner.run_interleaved(plans, announce)
    else:  # one plan after the other (a rank runs its own plan only: --with is a round's single process)
        shown = progress.settings(quiet or as_json, verbose)
        outcomes = [runner.run(p, shown, announce=announce if i == 0 else None)
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


def _bench_rounds(plan, ctx: click.Context, no_baseline: bool, dry_run: bool, as_json: bool,
                  command: str = "run") -> None:
    """`accel run` / `accel launch` of an entry at bench scale: its arms (and its baseline entry's) measured in
    rounds of processes (cli/rounds.py), ending with the verdict."""
    from pipelines.core.cli import rounds
    from pipelines.core.run import preview
    from pipelines.core.run.launch import refuse

    entry, first = plan.experiment, plan.configs[0]
    refuse(entry, ctx.params, os.environ, command)  # what its launcher cannot start here (a GPU, oneCCL, MPI)
    choice = preview.baseline_choice(entry, plan.configs, first.scale, first.results_dir, refused=no_baseline)
    requests = [*([(choice.bring, choice.variants)] if choice.bring else []),
                (entry.id, tuple(cfg.variant for cfg in plan.configs))]
    # the baseline's arms are here for this entry's ratios: shown as its baseline, not judged on their own
    serving = {(choice.bring, arm): f"baseline of {entry.id}" for arm in choice.variants} if choice.bring else {}
    title = f"{entry.id} with its baseline {choice.bring}" if choice.bring else entry.id
    params = ctx.params
    rounds.measure(requests, _plan_from_args, _passthrough(ctx, per_slot=True), first.results_dir,
                   None if first.repeats_auto else first.repeats, first.budget_s or rounds.NO_BUDGET_S,
                   params.get("halfwidth"), allocator_choice=params.get("allocator") or "auto",
                   share=params.get("share") or "auto", dry_run=dry_run, as_json=as_json, title=title,
                   notes=[choice.note], serving=serving)


# `accel launch` hands its plan to the run it starts, which prints it (rank 0) once every refusal has passed:
# a mistake the launcher script or a rank's checks refuse stays one line, with no plan above it.
PLAN_ENV = "ACCEL_PLAN_TEXT"
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


def _quiet_foreign_warnings(device: str) -> None:
    """On a machine without CUDA, torch.compile's import of cpp_extension warns "No CUDA runtime is found"
    once per process, in the middle of the progress bars; the plan already says the run uses the CPU."""
    import logging

    import torch

    if device == "cpu" and not torch.cuda.is_available():
        logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)


def _device_note(configs) -> str:
    import torch

    if all(c.device == "cpu" for c in configs) and not torch.cuda.is_available():
        return "cpu (no CUDA GPU visible here)"
    return ", ".join(sorted({c.device for c in configs}))


def _single_plan_text(plan, choice, launcher: str | None, env=None) -> str:
    """The plan of one entry run by one command (this process, or the launcher it is about to start)."""
    import torch

    from pipelines.core.run import preview

    entry, first = plan.experiment, plan.configs[0]
    layouts = [preview.layout(entry, cfg, launcher, env, in_process_threads=torch.get_num_threads())
               for cfg in plan.configs]
    rounds = None if first.repeats_auto else first.repeats
    how = f"{entry.id} under launch/{launcher}.sh" if launcher and launcher != "local" else entry.id
    return preview.block(how, [(cfg, preview.against_text(entry, cfg.variant)) for cfg in plan.configs], layouts,
                         preview.repeat_rule(first), preview.estimate(plan.configs, first.results_dir, rounds,
                                                                      first.budget_s if rounds is None else None,
                                                                      layouts[0].ranks * layouts[0].nodes),
                         first.results_dir, [choice.note], _device_note(plan.configs))


def _plan_from_args(experiment_id: str, args: list[str]):
    """A runner plan from `accel run` arguments (what an alternation's processes will receive)."""
    ctx = run.make_context("run", [experiment_id, *args])
    params = dict(ctx.params)
    for shown in NOT_PASSED_ON - {"experiment_id", "repeats", "results_dir", "budget_s"}:
        params.pop(shown)
    return _plan(params.pop("experiment_id"), params.pop("scale"), params.pop("variants"),
                 params.pop("option_items"), params)


def _plan(experiment_id: str, scale: str, variants: tuple[str, ...], option_items: tuple[str, ...], overrides):
    from pipelines.core.run import plan as planning

    return planning.plan(experiments.get(experiment_id), scale, overrides, _key_values(option_items), variants)


@cli.command(hidden=True, context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--world-size", type=click.IntRange(min=1), default=1, show_default=True,
              help="Processes the launcher is about to start, on all nodes.")
@click.option("--rank", type=click.IntRange(min=0), default=0, show_default=True,
              help="Global rank of this node's first process (rank 0 writes results).")
@click.option("--capabilities/--no-capabilities", default=True, show_default=True,
              help="Also refuse what this machine cannot do (GPU, backend, runtime): when the ranks run here.")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def preflight(world_size: int, rank: int, capabilities: bool, args: tuple[str, ...]) -> None:
    """A launcher's check of ACCEL-ARGS before it starts torchrun, mpirun or srun: a user mistake is one
    line here, not one per rank plus the launcher's traceback. Prints what the launcher needs to know:
    the rendezvous wait (timeout_s) and the results folder."""
    from pipelines.core.config import options, runconfig

    if args and args[0] not in cli.commands:
        raise click.UsageError(f"No such command '{args[0]}'.")
    if not args or args[0] != "run" or {"-h", "--help"} & set(args):  # nothing to check: the defaults
        click.echo(f"{options.DistOptions.timeout_s:g} {runconfig.RunConfig.results_dir}")
        return
    params = run.make_context("run", list(args[1:])).params
    experiments.get(params["experiment_id"])  # an unknown id is refused before torch loads
    runconfig.check_environment()  # so is a bad OMP_NUM_THREADS (libgomp would warn first)
    from pipelines.core.data import files
    from pipelines.core.run import preview, refusals

    for shown in NOT_PASSED_ON - {"experiment_id", "repeats", "results_dir", "budget_s"}:
        params.pop(shown)
    plan = _plan(params.pop("experiment_id"), params.pop("scale"), params.pop("variants"),
                 params.pop("option_items"), params)
    printing = bool(os.environ.get("ACCEL_PRINT"))  # `accel launch --print`: shows, starts nothing
    timeout_s = refusals.preflight(plan, world_size, rank, capabilities, data=not printing)
    first = plan.configs[0]
    if printing and first.dataset != "synthetic" and not files.present(first.dataset, first.data_root):
        click.echo(f"note: {preview.data_text(first)}", err=True)
    click.echo(f"{timeout_s:g} {first.results_dir}")


@cli.command()
@experiment_argument
@click.option("--json", "as_json", is_flag=True, help="The catalog entry as one JSON object, for scripts.")
def show(experiment_id: str, as_json: bool) -> None:
    """Everything the catalog knows about one experiment."""
    from pipelines.core.report.summary import describe

    entry = experiments.get(experiment_id)
    if not as_json:
        click.echo(describe(entry))
        return
    whole = dataclasses.asdict(entry)
    for fig, shown in zip(entry.published, whole["published"]):
        shown["basis"] = fig.basis_name  # the derived basis too, not an empty string
        # the count stated, or the one its arm ran on (ranks option, NPROC knob, one process)
        shown["devices"] = fig.devices or entry.published_devices(fig.variant or entry.variants[0].name)
    click.echo(json.dumps(whole, indent=1, default=dict))


# `accel launch --help`: the launchers' environment knobs (each script's header has the details).
LAUNCH_KNOBS = """\b
Environment knobs (your environment wins over the catalog's; every launcher echoes what it uses):
 all         PYTHON (interpreter; default .venv/bin/python), THREADS (OMP_NUM_THREADS per process;
             default: usable cores / processes), IMAGE (path.sif | podman:TAG | docker:TAG: run inside
             that container), GLOO_SOCKET_IFNAME, NCCL_SOCKET_IFNAME, NCCL_DEBUG (passed through),
             ACCEL_PRINT=1 (what --print sets: the script prints its command line and starts nothing)
 local       OMP_RUNTIME=gnu|intel, OMP_BIND=none|pinned, ALLOCATOR=default|pinned|tcmalloc|jemalloc
             (pinned: glibc's thresholds fixed in GLIBC_TUNABLES; every launcher takes it), ALLOCATOR_PATH,
             KMP_AFFINITY, KMP_BLOCKTIME, IMAGE_PREFIX (the image's Python prefix),
             OPENBLAS_NUM_THREADS (numpy's BLAS pool; default 1, so no thread floats beside pinned ones)
 torchrun    NPROC (processes per node), NNODES, NODE_RANK, MASTER_ADDR, MASTER_PORT, RDZV=static|c10d,
             RDZV_ID, LOCAL_ADDR, MAX_RESTARTS
 mpirun      NP (total processes), HOSTS=host:slots,..., MAP_BY, BIND_TO, RSH_AGENT, MASTER_ADDR,
             MASTER_PORT
 srun        NTASKS, NODES, SRUN_ARGS, MASTER_ADDR, MASTER_PORT (sbatch launch/slurm.sbatch calls it)
 IMAGE=...   GPUS=auto|yes|no, DATA_DIR, RESULTS_DIR, SHM_SIZE, NETWORK, CONTAINER_ARGS, CONTAINER_USER,
             APPTAINER (the apptainer binary)
Every launcher checks its knobs (pipelines/core/distributed/launchers.py) and the run's arguments before it
starts any process (one line for a mistake), and every rendezvous waits at most the run's -o timeout_s
(default 120).
Details: the header of launch/<launcher>.sh and launch/_container.sh.
"""


@cli.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
             epilog=LAUNCH_KNOBS)
@experiment_argument
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def launch(experiment_id: str, args: tuple[str, ...]) -> None:
    """Start an experiment through its launcher script (launch/<launcher>.sh), with the catalog's knobs.

    ARGS go to `accel run` unchanged, e.g. `accel launch ID --scale bench --repeats 5`. With --print,
    the exact command line the launcher would run (torchrun, mpirun or srun; inside IMAGE's container
    when IMAGE is set) is printed after the same checks, and nothing starts.
    """
    from pipelines.core.run.launch import refuse
    from pipelines.core.config.runconfig import check_environment

    entry = experiments.get(experiment_id)
    printing = "--print" in args  # the command line the launcher would run, printed; nothing started
    args = tuple(a for a in args if a != "--print")
    check_environment()  # before torch loads: libgomp would print its own warning line first
    if {"-h", "--help"} & set(args):
        script = REPO / "launch" / f"{entry.launcher}.sh"
        os.execve(str(script), [str(script), "run", experiment_id, *args], dict(os.environ))
    ctx = run.make_context("run", [experiment_id, *args])  # parsed once; the checks read the parsed values
    options = ctx.params
    script = refuse(entry, options, os.environ)
    knobs = {k: v for k, v in entry.knobs.items() if k not in os.environ}
    if printing:
        argv = [str(script), "run", experiment_id, *args, "--no-baseline"]
        sys.stdout.flush()
        os.execve(str(script), argv, {**os.environ, **knobs, "ACCEL_PRINT": "1"})
    if not os.environ.get("ACCEL_PLAN_SHOWN"):  # a round's process: the comparison showed the plan
        from pipelines.core.run import preview

        plan = _plan_from_args(experiment_id, list(args))
        first = plan.configs[0]
        if first.scale == "bench":  # rounds of processes, each started through its entry's launcher
            _bench_rounds(plan, ctx, options["no_baseline"], options["dry_run"], options["as_json"], "launch")
            return
        choice = preview.baseline_choice(entry, plan.configs, first.scale, first.results_dir,
                                         refused=options["no_baseline"])
        text = _single_plan_text(plan, choice, entry.launcher, {**os.environ, **knobs})
        if options["dry_run"]:
            click.echo(text)
            return
        knobs[PLAN_ENV] = text
    # the launched `accel run` never brings a baseline itself, and does not show the plan again
    run_args = [*args, *([] if options["no_baseline"] else ["--no-baseline"])]
    argv = [str(script), "run", experiment_id, *run_args]
    shown = " ".join([*(f"{k}={v}" for k, v in knobs.items() if k != PLAN_ENV), *argv])
    click.echo(f"+ {shown}", err=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(str(script), argv, {**os.environ, **knobs})


@cli.command()
@click.option("--results-dir", type=PathArg(), default=Path("results"), show_default=True,
              help="Result files to read (sub-folders too, except reference/ ones).")
@click.option("--out", "out_dir", type=PathArg(),
              help="Write report.md (+ PNG plots), report.csv and report.html here (else: print a table).")
@click.option("--format", "formats", type=click.Choice(["md", "csv", "html"]), multiple=True,
              help="With --out: only these outputs (repeatable; default all three).")
@click.option("--against", type=PathArg(),
              help="A reference results folder (e.g. results/reference/...) shown beside these numbers.")
@click.option("--experiments", "experiment_ids", default="", help="Comma-separated ids to list even when not run.")
@click.option("--note", default="", help="A note for the report's header (e.g. how noisy the machine was).")
@click.option("--fail-on-reversal", is_flag=True,
              help="With --against: exit 1 when a conclusive verdict reversed (faster <-> slower than "
                   "published).")
@click.option("--strict", is_flag=True,
              help="No conclusive verdict from an arm (or its baseline) with a repeat flagged noisy: "
                   "others' CPU, throttling or swap during the repeat (the record's machine field).")
def report(results_dir: Path, out_dir: Path | None, formats: tuple[str, ...], against: Path | None,
           experiment_ids: str, note: str, fail_on_reversal: bool, strict: bool) -> None:
    """Published vs reproduced, from result files only."""
    from pipelines.core.report.summary import FORMATS, summary_table, write_report

    if against is not None and not against.is_dir():
        raise ConfigError(f"--against {against} is not a folder; pass a results folder such as "
                          "results/reference/<run>")
    if fail_on_reversal and against is None:
        raise ConfigError("--fail-on-reversal needs --against REF (the reference whose verdicts must hold)")
    if out_dir is None and (formats or against or experiment_ids or note):
        raise ConfigError("--format, --against, --experiments and --note need --out DIR "
                          "(where report.md goes)")
    _refuse_empty(results_dir, experiment_ids)
    if out_dir is None:
        click.echo(summary_table(results_dir, strict))
        return
    from pipelines.core.record.atomic import check_folder

    check_folder(out_dir, "--out", "pass --out with a writable folder")
    only = [e.strip() for e in experiment_ids.split(",") if e.strip()]
    for experiment_id in only:
        experiments.get(experiment_id)
    written = write_report(results_dir, out_dir, formats or FORMATS, only, against, note, strict)
    for line in written.loaded.skipped:
        click.echo(f"accel report: skipped {line}", err=True)
    click.echo(f"{len(written.loaded.records)} record(s) from {written.loaded.files} file(s); wrote " +
               ", ".join(str(p) for p in written.paths))
    if written.drift is not None:  # the drift table belongs in a CI log, not only in report.md
        from pipelines.core.report.drift import terminal_table

        click.echo(terminal_table(written.drift))
    if written.drift_skipped:  # another machine class: the full report, no drift table, and why
        click.echo(f"accel report: drift check skipped: {written.drift_skipped}")
    if fail_on_reversal and written.drift is not None and written.drift.reversals:
        _fail(f"conclusive verdict reversed against {against}: " + "; ".join(written.drift.reversals), 1)


def _refuse_empty(results_dir: Path, experiment_ids: str) -> None:
    """A folder with no result file at all is a wrong path or a run not made yet, not an empty report."""
    if results_dir.is_dir() and not experiment_ids.strip() and not any(results_dir.glob("**/*.jsonl")):
        raise ConfigError(f"no result records (*.jsonl) under {results_dir}; run an experiment first "
                          "(accel run ID) or pass --results-dir with a folder that has them")


@cli.command(context_settings={"ignore_unknown_options": True})
@click.argument("items", nargs=-1, required=True, type=click.UNPROCESSED, metavar="ID[@ARM]... [RUN OPTIONS]")
@click.option("--rounds", default="auto", show_default=True,
              help="Rounds of one process per slot, or auto: until every arm's 95 % interval is within "
                   "--halfwidth, or the budget runs out.")
@click.option("--budget-s", type=float, default=300, show_default=True,
              help="Time budget in seconds; no round starts that would overrun it.")
@click.option("--halfwidth", type=float, default=0.05, show_default=True,
              help="With --rounds auto: the relative interval half-width that is precise enough.")
@click.option("--allocator", type=click.Choice(["auto", "pinned", "default"]), default="auto", show_default=True,
              help="pinned glibc thresholds for every arm (auto at bench scale, unless an arm compares "
                   "allocators), or glibc's default, as the sources ran.")
@click.option("--share", type=click.Choice(["auto", "none"]), default="auto", show_default=True,
              help="Arms with one process environment share a process, interleaved in blocks (auto), or "
                   "every arm gets its own process each round (none).")
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

    check_environment()  # before torch loads (alternate imports it): libgomp would warn first
    from pipelines.core.cli import rounds as in_rounds
    from pipelines.core.stats import alternate

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
    in_rounds.measure(asked, _plan_from_args, passthrough, results_dir, alternate.parse_rounds(rounds),
                      budget_s, halfwidth, allocator_choice=allocator, share=share, dry_run=dry_run,
                      as_json=as_json, title=" vs ".join(named))


cli.add_command(data)
cli.add_command(doctor)
cli.add_command(diff)
cli.add_command(history)


def _interrupted(stop: Interrupted) -> None:
    """One line from rank 0 (the others stay quiet), then 128 + the signal number. A rank of a distributed
    run leaves without interpreter teardown, which could wait on peers that are gone (dist.Session.abort)."""
    if stop.main:
        click.echo(f"accel: {stop.message()}", err=True)
    if not stop.main or stop.launched:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(stop.exit_code)
    sys.exit(stop.exit_code)


def main(argv: list[str] | None = None) -> None:
    from pipelines.core.record.machine import mark_root

    mark_root()  # this process and what it starts are the run's own load, never "other processes"
    try:
        with signals_raise():
            cli.main(args=argv, prog_name="accel", standalone_mode=False)
    except Interrupted as stop:
        _interrupted(stop)
    except click.exceptions.Abort:
        _fail("aborted", 130)
    except click.exceptions.NoArgsIsHelpError as exc:
        click.echo(exc.ctx.get_help() if exc.ctx else str(exc))
        sys.exit(EXIT_USAGE)
    except click.ClickException as exc:
        _fail(exc.format_message().replace("\n", " "), EXIT_USAGE)
    except NotRunnable as exc:
        _fail(str(exc), EXIT_NOT_RUNNABLE)
    except (DistError, WriteError) as exc:
        _fail(str(exc), 1)
    except (ConfigError, experiments.UnknownExperiment) as exc:
        _fail(str(exc).strip("'\""), EXIT_USAGE)


if __name__ == "__main__":
    main()
