"""Lightning Fabric on the launcher's ranks: the processes torchrun, mpirun or srun started, and the
process group the runner joined (core/distributed/ranks.py), told to Fabric so it creates no processes of its own."""

from __future__ import annotations

from lightning.fabric.plugins.environments import ClusterEnvironment

from pipelines.core.distributed import placement


class RunnerEnvironment(ClusterEnvironment):
    """The ranks the launcher started and the runner joined (core/distributed/ranks.py), told to Fabric."""

    def __init__(self, place: placement.Placement):
        self.place = place

    @property
    def creates_processes_externally(self) -> bool:
        return True

    @property
    def main_address(self) -> str:
        return self.place.master_addr or "127.0.0.1"

    @property
    def main_port(self) -> int:
        return self.place.master_port or 0

    @staticmethod
    def detect() -> bool:
        return True

    def world_size(self) -> int:
        return self.place.world_size

    def set_world_size(self, size: int) -> None:
        """The launcher decided the world size; Fabric's own count must agree with it (checked at launch)."""

    def global_rank(self) -> int:
        return self.place.rank

    def set_global_rank(self, rank: int) -> None:
        """As set_world_size: the rank is the launcher's."""

    def local_rank(self) -> int:
        return self.place.local_rank

    def node_rank(self) -> int:
        return self.place.node_rank
