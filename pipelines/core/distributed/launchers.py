"""The launchers local, torchrun, mpirun and srun: each one's own knobs checked, defaulted and derived for its
launch script, and the command the scripts call for them.

Each launch script (local, torchrun, mpirun, srun, and the container wrapper) asks this module for its
knobs before it builds its command line:

    eval "$(python -m pipelines.core.distributed.launchers torchrun ACCEL-ARGS...)"

and gets shell assignments back (`export OMP_NUM_THREADS=2`, `NPROC=2`, ...), or one `launch: error:` line
and exit 2. So the scripts only assemble a command, and every check of a knob is Python, tested in-process:
here what one launcher owns (local's OpenMP runtime and pinning, torchrun's nodes and rendezvous, mpirun's
HOSTS, mapping and binding, srun's tasks and allocation); the checks they share in distributed/knobs.py; the
hosts in distributed/hosts.py; IMAGE and the container wrapper (`container`, and `start-failure`, the line for
a start the engine refused) in distributed/containers.py. The accel arguments themselves are checked
afterwards by `accel preflight` (pipelines/core/harness/refusals.py), as every rank will check them.

Standard library only: with IMAGE the host may have a bare python3 (the image holds torch).
"""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import sys
from pathlib import Path
from typing import Callable, Mapping, Sequence

from pipelines.core.distributed import affinity
from pipelines.core.distributed.containers import container, image, image_on_every_host, start_failure
from pipelines.core.distributed.hosts import HOSTS_PATTERN, installed, is_this_host, per_node, resolve
from pipelines.core.distributed.knobs import (
    DEFAULT_PORT, REPO, USAGE, KnobError, Knobs, allocator_preload, port, port_free, positive_int, ranks_allocator,
    ranks_fit_here, rendezvous_port, threads)


def local(knobs: Knobs, args: Sequence[str]) -> None:
    """One process: OpenMP runtime, pinning and allocator (the runtime knobs a launcher owns)."""
    count = threads(knobs, 1)
    runtime = knobs.export("OMP_RUNTIME", knobs.get("OMP_RUNTIME", "gnu"))
    bind = knobs.export("OMP_BIND", knobs.get("OMP_BIND", "none"))
    allocator = knobs.export("ALLOCATOR", knobs.get("ALLOCATOR", "default"))
    # numpy (imported for the statistics before torch) loads OpenBLAS, whose pool would start threads before
    # the OpenMP runtime binds this process; training never uses numpy's BLAS, so it stays at one thread.
    knobs.export("OPENBLAS_NUM_THREADS", knobs.get("OPENBLAS_NUM_THREADS", "1"))
    preload = [p for p in knobs.get("LD_PRELOAD").split(":") if p]
    if runtime == "intel":
        if knobs.get("IMAGE"):  # inside an image the environment lives at IMAGE_PREFIX; the run there checks
            iomp = Path(knobs.get("IMAGE_PREFIX", "/opt/venv")) / "lib" / "libiomp5.so"
        else:
            iomp = Path(sys.prefix) / "lib" / "libiomp5.so"
            if not iomp.is_file():
                raise KnobError(f"OMP_RUNTIME=intel but {iomp} does not exist; install intel-openmp into that "
                                "environment (make venv does)")
        preload.insert(0, str(iomp))
        knobs.export("KMP_AFFINITY", knobs.get("KMP_AFFINITY", "granularity=fine,compact,1,0"))
        knobs.export("KMP_BLOCKTIME", knobs.get("KMP_BLOCKTIME", "0"))
    elif runtime != "gnu":
        raise KnobError(f"OMP_RUNTIME={runtime} is not gnu or intel")
    if bind == "pinned":
        if runtime != "gnu":
            raise KnobError("OMP_BIND=pinned is for OMP_RUNTIME=gnu; Intel OpenMP binds with KMP_AFFINITY")
        knobs.export("OMP_PROC_BIND", "TRUE")
        knobs.export("OMP_SCHEDULE", "STATIC")
        knobs.export("GOMP_CPU_AFFINITY", affinity.gomp_list(count))
    elif bind != "none":
        raise KnobError(f"OMP_BIND={bind} is not none or pinned")
    preload = allocator_preload(knobs, allocator) + preload
    if preload:
        knobs.export("LD_PRELOAD", ":".join(preload))
    image(knobs, "here")


