"""Helpers for tests that start real distributed processes: ports, process groups, leftovers."""

from __future__ import annotations

import json
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


def counting_starts(tmp_path: Path) -> tuple[dict, Path]:
    """An environment whose every Python interpreter appends its argv (sys.orig_argv) to a JSON-lines file:
    PYTHONPATH with a sitecustomize.py that does it, the way docs/design.md counts a command's processes."""
    site, log = tmp_path / "site", tmp_path / "starts.jsonl"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        f"import json, sys\nwith open({str(log)!r}, 'a') as out:\n    out.write(json.dumps(sys.orig_argv) + '\\n')\n")
    return {"PYTHONPATH": str(site)}, log


def starts_in(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def check_one_orchestrator(starts: list[list[str]], command: str) -> list[list[str]]:
    """The first start is the user's `accel COMMAND`; no later one runs any `accel` command; returns the
    workers' starts (launcher scripts ending in `python -m pipelines --worker FILE`), each reading a request
    the orchestrator wrote."""
    from pipelines.core.cli.main import cli
    from pipelines.core.config import request as requests

    def cli_command(argv: list[str]) -> str | None:
        if "-m" not in argv or argv[argv.index("-m") + 1] != "pipelines":
            return None
        rest = argv[argv.index("-m") + 2:]
        return rest[0] if rest and rest[0] in cli.commands else None

    assert cli_command(starts[0]) == command, starts[0]
    assert [s for s in starts[1:] if cli_command(s)] == [], "an accel process started an accel CLI command"
    workers = [s for s in starts if "-m" in s and s[s.index("-m") + 1:][:2] == ["pipelines", requests.FLAG]]
    for argv in workers:
        assert requests.read(argv[argv.index(requests.FLAG) + 1]).plans
    return workers
