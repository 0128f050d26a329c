"""Verdict bases: one module per way a published figure is judged, each holding its band, its rule and its text.

A published figure measures something (its basis, `Published.basis_name`), and a basis says how a measurement is
held against it. Every basis module here has the same face:

- `NAME`: the basis, as the glossary and the report say it;
- `FIGURES`: the `Published.basis_name` values it judges (none for a check against a goal, as the harness's);
- `ORDER`: where its section comes in the report, the verdict table and the CI outputs;
- `WORDS`: the verdict words it gives;
- `band(fig)` and `rule(fig)`: where a measurement reproduces or matches the figure, and why there;
- its judging function, named for what it judges (`judge`, `saving`, `checks`, `share_rows`, `overhead`).

A basis whose result is more than the arm's ratio and verdict (a memory saving, a count) also has:

- `FIELDS`: its flat keys with their defaults, which every row's CSV line and `--json` object carry;
- `arm_outcome(entry, variant, records)` or `pair_outcome(entry, variant, records, base_records)`: its result
  for one arm, alone or against its baseline's records (None where it has none);
- `fields(outcome)`: that result as FIELDS;
- `section(rows)`: its part of a run's verdict text; `REPORT` (title, introduction) and `report_rows(rows)`:
  its section of the report.

`ALL` is every module of this package, found when the package is imported, in ORDER: adding a basis is adding
one module here. `of(fig)` is the one place that maps a figure to its basis: no other module compares basis
names. A row keeps its bases' results in `Row.outcomes`, by NAME.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType
from typing import Any, Sequence

ALL: tuple[ModuleType, ...] = tuple(sorted(
    (importlib.import_module(f"{__name__}.{info.name}") for info in pkgutil.iter_modules(__path__)),
    key=lambda module: module.ORDER))


def of(fig: Any) -> ModuleType | None:
    """The basis module that judges a published figure; None for figures no basis judges (accuracy, context)."""
    return next((module for module in ALL if fig.basis_name in module.FIGURES), None)


def judges(fig: Any, *modules: ModuleType) -> bool:
    """Whether one of `modules` is the basis of `fig`."""
    return of(fig) in modules


def arm_outcomes(entry: Any, variant: str, records: list[dict[str, Any]]) -> dict[str, Any]:
    """Every basis's result for one arm on its own records (a count against its figure)."""
    found = {module.NAME: module.arm_outcome(entry, variant, records) for module in ALL
             if hasattr(module, "arm_outcome")}
    return {name: outcome for name, outcome in found.items() if outcome is not None}


def pair_outcomes(entry: Any, variant: str, records: list[dict[str, Any]],
                  base_records: list[dict[str, Any]]) -> dict[str, Any]:
    """Every basis's result for one arm against its baseline's records (a memory saving)."""
    found = {module.NAME: module.pair_outcome(entry, variant, records, base_records) for module in ALL
             if hasattr(module, "pair_outcome")}
    return {name: outcome for name, outcome in found.items() if outcome is not None}


def field_names() -> list[str]:
    """The flat keys of every basis with FIELDS, in ORDER: the CSV's last columns."""
    return [name for module in ALL for name in getattr(module, "FIELDS", {})]


def fields(outcomes: dict[str, Any]) -> dict[str, Any]:
    """One row's flat keys: each basis's FIELDS, filled from its result where the row has one."""
    out: dict[str, Any] = {}
    for module in ALL:
        if hasattr(module, "FIELDS"):
            out.update(module.FIELDS)
            if module.NAME in outcomes:
                out.update(module.fields(outcomes[module.NAME]))
    return out


def sections(rows: Sequence[Any]) -> str:
    """The bases' parts of a run's verdict text, in ORDER (each empty where no row has its result)."""
    return "".join(module.section(rows) for module in ALL if hasattr(module, "section"))


def report_sections(rows: Sequence[Any]) -> list[tuple[str, str, list[dict[str, Any]]]]:
    """(title, introduction, table rows) of each basis's report section that has rows."""
    out = []
    for module in ALL:
        if hasattr(module, "report_rows") and (table := module.report_rows(rows)):
            out.append((*module.REPORT, table))
    return out