def torchrun(knobs: Knobs, args: Sequence[str]) -> None:
    """NPROC ranks per node under torchrun, static or c10d rendezvous."""
    nproc = positive_int("NPROC", knobs.set("NPROC", knobs.get("NPROC", "2")))
    ranks_fit_here("NPROC", nproc)
    nnodes = node_count(knobs)
    node_rank = knobs.set("NODE_RANK", knobs.get("NODE_RANK", "0"))
    if not re.fullmatch(r"[0-9]+", node_rank) or int(node_rank) >= nnodes:
        raise KnobError(f"NODE_RANK={node_rank} must be an integer from 0 to NNODES-1 ({nnodes - 1})")
    restarts = knobs.set("MAX_RESTARTS", knobs.get("MAX_RESTARTS", "0"))
    if not re.fullmatch(r"[0-9]+", restarts):
        raise KnobError(f"MAX_RESTARTS={restarts} is not a non-negative integer")
    addr = knobs.set("MASTER_ADDR", knobs.get("MASTER_ADDR", "127.0.0.1"))
    number = rendezvous_port(knobs, addr, one_host=nnodes == 1)
    knobs.set("MASTER_PORT", str(number))
    threads(knobs, nproc)
    rdzv = knobs.set("RDZV", knobs.get("RDZV", "static"))
    if rdzv not in ("static", "c10d"):
        raise KnobError(f"RDZV={rdzv} is not static or c10d")
    knobs.set("RDZV_ID", knobs.get("RDZV_ID", "accel"))
    if int(node_rank) == 0:
        port_free(addr, number)
    local_addr = knobs.get("LOCAL_ADDR")
    if rdzv == "c10d" and not local_addr and nnodes > 1 and int(node_rank) == 0:
        local_addr = addr  # node 0 hosts the store: torchrun's hostname guess misses multi-homed hosts
    knobs.set("LOCAL_ADDR", local_addr)
    ranks_allocator(knobs)
    image(knobs, "here")  # torchrun runs inside one container and starts the ranks there


def node_count(knobs: Knobs) -> int:
    """NNODES: a count, or MIN:MAX for an elastic run (c10d only: torchrun forms each round with whichever
    nodes between MIN and MAX are there, so a run that loses a node goes on with fewer). Returns MAX."""
    text = knobs.set("NNODES", knobs.get("NNODES", "1"))
    elastic = re.fullmatch(r"([0-9]+):([0-9]+)", text)
    if not elastic and ":" not in text:
        return positive_int("NNODES", text)
    low, high = (int(elastic[1]), int(elastic[2])) if elastic else (0, 0)
    if not 1 <= low <= high:
        raise KnobError(f"NNODES={text} must be MIN:MAX with 1 <= MIN <= MAX (e.g. 1:2)")
    if knobs.get("RDZV", "static") != "c10d":
        raise KnobError(f"NNODES={text} (elastic) needs RDZV=c10d: a static rendezvous waits for a fixed count")
    return high


def mpirun(knobs: Knobs, args: Sequence[str]) -> None:
    """NP ranks from Open MPI's mpirun, on this host or across HOSTS."""
    if not installed("mpirun"):
        raise KnobError("mpirun not found; install Open MPI (Debian: openmpi-bin) or use the mpi image")
    np_ = positive_int("NP", knobs.set("NP", knobs.get("NP", "2")))
    port("MASTER_PORT", knobs.get("MASTER_PORT", str(DEFAULT_PORT)))  # checked in the order the knobs read
    map_by = knobs.set("MAP_BY", knobs.get("MAP_BY", "slot"))
    if map_by not in ("slot", "node", "core", "socket"):
        raise KnobError(f"MAP_BY={map_by} is not slot, node, core or socket")
    bind_to = knobs.set("BIND_TO", knobs.get("BIND_TO", "none"))
    if bind_to not in ("none", "core", "socket"):
        raise KnobError(f"BIND_TO={bind_to} is not none, core or socket")
    hosts, addr, local_ranks = knobs.set("HOSTS", knobs.get("HOSTS")), knobs.get("MASTER_ADDR"), np_
    names: list[str] = []
    if hosts:
        if not HOSTS_PATTERN.fullmatch(hosts):
            raise KnobError(f"HOSTS={hosts} is not host[:slots][,host[:slots]...] (e.g. node1:8,node2:8)")
        entries = hosts.split(",")
        names = [entry.split(":")[0] for entry in entries]
        addresses = {name: resolve(name, hosts) for name in names}
        addr = addr or addresses[names[0]]
        if ":" in entries[0]:
            local_ranks = int(entries[0].split(":")[1])
    else:
        ranks_fit_here("NP", np_)
    addr = knobs.export("MASTER_ADDR", addr or "127.0.0.1")
    number = rendezvous_port(knobs, addr, one_host=not hosts)
    knobs.export("MASTER_PORT", str(number))
    if is_this_host(addr):
        port_free(addr, number)
    threads(knobs, local_ranks)
    ranks_allocator(knobs)
    knobs.set("RANKS_AT", "elsewhere" if hosts else "here")
    image(knobs, knobs.values["RANKS_AT"])  # the host's mpirun starts one container per rank
    if knobs.get("IMAGE") and not knobs.get("ACCEL_PRINT"):
        if hosts:
            image_on_every_host(knobs, names)
        else:
            container(Knobs(knobs.env), ["--check"])


