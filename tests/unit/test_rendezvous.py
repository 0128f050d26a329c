"""The rendezvous budget and its one-line error: `rendezvous.Budget` hands torch whole seconds, rounded up and
never below its floor, and the line a rank or the agent prints when a group does not form states the user's
timeout only, with torch's own figure ("after 11 seconds", "after 10000ms") taken out of torch's message."""

from __future__ import annotations

import pytest

from pipelines.core.distributed import rendezvous


def test_budget_rounds_torch_waits_up_and_never_below_its_floor(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(rendezvous.time, "monotonic", lambda: now[0])
    budget = rendezvous.Budget(10)
    assert budget.left() == 10 and budget.left_whole_s() == 10
    now[0] += 0.4
    assert budget.left_whole_s() == 10  # 9.6 s left: torch takes whole seconds, rounded up
    assert rendezvous.Budget(10.5).left_whole_s() == 11  # why torch's own figure can exceed the user's
    now[0] += 20
    assert budget.left() == rendezvous.MIN_LEFT_S and budget.left_whole_s() == 1


@pytest.mark.parametrize("torch_says, kept", [
    ("Timed out after 11 seconds waiting for clients. 1/2 clients joined.",
     "Timed out waiting for clients. 1/2 clients joined."),
    ("The client socket has timed out after 10000ms while trying to connect to (127.0.0.1, 29500).",
     "The client socket has timed out while trying to connect to (127.0.0.1, 29500)."),
    ("wait timeout after 30000ms, keys: /accel/x", "wait timeout, keys: /accel/x"),
    ("Connection refused", "Connection refused")])
def test_the_one_line_error_states_the_users_timeout_only(torch_says, kept):
    from pipelines.core.distributed import agent, placement, ranks

    assert rendezvous.without_torch_figure(torch_says) == kept
    line = agent.not_formed(0, "127.0.0.1:29500", 10, RuntimeError(torch_says))
    assert "within 10 s" in line and kept in line and "11 seconds" not in line and "10000ms" not in line
    place = placement.Placement("single", rank=1, world_size=2, master_addr="127.0.0.1", master_port=29500)
    joined = ranks.not_joined(place, "gloo", 10, RuntimeError(torch_says))
    assert joined.startswith("rank 1 of 2 could not join the gloo group at 127.0.0.1:29500 within 10 s (")
    assert kept in joined and "11 seconds" not in joined

