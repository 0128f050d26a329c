"""`accel`: list, run, launch, report, data. Shared options become one RunConfig via the runner.

User mistakes print one line (`accel: error: ...`) and exit 2; an experiment that cannot run on this
machine (planned, no GPU, wrong OpenMP runtime) exits 3; a genuine failure keeps its traceback.

Commands import what they need inside their functions on purpose: torch, torchvision and matplotlib take
seconds to load, and `accel list`, `show`, `--help` and shell completion must answer at once.
"""

from __future__ import annotations

import itertools
import os
import sys
from pathlib import Path

import click

from pipelines.core import experiments
from pipelines.core.config import SCALES
from pipelines.core.errors import ConfigError, DistError, NotRunnable

EXIT_USAGE, EXIT_NOT_RUNNABLE = 2, 3
REPO = Path(__file__).resolve().parents[2]


def _fail(message: str, code: int = EXIT_USAGE) -> None:
    click.echo(f"accel: error: {message}", err=True)
    sys.exit(code)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """Reproducible PyTorch training-acceleration experiments (book chapters 1-11, talk, course)."""


@cli.command("list")
@click.option("--status", type=click.Choice(experiments.STATUSES), help="Only ready or only planned entries.")
@click.option("--markdown", is_flag=True, help="The README's map table.")
def list_cmd(status: str | None, markdown: bool) -> None:
    """Every experiment id: what it compares, target, launcher, published ratio."""
    from pipelines.core.report import map_markdown, published_ratio_text

    if markdown:
        click.echo(map_markdown())
        return
    rows = [(e.id, e.status, e.target, e.launcher, published_ratio_text(e), e.compares)
            for e in experiments.all_experiments().values() if status in (None, e.status)]
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    for row in rows:
        click.echo("  ".join(col.ljust(w) for col, w in zip(row[:5], widths)) + "  " + row[5])


