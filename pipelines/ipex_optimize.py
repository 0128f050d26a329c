"""Chapter 4: Intel Extension for PyTorch (`ipex.optimize`) on DenseNet121, and its upstream replacement.

- optimize=none: the plain step (the book's baseline: the IPEX run minus the optimize call).
- optimize=ipex: `model, optimizer = ipex.optimize(model, optimizer=optimizer, dtype=...)` after the
  optimizer is made, as the book. IPEX swaps in its own kernels (prepacked convolutions, fused Adam).
  dtype=bf16 also trains under CPU autocast to bfloat16, which is how IPEX's bf16 path is used.
- optimize=compile: `torch.compile(model)` (inductor, CPU), what upstream PyTorch offers now that IPEX
  has reached end of life; dtype=bf16 adds the same autocast.

IPEX was released for each torch minor version separately, and its last CPU release pairs with torch
2.8: the pipeline refuses (exit 3) unless IPEX is installed with the same torch major.minor, and names
where it does run (its own venv, or the cpu-intel image: core/train/ipex.py). The OpenMP runtime is the launcher's job.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from pipelines.core.train import models
from pipelines.core.train.ipex import IPEX_HINT, ipex_has_bf16_kernels, ipex_problem
from pipelines.core.train.profiler import ProfileAfterTraining
from pipelines.core.harness.pipeline import ConfigError, NotRunnable, Trainable, TrainingPipeline
from pipelines.core.train.steps import DTYPES, autocast_forward, book_optimizer, plain_step

@dataclass(frozen=True)
class Options:
    optimize: Literal["none", "ipex", "compile"] = "none"
    dtype: Literal["fp32", "bf16"] = "fp32"
    profile: bool = False  # after training: one more training step profiled, for the book's op-share tables


class IpexOptimize(TrainingPipeline[Options]):
    Options = Options
    smoke_settings = {"model": "densenet_tiny", "batch_size": 16}  # DenseNet's structure, seconds not minutes

    def check(self, cfg, ctx) -> None:
        opts: Options = cfg.options
        if opts.optimize == "ipex" and cfg.device != "cpu":
            raise ConfigError("optimize=ipex is the CPU extension; use --device cpu (IPEX for GPUs is "
                              "XPU-only)")
        if opts.optimize == "ipex" and (problem := ipex_problem()):
            raise NotRunnable(f"{cfg.experiment} variant {cfg.variant}: {problem}; {IPEX_HINT}")

    def skip(self, cfg, ctx) -> str | None:
        opts: Options = cfg.options
        if opts.optimize == "ipex" and opts.dtype == "bf16" and not ipex_has_bf16_kernels():
            return ("IPEX's bf16 path needs a CPU with avx512bw/vl/dq or avx_ne_convert (IPEX asserts "
                    "otherwise); this CPU has neither")
        return None

    def setup(self, cfg, ctx) -> Trainable:
        opts: Options = cfg.options
        model = models.build(cfg.model, classes=cfg.head_classes, weights=cfg.weights).to(ctx.device)
        model.train()
        optimizer = book_optimizer(model, cfg)
        dtype = DTYPES[opts.dtype]
        if opts.optimize == "ipex":
            import intel_extension_for_pytorch as ipex  # optional: only in .venv-ipex / the cpu-intel image

            model, optimizer = ipex.optimize(model, optimizer=optimizer, dtype=dtype)
            step = plain_step(model, optimizer, dtype)
            # IPEX's own kernels are invisible to torch's FLOP counter: no count rather than a wrong one.
            return self._profiled(Trainable(model, step, count_flops=False, predict=autocast_forward(model, dtype),
                                            notes=[f"intel-extension-for-pytorch {ipex.__version__}"]), opts, ctx)
        run_model = model
        if opts.optimize == "compile":
            run_model = torch.compile(model)
        step = plain_step(run_model, optimizer, dtype)
        return self._profiled(Trainable(model, step, predict=autocast_forward(run_model, dtype)), opts, ctx)

    @staticmethod
    def _profiled(trainable: Trainable, opts: Options, ctx) -> Trainable:
        """The book profiled its training (a whole epoch): with `profile`, one training step after the timed
        ones is profiled (core/train/profiler.py), and the record says the model trained that step more."""
        if opts.profile:
            trainable.hooks.append(ProfileAfterTraining(trainable.step, ctx.device))
            trainable.notes.append("profile: one more training step after the timed ones, profiled (the book "
                                   "profiled a whole epoch of training); evaluation follows it")
        return trainable

PIPELINE = IpexOptimize()
