"""The last thing `accel run`, `accel compare` and `accel launch` print: a compact verdict table.

The product of an experiment is its verdict ("Table 9.1's 1.65x is reproduced here: 1.62 [1.56, 1.68]"),
so a command that measured something ends with it instead of a file path. The rows are the report's own
(stats/rows.py `build` over this command's records only, never older ones in the same folder), so the table
and `accel report` can never disagree on the same records. One line after the table names the record
files and the command that writes the full report.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from pipelines.core.config import experiments
from pipelines.core.record.results import Loaded
from pipelines.core.stats import rows as rows_of
from pipelines.core.stats import bases, intervals, judging, pairing, plain_table
from pipelines.core.config.arm import Arm

COLUMNS = ("arm", "measured ratio [95 %]", "published", "verdict")


def published_source(entry: experiments.Experiment | None, variant: str,
                     metrics: Sequence[str] = ("ratio", pairing.STATED_SPEED)) -> str:
    """Where the published figure of this arm comes from (book:ch2, talk-slides, ...), or ''."""
    if entry is None:
        return ""
    for metric in metrics:
        for fig in entry.published:
            if fig.metric == metric and fig.variant in (variant, None):
                return fig.source
    return ""


def _measured(row: rows_of.Row) -> str:
    if row.ratio is None:
        return "-"
    interval = f" [{intervals.fmt(row.ci_low)}, {intervals.fmt(row.ci_high)}]" if row.ci_low is not None else ""
    return f"{intervals.fmt(row.ratio)}{interval}"


def _published(row: rows_of.Row) -> str:
    """The published ratio, its source, and its basis when that is not plain same-work throughput."""
    if row.published_ratio is None:
        return "-"
    source = published_source(row.entry, row.variant)
    basis = "" if row.published_basis in ("-", "same-work throughput") else f"; {row.published_basis}"
    return f"{intervals.figure(row.published_ratio)} ({source}{basis})" if source else \
        intervals.figure(row.published_ratio)


def _accuracy(row: rows_of.Row) -> str:
    """Book scale on real data only: a few bench steps never compare with a published final accuracy."""
    if row.accuracy_mean is None or not rows_of.book_accuracy(row):
        return "-"
    published = "" if row.published_accuracy is None else (
        f" (published {row.published_accuracy:.2f} %: context only, {row.accuracy_context})" if row.accuracy_context
        else f" vs {row.published_accuracy:.2f} %")
    return f"{row.accuracy_mean:.2f} %{published}"


def rows(records: list[dict[str, Any]], ids: Sequence[str],
         serving: dict[tuple[str, str], str] | None = None) -> list[dict[str, Any]]:
    """One dict per arm of `ids` that has records (the table's lines, and the --json objects). `serving`:
    arms measured only as another entry's baseline, shown as that ("baseline", the role as why)."""
    built = rows_of.build(Loaded(records, [], 1), list(ids))
    out = []
    for row in built:
        if row.experiment not in ids or not (row.records or row.errors or row.interrupted):
            continue
        if (row.experiment, row.variant) in (serving or {}) and row.records:
            row.verdict, row.why, row.ratio, row.ci_low, row.ci_high = "baseline", "", None, None, None
            row.baseline, row.published_ratio = serving[(row.experiment, row.variant)], None
        out.append({"experiment": row.experiment, "variant": row.variant, "scale": row.scale,
                    "repeats": row.n, "baseline": row.baseline, "ratio": row.ratio, "ci_low": row.ci_low,
                    "ci_high": row.ci_high, "published_ratio": row.published_ratio,
                    "published_source": published_source(row.entry, row.variant) or None,
                    "published_basis": row.published_basis,
                    "verdict": row.verdict, "why": row.why, "cause": row.cause,
                    "accuracy_pct": row.accuracy_mean if rows_of.book_accuracy(row) else None,
                    "published_accuracy_pct": row.published_accuracy if rows_of.book_accuracy(row) else None,
                    "published_accuracy_context": row.accuracy_context,
                    **bases.fields(row.outcomes),  # the memory saving's and the counts' keys
                    "_row": row})
    return out


def text(records: list[dict[str, Any]], ids: Sequence[str], paths: Sequence[Path], results_dir: Path,
         method: str = "", serving: dict[tuple[str, str], str] | None = None) -> str:
    """The table, the reasons behind verdicts that are not conclusive, how the arms were measured
    (`method`: the allocator; the pairing is the rows'), and the closing line."""
    lines = rows(records, ids, serving)
    if not lines:
        body = "verdict: nothing was measured (no finished repeat)"
    else:
        book = any(line["scale"] == "book" for line in lines)
        table = []
        for line in lines:
            row = line["_row"]
            noisy = f" (noisy: {row.noisy_repeats} of {row.n} repeats)" if row.noisy_repeats else ""
            resumed = sum(1 for r in row.records if r["metrics"].get("resumed_from"))  # after a lost process
            elsewhere = sum(1 for r in row.records if judging.resumed_elsewhere(r))
            noisy += f" (resumed from a checkpoint: {resumed} of {row.n} repeats" if resumed else ""
            noisy += f", {elsewhere} at another world size: no ratio)" if elsewhere else ")" if resumed else ""
            cells = [str(Arm.of(row)), _measured(row), _published(row), row.verdict + noisy]
            if book:
                cells.append(_accuracy(row))
            table.append(cells)
        headers = [*COLUMNS, *(["accuracy (published)"] if book else [])]
        body = "verdict:\n" + plain_table.render(headers, table)
        reasons = []  # each arm's verdict reasons, then its why line (stats/explain.py)
        for line in lines:
            if line["verdict"] != "baseline":
                reasons += [f"  {Arm.of(line)}: {line['why']}"] if line["why"] else []
                reasons += [f"  {Arm.of(line)}, why: {line['cause']}"] if line["cause"] else []
        if reasons:
            body += "\n" + "\n".join(reasons)
        pairings = sorted({line["_row"].pairing for line in lines if line["_row"].pairing not in ("-", "")})
        if pairings or method:
            body += "\n  measured: " + "; ".join([*(f"paired {p}" if p != "unpaired" else p for p in pairings),
                                                 *([method] if method else [])])
        body += bases.sections([line["_row"] for line in lines])
    body += "".join(f"\n  not run here: {arm}: {why}" for arm, why in not_run(records, ids).items())
    return f"{body}\n{closing_line(paths, results_dir)}"


def not_run(records: list[dict[str, Any]], ids: Sequence[str]) -> dict[str, str]:
    """Arms of `ids` skipped here (a declared need this run does not meet), each with the reason its record
    holds: the table has no line for them, so the verdict names them after it."""
    return {str(Arm.of(r)): "; ".join(r.get("notes", [])) or "skipped" for r in records
            if r["status"] == "skipped" and r["experiment"] in ids}


def closing_line(paths: Sequence[Path], results_dir: Path) -> str:
    """The record files (named when few; a comparison writes one per process and round) and the report."""
    files = (", ".join(str(p) for p in paths) if len(paths) <= 2 else f"{len(paths)} files in {results_dir}/"
             ) if paths else "(none written)"
    return f"records: {files}; full report: accel report --results-dir {results_dir} --out {results_dir}"


def as_json(records: list[dict[str, Any]], ids: Sequence[str], paths: Sequence[Path], results_dir: Path,
            serving: dict[tuple[str, str], str] | None = None) -> str:
    """The same table for scripts: one object with the arms, the record files and the report command."""
    arms = [{k: v for k, v in line.items() if k != "_row"} for line in rows(records, ids, serving)]
    skipped = [{"arm": arm, "why": why} for arm, why in not_run(records, ids).items()]
    return json.dumps({"arms": arms, "not_run": skipped, "records": [str(p) for p in paths],
                       "report": f"accel report --results-dir {results_dir} --out {results_dir}"},
                      indent=1, allow_nan=False, default=str)
