"""What `accel report` prints in a terminal: the verdict table sized to the terminal's width, then the
reasons, errors, skipped input and arms not run here, one wrapped line each (report.md and report.html
are document.py's)."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

from pipelines.core.config.arm import Arm
from pipelines.core.record import results
from pipelines.core.report import tables
from pipelines.core.report.render import markdown_table
from pipelines.core.stats import rows as stats_rows

# columns a narrow terminal loses first, in this order: the arm's own numbers, never its ratio or verdict
NARROW_DROPS = ("samples/s (mean ± sd)", "step ms", "n")


def verdict_table(results_dir: Path, strict: bool = False, width: int | None = None) -> str:
    """The compact table `accel report` prints, then why an arm was not compared, errors, skipped input and
    arms not run here. It fits `width` columns (None: the terminal's, 100 in a pipe) down to about 100: the
    verdict column holds the word, its reason goes below, wrapped, and the arm's own numbers go before its
    ratio, interval, published figure and verdict do."""
    width = width or shutil.get_terminal_size((100, 24)).columns
    loaded = results.load(results_dir)
    rows = stats_rows.build(loaded, None, strict)
    lines = [f"(no successful runs under {results_dir})"]
    if rows:
        view = tables.verdict_view(tables.frame(rows), reasons=False)
        for drop in range(len(NARROW_DROPS) + 1):  # the narrowest is about 100 columns wide
            text = markdown_table(view.drop(columns=list(NARROW_DROPS[:drop])), tablefmt="simple")
            if max(map(len, text.splitlines())) <= width:
                break
        lines = [text]
    notes = [f"- not comparable: {Arm.of(r)}: {r.why}" for r in rows if r.verdict == "not comparable" and r.why]
    notes += [f"- error: {Arm.of(r)}: {e}" for r in rows for e in r.errors]
    notes += [f"- interrupted: {Arm.of(r)} {i}" for r in rows for i in r.interrupted]
    notes += [f"- skipped: {s}" for s in loaded.skipped]
    notes += [f"- not run here: {Arm.of(r)}: {'; '.join(r.get('notes', []))}"
              for r in loaded.records if r["status"] == "skipped"]
    lines += [textwrap.fill(note, width, subsequent_indent="  ", break_on_hyphens=False) for note in notes]
    return "\n".join(lines)
