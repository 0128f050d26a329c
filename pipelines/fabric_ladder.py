"""The plain loop or Lightning Fabric, with torch.compile and a precision: the talk's ViT ladder (plain PyTorch ->
torch.compile -> Lightning Fabric -> Fabric bf16-mixed) and the course's DistilBERT precision and compile entries.

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
16-true, 64-true), so the course's precision and compile entries run here too, on the course's own
workload (any registered model works: DistilBERT on IMDB for unit 9, the ViT for the talk).

The loop owns the data loaders and moves each batch to the device, so fabric.setup_dataloaders is not
used (on one device it would only do that same move).

What the talk's train() did besides the step, inside its clock, is here too (core/train/bookkeeping.py):
a validation pass after every epoch over the split's held-out images (the talk's entries split CIFAR-10
45,000 / 5,000; the course's IMDB 35,000 / 5,000 / 10,000), through the same forward the step uses
(compiled, or Fabric's wrapper); and with train_accuracy / loss_every (the talk's entries set them) a
torchmetrics train accuracy updated from every batch's argmax and the loss read every 300 batches.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from lightning.fabric import Fabric  # before any torch.compile: Fabric records compile's arguments

from pipelines.core.train import bookkeeping, models
from pipelines.core.harness.pipeline import BookkeepingOptions, ConfigError, Needs, Trainable, TrainingPipeline
from pipelines.core.train.steps import book_optimizer, fabric_step, plain_step


@dataclass(frozen=True)
class Options(BookkeepingOptions):
    fabric: bool = False
    precision: Literal["32-true", "16-mixed", "bf16-mixed", "16-true", "bf16-true", "64-true"] = "32-true"
    compile: bool = False
    matmul_precision: Literal["highest", "high", "medium"] = "highest"
    pretrained: bool = False


class FabricLadder(TrainingPipeline[Options]):
    Options = Options
    smoke_settings = {"model": "vit_tiny", "batch_size": 4, "num_workers": 0, "pin_memory": False}
    process_options = ("matmul_precision",)  # torch's float32 matmul precision: the engine sets it

    def check(self, cfg, ctx) -> None:
        opts: Options = cfg.options
        if opts.precision != "32-true" and not opts.fabric:
            raise ConfigError(f"option precision={opts.precision} needs fabric=true (the plain loop is fp32)")

    needs = (Needs("16-mixed (fp16 autocast + GradScaler) needs CUDA; on CPU Lightning would silently run "
                   "bf16-mixed instead", when={"precision": "16-mixed"}, device="cuda"),
             Needs("bf16 precisions (the talk's fallback is 16-mixed)", when={"precision": ("bf16-mixed", "bf16-true")},
                   bf16=True))

    def setup(self, cfg, ctx) -> Trainable:
        opts: Options = cfg.options
        notes = []
        if opts.pretrained and cfg.weights is None:
            notes.append("random init: no --weights given (the talk fine-tuned ImageNet weights; this run "
                         "did not)")
        elif cfg.weights is not None:
            notes.append(f"weights from {cfg.weights}; classification head re-initialised for "
                         f"{cfg.head_classes} classes")
        model = models.build(cfg.model, classes=cfg.head_classes, weights=cfg.weights)
        run_model = torch.compile(model) if opts.compile else model
        if not opts.fabric:
            model.to(ctx.device)
            observe, hooks = bookkeeping.source_loop(opts, cfg, ctx, forward=run_model)
            return Trainable(model, plain_step(run_model, book_optimizer(model, cfg), observe=observe),
                             predict=run_model, notes=notes, hooks=hooks)
        fabric = Fabric(accelerator=ctx.device.type, devices=1, precision=opts.precision)
        fabric_model, optimizer = fabric.setup(run_model, book_optimizer(model, cfg))
        observe, hooks = bookkeeping.source_loop(opts, cfg, ctx, forward=fabric_model)
        # FLOPs are counted on the eager fp32 model; "-true" precisions convert the weights themselves.
        count = opts.precision in ("32-true", "16-mixed", "bf16-mixed")
        return Trainable(model, fabric_step(fabric, fabric_model, optimizer, observe=observe), predict=fabric_model,
                         count_flops=count, notes=notes, hooks=hooks)


PIPELINE = FabricLadder()
