"""Chapter 7: automatic mixed precision (fp32 / bf16 / fp16 + GradScaler) and the backend flags.

The technique, all of it visible below:
1. Backend flags. `cudnn.benchmark` times the convolution algorithms once per input shape and keeps
   the fastest. `tf32` lets fp32 matmuls/convolutions use TF32 Tensor Cores. `reduced_precision_
   reduction` lets fp16/bf16 matmuls accumulate partial sums in reduced precision. They hold for the
   whole process, so they are declared (`process_options`) and the engine sets them for each arm and
   puts torch's back after it ("default": torch's own default). They are CUDA settings: on CPU the
   record says they changed nothing.
2. `torch.autocast(device.type, dtype=...)` around forward and loss: matmuls and convolutions run in
   the low-precision type; reductions, softmax and the loss stay in fp32.
3. `torch.amp.GradScaler(device.type)` for fp16: the loss is scaled so small gradients do not flush
   to zero in fp16's 5-bit exponent; gradients are unscaled before the step, and a step with inf/nan
   gradients is skipped. bf16 has fp32's exponent range and needs no scaler.
`scaler=false` with fp16 is what the book repository's last notebook cell actually ran (autocast
float16, no scaler); the catalog keeps it as a labelled variant, not as the recommended recipe.

On CPU, bf16 autocast runs for real. fp16 variants are skipped with a reason (see `needs`): torch can
run fp16 autocast on CPU, but the book's fp16 recipe is a CUDA Tensor Core technique and most CPUs have
no fp16 arithmetic units, so a CPU time would not measure it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F

from pipelines.core.train import models
from pipelines.core.harness.pipeline import Needs, Trainable, TrainingPipeline
from pipelines.core.train.steps import DTYPES, book_optimizer

Switch = Literal["default", "on", "off"]


@dataclass(frozen=True)
class Options:
    precision: Literal["fp32", "bf16", "fp16"] = "fp32"
    scaler: bool = True  # GradScaler for fp16 (false: the book repository's last cell)
    cudnn_benchmark: bool = True
    tf32: Switch = "default"
    reduced_precision_reduction: Switch = "default"
    optimizer: Literal["adam", "adamw"] = "adam"


def make_step(model, optimizer, device: torch.device, precision: str, use_scaler: bool):
    dtype = DTYPES[precision]
    scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16" and use_scaler)

    def step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device.type, dtype=dtype, enabled=precision != "fp32"):
            loss = F.cross_entropy(model(x), y)  # autocast keeps the loss in fp32
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()  # outside autocast: backward runs in the forward's dtypes
        scaler.step(optimizer)  # unscales first; skips the step if any gradient is inf/nan
        scaler.update()
        return loss

    def predict(x: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device.type, dtype=dtype, enabled=precision != "fp32"):
            return model(x)

    return step, predict


class MixedPrecision(TrainingPipeline[Options]):
    Options = Options
    process_options = ("cudnn_benchmark", "tf32", "reduced_precision_reduction")  # the engine sets these flags

    def process_values(self, cfg):
        """The backend flags are CUDA settings: on a CPU they change nothing, so arms differing in them share."""
        return super().process_values(cfg) if cfg.device == "cuda" else ()
    smoke_settings = {"model": "efficientnet_b0", "batch_size": 8, "num_workers": 0, "pin_memory": False}

    needs = (Needs("fp16 autocast + GradScaler is the CUDA Tensor Core recipe; it is not measured on CPU",
                   when={"precision": "fp16"}, device="cuda"),
             Needs("bf16 autocast", when={"precision": "bf16"}, bf16=True))

    def setup(self, cfg, ctx) -> Trainable:
        opts: Options = cfg.options
        model = models.build(cfg.model, classes=cfg.head_classes, weights=cfg.weights).to(ctx.device)
        optimizer = book_optimizer(model, cfg) if opts.optimizer == "adam" else \
            torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        step, predict = make_step(model, optimizer, ctx.device, opts.precision, opts.scaler)
        notes = []
        if ctx.device.type != "cuda":
            changed = [n for n in ("tf32", "reduced_precision_reduction") if getattr(opts, n) != "default"]
            changed += ["cudnn_benchmark"] if opts.cudnn_benchmark else []
            if changed:
                notes.append(f"{', '.join(changed)}: CUDA backend settings, no effect on {ctx.device.type}")
        if opts.precision == "fp16" and not opts.scaler:
            notes.append("fp16 without GradScaler (the book repository's final run): gradients may underflow")
        trainable = Trainable(model, step, predict=predict, notes=notes)
        # the largest finite value of the arm's compute type (the note's precision table: fp16 65504, fp32
        # and bf16 3.4e38), a count the report checks against the table
        trainable.metrics["max_finite_value"] = torch.finfo(DTYPES.get(opts.precision, torch.float32)).max
        return trainable


PIPELINE = MixedPrecision()
