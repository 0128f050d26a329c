"""Chapter 1: where the time goes in one forward pass, and what one extra layer costs in parameters.

- task=profile: torch.profiler over one forward pass of a 64-image batch (no warm-up, as the book),
  ops sorted by self CPU time; the shares are the comparable numbers, the times are this machine's.
- task=params: parameter counts with and without the extra FC layer, then the extra-FC model is
  trained through the shared loop, as the book's saved run did.
"""

from __future__ import annotations

import torch
from torch.profiler import ProfilerActivity, profile

from pipelines.core import loop, models
from pipelines.core.steps import book_optimizer, plain_step

OPTIONS = {"task": "profile", "extra_fc": False, "top_ops": 20}


def check(cfg, ctx) -> None:
    from pipelines.core.config import ConfigError

    if cfg.options["task"] not in ("profile", "params"):
        raise ConfigError(f"option task={cfg.options['task']!r} is unknown; use task=profile or task=params")


def profile_forward(model: torch.nn.Module, batch: torch.Tensor, top: int) -> tuple[dict, str]:
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if batch.is_cuda else [])
    with torch.no_grad(), profile(activities=activities) as prof:
        model(batch)
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events) or 1
    ranked = sorted(events, key=lambda e: e.self_cpu_time_total, reverse=True)
    shares = {e.key: round(100.0 * e.self_cpu_time_total / total, 2) for e in ranked[:top]}
    table = events.table(sort_by="self_cpu_time_total", row_limit=top)
    return {"self_cpu_total_ms": total / 1e3, "op_share_pct": shares}, table


def analyze(cfg, ctx, loaders):
    x, y = next(iter(loaders.train))
    model = models.build(cfg.model, classes=cfg.head_classes, weights=cfg.weights,
                         extra_fc=cfg.options["extra_fc"]).to(ctx.device)
    if cfg.options["task"] == "profile":
        metrics, table = profile_forward(model, x.to(ctx.device), cfg.options["top_ops"])
        for op in ("aten::mkldnn_convolution", "aten::max_pool2d_with_indices", "aten::addmm",
                   "aten::clamp_min"):
            metrics[f"share_{op.split('::')[1]}_pct"] = metrics["op_share_pct"].get(op, 0.0)
        metrics["parameters"] = models.parameter_count(model)
        return metrics, {"profile_table": table, "batch_shape": list(x.shape)}
    baseline = models.build(cfg.model, classes=cfg.head_classes)
    trainable = loop.Trainable(model, plain_step(model, book_optimizer(model, cfg)))
    metrics = loop.train(trainable, loaders, cfg, ctx)
    metrics.update(loop.evaluate(trainable, loaders.test, cfg, ctx))
    metrics.update(parameters=models.parameter_count(model),
                   baseline_parameters=models.parameter_count(baseline))
    metrics["param_ratio"] = metrics["parameters"] / metrics["baseline_parameters"]
    return metrics, {}
