"""`accel doctor`: what a distributed run needs from this machine, checked before the run.

Each check yields {"check", "status": ok|warn|problem|info, "detail"}. Problems make the command exit
non-zero with their list; warnings are printed only. Nothing here changes the machine.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Any

from pipelines.core.distributed.backends import ccl_binding, check_backend
from pipelines.core.record import atomic, envinfo

SHM_MIN_MIB = 512  # DataLoader workers and Gloo's shared-memory transport need room in /dev/shm


def _finding(check: str, status: str, detail: str, **extra) -> dict[str, Any]:
    return {"check": check, "status": status, "detail": detail, **extra}


def shm(path: str = "/dev/shm") -> dict[str, Any]:
    if not os.path.isdir(path):
        return _finding("shm", "problem", f"{path} does not exist; containers need --ipc=host or --shm-size")
    stats = os.statvfs(path)
    mib = stats.f_bsize * stats.f_blocks / 2**20
    status = "ok" if mib >= SHM_MIN_MIB else "problem"
    fix = "" if status == "ok" else f" (< {SHM_MIN_MIB} MiB: use --ipc=host or --shm-size=8g in containers)"
    return _finding("shm", status, f"{path} is {mib:.0f} MiB{fix}", mib=round(mib))


def rendezvous(addr: str, port: int) -> list[dict[str, Any]]:
    out = []
    try:
        resolved = socket.gethostbyname(addr)
    except OSError as exc:
        return [_finding("rendezvous", "problem", f"MASTER_ADDR={addr} does not resolve ({exc})")]
    local = _is_local(resolved)
    out.append(_finding("rendezvous_address", "ok" if local or _reachable(resolved, port) else "warn",
                        f"{addr} -> {resolved} ({'this host' if local else 'remote'})"))
    if local:
        with socket.socket() as probe:
            try:
                probe.bind((resolved, port))
                out.append(_finding("rendezvous_port", "ok", f"port {port} on {resolved} is free"))
            except OSError as exc:
                out.append(_finding("rendezvous_port", "problem",
                                    f"port {port} on {resolved} is in use ({exc.strerror}); set MASTER_PORT"))
    return out


def _is_local(address: str) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind((address, 0))
            return True
        except OSError:
            return False


def _reachable(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=2):
            return True
    except OSError:
        return False


def backend_availability() -> dict[str, str]:
    """backend -> 'ok' or the reason it cannot run here."""
    out = {}
    for backend, device in (("gloo", "cpu"), ("mpi", "cpu"), ("ccl", "cpu"), ("nccl", "cuda")):
        try:
            check_backend(backend, device)
            out[backend] = "ok"
            if backend == "ccl":
                binding = ccl_binding()
                out[backend] = (f"ok: {binding['binding']} (oneCCL {binding['oneccl']}"
                                + (f"; {binding['work']} work; transport {binding['transport']}, shm within a node "
                                   "where CCL_ATL_SHM=1; each rank's oneCCL worker on a core of its own"
                                   if "work" in binding else "") + ")")
        except ValueError as exc:
            out[backend] = str(exc)
    return out


def backends() -> list[dict[str, Any]]:
    out = []
    for name, verdict in backend_availability().items():
        status = "ok" if verdict.startswith("ok") else ("problem" if name == "gloo" else "info")
        out.append(_finding(f"backend_{name}", status, verdict))
    return out


def openmp() -> dict[str, Any]:
    """KMP_* variables only act on Intel OpenMP; GOMP_* only on GNU's: flag the mismatch."""
    loaded = envinfo.openmp_runtime()["openmp_runtime"]
    kmp = sorted(k for k in os.environ if k.startswith("KMP_"))
    gomp = sorted(k for k in os.environ if k.startswith("GOMP_"))
    if kmp and loaded != "intel":
        return _finding("openmp", "problem", f"{', '.join(kmp)} set but the {loaded} OpenMP runtime is loaded, "
                        "which ignores them; start with OMP_RUNTIME=intel or unset them")
    if gomp and loaded == "intel":
        return _finding("openmp", "problem", f"{', '.join(gomp)} set but Intel OpenMP is loaded, which ignores "
                        "them; use KMP_AFFINITY instead or OMP_RUNTIME=gnu")
    return _finding("openmp", "ok", f"{loaded} runtime loaded; OMP_NUM_THREADS="
                    f"{os.environ.get('OMP_NUM_THREADS', '(unset)')}")


def slurm() -> dict[str, Any]:
    found = [c for c in ("scontrol", "srun", "sbatch") if shutil.which(c)]
    if len(found) == 3:
        return _finding("slurm", "ok", "scontrol, srun and sbatch are on PATH")
    missing = ", ".join(sorted({"scontrol", "srun", "sbatch"} - set(found)))
    return _finding("slurm", "info", f"SLURM commands missing: {missing}"
                    " (only launch/srun.sh and slurm.sbatch need them)")


def gpus() -> list[dict[str, Any]]:
    if not shutil.which("nvidia-smi"):
        return [_finding("gpus", "info", "no nvidia-smi: no NVIDIA GPUs visible (nccl runs need them)")]
    listing = _command(["nvidia-smi", "-L"])
    topology = _command(["nvidia-smi", "topo", "-m"])
    return [_finding("gpus", "ok" if listing.strip() else "warn", listing.strip() or "nvidia-smi lists no GPU"),
            _finding("gpu_topology", "info", "nvidia-smi topo -m captured", topology=topology)]


def _command(argv: list[str]) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"({argv[0]} failed: {exc})"


def run_checks(addr: str | None = None, port: int | None = None) -> list[dict[str, Any]]:
    addr = addr or os.environ.get("MASTER_ADDR") or "127.0.0.1"
    port = port or int(os.environ.get("MASTER_PORT") or 29500)
    return [shm(), *rendezvous(addr, port), *backends(), openmp(), slurm(), *gpus()]


def render(findings: list[dict[str, Any]]) -> str:
    lines = [f"{f['status']:>7}  {f['check']:<20} {f['detail']}" for f in findings]
    for f in findings:
        if f.get("topology"):
            lines += ["", "nvidia-smi topo -m:", f["topology"].rstrip()]
    return "\n".join(lines)


def write_record(findings: list[dict[str, Any]], path: Path) -> Path:
    document = {"schema": "accel.doctor/1", "host": socket.gethostname(), "findings": findings}
    return atomic.write_text(Path(path), json.dumps(document, indent=1))
