"""The published counts and settings of an arm (bases "count" and "setting": a model's parameters, a batch
size) against what every record of the arm measured: 'matches' when all do (Published.matches: the figure's
range or printed precision), else 'differs'. No interval: a count is exact, and one record that differs is a
difference. A count per device (steps per epoch: the talk's 2,812 on 1 GPU, 703 per device on 4) is
compared only where the arm ran on the figure's device count; elsewhere it reads 'other devices', with both
counts, since the run split its data another way.
"""

from __future__ import annotations

from typing import Any

from pipelines.core.config import experiments
from pipelines.core.stats import pairing

MATCHES, DIFFERS, OTHER_DEVICES = "matches", "differs", "other devices"
PER_DEVICE = ("steps_per_epoch",)  # counts that depend on how many devices split the data


def checks(entry: experiments.Experiment, variant: str,
           records: list[dict[str, Any]]) -> list[tuple[str, float, float, str]]:
    """(metric, published, measured, verdict) per count or setting the records carry; `measured` is the first
    record's value when all match, else the first that differs."""
    out = []
    for fig in entry.published:
        # a count named for no arm is every arm's (a model's parameters do not change with its precision)
        if fig.basis_name not in ("count", "setting") or fig.variant not in (None, variant):
            continue
        values = [r["metrics"].get(fig.metric) for r in records]
        values = [v for v in values if isinstance(v, (int, float))]
        wanted = entry.published_devices(variant) if fig.metric in PER_DEVICE else None
        ran = pairing.device_counts(records)
        if values and wanted is not None and ran != [wanted]:
            out.append((fig.metric, fig.value, values[0],
                        f"{OTHER_DEVICES}: published on {wanted}, run on {'/'.join(map(str, ran))}"))
        elif values:
            verdict = MATCHES if all(fig.matches(v) for v in values) else DIFFERS
            out.append((fig.metric, fig.value, values[0] if verdict == MATCHES else
                        next(v for v in values if not fig.matches(v)), verdict))
    return out
