"""The published counts and settings of an arm (bases "count" and "setting": a model's parameters, a batch
size) against what every record of the arm measured: 'matches' when all do (Published.matches: the figure's
range or printed precision), else 'differs'. No interval: a count is exact, and one record that differs is a
difference. A count per device (steps per epoch: the talk's 2,812 on 1 GPU, 703 per device on 4) is
compared only where the arm ran on the figure's device count; elsewhere it reads 'other devices', with both
counts, since the run split its data another way. A model's count from a run of a small stand-in model (a
GPU entry's smoke run on a tiny ViT) reads 'stand-in model': it counts another model.
"""

from __future__ import annotations

from typing import Any, Sequence

from pipelines.core.config import experiments
from pipelines.core.config.arm import Arm
from pipelines.core.stats import pairing, plain_table

NAME = "count or setting"
FIGURES = ("count", "setting")
ORDER = 4
MATCHES, DIFFERS, OTHER_DEVICES, STAND_IN = "matches", "differs", "other devices", "stand-in model"
WORDS = (MATCHES, DIFFERS, OTHER_DEVICES, STAND_IN)
PER_DEVICE = ("steps_per_epoch",)  # counts that depend on how many devices split the data
MODEL_COUNTS = ("parameters", "baseline_parameters", "unpruned_parameters")  # counts of the source's own model


def checks(entry: experiments.Experiment, variant: str,
           records: list[dict[str, Any]]) -> list[tuple[str, float, float, str]]:
    """(metric, published, measured, verdict) per count or setting the records carry; `measured` is the first
    record's value when all match, else the first that differs."""
    out = []
    for fig in entry.published:
        # a count named for no arm is every arm's (a model's parameters do not change with its precision)
        if fig.basis_name not in FIGURES or fig.variant not in (None, variant):
            continue
        values = [r["metrics"].get(fig.metric) for r in records]
        values = [v for v in values if isinstance(v, (int, float))]
        wanted = entry.published_devices(variant) if fig.metric in PER_DEVICE else None
        ran = pairing.device_counts(records)
        models = sorted({str(model) for r in records if (model := (r.get("config") or {}).get("model"))})
        source_model = entry.settings.get("model")
        if values and fig.metric in MODEL_COUNTS and source_model and models and models != [source_model]:
            out.append((fig.metric, fig.value, values[0],
                        f"{STAND_IN}: {'/'.join(models)} ran in place of {source_model}, so its count is not "
                        "the source's"))
        elif values and wanted is not None and ran != [wanted]:
            out.append((fig.metric, fig.value, values[0],
                        f"{OTHER_DEVICES}: published on {wanted}, run on {'/'.join(map(str, ran))}"))
        elif values:
            verdict = MATCHES if all(fig.matches(v) for v in values) else DIFFERS
            out.append((fig.metric, fig.value, values[0] if verdict == MATCHES else
                        next(v for v in values if not fig.matches(v)), verdict))
    return out


def band(fig: Any) -> tuple[float, float]:
    """The figure's stated range, else the figure itself: equal at its printed precision (Published.matches)."""
    return (fig.low, fig.high) if fig.low is not None else (fig.value, fig.value)


def rule(fig: Any) -> str:
    return "inside the stated range" if fig.low is not None else "equal at the figure's printed precision"


def band_text(fig: Any) -> str:
    low, high = band(fig)
    return f"{fig.value:,.10g}: {rule(fig)}" + (f" [{low:,.10g}, {high:,.10g}]" if fig.low is not None else "")


arm_outcome = checks  # the basis's result for one arm (stats/bases/__init__.py): its checks, [] where none

FIELDS: dict[str, Any] = {"checks": []}


def fields(found: list[tuple[str, float, float, str]]) -> dict[str, Any]:
    return {"checks": [dict(zip(("metric", "published", "measured", "verdict"), check)) for check in found]}


def _shown(value: float) -> str:
    """1,630,090 as printed, 3.4e+38 and 1.079 as they are."""
    return f"{value:,.0f}" if float(value).is_integer() and abs(value) < 1e15 else f"{value:.6g}"


def section(rows: Sequence[Any]) -> str:
    """A run's counts and settings (parameters, steps per epoch, batch sizes) against the records: exact."""
    table = [[str(Arm.of(row)), metric, _shown(measured), _shown(published), verdict]
             for row in rows for metric, published, measured, verdict in row.outcomes.get(NAME, [])]
    if not table:
        return ""
    return "\ncounts and settings:\n" + plain_table.render(["arm", "figure", "measured", "published", "verdict"],
                                                            table)
