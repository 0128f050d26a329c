"""The rank contract: which launcher started this process, and its rank, local rank, world size, node and
rendezvous address, read from the launcher's environment as one `Placement`.

Who started the processes, in order of precedence (the first whose variables are present wins):
1. torchrun (or anything exporting RANK + WORLD_SIZE): RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE.
   `srun torchrun ...` sets SLURM_* for the torchrun agent as well; the worker's own RANK is the truth.
2. Open MPI mpirun: OMPI_COMM_WORLD_RANK / _LOCAL_RANK / _SIZE / _LOCAL_SIZE. `mpirun` inside a SLURM
   allocation inherits the batch step's SLURM_PROCID=0 in every process; the OMPI values are the truth.
3. SLURM srun: SLURM_PROCID / SLURM_LOCALID / SLURM_NTASKS, only inside a job step (SLURM_STEP_ID set):
   the batch script itself also carries SLURM_PROCID=0 and SLURM_NTASKS=N, but it is one process.
4. Nothing: a single process.
The rendezvous address comes from MASTER_ADDR/MASTER_PORT, which the launch scripts export. This module
reads the environment; it never writes it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Mapping

from pipelines.core.errors import ConfigError


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
