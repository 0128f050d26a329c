"""One rank's part of a distributed run: its cores pinned, the process group joined with a timeout (the
rendezvous store), the record's `dist` section, clean exit, and the `Session` that holds those steps together.

`Session` is the one distributed path: pin this rank's cores, join the group (one bounded wait, see
`core/distributed/rendezvous.py`), hand the runner a RunContext, and shut down cleanly, or, when the run failed,
record why, print one line and leave without the teardown that would wait on a dead peer. torchrun stops
the surviving ranks with SIGTERM when one fails; a session turns that signal into an error the runner
records, instead of dying silently. Who started the processes is core/distributed/placement.py; which backend
can run, core/distributed/backends.py. This module reads the environment; it never writes it.
"""

from __future__ import annotations

import datetime
import gc
import os
import signal
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
import torch.distributed as tdist

from pipelines.core.distributed import affinity
from pipelines.core.distributed.backends import ccl_binding
from pipelines.core.distributed.collectives import gather_objects
from pipelines.core.distributed.placement import Placement
from pipelines.core.errors import ConfigError, DistError, first_line
from pipelines.core.distributed.rendezvous import ROUND_VAR, Budget, reach, without_torch_figure
from pipelines.core.train.loop import RunContext

DEFAULT_TIMEOUT_S = 120
EXIT_RUN_FAILED = 1
SINGLE_PROCESS = {"launcher": "local", "backend": None, "world_size": 1, "nodes": 1}  # a record's `dist`


def pin(place: Placement) -> dict[str, Any]:
    """Bind this rank to its cores and set intra-op threads = its core count (OMP_NUM_THREADS wins)."""
    available = sorted(os.sched_getaffinity(0))
    cores, oversubscribed = affinity.rank_cores(available, place.local_rank, place.local_world_size)
    if cores != available:
        os.sched_setaffinity(0, cores)
    asked = os.environ.get("OMP_NUM_THREADS", "")
    torch.set_num_threads(int(asked) if asked.isdigit() and int(asked) > 0 else len(cores))
    return {"rank": place.rank, "local_rank": place.local_rank, "node_rank": place.node_rank,
            "host": os.uname().nodename,
            "cores": cores, "threads": torch.get_num_threads(), "oversubscribed": oversubscribed}


class Stopped(DistError):
    """The launcher stopped this rank (SIGTERM): torchrun does so to every survivor when one rank fails."""


def init(place: Placement, backend: str, device: str, timeout_s: float = DEFAULT_TIMEOUT_S):
    """Create the default process group within `timeout_s`, all stages together; a missing or unreachable
    peer is a DistError whose message is one line (torch's full text stays on its `__cause__`).

    The backend was checked before (`check_backend`, in the runner's refusals)."""
    if not place.master_addr or not place.master_port:
        raise ConfigError(f"{place.source} started rank {place.rank} without MASTER_ADDR/MASTER_PORT; "
                            "start it with launch/torchrun.sh, mpirun.sh or srun.sh, which export them")
    if backend == "ccl":
        ccl_binding()  # registers the backend (checked before, in the runner's refusals)
    kwargs: dict[str, Any] = {}
    if backend == "nccl":
        torch.cuda.set_device(place.local_rank)
        kwargs["device_id"] = torch.device("cuda", place.local_rank)
    timeout, budget = datetime.timedelta(seconds=timeout_s), Budget(timeout_s)
    try:
        if backend == "mpi":  # MPI takes rank and size from its own launcher
            tdist.init_process_group("mpi", timeout=timeout)
        else:
            store = _store(place, budget)
            tdist.init_process_group(backend, store=_attempt(store), rank=place.rank,
                                     world_size=place.world_size, timeout=timeout, **kwargs)
            store.set_timeout(timeout)  # later store users (new groups) get the whole wait again
    except DistError:
        raise
    except (RuntimeError, ValueError) as exc:
        raise DistError(not_joined(place, backend, timeout_s, exc)) from exc
    return timeout


