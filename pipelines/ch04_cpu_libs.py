"""Chapter 4: Intel Extension for PyTorch (`ipex.optimize`) on DenseNet121, and its upstream replacement.

- optimize=none: the plain step (the book's baseline: the IPEX run minus the optimize call).
- optimize=ipex: `model, optimizer = ipex.optimize(model, optimizer=optimizer, dtype=...)` after the
  optimizer is made, as the book. IPEX swaps in its own kernels (prepacked convolutions, fused Adam).
  dtype=bf16 also trains under CPU autocast to bfloat16, which is how IPEX's bf16 path is used.
- optimize=compile: `torch.compile(model)` (inductor, CPU), what upstream PyTorch offers now that IPEX
  has reached end of life; dtype=bf16 adds the same autocast.

IPEX was released for each torch minor version separately, and its last CPU release pairs with torch
2.8: the pipeline refuses (exit 3) unless IPEX is installed with the same torch major.minor, and names
where it does run (`make ipex-venv`, or the cpu-intel image). The OpenMP runtime is the launcher's job.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from importlib import metadata
from typing import Literal

import torch

from pipelines.core.train import models
from pipelines.core.errors import ConfigError, NotRunnable
from pipelines.core.train.loop import Trainable
from pipelines.core.harness.pipeline import TrainingPipeline
from pipelines.core.train.steps import DTYPES, autocast_forward, book_optimizer, plain_step

IPEX_HINT = ("IPEX exists only for torch 2.7/2.8: run `make ipex-venv` and start it with "
             "PYTHON=.venv-ipex/bin/python, or use the cpu-intel image (IMAGE=...)")


@dataclass(frozen=True)
class Options:
    optimize: Literal["none", "ipex", "compile"] = "none"
    dtype: Literal["fp32", "bf16"] = "fp32"


def version_pair_problem(ipex_version: str | None, torch_version: str) -> str | None:
    """Why this IPEX cannot run with this torch (IPEX x.y pairs with torch x.y only), or None."""
    if ipex_version is None:
        return "intel-extension-for-pytorch is not installed"
    wanted = ".".join(ipex_version.split("+")[0].split(".")[:2])
    have = ".".join(torch_version.split("+")[0].split(".")[:2])
    if wanted != have:
        return (f"intel-extension-for-pytorch {ipex_version} needs torch {wanted}.x but torch "
                f"{torch_version} is installed")
    return None


def ipex_problem() -> str | None:
    installed = importlib.util.find_spec("intel_extension_for_pytorch") is not None
    return version_pair_problem(metadata.version("intel-extension-for-pytorch") if installed else None,
                                torch.__version__)


def ipex_has_bf16_kernels() -> bool:
    """IPEX's own answer to "can ipex.optimize(dtype=bfloat16) prepack on this CPU?".

    Asked before the run so that a CPU without AVX-512 (common on AMD and cloud VMs) gets a `skipped`
    record with the reason instead of IPEX's AssertionError in the middle of a sweep.
    """
    from intel_extension_for_pytorch import _C as ipex_core  # optional: only where IPEX runs

    return bool(ipex_core.onednn_has_bf16_support())


class CpuLibraries(TrainingPipeline[Options]):
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
            # IPEX's own kernels are invisible to torch's FLOP counter: no count rather than a wrong one.
            return Trainable(model, plain_step(model, optimizer, dtype), count_flops=False,
                             predict=autocast_forward(model, dtype),
                             notes=[f"intel-extension-for-pytorch {ipex.__version__}"])
        run_model = model
        if opts.optimize == "compile":
            torch._dynamo.reset()  # variants must not share compiled graphs
            run_model = torch.compile(model)
        return Trainable(model, plain_step(run_model, optimizer, dtype),
                         predict=autocast_forward(run_model, dtype))


PIPELINE = CpuLibraries()
