"""Two hosts on one machine: two network namespaces joined by a veth pair, made (and removed) by the test.

One torchrun node runs in each namespace (--nnodes 2, static and c10d rendezvous over the veth
addresses, Gloo told the interface), and Open MPI's mpirun spans both namespaces with a small
`ip netns exec` remote agent (tests/netns-rsh) in place of ssh. Traffic stays on the private veth.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time

import pytest
import torch

from conftest import REPO, records
from distutil import Procs, wait_for
from imageutil import SANDBOX_ARGS, built, requires_podman

pytestmark = pytest.mark.slow
ADDRS = ("10.231.0.1", "10.231.0.2")
IFACE = "accel0"


def _can_make_namespaces() -> bool:
    if os.geteuid() != 0 or shutil.which("ip") is None:
        return False
    name = f"accel-probe-{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", name], capture_output=True).returncode == 0
    if made:
        subprocess.run(["ip", "netns", "del", name], capture_output=True)
    return made


if not _can_make_namespaces():
    pytest.skip("network namespaces need root and iproute2 (CI runs as root with iproute2)", allow_module_level=True)


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


@pytest.fixture
def hosts():
    """Two namespaces A and B, each with lo up and one end of a veth pair named accel0."""
    tag = f"{os.getpid() % 100000}"
    names = (f"accel-a-{tag}", f"accel-b-{tag}")
    procs = Procs()
    try:
        for name in names:
            ip("netns", "add", name)
            ip("-n", name, "link", "set", "lo", "up")
        ip("link", "add", f"acca{tag}", "type", "veth", "peer", "name", f"accb{tag}")
        for end, name, addr in zip((f"acca{tag}", f"accb{tag}"), names, ADDRS):
            ip("link", "set", end, "netns", name)
            ip("-n", name, "link", "set", end, "name", IFACE)
            ip("-n", name, "addr", "add", f"{addr}/24", "dev", IFACE)
            ip("-n", name, "link", "set", IFACE, "up")
        yield names, procs
    finally:
        procs.close()
        for name in names:
            subprocess.run(["ip", "netns", "pids", name], capture_output=True)
            pids = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True).stdout.split()
            for pid in pids:
                subprocess.run(["kill", "-9", pid], capture_output=True)
            subprocess.run(["ip", "netns", "del", name], capture_output=True)


def in_ns(ns: str, env: dict, *argv: str, procs: Procs):
    """argv in namespace ns's network (nsenter: the network only, so /sys and its cgroup mounts, which a
    container runtime needs, stay as they are; `ip netns exec` would mount a fresh /sys)."""
    return procs.start(["nsenter", f"--net=/run/netns/{ns}", *argv], env={**os.environ, **env})


@pytest.mark.parametrize("rdzv", ["static", "c10d"])
def test_torchrun_two_nodes_over_veth(hosts, rdzv, tmp_path):
    names, procs = hosts
    results = tmp_path / "results"
    common = {"NNODES": "2", "NPROC": "1", "MASTER_ADDR": ADDRS[0], "MASTER_PORT": "29531", "RDZV": rdzv,
              "GLOO_SOCKET_IFNAME": IFACE}
    args = ("launch/torchrun.sh", "run", "ch8-ddp-template", "--scale", "smoke", "--dataset", "synthetic",
            "-o", "timeout_s=60", "--results-dir", str(results))
    nodes = [in_ns(ns, {**common, "NODE_RANK": str(i), "LOCAL_ADDR": ADDRS[i]}, *args, procs=procs)
             for i, ns in enumerate(names)]
    outputs = [node.communicate(timeout=300) for node in nodes]
    for node, (out, err) in zip(nodes, outputs):
        assert node.returncode == 0, [o[-3000:] for output in outputs for o in output]
    found = [r for r in records(results) if r["status"] == "ok"]
    assert len(found) == 1
    rec = found[0]
    assert rec["dist"]["world_size"] == 2 and rec["dist"]["nodes"] == 2
    assert sorted(r["node_rank"] for r in rec["dist"]["ranks"]) == [0, 1]
    assert rec["env"]["vars"].get("GLOO_SOCKET_IFNAME") == IFACE


def mpirun_env(names, port: int, **extra: str) -> dict:
    """launch/mpirun.sh across both namespaces: one slot each, netns-rsh as the remote agent, every
    Open MPI and Gloo channel on the veth."""
    return {"NP": "2", "HOSTS": f"{ADDRS[0]}:1,{ADDRS[1]}:1", "MASTER_ADDR": ADDRS[0], "MASTER_PORT": str(port),
            "GLOO_SOCKET_IFNAME": IFACE, "RSH_AGENT": str(REPO / "tests" / "netns-rsh"),
            "ACCEL_NETNS_MAP": f"{ADDRS[0]}={names[0]} {ADDRS[1]}={names[1]}",
            "OMPI_MCA_oob_tcp_if_include": IFACE, "OMPI_MCA_btl_tcp_if_include": IFACE, **extra}


SMOKE_DDP = ("launch/mpirun.sh", "run", "ch8-ddp-template", "--scale", "smoke", "--dataset", "synthetic",
             "-o", "timeout_s=60")


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="Open MPI's mpirun is not installed (openmpi-bin)")
def test_mpirun_across_two_namespaces(hosts, tmp_path):
    names, procs = hosts
    results = tmp_path / "results"
    run = in_ns(names[0], mpirun_env(names, 29532), *SMOKE_DDP, "--results-dir", str(results), procs=procs)
    out, err = run.communicate(timeout=300)
    assert run.returncode == 0, out[-2000:] + err[-3000:]
    rec = [r for r in records(results) if r["status"] == "ok"][0]
    assert rec["dist"]["launcher"] == "mpirun" and rec["dist"]["world_size"] == 2
    assert rec["dist"]["nodes"] == 2 and rec["dist"]["master"] == f"{ADDRS[0]}:29532"


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="Open MPI's mpirun is not installed (openmpi-bin)")
@requires_podman
def test_hybrid_mpirun_starts_one_container_per_rank_on_each_host(hosts, tmp_path):
    """The cluster model: mpirun on the host, across two hosts, each rank in its own container of the `mpi`
    image; the ranks find each other with Open MPI's variables and Gloo over the veth pair."""
    names, procs = hosts
    tag = built("mpi")["tag"]
    results = tmp_path / "results"
    env = mpirun_env(names, 29533, IMAGE=f"podman:{tag}", CONTAINER_ARGS=SANDBOX_ARGS)
    run = in_ns(names[0], env, *SMOKE_DDP, "--results-dir", str(results), procs=procs)
    out, err = run.communicate(timeout=600)
    assert run.returncode == 0, out[-2000:] + err[-4000:]
    assert err.count("+ podman run --rm") == 2, "one container per rank, started on its host"
    [rec] = [r for r in records(results) if r["status"] == "ok"]
    assert rec["dist"]["launcher"] == "mpirun" and rec["dist"]["world_size"] == 2 and rec["dist"]["nodes"] == 2
    assert rec["env"]["image"]["target"] == "mpi", "the record's fingerprint names the image"
    assert rec["env"]["executable"].startswith("/opt/venv/")


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="Open MPI's mpirun is not installed (openmpi-bin)")
@requires_podman
def test_hybrid_mpirun_refuses_a_host_without_the_container_runtime(hosts, tmp_path):
    """Host B has no podman (hidden in its mount namespace): one line naming the host and the fix, exit 2,
    before any rank starts."""
    names, procs = hosts
    tag = built("mpi")["tag"]
    env = mpirun_env(names, 29534, IMAGE=f"podman:{tag}", CONTAINER_ARGS=SANDBOX_ARGS,
                     ACCEL_NETNS_HIDE=f"{ADDRS[1]}={shutil.which('podman')}")
    run = in_ns(names[0], env, *SMOKE_DDP, "--results-dir", str(tmp_path / "results"), procs=procs)
    out, err = run.communicate(timeout=300)
    errors = [line for line in err.splitlines() if "error" in line.lower()]
    assert run.returncode == 2 and errors == [
        f"launch: error: host {ADDRS[1]}: IMAGE=podman:{tag} but podman is not installed on "
        f"{os.uname().nodename}; install it there or use another IMAGE scheme"], err[-3000:]
    assert "+ mpirun -np 2" not in err and "podman run" not in err, "no rank was started"
    assert not (tmp_path / "results").exists()


