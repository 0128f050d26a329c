"""Arm: one experiment and one of its variants, the unit every plan, record, verdict and log line names.

A comparison measures arms; a record holds one arm's measurement; a verdict judges one arm against its
baseline arm. Its text form, `id [variant]`, is the label the plan, the progress bars, the verdict table and
the report print, so an arm reads the same everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping


@dataclass(frozen=True, order=True)
class Arm:
    experiment: str  # the catalog id
    variant: str  # the variant's name within it ("baseline", "bf16", "ranks=4", ...)

    def __str__(self) -> str:
        return f"{self.experiment} [{self.variant}]"

    @classmethod
    def of(cls, item: Mapping[str, Any] | Any) -> "Arm":
        """The arm of a record (a mapping with `experiment` and `variant`), a config or a report row."""
        if isinstance(item, Mapping):
            return cls(item["experiment"], item["variant"])
        return cls(item.experiment, item.variant)
