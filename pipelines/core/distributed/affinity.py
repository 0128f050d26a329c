"""The core-per-rank policy and CPU lists for thread pinning, from the cores this process may use.

One policy serves Python and the launchers: `rank_cores` gives each local rank a disjoint slice of the
usable cores (shared single cores only when ranks outnumber cores), and `threads_per_rank` is the size of
the smallest slice, so no rank runs more threads than it has cores. The launchers' THREADS default is
`threads_per_rank` (distributed/knobs.py `threads`).

`GOMP_CPU_AFFINITY=0-15` (a fixed list) is physical-cores-only only when the OS numbers hyper-thread
siblings after all first threads, and it ignores taskset, cgroup cpusets and SLURM bindings. Here the
list starts from `os.sched_getaffinity(0)` and puts one logical CPU of every physical core (package,
core id) first, then the remaining siblings, so N threads land on N distinct cores when N <= cores.

launch/local.sh's OMP_BIND=pinned takes its GOMP_CPU_AFFINITY from `gomp_list` (distributed/launchers.py); this
module only reads (the caller binds).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Mapping

SYSFS_CPU = Path("/sys/devices/system/cpu")

Topology = Mapping[int, tuple[int, int]]  # logical cpu -> (physical package id, core id)


def read_topology(cpus: Iterable[int], root: Path = SYSFS_CPU) -> dict[int, tuple[int, int]]:
    """(package, core) of each cpu from sysfs; a cpu without topology files counts as its own core."""
    out = {}
    for cpu in cpus:
        folder = root / f"cpu{cpu}" / "topology"
        try:
            package = int((folder / "physical_package_id").read_text())
            core = int((folder / "core_id").read_text())
        except (OSError, ValueError):
            package, core = -1, cpu
        out[cpu] = (package, core)
    return out


def physical_first(cpus: Iterable[int], topology: Topology) -> list[int]:
    """The cpus ordered so the first of each physical core comes before any second sibling."""
    rounds: dict[tuple[int, int], int] = {}
    keyed = []
    for cpu in sorted(cpus):
        core = topology.get(cpu, (-1, cpu))
        sibling = rounds.get(core, 0)  # 0 for the first logical cpu seen on this core
        rounds[core] = sibling + 1
        keyed.append((sibling, cpu))
    return [cpu for _, cpu in sorted(keyed)]


def usable_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def physical_cores(topology: Topology) -> int:
    return len(set(topology.values()))


def rank_cores(cores: Iterable[int], local_rank: int, local_world: int) -> tuple[list[int], bool]:
    """The disjoint slice of `cores` for this local rank, and whether it is oversubscribed (more local
    ranks than cores: each rank then gets one core, shared round-robin)."""
    cores = sorted(cores)
    if not cores or local_world < 1 or not 0 <= local_rank < local_world:
        raise ValueError(f"local rank {local_rank} of {local_world} over {len(cores)} core(s)")
    if local_world <= len(cores):
        per, extra = divmod(len(cores), local_world)
        start = local_rank * per + min(local_rank, extra)
        return cores[start:start + per + (1 if local_rank < extra else 0)], False
    return [cores[local_rank % len(cores)]], True


def threads_per_rank(local_world: int, cores: Iterable[int] | None = None) -> int:
    """Threads for each of `local_world` ranks on this node: the core count of the smallest rank_cores
    slice of the usable cores (at least 1)."""
    cores = usable_cpus() if cores is None else sorted(cores)
    return min(len(rank_cores(cores, rank, local_world)[0]) for rank in range(local_world))


def gomp_list(threads: int | None = None, topology: Topology | None = None) -> str:
    """GOMP_CPU_AFFINITY value: the first `threads` cpus of the physical-first order, comma separated."""
    cpus = usable_cpus() if topology is None else sorted(topology)
    topology = read_topology(cpus) if topology is None else topology
    ordered = physical_first(cpus, topology)
    if threads is not None:
        if threads < 1:
            raise ValueError(f"threads must be at least 1, got {threads}")
        ordered = ordered[:threads]
    return ",".join(str(cpu) for cpu in ordered)
