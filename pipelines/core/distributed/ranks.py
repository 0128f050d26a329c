"""One rank/world contract for every launcher, process groups with timeouts, per-rank cores, clean exit.

Who started the processes, in order of precedence (the first whose variables are present wins):
1. torchrun (or anything exporting RANK + WORLD_SIZE): RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE.
   `srun torchrun ...` sets SLURM_* for the torchrun agent as well; the worker's own RANK is the truth.
2. Open MPI mpirun: OMPI_COMM_WORLD_RANK / _LOCAL_RANK / _SIZE / _LOCAL_SIZE. `mpirun` inside a SLURM
   allocation inherits the batch step's SLURM_PROCID=0 in every process; the OMPI values are the truth.
3. SLURM srun: SLURM_PROCID / SLURM_LOCALID / SLURM_NTASKS, only inside a job step (SLURM_STEP_ID set):
   the batch script itself also carries SLURM_PROCID=0 and SLURM_NTASKS=N, but it is one process.
4. Nothing: a single process.
The rendezvous address comes from MASTER_ADDR/MASTER_PORT, which the launch scripts export.

`Session` is the one distributed path: pin this rank's cores, join the group (one bounded wait, see
`core/distributed/rendezvous.py`), hand the runner a RunContext, and shut down cleanly, or, when the run failed,
record why, print one line and leave without the teardown that would wait on a dead peer. torchrun stops
the surviving ranks with SIGTERM when one fails; a session turns that signal into an error the runner
records, instead of dying silently. This module reads the environment; it never writes it.

Over 300 lines on purpose: the rank contract is one protocol (placement, join, gather, shutdown) whose
failure handling is read step by step; split, each step's timeout would lose the others' context.
"""

from __future__ import annotations

import datetime
import gc
import os
import re
import signal
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping

import torch
import torch.distributed as tdist

from pipelines.core.distributed import affinity
from pipelines.core.errors import ConfigError, DistError, NotRunnable, first_line
from pipelines.core.distributed.rendezvous import Budget, reach, without_torch_figure
from pipelines.core.train.loop import RunContext

BACKENDS = ("gloo", "ccl", "nccl", "mpi")
# What a backend implements where that is not every collective a technique may call: accel's own oneCCL binding
# (backends/ccl/csrc/ccl_backend.cpp) has these four; FSDP's reduce-scatter or a pipeline's send/recv are not
# among them. A technique declares what it calls (harness/pipeline.py Needs.collectives).
COLLECTIVES = {"ccl": ("all_reduce", "broadcast", "all_gather", "barrier")}
DEFAULT_TIMEOUT_S = 120
EXIT_RUN_FAILED = 1
SINGLE_PROCESS = {"launcher": "local", "backend": None, "world_size": 1, "nodes": 1}  # a record's `dist`


def missing_collectives(backend: str | None, wanted: tuple[str, ...]) -> list[str]:
    """The collectives of `wanted` that `backend` does not implement (none for a backend not in COLLECTIVES)."""
    has = COLLECTIVES.get(backend or "")
    return [] if has is None else [name for name in wanted if name not in has]


