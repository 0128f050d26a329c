#!/usr/bin/env python3
"""Score the step-time model (stats/prediction.py) on a results folder: for every measured ratio whose arm and
baseline carry a machine card and a step profile, the ratio the model predicts against the one measured.

Usage: python ci/prediction-check.py RESULTS_DIR [--markdown]

The pass rule was written in docs/timing.md ("The prediction and its pass rule") before any folder was
scored: over the judged CPU arms of one machine class (a verdict of reproduced, faster, slower or inconclusive;
a "not comparable" arm is listed, not scored), the median |predicted / measured - 1| is at most 10 %.
This prints one line per arm (predicted, measured with its interval, the error, whether the prediction falls
inside the interval, whether the verdict line gives a cause, and the errors of the two models the rule must
reject: the roofline and FLOPs alone), then for each model the median and worst error and whether the rule
holds. An arm judged end-to-end is held against its steady-state ratio, as its verdict line holds it. It exits 0
either way: it scores models, it gates nothing.
`--markdown` prints the table as docs/timing.md quotes it.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from pipelines.core.errors import ConfigError  # noqa: E402
from pipelines.core.record.results import load  # noqa: E402
from pipelines.core.stats import explain, intervals, prediction, rows as stats_rows  # noqa: E402


JUDGED = (intervals.REPRODUCED, intervals.FASTER, intervals.SLOWER, intervals.INCONCLUSIVE)  # what the rule scores


def scored(folder: Path) -> pd.DataFrame:
    built = stats_rows.build(load(folder))
    by_key = {row.key: row for row in built}
    lines = []
    for row in built:
        base = by_key.get(row.base_key) if row.base_key else None
        found = prediction.predict(row.records, base.records) if base is not None and row.ratio else None
        if found is None:
            continue
        wrong = {model: prediction.predict(row.records, base.records, model=model) for model in ("roofline", "flops")}
        measured = explain.steady_ratio(row, base)  # what the verdict line holds the prediction against
        inside = (row.interval.low <= found.ratio <= row.interval.high if row.interval is not None
                  and measured == row.ratio else None)  # the interval is of the ratio judged
        lines.append({"arm": f"{row.experiment} [{row.variant}]", "verdict": row.verdict,
                      "predicted": round(found.ratio, 3),
                      "measured": round(measured, 3), "judged": row.judged,
                      "interval": "-" if row.interval is None else f"[{row.ci_low:.2f}, {row.ci_high:.2f}]",
                      "error %": round(100 * found.error(measured), 1),
                      "inside": "-" if inside is None else "yes" if inside else "no",
                      "cause": "yes" if abs(found.error(measured)) <= prediction.CAUSE_WITHIN else "withheld",
                      **{f"{model} error %": round(100 * found.error(measured), 1) for model, found in wrong.items()}})
    return pd.DataFrame(lines)


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    folder = Path(argv[0])
    try:
        table = scored(folder)
    except ConfigError as exc:  # a folder that is not there, or holds no records: one line, not a traceback
        print(f"prediction-check: error: {exc}", file=sys.stderr)
        return 2
    if table.empty:
        print(f"prediction-check: no measured ratio in {folder} has a card and step profiles on both sides")
        return 0
    print(table.to_markdown(index=False) if "--markdown" in argv else table.to_string(index=False))
    judged = table[table["verdict"].isin(JUDGED)]
    inside = (judged["inside"] == "yes").sum()
    print(f"\n{len(judged)} judged arms ({len(table) - len(judged)} more, not comparable or not in the catalog, "
          f"left out), {inside} predictions inside the measured interval, {(judged['cause'] == 'withheld').sum()} "
          "causes withheld")
    for model, column in (("calibrated", "error %"), ("roofline", "roofline error %"), ("flops", "flops error %")):
        errors = [abs(e) for e in judged[column]]
        median = statistics.median(errors)
        held = "holds" if median <= 100 * prediction.CAUSE_WITHIN else "fails"
        print(f"{model}: median |error| {median:.1f} %, worst {max(errors):.1f} %; the pass rule (median at most "
              f"{100 * prediction.CAUSE_WITHIN:.0f} %) {held}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
