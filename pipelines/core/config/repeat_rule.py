"""The repeat rule's settings and their checks: what `--rounds auto` (or `--repeats auto`), `--budget-s` and
`--halfwidth` mean before anything runs. RunConfig reads them here; the rule itself (when rounds stop) is
stats/stopping.py.
"""

from __future__ import annotations

import math

from pipelines.core.errors import ConfigError

DEFAULT_HALFWIDTH = 0.05
DEFAULT_BUDGET_S = 300.0  # bench scale: a few minutes per experiment on 2 cores
MAX_AUTO_REPEATS = 50  # at 10 % run-to-run noise a 5 % half-width needs about 16 repeats; 50 is a backstop
AUTO = "auto"


def check_budget(budget_s: float) -> None:
    if not (math.isfinite(budget_s) and budget_s > 0):
        raise ConfigError(f"--budget-s {budget_s:g} must be a positive number of seconds (e.g. --budget-s 300)")


def check_halfwidth(halfwidth: float) -> None:
    if not (math.isfinite(halfwidth) and 0 < halfwidth < 1):
        raise ConfigError(f"--halfwidth {halfwidth * 100:g} must be between 0 and 100 percent (e.g. 5 for ±5 %)")
