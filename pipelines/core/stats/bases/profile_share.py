"""Profile shares: a source's printed op share (torch.profiler's self time, %) against the share of the same op in
a profile recorded here. No interval: one profile a repeat, a mean over repeats, and a band in percentage points.

The band (`tolerance_pp`): max(FLOOR_PP, RELATIVE x the published share). A relative band alone would fail every
small share by construction: a printed share comes from one call of a few milliseconds, where a wrapper op is a
few microseconds, and two printed profiles of the same pass can differ several-fold on such an op. An absolute
floor of 1 point judges it by what can be checked, that it stays a small share, and it cannot pass by
construction: a wrapper that takes over a kernel's time (2 % or more) differs. For large shares, two printed
profiles of the same pass differed by up to 31 % of the share, so the band is 35 %: a real shift of time between
the big ops still differs. The profiles the band is calibrated on, and the test that they judge each other
"matches", are the catalog's (pipelines/catalog/book_tables.py). How ops are named across torch versions, and
the rows: report/shares.py.
"""

from __future__ import annotations

from typing import Any

NAME = "profile share"
FIGURES = ("profile share",)
ORDER = 5
FLOOR_PP = 1.0  # percentage points: the least difference a one-call profile can resolve
RELATIVE = 0.35  # of the published share: two printed profiles' spread (31 %), rounded up
MATCHES, DIFFERS = "matches", "differs"
WORDS = (MATCHES, DIFFERS)


def tolerance_pp(published: float) -> float:
    """The band's half-width around a published share, in percentage points (see the module's docstring)."""
    return max(FLOOR_PP, RELATIVE * published)


def band(fig: Any) -> tuple[float, float]:
    return fig.value - tolerance_pp(fig.value), fig.value + tolerance_pp(fig.value)


def rule(fig: Any) -> str:
    return f"within ±{tolerance_pp(fig.value):.2f} points: max({FLOOR_PP:g} point, {RELATIVE:.0%} of the share)"


def judge(published: float, measured: float) -> str:
    return MATCHES if abs(measured - published) <= tolerance_pp(published) + 1e-9 else DIFFERS


def band_text(fig: Any) -> str:
    """'': the report's profile-share section gives every share's band beside its measurement."""
    return ""
