"""Chapter 9's oneCCL backend, accel's own (backends/ccl, built by `make venv` against the host's torch and by
`make ipex-venv` against the cpu-intel lock's torch 2.8): its collectives against gloo's in both, asynchronous
work at 2 and 3 ranks (ccl_async.py), a timed-out group, DDP over it against one process, a killed rank, and
the record naming which binding ran. The DDP and kill tests are the
gloo ones of test_dist_runs.py, parametrized over the backend there."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

from conftest import IPEX_PYTHON, REPO, accel, needs_ipex_venv, records
from distutil import free_port, rank_env

HOST_BUILT = pytest.mark.skipif(importlib.util.find_spec("accel_ccl") is None,
                                reason="the ccl backend is not built in this environment (make venv builds it)")
# The host's torch, and the cpu-intel image's (the same lock, installed on the host by make ipex-venv).
PYTHONS = [pytest.param(sys.executable, id="host", marks=HOST_BUILT),
           pytest.param(str(IPEX_PYTHON), id="cpu-intel-lock", marks=[pytest.mark.ipex, needs_ipex_venv])]
pytestmark = [pytest.mark.slow]


@pytest.fixture
def accel_ccl():
    """The binding imported here, with this process's environment as it was afterwards (importing it sets the
    transport's variables, which later tests' processes must not inherit)."""
    before = dict(os.environ)
    import accel_ccl

    yield accel_ccl
    os.environ.clear()
    os.environ.update(before)


@pytest.mark.parametrize("python", PYTHONS)
def test_every_collective_equals_gloo_s_on_two_ranks(python):
    run = subprocess.run([python, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                          str(REPO / "tests" / "dist" / "ccl_vs_gloo.py")],
                         cwd=REPO, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    assert [line for line in run.stdout.splitlines() if line.startswith("ok ")] == [
        "ok all_reduce torch.int32 sum/max/min bit for bit", "ok all_reduce torch.int64 sum/max/min bit for bit",
        "ok all_reduce torch.float32 sum within torch.float32 rounding",
        "ok all_reduce torch.bfloat16 sum within torch.bfloat16 rounding",
        "ok broadcast from every root bit for bit",
        "ok all_gather and all_gather_into_tensor bit for bit", "ok barrier", "ok an unsupported op or dtype is named"]


@HOST_BUILT
def test_the_transport_follows_the_wheels_layout_and_the_user_wins(tmp_path, accel_ccl):
    old = tmp_path / "old"  # impi-rt 2021.14: libfabric and its providers in lib/libfabric/
    (old / "lib" / "libfabric" / "prov").mkdir(parents=True)
    (old / "lib" / "libfabric" / "libfabric.so.1").touch()
    settings = accel_ccl.transport_settings(old, {"LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"})
    assert settings["CCL_OFI_LIBRARY_PATH"] == str(old / "lib" / "libfabric" / "libfabric.so.1")
    assert settings["FI_PROVIDER_PATH"] == str(old / "lib" / "libfabric" / "prov")
    assert (settings["CCL_LOCAL_RANK"], settings["CCL_LOCAL_SIZE"], settings["CCL_PROCESS_LAUNCHER"]) == \
        ("1", "2", "none")
    new = tmp_path / "new"  # 2021.15 and later: both in lib/
    (new / "lib").mkdir(parents=True)
    settings = accel_ccl.transport_settings(new, {"FI_PROVIDER": "psm3", "CCL_PROCESS_LAUNCHER": "torch"})
    assert settings["FI_PROVIDER_PATH"] == str(new / "lib") and "FI_PROVIDER" not in settings  # the user's stays
    assert settings["CCL_PROCESS_LAUNCHER"] == "none"  # the book's "torch", which these releases reject
    # each rank's oneCCL worker on a core of its own: the last of its pinned cores, else its one-per-rank core
    layout = {"LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}
    assert accel_ccl.transport_settings(new, layout, cores=[1], machine_cpus=2)["CCL_WORKER_AFFINITY"] == "1,1"
    assert accel_ccl.transport_settings(new, layout, cores=[2, 3], machine_cpus=4)["CCL_WORKER_AFFINITY"] == "3,3"
    assert accel_ccl.transport_settings(new, layout, cores=[0, 1], machine_cpus=2)["CCL_WORKER_AFFINITY"] == "1,1"
    assert accel_ccl.transport_settings(new, {**layout, "CCL_WORKER_AFFINITY": "5,6"})  \
        .get("CCL_WORKER_AFFINITY") is None  # the user's stays
    assert accel_ccl.effective({"CCL_ATL_TRANSPORT": "ofi", "FI_PROVIDER": "tcp", "CCL_ATL_SHM": "1",
                                "CCL_WORKER_AFFINITY": "0,1", "CCL_LOCAL_RANK": "1"}) == \
        {"transport": "ofi/tcp,shm", "worker_core": "1"}  # oneCCL adds shm to the providers itself


def torchrun(python: str, ranks: int, script: str, *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([python, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(ranks),
                           str(REPO / "tests" / "dist" / script), *args],
                          cwd=REPO, capture_output=True, text=True, timeout=timeout)


@HOST_BUILT
@pytest.mark.parametrize("ranks", [2, 3])
def test_collectives_are_asynchronous_and_correct_on_non_contiguous_tensors_and_under_ddp_hooks(ranks):
    """The backend posts and returns (a collective a peer joins 2 s late returns at once, incomplete), writes
    results back into non-contiguous tensors, lets 8 async_op=True all-reduces be in flight at once, and DDP
    over it with a comm hook equals DDP over gloo: at an even and an odd world size."""
    run = torchrun(sys.executable, ranks, "ccl_async.py")
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    assert [line for line in run.stdout.splitlines() if line.startswith("ok ")] == [
        "ok a collective returns once posted, incomplete, and completes when its peers join",
        "ok non-contiguous tensors written back", "ok async_op=True: 8 posted, then waited, equal to gloo's",
        "ok DDP with a comm hook (bf16 compression) equals gloo's"]


@HOST_BUILT
@pytest.mark.parametrize("ranks", [2, 3])
def test_a_timed_out_group_fails_the_call_then_refuses_every_later_one_in_one_line(ranks):
    """Rank 0 all-reduces alone: the call fails at the group's 3 s timeout (not never), and the next call is
    refused at once, naming the first failure, since the ranks' order of collectives cannot be matched again."""
    run = torchrun(sys.executable, ranks, "ccl_async.py", "timeout", timeout=120)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    said = [line for line in run.stdout.splitlines() if line.startswith("ok ")]
    assert len(said) == 2 and said[0].startswith("ok timed out in 3.") and said[0].endswith(
        "ccl backend: allreduce did not complete within 3 s: a peer rank is gone or stopped answering")
    assert said[1] == ("ok then refused: ccl backend: allreduce refused: this process group is broken (ccl "
                       "backend: allreduce did not complete within 3 s: a peer rank is gone or stopped answering); "
                       "no later collective runs, start the job again")