def _final_weights(folder) -> dict:
    from pipelines.core.train import checkpoint

    state = checkpoint.load(folder / checkpoint.FILENAME)
    assert state["complete"], f"{folder}: the run did not finish"
    return state["model"]


EVERY = 3  # batches between step checkpoints
TRAINING = ("launch/torchrun.sh", "run", "ch8-ddp-template", "--dataset", "synthetic", "--model", "resnet18",
            "--scale", "book", "--epochs", "2", "-o", f"checkpoint_every_steps={EVERY}")


class TwoHosts:
    """A 2-node torchrun run (c10d, one rank a node, MAX_RESTARTS=1) of TRAINING over the veth pair, with step
    checkpoints in a folder both "hosts" share; `kill(i)` ends every process of host i, `start(i)` starts it."""

    def __init__(self, hosts, tmp_path, timeout_s: int, nnodes: str = "2", options: tuple[str, ...] = ()):
        self.names, self.procs = hosts
        self.ckpt, self.results = tmp_path / "ckpt", tmp_path / "results"
        self.common = {"NNODES": nnodes, "NPROC": "1", "MASTER_ADDR": ADDRS[0], "MASTER_PORT": "29533",
                       "RDZV": "c10d", "GLOO_SOCKET_IFNAME": IFACE, "MAX_RESTARTS": "1", "THREADS": "1"}
        self.argv = (*TRAINING, "-o", f"timeout_s={timeout_s}", "-o", f"checkpoint_dir={self.ckpt}", *options,
                     "--results-dir", str(self.results))
        self.nodes = [self.start(0), self.start(1)]

    def start(self, i: int):
        return in_ns(self.names[i], {**self.common, "NODE_RANK": str(i), "LOCAL_ADDR": ADDRS[i]}, *self.argv,
                     procs=self.procs)

    def saved_inside_an_epoch(self) -> bool:
        from pipelines.core.train import checkpoint

        try:
            return json.loads(checkpoint.marker_of(self.ckpt / checkpoint.FILENAME).read_text())["batch"] > 0
        except (OSError, ValueError, KeyError):
            return False

    def kill_after_a_step_checkpoint(self, i: int) -> None:
        wait_for(lambda: self.saved_inside_an_epoch() or any(n.poll() is not None for n in self.nodes), 300)
        assert self.saved_inside_an_epoch(), [o[-3000:] for n in self.nodes for o in n.communicate(timeout=60)]
        for pid in subprocess.run(["ip", "netns", "pids", self.names[i]], capture_output=True,
                                  text=True).stdout.split():
            subprocess.run(["kill", "-9", pid], capture_output=True)
        self.nodes[i].communicate(timeout=60)


