"""`accel list` (every experiment id, as a table, markdown or JSON) and `accel show ID` (one catalog entry):
the commands that read the catalog only, so they answer at once (no torch)."""

from __future__ import annotations

import dataclasses
import json

import click

from pipelines.core.cli.args import experiment_argument
from pipelines.core.config import experiments


def catalog_row(e: experiments.Experiment) -> dict[str, str]:
    """One experiment as `accel list` shows it (the table's columns, the --json objects' keys)."""
    from pipelines.core.report.views import published_ratio_text

    return {"id": e.id, "status": e.status, "target": e.target, "launcher": e.launcher,
            "reproduces": e.reproduces, "published_ratio": published_ratio_text(e), "compares": e.compares}


LIST_WIDTH = 100  # `accel list` fits this many columns (or the terminal, when narrower)


@click.command("list")
@click.option("--status", type=click.Choice(experiments.STATUSES), help="Only ready or only planned entries.")
@click.option("--markdown", is_flag=True, help="The map table of docs/experiments.md.")
@click.option("--json", "as_json", is_flag=True, help="One JSON array of objects, for scripts.")
@click.option("--wide", is_flag=True, help="Every column (status, source), however wide.")
def list_cmd(status: str | None, markdown: bool, as_json: bool, wide: bool) -> None:
    """Every experiment id: container target, launcher, published ratio, what it compares (`accel show ID`
    and `--wide` for the rest)."""
    import shutil

    from tabulate import tabulate

    from pipelines.core.report.views import map_markdown

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



@click.command()
@experiment_argument
@click.option("--json", "as_json", is_flag=True, help="The catalog entry as one JSON object, for scripts.")
def show(experiment_id: str, as_json: bool) -> None:
    """Everything the catalog knows about one experiment."""
    from pipelines.core.report.views import entry_text

    entry = experiments.get(experiment_id)
    if not as_json:
        click.echo(entry_text(entry))
        return
    from pipelines.core.stats.bases.throughput import RATIOS

    whole = dataclasses.asdict(entry)
    for fig, shown in zip(entry.published, whole["published"]):
        shown["basis"] = fig.basis_name  # the derived basis too, not an empty string
        # the count stated, or the one its arm ran on (ranks option, NPROC knob, one process)
        shown["devices"] = fig.devices or entry.published_devices(fig.variant or entry.variants[0].name)
        shown["band"] = list(fig.band()) if fig.metric in RATIOS and fig.basis != "context" else None
    click.echo(json.dumps(whole, indent=1, default=dict))