def not_joined(place: Placement, backend: str, timeout_s: float, exc: BaseException) -> str:
    """The line for a rank that could not join its group: the user's timeout_s, torch's reason without
    torch's own (rounded-up) wait figure (`rendezvous.without_torch_figure`)."""
    return (f"rank {place.rank} of {place.world_size} could not join the {backend} group at "
            f"{place.master_addr}:{place.master_port} within {timeout_s:g} s "
            f"({without_torch_figure(first_line(exc))}); are all ranks started and is the address reachable?")


def _store(place: Placement, budget: Budget):
    """The rendezvous store: torchrun's agent hosts it (a client everywhere), else rank 0 does.

    A client first proves the host answers (`rendezvous.reach`), so torch's connection never enters the
    retries that double the wait; the store then gets what is left of the budget."""
    agent = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
    host = not agent and place.rank == 0
    if not host and (why := reach(place.master_addr, place.master_port, budget)):
        raise DistError(f"rank {place.rank} of {place.world_size} could not reach the rendezvous at "
                        f"{place.master_addr}:{place.master_port} within {budget.timeout_s:g} s ({why}); "
                        "is rank 0 started and the address reachable?")
    return tdist.TCPStore(place.master_addr, place.master_port, place.world_size, is_master=host,
                          timeout=datetime.timedelta(seconds=budget.left()))


def _attempt(store):
    """Keys live under the group's generation: after a restart, a rank must not read the address a killed
    rank published before (it would connect to a dead port until the timeout). Under a c10d rendezvous the
    generation is its round, which every node of the round shares: torchrun's restart count is each agent's
    own, so a replaced host (count 0) and the survivors (count 1) would never read each other's keys
    (pytorch/pytorch#135712). A static rendezvous cannot take a replaced host; its restarts are counted."""
    generation = os.environ.get(ROUND_VAR)
    if generation is not None:
        return tdist.PrefixStore(f"accel/round-{generation}", store)
    return tdist.PrefixStore(f"accel/attempt-{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}", store)