def test_a_host_killed_inside_an_epoch_rejoins_and_the_run_ends_with_the_uninterrupted_weights(hosts, tmp_path):
    """Host B (every one of its processes) is killed inside an epoch, after a step checkpoint; host A's
    agent restarts its rank and waits in a new c10d round, which B's new agent joins. The run resumes from
    the checkpoint at its batch (at most EVERY batches lost) and ends with the weights of the same run left
    alone (one host, two ranks: the same world size, seeds and Gloo sums)."""
    run = TwoHosts(hosts, tmp_path, timeout_s=60)
    run.kill_after_a_step_checkpoint(1)
    run.nodes[1] = run.start(1)  # the replaced host
    outputs = [node.communicate(timeout=400) for node in run.nodes]
    for node in run.nodes:
        assert node.returncode == 0, [o[-3000:] for output in outputs for o in output]
    (rec,) = [r for r in records(run.results) if r["status"] == "ok"]
    resumed = rec["metrics"]["resumed_from"]
    assert resumed["batch"] > 0 and rec["metrics"]["start_batch"] == resumed["batch"]  # inside the epoch
    assert resumed["since_save_s"] < 60  # the lost work and the restart, together
    assert 0 <= resumed["lost_steps"] <= EVERY, resumed  # host A's rank outlived B and left its position
    assert "accel: resumed from" in outputs[0][1]

    alone = tmp_path / "alone"
    left = run.procs.start([*TRAINING, "-o", f"checkpoint_dir={alone}", "--results-dir", str(tmp_path / "alone-r")],
                           env={**os.environ, "NPROC": "2", "THREADS": "1", "MASTER_PORT": "29534"})
    out, err = left.communicate(timeout=400)
    assert left.returncode == 0, err[-3000:]
    interrupted, whole = _final_weights(run.ckpt), _final_weights(alone)
    assert all(torch.equal(interrupted[name], whole[name]) for name in whole), "the resumed run's weights differ"


