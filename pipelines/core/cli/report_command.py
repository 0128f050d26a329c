"""`accel report`: published vs reproduced, from result files only (a table, or report.md, .csv and .html
with --out; --against a reference folder adds the drift check; --junit and --markdown write the verdicts
as CI systems show them, report/ci.py)."""

from __future__ import annotations

from pathlib import Path

import click

from pipelines.core.cli.args import PathArg, fail as _fail
from pipelines.core.config import experiments
from pipelines.core.errors import ConfigError


@click.command()
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
                   "published) or a reproduction was lost or gained (reproduced <-> faster or slower).")
@click.option("--junit", "junit_path", type=PathArg(),
              help="Also write the verdicts as JUnit XML: one testcase per judged arm; an error, a reversal or a "
                   "reproduction lost or gained against --against fails, an arm not run is skipped.")
@click.option("--markdown", "markdown_path", type=PathArg(),
              help="Also write the verdict table and the drift table as GitHub-flavoured Markdown "
                   "(e.g. $GITHUB_STEP_SUMMARY; an existing file is appended to).")
@click.option("--strict", is_flag=True,
              help="No conclusive verdict from an arm (or its baseline) with a repeat flagged noisy: "
                   "others' CPU, throttling or swap during the repeat (the record's machine field).")
def report(results_dir: Path, out_dir: Path | None, formats: tuple[str, ...], against: Path | None,
           experiment_ids: str, note: str, fail_on_reversal: bool, junit_path: Path | None,
           markdown_path: Path | None, strict: bool) -> None:
    """Published vs reproduced, from result files only."""
    from pipelines.core.report.views import FORMATS, verdict_table, write_report

    if against is not None and not against.is_dir():
        raise ConfigError(f"--against {against} is not a folder; pass a results folder such as "
                          "results/reference/<run>")
    if fail_on_reversal and against is None:
        raise ConfigError("--fail-on-reversal needs --against REF (the reference whose verdicts must hold)")
    ci_files = junit_path is not None or markdown_path is not None
    if out_dir is None and not ci_files and (formats or against or experiment_ids or note):
        raise ConfigError("--format, --against, --experiments and --note need --out DIR "
                          "(where report.md goes), or --junit / --markdown FILE")
    if out_dir is None and (formats or note):
        raise ConfigError("--format and --note need --out DIR (where report.md goes)")
    _refuse_empty(results_dir, experiment_ids)
    from pipelines.core.record.atomic import check_folder

    for path, flag in ((junit_path, "--junit"), (markdown_path, "--markdown")):
        if path is not None:
            check_folder(path.parent, f"{flag}'s folder", f"pass {flag} with a file in a writable folder")
    if out_dir is None and not ci_files:
        click.echo(verdict_table(results_dir, strict))
        return
    only = [e.strip() for e in experiment_ids.split(",") if e.strip()]
    for experiment_id in only:
        experiments.get(experiment_id)
    if out_dir is not None:
        check_folder(out_dir, "--out", "pass --out with a writable folder")
        written = write_report(results_dir, out_dir, formats or FORMATS, only, against, note, strict)
        judged = written.judged
        click.echo(f"{len(judged.loaded.records)} record(s) from {judged.loaded.files} file(s); wrote " +
                   ", ".join(str(p) for p in written.paths))
    else:
        from pipelines.core.report.drift import judge

        judged = judge(results_dir, only, against, strict)
    for line in judged.loaded.skipped:
        click.echo(f"accel report: skipped {line}", err=True)
    if judged.drift is not None:  # the drift table belongs in a CI log, not only in report.md
        from pipelines.core.report.drift import terminal_table

        click.echo(terminal_table(judged.drift))
    if judged.drift_skipped:  # another machine class: the full report, no drift table, and why
        click.echo(f"accel report: drift check skipped: {judged.drift_skipped}")
    if ci_files:
        _write_ci_files(judged, junit_path, markdown_path)
    if fail_on_reversal and judged.drift is not None and judged.drift.reversals:
        _fail(f"conclusive verdict changed against {against}: " + "; ".join(judged.drift.reversals), 1)


def _write_ci_files(judged, junit_path: Path | None, markdown_path: Path | None) -> None:
    from pipelines.core.record import atomic
    from pipelines.core.report import ci

    if junit_path is not None:
        atomic.write_text(junit_path, ci.junit(judged.rows, judged.drift))
        click.echo(f"wrote {junit_path} (JUnit XML, {len(ci.judged(judged.rows))} judged arm(s))")
    if markdown_path is not None:
        text = ci.markdown(judged.rows, judged.drift, judged.drift_skipped)
        before = markdown_path.read_text() if markdown_path.is_file() else ""  # a step summary collects
        atomic.write_text(markdown_path, before + ("\n" if before else "") + text)
        click.echo(f"wrote {markdown_path} (Markdown)")


def _refuse_empty(results_dir: Path, experiment_ids: str) -> None:
    """A folder with no result file at all is a wrong path or a run not made yet, not an empty report."""
    if results_dir.is_dir() and not experiment_ids.strip() and not any(results_dir.glob("**/*.jsonl")):
        raise ConfigError(f"no result records (*.jsonl) under {results_dir}; run an experiment first "
                          "(accel run ID) or pass --results-dir with a folder that has them")