@dataclass(frozen=True)
class Placement:
    source: str  # torchrun | mpirun | srun | single
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    local_world_size: int = 1
    node_rank: int = 0
    master_addr: str | None = None
    master_port: int | None = None

    @property
    def launched(self) -> bool:
        return self.source != "single"

    @property
    def nodes(self) -> int:
        return max(1, -(-self.world_size // max(self.local_world_size, 1)))


def _int(env: Mapping[str, str], name: str, default: int | None = None) -> int:
    value = env.get(name)
    if value is None or value == "":
        if default is None:
            raise ConfigError(f"{name} is not set, but the launcher's other variables are")
        return default
    if not re.fullmatch(r"\d+", value.strip()):
        raise ConfigError(f"{name}={value!r} is not a non-negative integer")
    return int(value)


def _tasks_on_node(spec: str, node: int) -> int:
    """SLURM_TASKS_PER_NODE syntax, e.g. '2(x3),1' -> tasks on node index `node`."""
    counts: list[int] = []
    for part in spec.split(","):
        match = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part.strip())
        if not match:
            return 1
        counts += [int(match.group(1))] * int(match.group(2) or 1)
    return counts[min(node, len(counts) - 1)] if counts else 1


def placement(env: Mapping[str, str] | None = None) -> Placement:
    """Map the launcher's variables to one contract (see the module docstring for the precedence)."""
    env = os.environ if env is None else env
    port = _int(env, "MASTER_PORT", 0) or None
    addr = env.get("MASTER_ADDR") or None
    if "RANK" in env and "WORLD_SIZE" in env:
        place = Placement("torchrun", _int(env, "RANK"), _int(env, "LOCAL_RANK", 0), _int(env, "WORLD_SIZE"),
                          _int(env, "LOCAL_WORLD_SIZE", 1), _int(env, "GROUP_RANK", 0), addr, port)
    elif "OMPI_COMM_WORLD_RANK" in env:
        rank, local_size = _int(env, "OMPI_COMM_WORLD_RANK"), _int(env, "OMPI_COMM_WORLD_LOCAL_SIZE", 1)
        place = Placement("mpirun", rank, _int(env, "OMPI_COMM_WORLD_LOCAL_RANK", 0),
                          _int(env, "OMPI_COMM_WORLD_SIZE"), local_size, rank // max(local_size, 1), addr, port)
    elif "SLURM_PROCID" in env and ("SLURM_STEP_ID" in env or "SLURM_STEPID" in env):
        node = _int(env, "SLURM_NODEID", 0)
        local_world = _tasks_on_node(env.get("SLURM_STEP_TASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE")
                                     or "1", node)
        place = Placement("srun", _int(env, "SLURM_PROCID"), _int(env, "SLURM_LOCALID", 0),
                          _int(env, "SLURM_NTASKS", 1), local_world, node, addr, port)
    else:
        return Placement("single")
    if place.world_size < 1 or not 0 <= place.rank < place.world_size:
        raise ConfigError(f"rank {place.rank} is outside world size {place.world_size} ({place.source})")
    return place


def mpi_backend_missing() -> str:
    """Why backend mpi cannot run with this torch, or "" when it can."""
    if tdist.is_available() and tdist.is_mpi_available():
        return ""
    return (f"needs a torch built with MPI (USE_MPI=1), and torch {torch.__version__} is not: no PyPI wheel and "
            "no image of this project is; build torch from source with USE_MPI=1 against the cluster's Open "
            "MPI (README: Run on a cluster), or run the same DDP under mpirun with -o backend=gloo")


def check_backend(backend: str, device: str) -> None:
    """Refuse a backend that cannot run here, before any process group exists."""
    if backend not in BACKENDS:
        raise ConfigError(f"unknown backend {backend!r}; choose one of: {', '.join(BACKENDS)} "
                            "(e.g. -o backend=gloo)")
    if not tdist.is_available():
        raise NotRunnable("this torch build has no torch.distributed")
    if backend == "nccl":
        if device != "cuda" or not torch.cuda.is_available():
            raise NotRunnable("backend nccl needs CUDA GPUs (--device cuda on a GPU machine); "
                              "on CPU use -o backend=gloo")
        if not tdist.is_nccl_available():
            raise NotRunnable(f"backend nccl is not built into torch {torch.__version__}")
    elif backend == "gloo" and not tdist.is_gloo_available():
        raise NotRunnable(f"backend gloo is not built into torch {torch.__version__}")
    elif backend == "mpi" and (missing := mpi_backend_missing()):
        raise NotRunnable(f"backend mpi {missing}")
    elif backend == "ccl":
        ccl_binding()


def ccl_binding() -> dict[str, str]:
    """Load (and so register) the ccl backend: Intel's binding where importable, else accel's own
    (backends/ccl, built by `make venv`, `make ipex-venv` and the cpu-intel image). Returns what the record
    keeps: which binding, and the oneCCL it loaded."""
    import importlib.metadata

    failures = []
    try:
        import oneccl_bindings_for_pytorch  # noqa: F401  (Intel's, torch <= 2.7 from Intel's index: registers ccl)

        return {"binding": "oneccl_bindings_for_pytorch", "oneccl": importlib.metadata.version("oneccl_bind_pt")}
    except ImportError as exc:
        failures.append(f"oneccl_bindings_for_pytorch: {exc}")
    try:
        import accel_ccl  # registers ccl
    except ImportError as exc:
        failures.append(f"accel_ccl: {exc}")
        raise NotRunnable("backend ccl needs oneCCL under torch.distributed, and neither binding loads here ("
                          + "; ".join(failures) + "); `make venv` and `make ipex-venv` build accel's own "
                          "(backends/ccl) on the host, and of the images the cpu-intel one carries it; or use "
                          "-o backend=gloo") from None
    return {"binding": "accel_ccl", "oneccl": accel_ccl.ONECCL_VERSION,
            "transport": f"{os.environ.get('CCL_ATL_TRANSPORT', '')}/{os.environ.get('FI_PROVIDER', '')}"}


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
    """Keys live under the torchrun attempt number: after a restart, a rank must not read the address a
    killed rank published in the previous attempt (it would connect to a dead port until the timeout)."""
    return tdist.PrefixStore(f"accel/attempt-{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}", store)


def gather_objects(obj: Any) -> list[Any]:
    if not (tdist.is_available() and tdist.is_initialized()):
        return [obj]
    out: list[Any] = [None] * tdist.get_world_size()
    tdist.all_gather_object(out, obj)
    return out


def global_batch(tensor: torch.Tensor) -> torch.Tensor:
    """Every rank's batch, concatenated in rank order, on every rank (one process: the batch itself).

    Data parallelism gives each rank its own shard; model-parallel techniques (tensor, pipeline) need
    every rank of the group to see the same samples. Gathering the shards keeps the runner's sampler
    and accounting (global batch = per-rank batch x world size) the same for every technique."""
    if not (tdist.is_available() and tdist.is_initialized()):
        return tensor
    tensor = tensor.contiguous()
    out = tensor.new_empty((tensor.shape[0] * tdist.get_world_size(), *tensor.shape[1:]))
    # torch 2.14's name; torch 2.8 (the cpu-intel image, .venv-ipex) has only all_gather_into_tensor
    gather = getattr(tdist, "all_gather_single", None) or tdist.all_gather_into_tensor
    gather(out, tensor)
    return out


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


def describe(place: Placement, backend: str, per_rank: list[dict[str, Any]]) -> dict[str, Any]:
    """The result's `dist` section (with ccl: which binding ran, and the oneCCL it loaded)."""
    return {"launcher": place.source, "backend": backend, "world_size": place.world_size,
            "nodes": max(place.nodes, len({(r["host"], r["node_rank"]) for r in per_rank})),
            "local_world_size": place.local_world_size, "master": f"{place.master_addr}:{place.master_port}",
            "ranks": per_rank, "placement": asdict(place), **({"ccl": ccl_binding()} if backend == "ccl" else {})}


def barrier_if_initialized() -> None:
    """A barrier when a process group exists (checkpoint hooks: no rank runs ahead of a checkpoint)."""
    if tdist.is_available() and tdist.is_initialized():
        tdist.barrier()


class Session:
    """One rank's part of a distributed run: `with Session(...) as s: runner(s.ctx, s.describe())`.

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

    def describe(self) -> dict[str, Any]:
        """The result's `dist` section, with every rank's placement (a collective: all ranks call it)."""
        return describe(self.place, self.backend, gather_objects(self.placement_info))

    def abort(self, exc: BaseException, record: Path | None) -> None:
        self.stopping = True
        place = self.place
        if os.environ.get("TORCHELASTIC_ERROR_FILE"):  # torchrun's per-rank error record, full text
            from torch.distributed.elastic.multiprocessing.errors import ErrorHandler

            ErrorHandler().record_exception(exc)
        where = f"; error record {record}" if record else ""
        cause = "" if isinstance(exc, Stopped) else (
            f"; a peer was lost or did not answer within {self.timeout_s:g} s, or this rank failed")
        print(f"accel: error: rank {place.rank}/{place.world_size} ({place.source}): the run failed "
              f"({exc.__class__.__name__}: {first_line(exc)}){cause} "
              f"(rendezvous {place.master_addr}:{place.master_port})"
              f"{where}", file=sys.stderr, flush=True)
        os._exit(EXIT_RUN_FAILED)

    def __exit__(self, kind, exc, tb) -> None:
        if kind is None:
            shutdown(self.timeout_s)
