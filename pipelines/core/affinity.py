"""CPU lists for thread pinning, computed from the cores this process may use, physical cores first.

`GOMP_CPU_AFFINITY=0-15` (a fixed list) is physical-cores-only only when the OS numbers hyper-thread
siblings after all first threads, and it ignores taskset, cgroup cpusets and SLURM bindings. Here the
list starts from `os.sched_getaffinity(0)` and puts one logical CPU of every physical core (package,
core id) first, then the remaining siblings, so N threads land on N distinct cores when N <= cores.

Launch scripts call `python -m pipelines.core.affinity gomp [N]`; this module only reads and prints.
"""

from __future__ import annotations

import os
import sys
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


def main(argv: list[str] | None = None) -> int:
    """`python -m pipelines.core.affinity gomp [THREADS]` | `physical` (count of usable physical cores)."""
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] not in ("gomp", "physical") or len(args) > 2:
        print("usage: python -m pipelines.core.affinity gomp [THREADS] | physical", file=sys.stderr)
        return 2
    if args[0] == "physical":
        print(physical_cores(read_topology(usable_cpus())))
        return 0
    try:
        print(gomp_list(int(args[1]) if len(args) > 1 else None))
    except ValueError as exc:
        print(f"affinity: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
