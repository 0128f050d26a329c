"""Verdict bases: one module per way a published figure is judged, each holding its band, its rule and its text.

A published figure measures something (its basis, `Published.basis_name`), and a basis says how a measurement is
held against it. Every basis module here has the same face:

- `NAME`: the basis, as the glossary and the report say it;
- `FIGURES`: the `Published.basis_name` values it judges (none for a check against a goal, as the harness's);
- `ORDER`: where its section comes in the report, the verdict table and the CI outputs;
- `WORDS`: the verdict words it gives;
- `band(fig)` and `rule(fig)`: where a measurement reproduces or matches the figure, and why there;
- its judging function, named for what it judges (`judge`, `saving`, `checks`, `share_rows`, `overhead`).

`ALL` lists the modules in ORDER, so adding a basis is adding one module here and its name to the import below
(a static import, so tests/unit/test_layers.py sees what it imports); `of(fig)` is the one place that maps a
figure to its basis: no other module compares basis names.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from pipelines.core.stats.bases import counts, end_to_end, harness, memory, profile_share, throughput

ALL = tuple(sorted((counts, end_to_end, harness, memory, profile_share, throughput), key=lambda module: module.ORDER))


def of(fig: Any) -> ModuleType | None:
    """The basis module that judges a published figure; None for figures no basis judges (accuracy, context)."""
    return next((module for module in ALL if fig.basis_name in module.FIGURES), None)


def judges(fig: Any, *modules: ModuleType) -> bool:
    """Whether one of `modules` is the basis of `fig`."""
    return of(fig) in modules
