"""The collective backends (gloo, ccl, nccl, mpi): which of them this torch can run here, refused before any
process group exists, what a backend implements where that is not every collective, and the ccl binding loaded
(Intel's or accel's own, backends/ccl).
"""

from __future__ import annotations

import os

import torch
import torch.distributed as tdist

from pipelines.core.errors import ConfigError, NotRunnable

BACKENDS = ("gloo", "ccl", "nccl", "mpi")
# What a backend implements where that is not every collective a technique may call: accel's own oneCCL binding
# (backends/ccl/csrc/ccl_backend.cpp) has these four; FSDP's reduce-scatter or a pipeline's send/recv are not
# among them. A technique declares what it calls (harness/pipeline.py Needs.collectives).
COLLECTIVES = {"ccl": ("all_reduce", "broadcast", "all_gather", "barrier")}


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
    return {"binding": "accel_ccl", "oneccl": accel_ccl.ONECCL_VERSION, "work": getattr(accel_ccl, "WORK", "sync"),
            **accel_ccl.effective(os.environ)}
