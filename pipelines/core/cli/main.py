"""`accel`: the command group and its entry point. Each command lives in a module of its own (or of its family):

- catalog_commands.py: `list`, `show`
- run_command.py: `run`, and what run, launch, compare and preflight share (run options, plan, plan text)
- launch_commands.py: `launch` and the hidden `preflight` (the launcher scripts' check)
- compare_command.py: `compare` (harness/comparison.py orchestrates its rounds of processes; run and launch
  too, at bench scale)
- report_command.py: `report`
- data_commands.py: `data`; doctor_command.py: `doctor`; history_commands.py: `diff`, `history`
- args.py: what every command shares (exit codes, the one-line failure, argument types, id completion)

User mistakes print one line (`accel: error: ...`) and exit 2; an experiment that cannot run on this
machine (planned, no GPU, wrong OpenMP runtime) exits 3; a genuine failure keeps its traceback. Ctrl-C
and SIGTERM keep what finished and exit 130 / 143 with one `accel: interrupted ...` line.
Experiment ids complete in the shell: `eval "$(_ACCEL_COMPLETE=bash_source accel)"` (zsh_source, fish_source).

Commands import what they need inside their functions on purpose: torch, torchvision and matplotlib take
seconds to load, and `accel list`, `show`, `--help` and shell completion must answer at once.
"""

from __future__ import annotations

import os
import sys
import time

import click

from pipelines.core.record import version
from pipelines.core.config import experiments
from pipelines.core.cli.args import EXIT_NOT_RUNNABLE, EXIT_USAGE, fail as _fail
from pipelines.core.cli.catalog_commands import list_cmd, show
from pipelines.core.cli.compare_command import compare
from pipelines.core.cli.data_commands import data
from pipelines.core.cli.doctor_command import doctor
from pipelines.core.cli.launch_commands import launch, preflight
from pipelines.core.cli.history_commands import diff, history
from pipelines.core.cli.report_command import report
from pipelines.core.cli.run_command import run
from pipelines.core.errors import ConfigError, DistError, NotRunnable, WriteError
from pipelines.core.train.interrupt import Interrupted, end_forked_children, signals_raise

REQUEUE_GRACE_S = 3.0  # how long the other ranks of a run stopped for a requeue let rank 0 leave first


def _show_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(version.text())
        ctx.exit()


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_show_version,
              help="Print the package version and git commit, then exit.")
def cli() -> None:
    """Reproducible PyTorch training-acceleration experiments, one catalog entry per published figure.

    Start with `accel list`, then `accel show ID` and `accel run ID --scale smoke`.
    """


cli.add_command(list_cmd)
cli.add_command(run)
cli.add_command(preflight)
cli.add_command(show)
cli.add_command(launch)
cli.add_command(report)
cli.add_command(compare)
cli.add_command(data)
cli.add_command(doctor)
cli.add_command(diff)
cli.add_command(history)


def _interrupted(stop: Interrupted, whole_process: bool) -> None:
    """One line from rank 0 (the others stay quiet), then 128 + the signal number. A process of its own
    (`whole_process`: the command or a worker, not `cli.main` called in a test) ends its DataLoader workers
    and leaves without interpreter teardown once everything is flushed: the records are on disk already,
    torch's teardown alone takes about a second, and multiprocessing's exit waits without a limit for
    every child it knows. A rank always does: its teardown could wait on peers that are gone
    (`distributed.ranks.Session.abort`)."""
    if stop.main:
        click.echo(f"accel: {stop.message()}", err=True)
    if stop.checkpoint and stop.launched and not stop.main:  # stopped for a requeue: rank 0 leaves first, its
        time.sleep(REQUEUE_GRACE_S)  # line written (srun's --kill-on-bad-exit ends the step at the first exit)
    if whole_process or not stop.main or stop.launched:
        end_forked_children()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(stop.exit_code)
    sys.exit(stop.exit_code)


def main(argv: list[str] | None = None) -> None:
    """The `accel` command: `argv` None is this process's own command line (the console script,
    `python -m pipelines`); a list is `accel` called from Python (the tests)."""
    guarded(lambda: cli.main(args=argv, prog_name="accel", standalone_mode=False), whole_process=argv is None)


def worker_main(argv: list[str]) -> None:
    """`python -m pipelines --worker FILE`: one process (or rank) of an orchestrator's launch or round
    (harness/worker.py), with the CLI's exit codes and one-line failures."""
    def serve() -> None:
        from pipelines.core.cli.run_command import finish, quiet_foreign_warnings
        from pipelines.core.config import request as requests
        from pipelines.core.config.runconfig import check_environment

        if len(argv) != 1:
            raise ConfigError(f"usage: python -m pipelines {requests.FLAG} FILE (a request an orchestrator wrote)")
        check_environment()  # before torch loads: libgomp would print its own warning line first
        request = requests.read(argv[0])
        from pipelines.core.harness import worker

        quiet_foreign_warnings(str(request.plans[0][1][0].get("device", "cpu")))
        plans, outcomes = worker.serve(request)
        if request.finish != "none":
            finish(plans, outcomes, request.finish == "json")

    guarded(serve, second_signal_forces=False,  # its orchestrator ends it if it does not end (harness/rounds.py)
            whole_process=True)


def guarded(command, second_signal_forces: bool = True, whole_process: bool = False) -> None:
    """Run `command` as an `accel` process: its signals raise Interrupted, and an error or a signal ends in
    one line and its exit code."""
    from pipelines.core.record.machine import mark_root

    mark_root()  # this process and what it starts are the run's own load, never "other processes"
    try:
        with signals_raise(second_signal_forces):
            command()
    except Interrupted as stop:
        _interrupted(stop, whole_process)
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
