"""Sharded training state, shared by every technique that shards it (FSDP in data_parallel.py and tensor_parallel.py,
ZeRO in zero.py, and Lightning Fabric's FSDP and DeepSpeed strategies in fabric_strategies.py).

Rank 0 evaluates alone after training, so a sharded model must first become one full copy there: the
two hooks gather it (FSDP's state-dict API, or DeepSpeed's GatheredParameters for ZeRO-3). DeepSpeed is
imported here once, with its accelerator matched to --device, because it reads DS_ACCELERATOR at import.
"""

from __future__ import annotations

import logging
import os

import torch
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

from pipelines.core.errors import ConfigError
from pipelines.core.train import models
from pipelines.core.train.loop import Hooks, Trainable


class GatherFullCopy(Hooks):
    """FSDP: sharded weights -> a full copy on every rank after training, so rank 0 can evaluate alone."""

    def __init__(self, sharded, cfg, ctx):
        self.sharded, self.cfg, self.ctx = sharded, cfg, ctx

    def train_end(self, trainable: Trainable, epoch: int) -> None:
        full = StateDictOptions(full_state_dict=True, cpu_offload=True)
        state = get_model_state_dict(self.sharded, options=full)
        copy = models.build(self.cfg.model, classes=self.cfg.head_classes)
        if self.ctx.is_main:
            copy.load_state_dict(state)
        trainable.model = copy.to(self.ctx.device)
        trainable.predict = None


class GatherPartitioned(Hooks):
    """ZeRO-3: gather the partitioned parameters on every rank (a collective) into a full copy on rank 0,
    so rank 0 can evaluate alone."""

    def __init__(self, deepspeed, engine, cfg, ctx):
        self.deepspeed, self.engine, self.cfg, self.ctx = deepspeed, engine, cfg, ctx

    def train_end(self, trainable: Trainable, epoch: int) -> None:
        copy = models.build(self.cfg.model, classes=self.cfg.head_classes)
        module = self.engine.module
        with self.deepspeed.zero.GatheredParameters(list(module.parameters())):
            if self.ctx.is_main:
                copy.load_state_dict(module.state_dict())
        trainable.model = copy.to(self.ctx.device)


def import_deepspeed(device: torch.device):
    """DeepSpeed, with its accelerator matching --device (DS_ACCELERATOR, read once at import)."""
    wanted = os.environ.setdefault("DS_ACCELERATOR", device.type)
    if wanted != device.type:
        raise ConfigError(f"DS_ACCELERATOR={wanted} does not match --device {device.type}; unset DS_ACCELERATOR")
    import deepspeed

    logging.getLogger("DeepSpeed").setLevel(logging.WARNING)  # it logs its whole config on every rank
    return deepspeed