def _key_values(values: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for item in values:
        if "=" not in item:
            raise ConfigError(f"option {item!r} is not KEY=VALUE (e.g. -o bias=false)")
        key, value = item.split("=", 1)
        out[key.strip()] = value
    return out


@cli.command()
@click.argument("experiment_id")
@click.option("--scale", type=click.Choice(SCALES), default="book", show_default=True)
@click.option("--variant", "variants", multiple=True, help="Run only this variant (repeatable).")
@click.option("--repeats", type=int)
@click.option("--steps", type=int, help="Timed steps after warm-up (instead of whole epochs).")
@click.option("--epochs", type=int)
@click.option("--warmup-steps", type=int)
@click.option("--batch-size", type=int)
@click.option("--lr", type=float)
@click.option("--device", type=str)
@click.option("--model", type=str, help="Override the model, e.g. vit_tiny to smoke-test a ViT entry on CPU.")
@click.option("--dataset", type=str, help="Override the dataset, e.g. synthetic for pure throughput.")
@click.option("--data-root", type=click.Path(path_type=Path))
@click.option("--results-dir", type=click.Path(path_type=Path))
@click.option("--weights", type=click.Path(path_type=Path),
              help="Local state_dict file, or a save_pretrained folder for distilbert (never downloaded).")
@click.option("--tokenizer", type=click.Path(path_type=Path),
              help="Local tokenizer folder for text data (default: train a WordPiece tokenizer on the data).")
@click.option("--seq-len", type=int, help="Tokens per text for token models (default: the model's).")
@click.option("--seed", type=int)
@click.option("--num-workers", type=int)
@click.option("-o", "--option", "option_items", multiple=True, metavar="KEY=VALUE",
              help="Pipeline option, e.g. -o bias=false (see `accel show ID`).")
def run(experiment_id: str, scale: str, variants: tuple[str, ...], option_items: tuple[str, ...],
        **overrides) -> None:
    """Run one experiment by id; writes results/<id>--<run id>.jsonl."""
    from pipelines.core import runner  # torch and the pipelines: only for commands that run one
    from pipelines.core.report import print_run_summary

    plan = runner.plan(experiments.get(experiment_id), scale, overrides, _key_values(option_items), variants)
    outcome = runner.run(plan)
    if outcome.path or not outcome.launched:  # one summary per run: rank 0 of a distributed one
        print_run_summary(outcome.records, outcome.path)


@cli.command()
@click.argument("experiment_id")
def show(experiment_id: str) -> None:
    """Everything the catalog knows about one experiment."""
    from pipelines.core.report import describe

    click.echo(describe(experiments.get(experiment_id)))


@cli.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.argument("experiment_id")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def launch(experiment_id: str, args: tuple[str, ...]) -> None:
    """Start an experiment through its launcher script, with the catalog's knobs (your env wins)."""
    entry = experiments.get(experiment_id)
    device_given = any(a == "--device" or a.startswith("--device=") for a in args)
    if "gpu" in entry.requires and not any(Path("/dev").glob("nvidia[0-9]*")) and not device_given:
        _fail(f"{experiment_id} needs NVIDIA GPUs and this machine has none (/dev/nvidia*); run it on a GPU "
              "machine, or smoke-test the path on CPU with --device cpu -o backend=gloo", EXIT_NOT_RUNNABLE)
    if "ccl" in entry.requires and not os.environ.get("IMAGE") and "backend=" not in " ".join(args):
        import importlib.util

        if importlib.util.find_spec("oneccl_bindings_for_pytorch") is None:
            _fail(f"{experiment_id} needs oneCCL (oneccl_bindings_for_pytorch), which only the cpu-intel image "
                  "provides; run it with IMAGE=<cpu-intel image> or compare with -o backend=gloo",
                  EXIT_NOT_RUNNABLE)
    script = REPO / "launch" / f"{entry.launcher}.sh"
    if not script.is_file():
        _fail(f"launcher {script} for {experiment_id} does not exist", EXIT_NOT_RUNNABLE)
    knobs = {k: v for k, v in entry.knobs.items() if k not in os.environ}
    argv = [str(script), "run", experiment_id, *args]
    shown = " ".join([*(f"{k}={v}" for k, v in knobs.items()), *argv])
    click.echo(f"+ {shown}", err=True)
    sys.stdout.flush()
    os.execve(str(script), argv, {**os.environ, **knobs})


@cli.command()
@click.option("--results-dir", type=click.Path(path_type=Path), default=Path("results"), show_default=True)
@click.option("--out", "out_dir", type=click.Path(path_type=Path),
              help="Write report.md (+ PNG plots), report.csv and report.html here (else: print a table).")
@click.option("--format", "formats", type=click.Choice(["md", "csv", "html"]), multiple=True,
              help="With --out: only these outputs (repeatable; default all three).")
@click.option("--against", type=click.Path(path_type=Path),
              help="A reference results folder (e.g. results/reference/...) shown beside these numbers.")
@click.option("--experiments", "experiment_ids", default="", help="Comma-separated ids to list even when not run.")
@click.option("--note", default="", help="A note for the report's header (e.g. how noisy the machine was).")
@click.option("--fail-on-reversal", is_flag=True,
              help="With --against: exit 1 when a conclusive verdict reversed (faster <-> slower than "
                   "published).")
def report(results_dir: Path, out_dir: Path | None, formats: tuple[str, ...], against: Path | None,
           experiment_ids: str, note: str, fail_on_reversal: bool) -> None:
    """Published vs reproduced, from result files only."""
    from pipelines.core.report import FORMATS, summary_table, write_report

    if against is not None and not against.is_dir():
        raise ConfigError(f"--against {against} is not a folder; pass a results folder such as "
                          "results/reference/<run>")
    if fail_on_reversal and against is None:
        raise ConfigError("--fail-on-reversal needs --against REF (the reference whose verdicts must hold)")
    if out_dir is None and (formats or against or experiment_ids or note):
        raise ConfigError("--format, --against, --experiments and --note need --out DIR "
                          "(where report.md goes)")
    if out_dir is None:
        click.echo(summary_table(results_dir))
        return
    only = [e.strip() for e in experiment_ids.split(",") if e.strip()]
    for experiment_id in only:
        experiments.get(experiment_id)
    written = write_report(results_dir, out_dir, formats or FORMATS, only, against, note)
    for line in written.loaded.skipped:
        click.echo(f"accel report: skipped {line}", err=True)
    click.echo(f"{len(written.loaded.records)} record(s) from {written.loaded.files} file(s); wrote " +
               ", ".join(str(p) for p in written.paths))
    if written.drift is not None:  # the drift table belongs in a CI log, not only in report.md
        from pipelines.core.report_drift import terminal_table

        click.echo(terminal_table(written.drift))
    if fail_on_reversal and written.drift.reversals:
        _fail(f"conclusive verdict reversed against {against}: " + "; ".join(written.drift.reversals), 1)


@cli.command(context_settings={"ignore_unknown_options": True})
@click.argument("items", nargs=-1, required=True, type=click.UNPROCESSED, metavar="ID... [RUN OPTIONS]")
@click.option("--rounds", default="auto", show_default=True,
              help="Rounds of one repeat per experiment, or auto: until every ratio's 95 % interval is within "
                   "--halfwidth, or the budget runs out.")
@click.option("--budget-s", type=float, default=300, show_default=True,
              help="Time budget in seconds; no round starts that would overrun it.")
@click.option("--halfwidth", type=float, default=0.05, show_default=True,
              help="With --rounds auto: the relative interval half-width that is precise enough.")
@click.option("--results-dir", type=click.Path(path_type=Path), required=True,
              help="Folder for every round's records (one comparison per folder).")
def compare(items: tuple[str, ...], rounds: str, budget_s: float, halfwidth: float, results_dir: Path) -> None:
    """Experiments measured in alternation (ABBA rounds, one process each), e.g. the chapter 2 ladder.

    Options after the ids (--scale, --steps, --data-root ...) go to every `accel launch`."""
    from pipelines.core import alternate

    ids = [item for item in itertools.takewhile(lambda a: not a.startswith("-"), items)]
    passthrough = list(items[len(ids):])
    if len(ids) < 2:
        raise ConfigError("compare needs two or more experiment ids (e.g. accel compare ch2-baseline "
                          "ch2-nobias --results-dir results/ladder)")
    for experiment_id in ids:
        experiments.get(experiment_id)
    if any(a == "--repeats" or a.startswith("--repeats=") or a == "--results-dir" for a in passthrough):
        raise ConfigError("compare sets --repeats 1 per round and --results-dir itself; use --rounds instead")
    rule = alternate.StopRule(alternate.parse_rounds(rounds), budget_s, halfwidth)
    from pipelines.core import results as results_files

    results_files.check_writable(results_dir)
    try:
        summary = alternate.run(ids, passthrough, results_dir, rule, echo=lambda m: click.echo(m, err=True))
    except alternate.RoundFailed as failed:
        _fail(str(failed), alternate.EXIT_INTERRUPTED if failed.summary.stopped_by == "interrupted" else 1)
    click.echo(alternate.describe(summary))


@cli.group()
def data() -> None:
    """Fetch, generate or verify datasets (torchvision on-disk formats)."""


@data.command()
@click.argument("names", nargs=-1, required=True)
@click.option("--root", type=click.Path(path_type=Path), default=Path("data"), show_default=True)
def fetch(names: tuple[str, ...], root: Path) -> None:
    """Download with torchvision's dataset classes (needs internet), verify, record checksums."""
    from pipelines.core import datafiles

    for name in names:
        datafiles.spec(name)
    for name in names:
        try:
            folder = datafiles.fetch(name, root)
        except (OSError, RuntimeError) as exc:  # torchvision raises RuntimeError when offline or on a bad MD5
            _fail(f"could not fetch {name} ({exc.__class__.__name__}: {str(exc).splitlines()[0][:200]}); "
                  f"check the network, or run `accel data generate {name} --root {root}` for offline data")
        click.echo(f"{name}: real data in {folder}, checksums recorded")


@data.command()
@click.argument("name")
@click.option("--root", type=click.Path(path_type=Path), default=Path("data"), show_default=True)
@click.option("--train", type=int, default=2048, show_default=True)
@click.option("--test", type=int, default=512, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
def generate(name: str, root: Path, train: int, test: int, seed: int) -> None:
    """Write small files in the dataset's true format, with a learnable class signal."""
    from pipelines.core import datafiles

    folder = datafiles.generate(name, root, train, test, seed)
    click.echo(f"{name}: generated {train} train / {test} test samples in {folder} (data_source=generated)")


@data.command()
@click.argument("names", nargs=-1)
@click.option("--root", type=click.Path(path_type=Path), default=Path("data"), show_default=True)
def verify(names: tuple[str, ...], root: Path) -> None:
    """Check datasets: torchvision's digests (real data) or the checksum list (generated), and the format."""
    from pipelines.core import datafiles

    present = [n for n in datafiles.FILES if (root / datafiles.spec(n).folder / datafiles.ORIGIN).is_file()]
    if not names and not present:
        raise ConfigError(f"no dataset under {root}; {datafiles.fix_hint('fashion_mnist', root)}")
    for name in names or present:
        checked = datafiles.verify(name, root)
        click.echo(f"{name}: {len(checked)} files OK ({datafiles.source(name, root)} data)")


@cli.command()
@click.option("--addr", help="Rendezvous address to check (default: MASTER_ADDR or 127.0.0.1).")
@click.option("--port", type=int, help="Rendezvous port that must be free (default: MASTER_PORT or 29500).")
@click.option("--record", type=click.Path(path_type=Path), help="Also write the findings as JSON here.")
def doctor(addr: str | None, port: int | None, record: Path | None) -> None:
    """Check this machine before a distributed run; exits 1 with the list of problems."""
    from pipelines.core import doctor as checks

    findings = checks.run_checks(addr, port)
    click.echo(checks.render(findings))
    if record:
        checks.write_record(findings, record)
    problems = [f for f in findings if f["status"] == "problem"]
    if problems:
        _fail(f"{len(problems)} problem(s): " + "; ".join(f"{f['check']}: {f['detail']}" for f in problems), 1)


def main(argv: list[str] | None = None) -> None:
    try:
        cli.main(args=argv, prog_name="accel", standalone_mode=False)
    except click.exceptions.Abort:
        _fail("aborted", 130)
    except click.exceptions.NoArgsIsHelpError as exc:
        click.echo(exc.ctx.get_help() if exc.ctx else str(exc))
        sys.exit(EXIT_USAGE)
    except click.ClickException as exc:
        _fail(exc.format_message().replace("\n", " "), EXIT_USAGE)
    except NotRunnable as exc:
        _fail(str(exc), EXIT_NOT_RUNNABLE)
    except DistError as exc:
        _fail(str(exc), 1)
    except (ConfigError, experiments.UnknownExperiment) as exc:
        _fail(str(exc).strip("'\""), EXIT_USAGE)


if __name__ == "__main__":
    main()
