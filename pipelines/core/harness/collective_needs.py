"""The rule that skips an arm whose technique calls a collective its backend does not implement: the
technique's declared collectives (harness/pipeline.py `Needs.collectives`) against what the backend has
(distributed/backends.py `COLLECTIVES`).
"""

from __future__ import annotations

from pipelines.core.distributed.backends import COLLECTIVES


def missing_collectives(backend: str | None, wanted: tuple[str, ...]) -> list[str]:
    """The collectives of `wanted` that `backend` does not implement (none for a backend not in COLLECTIVES)."""
    has = COLLECTIVES.get(backend or "")
    return [] if has is None else [name for name in wanted if name not in has]
