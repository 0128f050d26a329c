"""The talk's ViT ladder: plain PyTorch -> torch.compile -> Lightning Fabric -> Fabric bf16-mixed.

- fabric=false (the talk's scripts 00-02): the model on the device, Adam, forward / loss / zero_grad /
  backward / step. compile=true wraps the model in `torch.compile` (script 02).
- fabric=true (scripts 03-04): `Fabric(accelerator, devices=1, precision)` sets up the model and the
  optimizer, and the step calls `fabric.backward(loss)`, so Fabric's precision plugin (autocast, and a
  GradScaler for 16-mixed) does the mixed-precision work. The shared loop still drives the steps.
  The talk's Fabric scripts also call torch.set_float32_matmul_precision("medium") (matmul_precision).
- pretrained=true (the fine-tune steps): ImageNet weights come from a local --weights file; the head is
  a fresh 10-class Linear (the file's 1000-class head does not fit and is skipped, as the talk replaced
  it). Without --weights the model starts from random init, and the record says so.
The same Fabric precision strings are the course's Trainer precisions (32-true, 16-mixed, bf16-mixed,
16-true, 64-true), so the course's precision entries run here too, on a stand-in model.

The loop owns the data loaders and moves each batch to the device, so fabric.setup_dataloaders is not
used (on one device it would only do that same move).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from pipelines.core import loop, models
from pipelines.core.config import ConfigError
from pipelines.core.steps import book_optimizer, plain_step

OPTIONS = {"fabric": False, "precision": "32-true", "compile": False, "matmul_precision": "highest",
           "pretrained": False}
SMOKE_ARGS = {"model": "vit_tiny", "batch_size": 4, "num_workers": 0, "pin_memory": False}
PRECISIONS = ("32-true", "16-mixed", "bf16-mixed", "16-true", "bf16-true", "64-true")
MATMUL = ("highest", "high", "medium")


def check(cfg, ctx) -> None:
    opts = cfg.options
    if opts["precision"] not in PRECISIONS:
        raise ConfigError(f"option precision={opts['precision']!r} is unknown; choose one of: "
                          f"{', '.join(PRECISIONS)}")
    if opts["precision"] != "32-true" and not opts["fabric"]:
        raise ConfigError(f"option precision={opts['precision']} needs fabric=true (the plain loop is fp32)")
    if opts["matmul_precision"] not in MATMUL:
        raise ConfigError(f"option matmul_precision={opts['matmul_precision']!r} is unknown; choose one of: "
                          f"{', '.join(MATMUL)}")


def skip(cfg, ctx) -> str | None:
    precision = cfg.options["precision"]
    if precision == "16-mixed" and ctx.device.type != "cuda":
        return ("16-mixed (fp16 autocast + GradScaler) needs CUDA; on CPU Lightning would silently run "
                "bf16-mixed instead, so it is not run here")
    if "bf16" in precision and ctx.device.type == "cuda" and not torch.cuda.is_bf16_supported():
        return "this GPU has no bf16 support (the talk's fallback is 16-mixed)"
    return None


def fabric_step(fabric, model, optimizer):
    """The talk's Fabric training step: Fabric's backward applies the precision plugin."""

    def step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        fabric.backward(loss)
        optimizer.step()
        return loss

    return step


def setup(cfg, ctx) -> loop.Trainable:
    opts = cfg.options
    torch._dynamo.reset()
    torch.set_float32_matmul_precision(opts["matmul_precision"])  # set for every variant: it is global
    notes = []
    if opts["pretrained"] and cfg.weights is None:
        notes.append("random init: no --weights given (the talk fine-tuned ImageNet weights; this run "
                     "did not)")
    elif cfg.weights is not None:
        notes.append(f"weights from {cfg.weights}; classification head re-initialised for "
                     f"{cfg.head_classes} classes")
    model = models.build(cfg.model, classes=cfg.head_classes, weights=cfg.weights)
    if not opts["fabric"]:
        run_model = torch.compile(model) if opts["compile"] else model
        model.to(ctx.device)
        step = plain_step(run_model, book_optimizer(model, cfg))
        return loop.Trainable(model, step, predict=run_model, notes=notes)

    from lightning.fabric import Fabric  # imported before torch.compile: Fabric records compile's arguments

    run_model = torch.compile(model) if opts["compile"] else model
    fabric = Fabric(accelerator=ctx.device.type, devices=1, precision=opts["precision"])
    fabric_model, optimizer = fabric.setup(run_model, book_optimizer(model, cfg))
    # FLOPs are counted on the eager fp32 model; "-true" precisions convert the weights themselves.
    count = opts["precision"] in ("32-true", "16-mixed", "bf16-mixed")
    return loop.Trainable(model, fabric_step(fabric, fabric_model, optimizer), predict=fabric_model,
                          count_flops=count, notes=notes)