def srun(knobs: Knobs, args: Sequence[str]) -> None:
    """NTASKS SLURM tasks with srun, inside an allocation or asking for one."""
    if not installed("srun"):
        raise KnobError("srun not found; run on a SLURM cluster (Debian: slurm-wlm) or use torchrun.sh")
    ntasks = positive_int("NTASKS", knobs.set("NTASKS", knobs.get("NTASKS", knobs.get("SLURM_NTASKS", "2"))))
    nodes = positive_int("NODES", knobs.set("NODES", knobs.get("NODES", knobs.get("SLURM_JOB_NUM_NODES", "1"))))
    port("MASTER_PORT", knobs.export("MASTER_PORT", knobs.get("MASTER_PORT", str(DEFAULT_PORT))))
    addr = knobs.get("MASTER_ADDR")
    if not addr and knobs.get("SLURM_JOB_NODELIST"):
        shown = subprocess.run(["scontrol", "show", "hostnames", knobs.get("SLURM_JOB_NODELIST")],
                               capture_output=True, text=True, check=False)
        addr = next(iter(shown.stdout.split()), "")
        if not addr:
            raise KnobError("could not find the first node of the allocation; set MASTER_ADDR")
    knobs.export("MASTER_ADDR", addr or socket.gethostname())
    threads(knobs, -(-ntasks // nodes))
    ranks_allocator(knobs)
    image(knobs, "elsewhere")  # the host's srun starts one container per task, on the allocation's nodes
    if knobs.get("IMAGE") and not knobs.get("ACCEL_PRINT"):
        if knobs.get("SLURM_JOB_ID"):  # once per node of the allocation, before any task starts
            extra = shlex.split(knobs.get("SRUN_ARGS"))
            per_node(knobs, ["srun", "--nodes", str(nodes), "--ntasks", str(nodes), "--ntasks-per-node", "1",
                             "--export=ALL", *extra, str(REPO / "launch" / "_container.sh"), "--check"],
                     "srun", lambda output: "")
        else:
            container(Knobs(knobs.env), ["--check"])  # no allocation yet: this host


LAUNCHERS: dict[str, Callable[[Knobs, Sequence[str]], None]] = {
    "local": local, "torchrun": torchrun, "mpirun": mpirun, "srun": srun, "container": container}


def resolve_knobs(launcher: str, args: Sequence[str], env: Mapping[str, str] | None = None) -> Knobs:
    """The knobs of `launcher` for these accel arguments, checked; KnobError for the first bad one."""
    knobs = Knobs(dict(os.environ) if env is None else env)
    if not args and launcher != "container":
        raise KnobError(USAGE[launcher])
    LAUNCHERS[launcher](knobs, list(args))
    return knobs


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["start-failure"] and len(args) == 4:  # launch/_container.sh, after the engine refused
        line = start_failure(args[1], int(args[2]), Path(args[3]).read_text(errors="replace"))
        if line:
            print(line, file=sys.stderr)
        return 0
    if not args or args[0] not in LAUNCHERS:
        print(f"launch: error: usage: python -m pipelines.core.distributed.launchers {{{','.join(LAUNCHERS)}}} "
              "ACCEL-ARGS...", file=sys.stderr)
        return 2
    try:
        print(resolve_knobs(args[0], args[1:]).shell())
    except KnobError as exc:
        print(f"launch: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