def shutdown(timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
    """Release DDP state, then a barrier with a timeout, then destroy the group.

    A Gloo DDP run that exits with the group (and the DDP reducer) still alive can abort at interpreter
    exit: a Gloo thread races Python's teardown. Collecting garbage first frees the reducer while the
    group exists; destroying the group joins Gloo's threads before Python tears itself down.
    """
    gc.collect()
    if not (tdist.is_available() and tdist.is_initialized()):
        return
    try:
        if tdist.get_backend() == "gloo":
            tdist.monitored_barrier(timeout=datetime.timedelta(seconds=timeout_s))
        else:
            tdist.barrier()
    finally:
        tdist.destroy_process_group()
        gc.collect()


def dist_section(place: Placement, backend: str, per_rank: list[dict[str, Any]]) -> dict[str, Any]:
    """The result's `dist` section (with ccl: which binding ran, and the oneCCL it loaded)."""
    return {"launcher": place.source, "backend": backend, "world_size": place.world_size,
            "nodes": max(place.nodes, len({(r["host"], r["node_rank"]) for r in per_rank})),
            "local_world_size": place.local_world_size, "master": f"{place.master_addr}:{place.master_port}",
            "ranks": per_rank, "placement": asdict(place), **({"ccl": ccl_binding()} if backend == "ccl" else {})}


class Session:
    """One rank's part of a distributed run: `with Session(...) as s: runner(s.ctx, s.dist_section())`.

    Joining (`join`, or entering) pins this rank's cores, joins the group (bounded by `timeout_s`) and,
    under torchrun, turns the agent's SIGTERM into `Stopped`, recorded as an error: the agent sends it to
    every survivor when a rank fails (or when it is stopped itself). Under mpirun and srun, whose SIGTERM
    is as often SLURM's preemption or time limit, the CLI's handler keeps its meaning: an `interrupted`
    record (core/train/interrupt.py). Leaving normally shuts the group down cleanly. `abort` is
    for a failed run: once a rank fails, the group is broken (a peer died, or this rank stopped answering),
    so it records the error in torchrun's per-rank error file (when torchrun set one), prints one line
    naming the rank, the failure and the rendezvous, and exits without the teardown that would wait on the
    dead peer.
    """

    def __init__(self, place: Placement, backend: str, device: str, timeout_s: float):
        self.place, self.backend, self.device, self.timeout_s = place, backend, device, timeout_s
        self.placement_info: dict[str, Any] = {}
        self.ctx: RunContext | None = None
        self.stopping = False

    def join(self) -> "Session":
        if self.ctx is None:
            self.placement_info = pin(self.place)
            if self.place.source == "torchrun":  # its agent's SIGTERM means: stop, the group is done
                signal.signal(signal.SIGTERM, self._stop)
            init(self.place, self.backend, self.device, self.timeout_s)
            if self.backend == "ccl" and ccl_binding()["binding"] == "accel_ccl":
                self._say_native_failures()
            device = torch.device("cuda", self.place.local_rank) if self.device == "cuda" else torch.device("cpu")
            self.ctx = RunContext(device=device, rank=self.place.rank, world_size=self.place.world_size)
        return self

    def __enter__(self) -> "Session":
        return self.join()

    def _stop(self, signum: int, frame) -> None:
        """SIGTERM: raise Stopped where the rank is, so the runner records it. Once only, and never while an
        error is already being handled (the record being written is worth more than stopping sooner)."""
        if self.stopping or sys.exc_info()[1] is not None:
            return
        self.stopping = True
        raise Stopped(f"stopped by {signal.Signals(signum).name} from the launcher (torchrun stops every rank "
                      "when one fails; SLURM when the job is cancelled or out of time)")

    def dist_section(self) -> dict[str, Any]:
        """The result's `dist` section, with every rank's placement (a collective: all ranks call it)."""
        return dist_section(self.place, self.backend, gather_objects(self.placement_info))

    def failure_line(self, failed: str, cause: str, where: str = "") -> str:
        place = self.place
        return (f"accel: error: rank {place.rank}/{place.world_size} ({place.source}): the run failed ({failed})"
                f"{cause} (rendezvous {place.master_addr}:{place.master_port}){where}")

    def abort(self, exc: BaseException, record: Path | None) -> None:
        self.stopping = True
        if os.environ.get("TORCHELASTIC_ERROR_FILE"):  # torchrun's per-rank error record, full text
            from torch.distributed.elastic.multiprocessing.errors import ErrorHandler

            ErrorHandler().record_exception(exc)
        where = f"; error record {record}" if record else ""
        cause = "" if isinstance(exc, Stopped) else f"; {failure_cause(exc, self.timeout_s)}"
        print(self.failure_line(f"{exc.__class__.__name__}: {first_line(exc)}", cause, where), file=sys.stderr,
              flush=True)
        os._exit(EXIT_RUN_FAILED)

    def _say_native_failures(self) -> None:
        """oneCCL's worker thread can end the process through std::terminate (a send to a peer that died
        mid-step), past every Python handler and so past `abort`: accel's ccl binding then writes this same
        line, the exception's message in it, and exits with the same code (backends/ccl/csrc)."""
        import accel_ccl

        cause = failure_cause(RuntimeError("uncaught"), self.timeout_s)
        before, after = self.failure_line("uncaught C++ exception: \0", f"; {cause}").split("\0")
        accel_ccl.on_uncaught(before, after, EXIT_RUN_FAILED)

    def __exit__(self, kind, exc, tb) -> None:
        if kind is None:
            shutdown(self.timeout_s)


PEER_CLOSED = ("connection closed by peer", "connection reset by peer", "broken pipe", "econnreset",
               "socket closed")  # what Gloo's and oneCCL's transports say when the other end died
TIMED_OUT = ("timed out", "timeout", "deadline", "did not complete within")


def failure_cause(exc: BaseException, timeout_s: float) -> str:
    """What a failed collective most likely means, from the error's own text: a peer's connection closed
    (a rank died: killed, out of memory), a collective that did not complete within the group timeout (a
    peer hung or died without closing), or neither (this rank failed on its own)."""
    text = f"{exc.__class__.__name__}: {exc}".lower()
    if any(mark in text for mark in PEER_CLOSED):
        return "a peer's connection closed: another rank died (killed, out of memory, or failed first)"
    if any(mark in text for mark in TIMED_OUT):
        return f"a collective did not complete within the group timeout ({timeout_s:g} s): a peer hung or was lost"
    return f"this rank failed, or a peer was lost without closing its connection (group timeout {timeout_s:g} s)"

