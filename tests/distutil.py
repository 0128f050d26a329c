"""Helpers for tests that start real distributed processes: ports, process groups, leftovers."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from conftest import REPO


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_env(rank: int, world: int, port: int, **extra) -> dict:
    return {**os.environ, "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world),
            "LOCAL_WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
            "PYTHONPATH": str(REPO), **extra}


class Procs:
    """Processes started in their own sessions; `close` kills whatever is left (used as a finalizer)."""

    def __init__(self):
        self.procs: list[subprocess.Popen] = []

    def start(self, argv, env=None, **kwargs) -> subprocess.Popen:
        proc = subprocess.Popen(argv, cwd=REPO, env=env or os.environ.copy(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True, **kwargs)
        self.procs.append(proc)
        return proc

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait(timeout=30)


def accel_argv(*args) -> list[str]:
    return [sys.executable, "-m", "pipelines", *args]


def processes_matching(marker: str) -> list[int]:
    """PIDs whose command line contains `marker` (to prove nothing was left running)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if marker in (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                    out.append(int(entry.name))
            except OSError:
                continue
    return out


def wait_for(predicate, timeout: float, interval: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return False
