"""Chapter 6: L1-norm structured pruning of the CNN's convolution filters, then real compression.

The book used NNI 2.x (`L1NormPruner` + `ModelSpeedup`). NNI 3.0 removed that API and NNI is no longer
maintained, so this pipeline uses what PyTorch itself keeps: `torch.nn.utils.prune.ln_structured`
(n=1, dim=0) chooses, per convolution, the output filters with the smallest L1 norm, and `compress`
below removes them for real: each conv keeps only its surviving filters, the next conv only the
matching input channels, and the first Linear only the flattened features those channels produced.
A mask alone would leave the tensors (and the time per step) unchanged; slicing makes the model smaller.

Procedure (the book's): train a fresh CNN for one warm-up epoch (at smoke/bench scale: as many steps
as the timed run), prune + compress, make a new Adam, train (timed), test. prune=false is the unpruned
reference, trained without the warm-up, as in the book. The pruned arms of one process start from the same
seed, so their dense warm-ups are the same training: the first one built runs it and the others prune a copy
of its weights (`dense_warmup`; eight arms a process in the chapter's comparison, 2.4 s each at bench scale).
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from typing import Annotated

import click
import torch
from torch import nn
from torch.nn.utils import prune

from pipelines.core.train import models
from pipelines.core.train.architectures import BookCNN
from pipelines.core.harness.pipeline import ConfigError, Trainable, TrainingPipeline
from pipelines.core.train.steps import book_optimizer, plain_step

# Exclusive range: 0 prunes nothing and 1 removes every filter.
SPARSITY = click.FloatRange(0, 1, min_open=True, max_open=True)


@dataclass(frozen=True)
class Options:
    prune: bool = True
    sparsity: Annotated[float, SPARSITY] = 0.5  # share of every convolution's filters removed


def l1_filter_masks(model: nn.Module, sparsity: float) -> list[torch.Tensor]:
    """Per Conv2d, a bool vector of the output filters to keep (L1-norm ranking, torch.nn.utils.prune)."""
    keep = []
    for conv in (m for m in model.modules() if isinstance(m, nn.Conv2d)):
        prune.ln_structured(conv, "weight", amount=sparsity, n=1, dim=0)
        keep.append(conv.weight_mask.flatten(1).any(dim=1))
        prune.remove(conv, "weight")
    return keep


def _sliced_conv(conv: nn.Conv2d, out_keep: torch.Tensor, in_keep: torch.Tensor | None) -> nn.Conv2d:
    weight = conv.weight.detach()[out_keep]
    if in_keep is not None:
        weight = weight[:, in_keep]
    new = nn.Conv2d(weight.shape[1], weight.shape[0], conv.kernel_size, conv.stride, conv.padding,
                    conv.dilation, conv.groups, conv.bias is not None, conv.padding_mode)
    new.weight.data.copy_(weight)
    if conv.bias is not None:
        new.bias.data.copy_(conv.bias.detach()[out_keep])
    return new


def _sliced_linear_inputs(linear: nn.Linear, channel_keep: torch.Tensor) -> nn.Linear:
    """Keep the flattened features of surviving channels (flatten is channel-major: C x H x W)."""
    per_channel = linear.in_features // channel_keep.numel()
    feature_keep = channel_keep.repeat_interleave(per_channel)
    new = nn.Linear(int(feature_keep.sum()), linear.out_features, linear.bias is not None)
    new.weight.data.copy_(linear.weight.detach()[:, feature_keep])
    if linear.bias is not None:
        new.bias.data.copy_(linear.bias.detach())
    return new


def compress(model: BookCNN, keep: list[torch.Tensor]) -> BookCNN:
    """Physically remove pruned filters from the CNN's conv stack and the Linear that reads it."""
    convs = [i for i, m in enumerate(model.features) if isinstance(m, nn.Conv2d)]
    previous = None
    for index, out_keep in zip(convs, keep):
        model.features[index] = _sliced_conv(model.features[index], out_keep, previous)
        previous = out_keep
    model.classifier[0] = _sliced_linear_inputs(model.classifier[0], previous)
    return model


def shape_metrics(model: nn.Module, before: int) -> dict:
    """Parameter counts before (`before`) and after pruning, and the surviving filters per convolution."""
    return {"unpruned_parameters": before, "param_ratio": models.parameter_count(model) / before,
            "conv_filters": [m.out_channels for m in model.modules() if isinstance(m, nn.Conv2d)]}


# This process's last dense warm-up: (what decided it, its weights, its seconds). One is kept: the next
# round's (or repeat's) arms start from another seed.
_last_warmup: tuple[tuple, dict[str, torch.Tensor], float] | None = None


def dense_warmup(trainable: Trainable, prep, cfg) -> float:
    """Train the dense model of `trainable` for the warm-up (untimed), or load the weights this process's last
    warm-up reached where it was the same training: the same first weights (a digest of every tensor) and the
    same config but for the arm (variant, sparsity). Returns the warm-up's seconds (those of the one that ran)."""
    global _last_warmup
    digest = hashlib.sha256()
    for tensor in trainable.model.state_dict().values():
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    same_training = dataclasses.replace(cfg, variant="", options=dataclasses.replace(cfg.options, sparsity=0.5))
    key = (digest.hexdigest(), same_training)
    if _last_warmup is not None and _last_warmup[0] == key:
        trainable.model.load_state_dict(_last_warmup[1])
        return _last_warmup[2]
    seconds = prep.train(trainable)["train_s"]
    _last_warmup = (key, {name: t.detach().clone() for name, t in trainable.model.state_dict().items()}, seconds)
    return seconds


class Pruning(TrainingPipeline[Options]):
    Options = Options

    def check(self, cfg, ctx) -> None:
        if cfg.model not in ("cnn_cifar10", "cnn_fmnist"):
            raise ConfigError(f"pruning is written for the book's CNNs (cnn_cifar10, cnn_fmnist), not "
                              f"{cfg.model}")

    def setup(self, cfg, ctx) -> Trainable:
        model = models.build(cfg.model, classes=cfg.head_classes, weights=cfg.weights).to(ctx.device)
        metrics = shape_metrics(model, models.parameter_count(model))
        return Trainable(model, plain_step(model, book_optimizer(model, cfg)), metrics=metrics)

    def before_training(self, trainable: Trainable, prep, cfg, ctx) -> Trainable:
        """The book's procedure: an untimed warm-up of the dense model, prune + compress, a new Adam."""
        opts: Options = cfg.options
        if not opts.prune:
            return trainable  # the unpruned reference trains without the warm-up, as in the book
        trainable.count_flops = False  # the warm-up is not the measured model
        warmup_s = dense_warmup(trainable, prep, cfg)
        with torch.no_grad():  # compress slices the model in place
            model = compress(trainable.model, l1_filter_masks(trainable.model, opts.sparsity)).to(ctx.device)
        metrics = shape_metrics(model, trainable.metrics["unpruned_parameters"])
        metrics["prune_warmup_s"] = warmup_s
        return Trainable(model, plain_step(model, book_optimizer(model, cfg)), metrics=metrics)  # a new Adam


PIPELINE = Pruning()
