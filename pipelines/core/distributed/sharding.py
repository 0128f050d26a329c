"""What each rank holds: bytes of parameters, gradients and optimizer state, per rank, measured.

ZeRO's claim (stage 1 shards optimizer state, stage 2 also gradients, stage 3 also parameters) and
FSDP's are claims about tensors that live on each rank. `RankBytes` measures them instead of deriving
them from the stage number: it sums the bytes of the tensors each rank really holds, counting a
sharded tensor (DTensor) by its local shard and a storage shared by several tensors once.

Two instants, because the categories peak at different points of a step:
- at the end of the model's forward (first step only): `params_in_forward`, the parameters present while
  activations are alive. ZeRO-2 / FSDP with reshard_after_forward=False keep them whole until backward;
  ZeRO-3 gathers each layer for its forward and frees it again;
- inside the optimizer's step (first step only, a step post-hook on the innermost torch optimizer, which
  is the one that updates the tensors): `params_at_rest` (the parameters the model keeps between steps),
  `grads` (the gradients of model parameters and of the tensors the optimizer updates), `master_params`
  (tensors the optimizer updates that are not model parameters: ZeRO's fp32 partition copies) and
  `optimizer_state` (the optimizer's moments and step counters).
Only the first step is measured, so the timed steps carry no measurement cost. At train end every rank's
numbers are gathered (a collective) and recorded per rank, with each rank's peak memory.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

import torch
from torch import nn

from pipelines.core.distributed import collectives
from pipelines.core.train import memory
from pipelines.core.train.loop import Hooks, RunContext, Trainable

CATEGORIES = ("params_at_rest", "params_in_forward", "grads", "master_params", "optimizer_state")


def _local(tensor: torch.Tensor) -> torch.Tensor:
    """A DTensor's shard on this rank; a plain tensor as it is."""
    to_local = getattr(tensor, "to_local", None)
    return to_local() if callable(to_local) else tensor


def _storages(tensors: Iterable[torch.Tensor | None]) -> dict[tuple[str, int], int]:
    """(device, storage address) -> bytes, for the non-empty local storages behind `tensors`."""
    found: dict[tuple[str, int], int] = {}
    for tensor in tensors:
        if tensor is None or not isinstance(tensor, torch.Tensor):
            continue
        storage = _local(tensor).untyped_storage()
        if storage.nbytes():
            found[(str(tensor.device), storage.data_ptr())] = storage.nbytes()
    return found


def local_bytes(tensors: Iterable[torch.Tensor | None]) -> int:
    """Bytes this rank holds for `tensors` (shards counted locally, shared storages once)."""
    return sum(_storages(tensors).values())


def innermost(optimizer: Any) -> torch.optim.Optimizer:
    """The torch optimizer that updates tensors, under wrappers (Fabric's and DeepSpeed's ZeRO optimizers
    keep it as `.optimizer`, torch's ZeroRedundancyOptimizer as `.optim`)."""
    while True:
        inner = next((found for name in ("optim", "optimizer")
                      if hasattr(found := getattr(optimizer, name, None), "param_groups")), None)
        if inner is None or inner is optimizer:
            return optimizer
        optimizer = inner


def optimizer_state(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    return [value for state in optimizer.state.values() for value in state.values() if torch.is_tensor(value)]


class RankBytes(Hooks):
    """Per-rank bytes by category (see the module doc), recorded as `metrics["bytes_per_rank"]`.

    `params` returns the tensors that hold the model's parameters on this rank now (for DeepSpeed ZeRO-3
    that includes each parameter's partition, `ds_tensor`); `module` is the module whose forward ends the
    forward pass; `optimizer` is any wrapper around the torch optimizer that steps.
    """

    def __init__(self, params: Callable[[], Iterable[torch.Tensor | None]], module: nn.Module, optimizer: Any,
                 ctx: RunContext):
        self.params, self.ctx = params, ctx
        self.measured: dict[str, int] = {}
        self.host: dict[str, int] = {}
        self._forward = module.register_forward_hook(self._after_forward)
        self._step = innermost(optimizer).register_step_post_hook(self._in_step)

    def _record(self, name: str, tensors: list[torch.Tensor | None]) -> None:
        found = _storages(tensors)
        self.measured[name] = sum(found.values())
        self.host[name] = sum(size for (device, _), size in found.items() if device == "cpu")

    def _after_forward(self, module, args, output) -> None:
        self._record("params_in_forward", list(self.params()))
        self._forward.remove()

    def _in_step(self, optimizer: torch.optim.Optimizer, args, kwargs) -> None:
        params = list(self.params())
        stepped = [p for group in optimizer.param_groups for p in group["params"]]
        held = _storages(params)
        self._record("params_at_rest", params)
        self._record("grads", [getattr(t, "grad", None) for t in params + stepped])
        self._record("master_params", [t for t in stepped if (str(t.device), _local(t).untyped_storage().data_ptr())
                                       not in held])
        self._record("optimizer_state", optimizer_state(optimizer))
        self._step.remove()

    def train_end(self, trainable: Trainable, epoch: int) -> None:
        mine = {"bytes": {name: self.measured.get(name) for name in CATEGORIES},
                "host_bytes": {name: self.host.get(name) for name in CATEGORIES},
                "peak_mib": memory.peak_mib(self.ctx.device)}
        ranks = collectives.gather_objects(mine)  # a collective: every rank runs train_end
        trainable.metrics["bytes_per_rank"] = {name: [r["bytes"][name] for r in ranks] for name in CATEGORIES}
        if self.ctx.device.type != "cpu":  # offloaded tensors: what lives in host memory on a GPU run
            trainable.metrics["host_bytes_per_rank"] = {name: [r["host_bytes"][name] for r in ranks]
                                                        for name in CATEGORIES}
        trainable.metrics["peak_mib_per_rank"] = [r["peak_mib"] for r in ranks]