# One rank of a real 2-rank ccl group joined through ranks.Session; rank 0 then throws in a thread of its own,
# where nothing can catch it (as oneCCL's worker does on a send to a peer that died mid-step).
UNCAUGHT_PROBE = """
import accel_ccl
from pipelines.core.distributed import placement, ranks

with ranks.Session(placement.placement(), "ccl", "cpu", timeout_s=30) as session:
    if session.place.rank == 0:
        accel_ccl._C._throw_in_a_thread("oneCCL: send_entry.hpp:109 update: EXCEPTION: SEND entry failed")
    else:
        import time; time.sleep(60)
"""


@HOST_BUILT
def test_an_exception_in_a_native_thread_ends_the_rank_with_its_one_line(procs):
    port = free_port()
    ranks = [procs.start([sys.executable, "-c", UNCAUGHT_PROBE], env=rank_env(r, 2, port)) for r in (0, 1)]
    _, err = ranks[0].communicate(timeout=120)
    assert ranks[0].returncode == 1 and "terminate called" not in err, err[-2000:]
    assert err.strip().splitlines()[-1] == (
        "accel: error: rank 0/2 (torchrun): the run failed (uncaught C++ exception: oneCCL: send_entry.hpp:109 "
        "update: EXCEPTION: SEND entry failed); this rank failed, or a peer was lost without closing its connection "
        f"(group timeout 30 s) (rendezvous 127.0.0.1:{port})")


@HOST_BUILT
def test_a_ccl_run_records_which_binding_and_oneccl_ran(tmp_path, accel_ccl):
    run = accel("launch", "ch9-cpu-oneccl", "--variant", "ranks=2", "--scale", "smoke", "--dataset", "synthetic",
                "--steps", "2", "--results-dir", str(tmp_path), env={"NPROC": "2", "MASTER_PORT": str(free_port())},
                timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    ok = [r for r in records(tmp_path) if r["status"] == "ok"]
    assert ok and all(r["dist"]["backend"] == "ccl" and r["dist"]["world_size"] == 2 for r in ok)
    assert ok[0]["dist"]["ccl"] == {"binding": "accel_ccl", "oneccl": accel_ccl.ONECCL_VERSION, "work": "async",
                                    "transport": "ofi/tcp,shm", "worker_core": ok[0]["dist"]["ccl"]["worker_core"]}
    assert {r["dist"]["ccl"]["worker_core"] for r in ok} <= {str(core) for core in os.sched_getaffinity(0)}


@pytest.mark.parametrize("python", [PYTHONS[1]])
def test_the_chapter_runs_over_ccl_on_the_cpu_intel_lock_s_torch(python, tmp_path):
    """The book's line (torch 2.8, IPEX's), as the cpu-intel image has it: the oneCCL arm and its Gloo
    baseline alternate in that environment, and the records name its torch and the binding."""
    run = subprocess.run([python, "-m", "pipelines", "run", "ch9-cpu-oneccl", "--variant", "ranks=2", "--rounds", "2",
                          "--dataset", "synthetic", "--steps", "4", "--results-dir", str(tmp_path)],
                         cwd=REPO, capture_output=True, text=True, timeout=600,
                         env={**os.environ, "PYTHON": python, "NPROC": "2"})
    assert run.returncode == 0, run.stderr[-3000:]
    assert "round 2/2: " in run.stdout + run.stderr and "verdict:" in run.stdout
    ok = [r for r in records(tmp_path) if r["status"] == "ok"]
    backends = {r["dist"]["backend"] for r in ok}
    assert backends == {"ccl", "gloo"}, backends
    assert all(r["env"]["torch"].startswith("2.8.") for r in ok)
    assert {r["dist"]["ccl"]["binding"] for r in ok if r["dist"]["backend"] == "ccl"} == {"accel_ccl"}
