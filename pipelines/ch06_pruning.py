"""Chapter 6: L1-norm structured pruning of the CNN's convolution filters, then real compression.

The book used NNI 2.x (`L1NormPruner` + `ModelSpeedup`). NNI 3.0 removed that API and NNI is no longer
maintained, so this pipeline uses what PyTorch itself keeps: `torch.nn.utils.prune.ln_structured`
(n=1, dim=0) chooses, per convolution, the output filters with the smallest L1 norm, and `compress`
below removes them for real: each conv keeps only its surviving filters, the next conv only the
matching input channels, and the first Linear only the flattened features those channels produced.
A mask alone would leave the tensors (and the time per step) unchanged; slicing makes the model smaller.

Procedure (the book's): train a fresh CNN for one warm-up epoch (at smoke/bench scale: as many steps
as the timed run), prune + compress, make a new Adam, train (timed), test. prune=false is the unpruned
reference, trained without the warm-up, as in the book.
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn
from torch.nn.utils import prune

from pipelines.core import loop, models
from pipelines.core.config import ConfigError
from pipelines.core.steps import book_optimizer, plain_step

OPTIONS = {"prune": True, "sparsity": 0.5}


def check(cfg, ctx) -> None:
    sparsity = cfg.options["sparsity"]
    if cfg.options["prune"] and not 0 < sparsity < 1:
        raise ConfigError(f"option sparsity={sparsity} must be between 0 and 1 (exclusive), e.g. 0.5 "
                          "removes half of every convolution's filters")
    if cfg.model not in ("cnn_cifar10", "cnn_fmnist"):
        raise ConfigError(f"pruning is written for the book's CNNs (cnn_cifar10, cnn_fmnist), "
                          f"not {cfg.model}")


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


def compress(model: models.BookCNN, keep: list[torch.Tensor]) -> models.BookCNN:
    """Physically remove pruned filters from the CNN's conv stack and the Linear that reads it."""
    convs = [i for i, m in enumerate(model.features) if isinstance(m, nn.Conv2d)]
    previous = None
    for index, out_keep in zip(convs, keep):
        model.features[index] = _sliced_conv(model.features[index], out_keep, previous)
        previous = out_keep
    model.classifier[0] = _sliced_linear_inputs(model.classifier[0], previous)
    return model


def analyze(cfg, ctx, loaders):
    model = models.build(cfg.model, classes=cfg.head_classes, weights=cfg.weights).to(ctx.device)
    original = models.parameter_count(model)
    extra = {}
    if cfg.options["prune"]:
        # Warm-up on the dense model: one epoch at book scale, else as many steps as the timed run.
        warm = dataclasses.replace(cfg, warmup_steps=0, epochs=1)
        warm_up = loop.Trainable(model, plain_step(model, book_optimizer(model, cfg)), count_flops=False)
        extra["prune_warmup_s"] = loop.train(warm_up, loaders, warm, ctx)["train_s"]
        with torch.no_grad():
            model = compress(model, l1_filter_masks(model, cfg.options["sparsity"])).to(ctx.device)
    trainable = loop.Trainable(model, plain_step(model, book_optimizer(model, cfg)))  # a new Adam
    metrics = loop.train(trainable, loaders, cfg, ctx)
    metrics.update(loop.evaluate(trainable, loaders.test, cfg, ctx))
    metrics.update(extra, parameters=models.parameter_count(model), unpruned_parameters=original,
                   conv_filters=[m.out_channels for m in model.modules() if isinstance(m, nn.Conv2d)])
    metrics["param_ratio"] = metrics["parameters"] / original
    return metrics, {}
