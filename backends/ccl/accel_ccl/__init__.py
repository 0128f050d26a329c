"""oneCCL as torch.distributed's "ccl" backend on CPU tensors, built by accel against oneCCL's public C++ API
(csrc/ccl_backend.cpp: bootstrap through the process group's Store, then allreduce, broadcast, allgather and
barrier, posted asynchronously and completed by a progress thread). Importing this package registers the
backend.

Intel's own binding (oneccl_bindings_for_pytorch) exists only for torch <= 2.7 and only on Intel's index;
pipelines/core/distributed/backends.py prefers it where it is importable and records which one ran.

The transport (set here unless the environment already says otherwise; docs/cluster.md has the knobs):
oneCCL's OFI layer over Intel MPI's libfabric from the impi-rt wheel, with libfabric's tcp provider (and its
shm provider within a node where CCL_ATL_SHM=1, as the book sets: oneCCL then adds shm to FI_PROVIDER), one
oneCCL worker thread per rank, pinned to a core of the rank's own (oneCCL's default puts rank i's worker on
another rank's core). No MPI launcher is involved: oneCCL's key-value store is bootstrapped through torch's
Store, so torchrun, mpirun and srun start it alike. `effective` is what a record keeps of it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Mapping

BOOK_LAUNCHER_VALUE = "torch"  # the book's CCL_PROCESS_LAUNCHER, which the oneCCL releases on PyPI reject


def worker_core(local_rank: int, cores: list[int], machine_cpus: int) -> int:
    """The core for this rank's oneCCL worker: the last of the rank's own cores where the launcher pinned it
    (its affinity is a part of the machine), else the core a one-core-per-rank placement gives it."""
    if len(cores) < machine_cpus:
        return cores[-1]
    return cores[local_rank % len(cores)]


def transport_settings(prefix: Path, env: Mapping[str, str], cores: list[int] | None = None,
                       machine_cpus: int | None = None) -> dict[str, str]:
    """The oneCCL / libfabric variables this environment should get, given the oneCCL prefix (a venv, or
    ONECCL_ROOT) and what `env` already sets (which wins, except the book's launcher value). `cores`: the
    cores this process may use (default: its affinity), `machine_cpus` the machine's (default: os.cpu_count).
    CCL_WORKER_AFFINITY lists one core per local rank, and each rank reads its own entry: so each rank
    writes its own core in every entry."""
    lib = prefix / "lib"
    # impi-rt 2021.14 keeps libfabric in lib/libfabric/ with providers in lib/libfabric/prov/; 2021.15 and
    # later put both in lib/.
    fabric = lib / "libfabric" if (lib / "libfabric" / "libfabric.so.1").exists() else lib
    providers = fabric / "prov" if (fabric / "prov").is_dir() else fabric
    wanted = {"CCL_ATL_TRANSPORT": "ofi", "CCL_OFI_LIBRARY_PATH": str(fabric / "libfabric.so.1"),
              "FI_PROVIDER_PATH": str(providers), "FI_PROVIDER": "tcp", "CCL_WORKER_COUNT": "1",
              # oneCCL warns once per variable set ("value of CCL_... changed"): errors only, unless asked
              "CCL_LOG_LEVEL": "error"}
    if "LOCAL_RANK" in env and "LOCAL_WORLD_SIZE" in env:  # the node's layout, as every launcher exports it
        wanted.update(CCL_LOCAL_RANK=env["LOCAL_RANK"], CCL_LOCAL_SIZE=env["LOCAL_WORLD_SIZE"],
                      CCL_PROCESS_LAUNCHER="none")
        cores = sorted(os.sched_getaffinity(0)) if cores is None else cores
        core = worker_core(int(env["LOCAL_RANK"]), cores, machine_cpus or os.cpu_count() or len(cores))
        wanted["CCL_WORKER_AFFINITY"] = ",".join([str(core)] * int(env["LOCAL_WORLD_SIZE"]))
    out = {name: value for name, value in wanted.items() if not env.get(name)}
    if env.get("CCL_PROCESS_LAUNCHER") == BOOK_LAUNCHER_VALUE:  # "unexpected value: torch" from oneCCL 2021.14+
        out["CCL_PROCESS_LAUNCHER"] = "none"
    return out


os.environ.update(transport_settings(Path(os.environ.get("ONECCL_ROOT") or sys.prefix), os.environ))

import torch.distributed as _dist  # noqa: E402  (after the variables: libccl reads them when it loads)

from accel_ccl import _C  # noqa: E402

ONECCL_VERSION = _C.oneccl_version()


def on_uncaught(before: str, after: str, code: int) -> None:
    """From now on, an uncaught C++ exception (oneCCL's worker thread throws one when a peer died mid-send)
    writes `before` + its message + `after` as one line to stderr and exits with `code`, instead of
    libstdc++'s abort (pipelines/core/distributed/ranks.py gives the rank's failure line)."""
    _C.on_uncaught(before, after, code)


def effective(env: Mapping[str, str]) -> dict[str, str]:
    """What a record keeps of the transport this process runs: the ATL and libfabric providers as oneCCL
    uses them (CCL_ATL_SHM=1 adds shm to FI_PROVIDER), and this rank's worker core."""
    provider = env.get("FI_PROVIDER", "")
    if env.get("CCL_ATL_SHM") == "1" and "shm" not in provider.split(","):
        provider = f"{provider},shm" if provider else "shm"
    cores = env.get("CCL_WORKER_AFFINITY", "").split(",")
    rank = int(env.get("CCL_LOCAL_RANK", "0") or 0)
    worker = cores[rank] if rank < len(cores) and cores[rank] else "oneCCL's default"
    return {"transport": f"{env.get('CCL_ATL_TRANSPORT', '')}/{provider}", "worker_core": worker}
WORK = _C.WORK  # "async": a collective returns once posted; a progress thread completes its Work


def _create(store, rank: int, world_size: int, timeout):
    return _C.create_backend(store, rank, world_size, timeout)


_dist.Backend.register_backend("ccl", _create, devices=["cpu"])
