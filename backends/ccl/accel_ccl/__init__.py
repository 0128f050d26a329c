"""oneCCL as torch.distributed's "ccl" backend on CPU tensors, built by accel against oneCCL's public C++ API
(csrc/ccl_backend.cpp: bootstrap through the process group's Store, then allreduce, broadcast, allgather and
barrier, posted asynchronously and completed by a progress thread). Importing this package registers the
backend.

Intel's own binding (oneccl_bindings_for_pytorch) exists only for torch <= 2.7 and only on Intel's index;
pipelines/core/distributed/backends.py prefers it where it is importable and records which one ran.

The transport (set here unless the environment already says otherwise; docs/cluster.md has the knobs):
oneCCL's OFI layer over Intel MPI's libfabric from the impi-rt wheel, with libfabric's tcp provider, one
oneCCL worker thread per rank. No MPI launcher is involved: oneCCL's key-value store is bootstrapped through
torch's Store, so torchrun, mpirun and srun start it alike.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Mapping

BOOK_LAUNCHER_VALUE = "torch"  # the book's CCL_PROCESS_LAUNCHER, which the oneCCL releases on PyPI reject


def transport_settings(prefix: Path, env: Mapping[str, str]) -> dict[str, str]:
    """The oneCCL / libfabric variables this environment should get, given the oneCCL prefix (a venv, or
    ONECCL_ROOT) and what `env` already sets (which wins, except the book's launcher value)."""
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
    out = {name: value for name, value in wanted.items() if not env.get(name)}
    if env.get("CCL_PROCESS_LAUNCHER") == BOOK_LAUNCHER_VALUE:  # "unexpected value: torch" from oneCCL 2021.14+
        out["CCL_PROCESS_LAUNCHER"] = "none"
    return out


os.environ.update(transport_settings(Path(os.environ.get("ONECCL_ROOT") or sys.prefix), os.environ))

import torch.distributed as _dist  # noqa: E402  (after the variables: libccl reads them when it loads)

from accel_ccl import _C  # noqa: E402

ONECCL_VERSION = _C.oneccl_version()
WORK = _C.WORK  # "async": a collective returns once posted; a progress thread completes its Work


def _create(store, rank: int, world_size: int, timeout):
    return _C.create_backend(store, rank, world_size, timeout)


_dist.Backend.register_backend("ccl", _create, devices=["cpu"])
