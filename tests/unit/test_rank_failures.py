"""A rank's one-line failure (distributed/ranks.py `failure_cause`): the likely cause read from the error's
own text, so a killed peer, a hung one and this rank's own failure read differently."""

from __future__ import annotations

import pytest

from pipelines.core.distributed import ranks


@pytest.mark.parametrize("error, cause", [
    (RuntimeError("[gloo/transport/tcp/pair.cc:534] Connection closed by peer [127.0.0.1]:40412"),
     "connection closed"),
    (RuntimeError("Read error [127.0.0.1]:1234: Connection reset by peer"), "connection closed"),
    (RuntimeError("ccl backend: allreduce did not complete within 20 s"), "did not complete within the group timeout"),
    (RuntimeError("Socket Timeout"), "did not complete within the group timeout"),
    (ValueError("shapes (3,) and (4,) differ"), "this rank failed"),
])
def test_a_failed_collective_names_its_likely_cause_from_the_error(error, cause):
    """A killed peer closes its sockets (Gloo says so); a hung one lets the group timeout expire; anything
    else is this rank's own failure: the one line says which, not a list of every possibility."""
    assert cause in ranks.failure_cause(error, 20)
