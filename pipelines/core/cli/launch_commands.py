"""`accel launch ID` (an experiment started through its launcher script, launch/<launcher>.sh, with the
catalog's knobs; its --help lists the launchers' environment knobs) and the hidden `accel preflight`, the
check those scripts run before they start torchrun, mpirun or srun. Both parse the run options with
`accel run`'s own command (run_command.py)."""

from __future__ import annotations

import os
import sys

import click

from pipelines.core.cli.args import REPO, experiment_argument
from pipelines.core.cli.run_command import (bench_rounds, in_rounds, plan_from_params, run,
                                            single_plan_text)
from pipelines.core.config import experiments


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
 torchrun    NPROC (processes per node), NNODES (a count, or MIN:MAX elastic with RDZV=c10d), NODE_RANK,
             MASTER_ADDR, MASTER_PORT, RDZV=static|c10d, RDZV_ID, LOCAL_ADDR, MAX_RESTARTS
 mpirun      NP (total processes), HOSTS=host:slots,..., MAP_BY, BIND_TO, RSH_AGENT, MASTER_ADDR,
             MASTER_PORT
 srun        NTASKS, NODES, SRUN_ARGS, MASTER_ADDR, MASTER_PORT (sbatch launch/slurm.sbatch calls it;
             MAX_REQUEUES: its most requeues after SLURM's SIGUSR1, default 3)
 IMAGE=...   GPUS=auto|yes|no, DATA_DIR, RESULTS_DIR, SHM_SIZE, NETWORK, CONTAINER_ARGS, CONTAINER_USER, TMPDIR,
             APPTAINER (the apptainer binary)
Every launcher checks its knobs (pipelines/core/distributed/launchers.py) and the run's arguments before it
starts any process (one line for a mistake), and every rendezvous waits at most the run's -o timeout_s
(default 120).
Details: the header of launch/<launcher>.sh and launch/_container.sh.
"""


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
               epilog=LAUNCH_KNOBS)
@experiment_argument
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def launch(experiment_id: str, args: tuple[str, ...]) -> None:
    """Start an experiment through its launcher script (launch/<launcher>.sh), with the catalog's knobs.

    ARGS go to `accel run` unchanged, e.g. `accel launch ID --scale bench --rounds 5`. With --print,
    the exact command line the launcher would run (torchrun, mpirun or srun; inside IMAGE's container
    when IMAGE is set) is printed after the same checks, and nothing starts.
    """
    from pipelines.core.config.runconfig import check_environment
    from pipelines.core.data import files
    from pipelines.core.distributed.knobs import KnobError
    from pipelines.core.harness import launch as launching, preview

    entry = experiments.get(experiment_id)
    printing = "--print" in args  # the command line the launcher would run, printed; nothing started
    args = tuple(a for a in args if a != "--print")
    check_environment()  # before torch loads: libgomp would print its own warning line first
    if {"-h", "--help"} & set(args):
        script = REPO / "launch" / f"{entry.launcher}.sh"
        os.execve(str(script), [str(script), "run", experiment_id, *args], dict(os.environ))
    options = run.make_context("run", [experiment_id, *args]).params  # parsed once; the checks read these values
    the_plan = plan_from_params(options)
    first = the_plan.configs[0]
    env = {**os.environ, **{k: v for k, v in entry.knobs.items() if k not in os.environ}}
    if in_rounds(first) and not printing:  # rounds, each process through the launcher
        bench_rounds(the_plan, options, options["no_baseline"], options["dry_run"], options["as_json"], "launch")
        return
    choice = preview.baseline_choice(entry, the_plan.configs, first.scale, first.results_dir,
                                     refused=options["no_baseline"])
    if options["dry_run"] and not printing:
        click.echo(single_plan_text(the_plan, choice, entry.launcher, env))
        return
    # --print shows the command a person would start by hand (the script's own `run ID` path, which works on
    # any cluster); a launch hands its ranks this command's plan in a worker request (config/request.py)
    run_args = ["run", experiment_id, *args, *([] if options["no_baseline"] else ["--no-baseline"])]
    try:
        ready = launching.prepare(entry, the_plan, options, run_args, env, printing)
    except KnobError as error:  # the launcher's own refusal, worded as the scripts word it
        click.echo(f"launch: error: {error}", err=True)
        sys.exit(2)
    sys.stdout.flush()
    if printing:
        if first.dataset != "synthetic" and not files.present(first.dataset, first.data_root):
            click.echo(f"note: {preview.data_text(first)}", err=True)
        os.execve(str(ready.script), [str(ready.script), *run_args], ready.env)
    from pipelines.core.config import request as requests
    from pipelines.core.harness import worker
    from pipelines.core.record import results

    request = worker.request_of([the_plan], results.new_run_id(), finish="json" if options["as_json"] else "verdict",
                                quiet=options["quiet"] or options["as_json"], verbose=options["verbose"])
    argv = [str(ready.script), requests.FLAG, str(worker.write_request(request, first.results_dir))]
    click.echo(single_plan_text(the_plan, choice, entry.launcher, env), err=True)
    shown = " ".join([*(f"{k}={v}" for k, v in env.items() if k in entry.knobs and k not in os.environ), *argv])
    click.echo(f"+ {shown}", err=True)
    sys.stderr.flush()
    os.execve(str(ready.script), argv, ready.env)


@click.command(hidden=True, context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--world-size", type=click.IntRange(min=1), default=1, show_default=True,
              help="Processes the launcher is about to start, on all nodes.")
@click.option("--rank", type=click.IntRange(min=0), default=0, show_default=True,
              help="Global rank of this node's first process (rank 0 writes results).")
@click.option("--capabilities/--no-capabilities", default=True, show_default=True,
              help="Also refuse what this machine cannot do (GPU, backend, runtime): when the ranks run here.")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def preflight(world_size: int, rank: int, capabilities: bool, args: tuple[str, ...]) -> None:
    """A launcher's check of ACCEL-ARGS (`run ID ...`, or a worker's `--worker FILE`) before it starts
    torchrun, mpirun or srun: a user mistake is one line here, not one per rank plus the launcher's
    traceback. Prints what the launcher needs to know: the rendezvous wait (timeout_s) and the results folder."""
    from pipelines.core.config import options, runconfig

    from pipelines.core.config import request as requests

    commands = click.get_current_context().find_root().command.commands  # the `accel` group's (main.py)
    worker_request = requests.from_args(args) if args[:1] == (requests.FLAG,) else None
    if args and args[0] not in commands and worker_request is None:
        raise click.UsageError(f"No such command '{args[0]}'.")
    if worker_request is None and (not args or args[0] != "run" or {"-h", "--help"} & set(args)):
        click.echo(f"{options.DistOptions.timeout_s:g} {runconfig.RunConfig.results_dir}")  # nothing to check
        return
    if worker_request is None:
        params = run.make_context("run", list(args[1:])).params
        experiments.get(params["experiment_id"])  # an unknown id is refused before torch loads
    runconfig.check_environment()  # so is a bad OMP_NUM_THREADS (libgomp would warn first)
    from pipelines.core.data import files
    from pipelines.core.harness import preview, refusals, worker

    plan = worker.plans_of(worker_request)[0] if worker_request is not None else plan_from_params(params)
    printing = bool(os.environ.get("ACCEL_PRINT"))  # `accel launch --print`: shows, starts nothing
    timeout_s = refusals.preflight(plan, world_size, rank, capabilities, data=not printing)
    first = plan.configs[0]
    if printing and first.dataset != "synthetic" and not files.present(first.dataset, first.data_root):
        click.echo(f"note: {preview.data_text(first)}", err=True)
    click.echo(f"{timeout_s:g} {first.results_dir}")
