"""Faults a distributed run must survive with one clear line: no rendezvous to join, a rank killed mid-run.

A second node whose rendezvous host never answers gives up within its
`-o timeout_s` (the launcher's own checks aside) and says so in one line; a rank killed under torchrun
leaves every survivor's error record, one `accel: error:` line instead of torchrun's ChildFailedError
traceback, and the log folder that line names. Real launchers, real processes, loopback only.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import REPO
from distutil import Procs, accel_argv, free_port, processes_matching, wait_for
from pipelines.core.train import checkpoint

pytestmark = pytest.mark.slow
TIMEOUT_S = 5
SMOKE = ("run", "ch8-ddp-template", "--scale", "smoke", "--dataset", "synthetic")
NOISE = ("Traceback", "ChildFailedError", "frame #", "Exception raised from", "[W", "[E")


def _timed_launch(argv: list[str], env: dict, procs: Procs, wrap: tuple[str, ...] = ()) -> tuple[int, str, float]:
    """Run a launcher; returns its exit code, stderr and the seconds from the moment the launcher started
    waiting (it echoes `+ ... pipelines.core.distributed.agent`, after its pre-flight) to its exit."""
    proc = procs.start([*wrap, *argv], env={**os.environ, **env})
    started: list[float] = []
    lines: list[str] = []

    def read() -> None:
        for line in proc.stderr:
            if "pipelines.core.distributed.agent" in line and line.startswith("+ "):
                started.append(time.monotonic())
            lines.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    proc.wait(timeout=300)
    ended = time.monotonic()
    reader.join(timeout=30)
    assert started, "the launcher never started torchrun's agent:\n" + "".join(lines)[-3000:]
    return proc.returncode, "".join(lines), ended - started[0]


def _one_accel_line(err: str) -> str:
    accel = [line for line in err.splitlines() if line.startswith("accel:")]
    assert len(accel) == 1, err[-3000:]
    assert not [word for word in NOISE if word in err], err[-3000:]
    return accel[0]


def _can_unshare_network() -> bool:
    return shutil.which("unshare") is not None and os.geteuid() == 0 and \
        subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0


@pytest.mark.parametrize("where", ["closed-port", "unresolvable", "unroutable"])
def test_second_node_without_a_rendezvous_gives_up_within_the_timeout(where, tmp_path, procs):
    """NNODES=2 NODE_RANK=1 with nobody at MASTER_ADDR:MASTER_PORT: torchrun's defaults waited 900 s."""
    addr, wrap = {"closed-port": ("127.0.0.1", ()), "unresolvable": ("no-such-host.invalid", ()),
                  "unroutable": ("10.255.255.1", ("unshare", "-n"))}[where]
    if wrap and not _can_unshare_network():
        pytest.skip("an unroutable address needs a network namespace without routes (root, unshare -n)")
    env = {"NNODES": "2", "NODE_RANK": "1", "NPROC": "1", "THREADS": "1", "MASTER_ADDR": addr,
           "MASTER_PORT": str(free_port())}
    code, err, waited = _timed_launch(["launch/torchrun.sh", *SMOKE, "-o", f"timeout_s={TIMEOUT_S}",
                                       "--results-dir", str(tmp_path / "results")], env, procs, wrap)
    assert code != 0
    line = _one_accel_line(err)
    assert f"could not reach the rendezvous host {addr}:{env['MASTER_PORT']} within {TIMEOUT_S} s" in line
    assert waited < TIMEOUT_S + 10, f"waited {waited:.1f} s for a {TIMEOUT_S} s timeout"
    log = Path(line.rsplit(": ", 1)[1])
    assert (log / "agent.log").is_file(), "the line names the folder with torchrun's full log"
    assert not processes_matching(str(tmp_path))


def test_first_node_whose_peer_never_comes_gives_up_within_the_timeout(tmp_path, procs):
    env = {"NNODES": "2", "NODE_RANK": "0", "NPROC": "1", "THREADS": "1", "MASTER_PORT": str(free_port())}
    code, err, waited = _timed_launch(["launch/torchrun.sh", *SMOKE, "-o", f"timeout_s={TIMEOUT_S}",
                                       "--results-dir", str(tmp_path / "results")], env, procs)
    assert code != 0
    assert f"node 0 could not form the group at 127.0.0.1:{env['MASTER_PORT']} within {TIMEOUT_S} s" in \
        _one_accel_line(err)
    assert waited < TIMEOUT_S + 10, f"waited {waited:.1f} s for a {TIMEOUT_S} s timeout"


