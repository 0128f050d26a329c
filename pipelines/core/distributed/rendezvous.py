"""One bounded wait for a rendezvous: the run's `timeout_s`, counted once, whoever waits.

torch's store client retries a connection it could not make: a first attempt for the whole timeout, a
backoff pause, then a second attempt for the whole timeout again, so on its own `timeout_s=120` gives up
after about 237 s. Here a process that must reach a rendezvous host (a rank under mpirun or srun, a second node's
torchrun agent) first proves, with plain sockets, that the host's port answers, and stops at the deadline
when it does not; what is left of the budget then bounds the store and the group's creation. A port that
answers makes torch's own connection succeed at once, so its retries never start.

Standard library only: the torchrun agent (`core/distributed/agent.py`) probes before it pays for importing torch.
"""

from __future__ import annotations

import math
import re
import socket
import time

RETRY_S = 0.5  # between connection attempts while the host is not listening yet
MIN_LEFT_S = 1.0  # the smallest wait handed to torch (it refuses zero)
ROUND_VAR = "ACCEL_RDZV_ROUND"  # the c10d round a torchrun agent's ranks joined (agent.py -> ranks._attempt)


class Budget:
    """The run's wait, started once: every later stage gets what is left of it."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.deadline = time.monotonic() + timeout_s

    def left(self) -> float:
        return max(MIN_LEFT_S, self.deadline - time.monotonic())

    def left_whole_s(self) -> int:
        """For torch options that take whole seconds (torchrun's rendezvous configuration)."""
        return math.ceil(self.left())


# torch's own figure in a timeout message: "Timed out after 11 seconds waiting for clients", "has timed out
# after 10000ms while trying to connect", "wait timeout after 30000ms".
_TORCH_FIGURE = re.compile(
    r"\b(timed out|timeout) after \d+(?:\.\d+)?\s*(?:ms|milliseconds?|s|secs?|seconds?)\b", re.IGNORECASE)


def without_torch_figure(reason: str) -> str:
    """torch's reason with its own wait figure taken out ("Timed out after 11 seconds waiting for clients"
    -> "Timed out waiting for clients").

    The one-line error states the user's `-o timeout_s`; torch's figure is the stage's share of it,
    rounded up to whole seconds (`Budget.left_whole_s`, at least MIN_LEFT_S once the deadline passed,
    or a fractional timeout rounded up), so it could read "within 10 s (... Timed out after 11 seconds
    ...)": two numbers for one wait. The rest of torch's reason (who joined, which address) stays."""
    return _TORCH_FIGURE.sub(lambda match: match[1], reason)


def reach(host: str, port: int, budget: Budget) -> str | None:
    """None as soon as host:port accepts a TCP connection; else, at the deadline, the last reason why not.

    A host that does not resolve fails at once (waiting will not make it resolve). The connection is closed
    without a word: torch's store server counts only clients that go on to register."""
    reason = "no answer"
    while True:
        left = budget.deadline - time.monotonic()
        if left <= 0:
            return reason
        try:
            with socket.create_connection((host, port), timeout=min(left, 5.0)):
                return None
        except socket.gaierror as exc:
            return f"{host} does not resolve: {exc.strerror}"
        except OSError as exc:  # refused (nothing listens yet), unreachable, or timed out (a firewall)
            reason = exc.strerror or "timed out"
        time.sleep(max(0.0, min(RETRY_S, budget.deadline - time.monotonic())))
