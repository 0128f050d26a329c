"""Activation checkpointing per block (lecture note): recompute activations instead of storing them.

Every block of the model's block list runs under `torch.utils.checkpoint.checkpoint(block, x,
use_reentrant=False)`: the forward pass keeps only each block's input, and the backward pass re-runs
the block to rebuild what it needs. Memory for activations falls; time rises by about one extra
forward pass. The record carries both sides of the trade: `saved_for_backward_mib` (what autograd
keeps from one forward pass, measured the same way on every device), the step time, and the peak
memory of this variant's training alone (`variant_peak_mib`: CUDA allocator, or the CPU process's RSS
high-water mark reset before training, which includes the model, data and loader buffers).
The non-reentrant variant is the one PyTorch recommends: it works with inputs that do not require grad
and with torch.autograd.grad.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from pipelines.core.train import memory, models
from pipelines.core.harness.pipeline import ConfigError, Trainable, TrainingPipeline
from pipelines.core.train.steps import book_optimizer, plain_step


@dataclass(frozen=True)
class Options:
    checkpoint: bool = True
    # bf16: forward and loss under autocast (the note's recipe row pairs checkpointing with mixed precision)
    precision: Literal["fp32", "bf16"] = "fp32"


def autocast_dtype(opts: Options) -> torch.dtype | None:
    return torch.bfloat16 if opts.precision == "bf16" else None


BLOCK_LISTS = ("encoder.layers", "features")  # ViT encoder blocks; EfficientNet/DenseNet/CNN stages


class Checkpointed(nn.Module):
    def __init__(self, block: nn.Module):
        super().__init__()
        self.block = block

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return checkpoint(self.block, x, use_reentrant=False)


def block_list(model: nn.Module) -> nn.Sequential | None:
    for path in BLOCK_LISTS:
        found = model
        for part in path.split("."):
            found = getattr(found, part, None)
        if isinstance(found, nn.Sequential):
            return found
    return None


def checkpoint_blocks(model: nn.Module) -> nn.Module:
    blocks = block_list(model)
    for index, block in enumerate(blocks):
        blocks[index] = Checkpointed(block)
    return model


class ActivationCheckpointing(TrainingPipeline[Options]):
    Options = Options
    separable_memory = True  # saved_for_backward_mib is this arm's own, whatever else the process holds
    smoke_settings = {"model": "vit_tiny", "batch_size": 4, "num_workers": 0}

    def check(self, cfg, ctx) -> None:
        opts: Options = cfg.options
        if opts.checkpoint and block_list(models.build(cfg.model, classes=cfg.head_classes)) is None:
            raise ConfigError(f"model {cfg.model} has no block list ({' or '.join(BLOCK_LISTS)}) to "
                              "checkpoint; "
                              "use a vit_*, efficientnet_* or densenet121 model")

    def setup(self, cfg, ctx) -> Trainable:
        opts: Options = cfg.options
        model = models.build(cfg.model, classes=cfg.head_classes, weights=cfg.weights).to(ctx.device)
        if opts.checkpoint:
            checkpoint_blocks(model)
        return Trainable(model, plain_step(model, book_optimizer(model, cfg), autocast_dtype(opts)))

    def before_training(self, trainable: Trainable, prep, cfg, ctx) -> Trainable:
        """What autograd keeps from one forward pass: the memory the technique trades for recompute."""
        opts: Options = cfg.options
        saved = memory.saved_for_backward_mib(trainable.model, *prep.batch(), dtype=autocast_dtype(opts))
        trainable.metrics["saved_for_backward_mib"] = saved
        return trainable


PIPELINE = ActivationCheckpointing()