def test_rank_whose_rendezvous_host_never_answers_stops_within_the_timeout(tmp_path, procs):
    """A rank under mpirun or srun (no agent): rank 1 alone, nobody on the port. torch's store client alone
    took about 2 x timeout plus a backoff, with C++ stack frames on the terminal."""
    port = free_port()
    env = {"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(port), "PYTHONPATH": str(REPO)}
    started = time.monotonic()
    rank = procs.start(accel_argv(*SMOKE, "-o", f"timeout_s={TIMEOUT_S}", "--results-dir", str(tmp_path)),
                       env={**os.environ, **env})
    _, err = rank.communicate(timeout=300)
    assert rank.returncode == 1
    line = _one_accel_line(err)
    assert f"rank 1 of 2 could not reach the rendezvous at 127.0.0.1:{port} within {TIMEOUT_S} s" in line
    assert time.monotonic() - started < TIMEOUT_S + 60  # python and torch start-up included, never 2 x timeout
    assert not list(tmp_path.glob("*.jsonl")), "only rank 0 writes results"


def test_killing_a_rank_under_torchrun_leaves_records_and_one_line(tmp_path, procs):
    """kill -9 of rank 1 mid-run: rank 0 (stopped by the gloo error or torchrun's SIGTERM, whichever comes
    first) records the error; the terminal gets one accel line naming rank 1, SIGKILL and the log folder."""
    ckpt, results = tmp_path / "ckpt", tmp_path / "results"
    env = {**os.environ, "NPROC": "2", "THREADS": "1", "MASTER_PORT": str(free_port())}
    args = ("run", "ch8-ddp-template", "--scale", "book", "--dataset", "synthetic", "--epochs", "200",
            "--batch-size", "32", "-o", f"checkpoint_dir={ckpt}", "-o", "timeout_s=20", "--results-dir", str(results))
    agent = procs.start(["launch/torchrun.sh", *args], env=env)
    assert wait_for(lambda: (ckpt / checkpoint.FILENAME).exists(), 240), "training never reached epoch 1"
    workers = sorted(p for p in processes_matching(str(ckpt)) if "-u -m pipelines run" in
                     Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
    assert len(workers) == 2, workers
    os.kill(workers[1], signal.SIGKILL)  # the later-started worker: local rank 1
    out, err = agent.communicate(timeout=120)
    assert agent.returncode == 1
    line = _one_accel_line(err)
    assert line.startswith("accel: error: rank 1 (pid") and "was killed by SIGKILL" in line, line
    log = Path(line.rsplit(": ", 1)[1])
    assert (log / "agent.log").is_file() and "ChildFailedError" in (log / "agent.log").read_text()
    [record] = [json.loads(text) for path in results.glob("*.jsonl") for text in path.read_text().splitlines()]
    assert record["status"] == "error" and record["dist"]["world_size"] == 2, record
    assert str(next(results.glob("*.jsonl"))) in line, "the line says where rank 0 recorded the error"
    rank0 = [p for p in log.rglob("error.json") if p.parent.name == "0"]
    assert rank0 and "message" in json.loads(rank0[0].read_text()), "rank 0's torchrun error record"
    assert wait_for(lambda: not processes_matching(str(ckpt)), 10), "processes were left running"


def test_sigterm_to_a_rank_is_recorded_before_it_exits(tmp_path, procs):
    """torchrun stops the survivors with SIGTERM when a rank dies (before they may have noticed): the rank
    records why (rank 0: the result file's error record) and prints one line, instead of dying silently."""
    from distutil import rank_env

    port, ckpt, results = free_port(), tmp_path / "ckpt", tmp_path / "results"
    args = ("run", "ch8-ddp-template", "--scale", "book", "--dataset", "synthetic", "--epochs", "200",
            "--batch-size", "32", "-o", f"checkpoint_dir={ckpt}", "-o", "timeout_s=20", "--results-dir", str(results))
    ranks = [procs.start(accel_argv(*args), env=rank_env(r, 2, port, OMP_NUM_THREADS="1")) for r in (0, 1)]
    assert wait_for(lambda: (ckpt / checkpoint.FILENAME).exists(), 240), "training never reached epoch 1"
    ranks[0].send_signal(signal.SIGTERM)
    _, err = ranks[0].communicate(timeout=60)
    assert ranks[0].returncode == 1
    line = _one_accel_line(err)
    assert "rank 0/2" in line and "stopped by SIGTERM" in line and "error record" in line, line
    [record] = [json.loads(text) for path in results.glob("*.jsonl") for text in path.read_text().splitlines()]
    assert record["status"] == "error" and record["error"]["type"] == "Stopped"
    ranks[1].communicate(timeout=120)  # the peer fails on the broken group within its timeout
    assert ranks[1].returncode == 1
