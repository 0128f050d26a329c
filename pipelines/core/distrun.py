"""The distributed entry: one process of a multi-process run, started by torchrun, mpirun or srun.

init (with a timeout) -> pin this rank's cores -> the ordinary runner (rank 0 evaluates and writes the
result, with every rank's placement in its `dist` section) -> clean shutdown. A lost peer surfaces as one
line naming this rank and the rendezvous address, and a non-zero exit, never as a hang.
"""

from __future__ import annotations

import sys
from types import ModuleType

from pipelines.core import experiments, dist
from pipelines.core.config import RunConfig

EXIT_PEER_LOST = 1


def timeout_s(cfg: RunConfig) -> float:
    return float(cfg.options.get("timeout_s", dist.DEFAULT_TIMEOUT_S))


def run(entry: experiments.Experiment, configs: list[RunConfig], module: ModuleType, place: dist.Placement):
    import torch

    from pipelines.core import loop, runner

    first = configs[0]
    backend = str(first.options.get("backend", "gloo"))
    dist.check_backend(backend, first.device)
    placement_info = dist.pin(place)
    dist.init(place, backend, first.device, timeout_s(first))
    device = torch.device("cuda", place.local_rank) if first.device == "cuda" else torch.device("cpu")
    ctx = loop.RunContext(device=device, rank=place.rank, world_size=place.world_size)
    try:
        info = dist.describe(place, backend, dist.gather_objects(placement_info))
        outcome = runner.run(entry, configs, module, ctx=ctx, dist_info=info)
    except RuntimeError as exc:  # a collective failed: a peer died or timed out
        if isinstance(exc, dist.DistError) or not _is_collective_failure(exc):
            raise
        _peer_lost(place, exc, timeout_s(first))
    dist.shutdown(timeout_s(first))
    return outcome


def _is_collective_failure(exc: RuntimeError) -> bool:
    import torch.distributed as tdist

    text = str(exc).lower()
    return isinstance(exc, getattr(tdist, "DistError", ())) or any(
        word in text for word in ("gloo", "connection", "timed out", "timeout", "nccl", "peer", "closed"))


def _peer_lost(place: dist.Placement, exc: BaseException, timeout: float) -> None:
    print(f"accel: error: rank {place.rank}/{place.world_size} ({place.source}): a peer was lost or did not "
          f"answer within {timeout:g} s (rendezvous {place.master_addr}:{place.master_port}): "
          f"{dist._first_line(exc)}", file=sys.stderr, flush=True)
    sys.stderr.flush()
    import os

    os._exit(EXIT_PEER_LOST)  # the group is broken: skip teardown that would wait on the dead peer