def test_an_elastic_run_that_loses_a_host_goes_on_with_fewer_ranks_and_gives_no_verdict(hosts, tmp_path):
    """NNODES=1:2: host B (every process) is killed after a step checkpoint and never returns. Host A's agent
    forms a round of one node; its rank resumes the 2-rank checkpoint (-o checkpoint_any_world=true) inside
    its epoch, says exactly what was lost (it outlived the failure and left its position), trains the rest
    alone, and the arm gets no ratio."""
    run = TwoHosts(hosts, tmp_path, timeout_s=20, nnodes="1:2", options=("-o", "checkpoint_any_world=true"))
    run.kill_after_a_step_checkpoint(1)
    out, err = run.nodes[0].communicate(timeout=400)
    assert run.nodes[0].returncode == 0, err[-3000:]
    (rec,) = [r for r in records(run.results) if r["status"] == "ok"]
    resumed = rec["metrics"]["resumed_from"]
    assert (resumed["world_size"], rec["dist"]["world_size"]) == (2, 1) and resumed["batch"] > 0
    batch = rec["config"]["batch_size"]
    assert resumed["lost_steps"] >= 0 and resumed["lost_samples"] == resumed["lost_steps"] * batch * 2, resumed
    assert "of 2 ranks, on 1 (the rest of the epoch shared out again; no verdict)" in err, err[-3000:]
    assert "(resumed from a checkpoint: 1 of 1 repeats, 1 at another world size: no ratio)" in out, out[-2000:]


@pytest.mark.parametrize("lost", [1, 0], ids=["a-host-never-returns", "the-rendezvous-host-is-killed"])
def test_a_lost_host_that_never_returns_ends_the_survivor_in_one_line_within_the_timeout(hosts, tmp_path, lost):
    """Host B never comes back, or host A, which holds the c10d rendezvous, is killed: the survivor's agent
    restarts its rank, the new round never forms, and it ends in one line within its timeout."""
    timeout_s = 15
    run = TwoHosts(hosts, tmp_path, timeout_s=timeout_s)
    run.kill_after_a_step_checkpoint(lost)
    started = time.monotonic()
    survivor = run.nodes[1 - lost]
    _, err = survivor.communicate(timeout=200)
    assert survivor.returncode not in (0, None)
    assert time.monotonic() - started < 2 * timeout_s + 30, err[-3000:]  # the group's wait, then the round's
    errors = [line for line in err.splitlines() if line.startswith("accel: error:")]
    assert len(errors) == 1 and "Traceback" not in err, err[-3000:]
    why = "the rendezvous host 10.231.0.1:29533 (node 0) is gone" if lost == 0 else \
        f"after a restart, the other nodes did not come back to 10.231.0.1:29533 within {timeout_s} s (a host lost)"
    assert f"accel: error: node {1 - lost} lost its group: {why}" in errors[0], errors
