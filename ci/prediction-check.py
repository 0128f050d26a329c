#!/usr/bin/env python3
"""Score the step-time model (stats/prediction.py) on a results folder: for every measured ratio whose arm and
baseline carry a machine card and a step profile, the ratio the model predicts against the one measured.

Usage: python ci/prediction-check.py RESULTS_DIR [--markdown]

The pass rule was written in docs/timing.md ("The prediction and its pass rule") before any folder was
scored: over the judged CPU arms of one machine class, the median |predicted / measured - 1| is at most 10 %.
This prints one line per arm (predicted, measured with its interval, the error, whether the prediction falls
inside the interval), the median, and whether the rule holds. It exits 0 either way: it scores a model, it
gates nothing. `--markdown` prints the table as docs/timing.md quotes it.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from pipelines.core.record.results import load  # noqa: E402
from pipelines.core.stats import prediction, rows as stats_rows  # noqa: E402


def scored(folder: Path) -> pd.DataFrame:
    built = stats_rows.build(load(folder))
    by_key = {row.key: row for row in built}
    lines = []
    for row in built:
        base = by_key.get(row.base_key) if row.base_key else None
        found = prediction.predict(row.records, base.records) if base is not None and row.ratio else None
        if found is None:
            continue
        inside = row.interval is not None and row.interval.low <= found.ratio <= row.interval.high
        lines.append({"arm": f"{row.experiment} [{row.variant}]", "predicted": round(found.ratio, 3),
                      "measured": round(row.ratio, 3),
                      "interval": "-" if row.interval is None else f"[{row.ci_low:.2f}, {row.ci_high:.2f}]",
                      "error %": round(100 * found.error(row.ratio), 1), "inside": "yes" if inside else "no",
                      "fixed share %": round(100 * found.baseline.share("fixed"), 1)})
    return pd.DataFrame(lines)


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    folder = Path(argv[0])
    table = scored(folder)
    if table.empty:
        print(f"prediction-check: no measured ratio in {folder} has a card and step profiles on both sides")
        return 0
    print(table.to_markdown(index=False) if "--markdown" in argv else table.to_string(index=False))
    median = statistics.median(abs(e) for e in table["error %"])
    inside = (table["inside"] == "yes").sum()
    held = "holds" if median <= 100 * prediction.CAUSE_WITHIN else "fails"
    print(f"\n{len(table)} arms: median |error| {median:.1f} %, {inside} predictions inside the measured "
          f"interval; the pass rule (median at most {100 * prediction.CAUSE_WITHIN:.0f} %) {held}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
