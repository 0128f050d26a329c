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
from importlib import metadata

import torch
import torch.nn.functional as F

from pipelines.core import loop, models
from pipelines.core.config import ConfigError
from pipelines.core.steps import book_optimizer

OPTIONS = {"optimize": "none", "dtype": "fp32"}
SMOKE_ARGS = {"model": "densenet_tiny", "batch_size": 16}  # DenseNet's structure, seconds not minutes
OPTIMIZERS = ("none", "ipex", "compile")
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
IPEX_HINT = ("IPEX exists only for torch 2.7/2.8: run `make ipex-venv` and start it with "
             "PYTHON=.venv-ipex/bin/python, or use the cpu-intel image (IMAGE=...)")


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


def check(cfg, ctx) -> None:
    from pipelines.core.runner import NotRunnable

    optimize, dtype = cfg.options["optimize"], cfg.options["dtype"]
    if optimize not in OPTIMIZERS:
        raise ConfigError(f"option optimize={optimize!r} is unknown; choose one of: {', '.join(OPTIMIZERS)}")
    if dtype not in DTYPES:
        raise ConfigError(f"option dtype={dtype!r} is unknown; choose one of: {', '.join(DTYPES)}")
    if optimize == "ipex" and cfg.device != "cpu":
        raise ConfigError("optimize=ipex is the CPU extension; use --device cpu (IPEX for GPUs is XPU-only)")
    if optimize == "ipex" and (problem := ipex_problem()):
        raise NotRunnable(f"{cfg.experiment} variant {cfg.variant}: {problem}; {IPEX_HINT}")


def autocast_step(model, optimizer, device: torch.device, dtype: torch.dtype) -> loop.Step:
    """The plain step, under autocast when the dtype is not fp32."""

    def step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device.type, dtype=dtype, enabled=dtype != torch.float32):
            loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss

    return step


def autocast_predict(model, device: torch.device, dtype: torch.dtype):
    """Evaluation in the training dtype (an IPEX bf16 model holds bf16 weights)."""

    def predict(x: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device.type, dtype=dtype, enabled=dtype != torch.float32):
            return model(x).float()

    return predict


def setup(cfg, ctx) -> loop.Trainable:
    model = models.build(cfg.model, classes=cfg.head_classes, weights=cfg.weights).to(ctx.device)
    model.train()
    optimizer = book_optimizer(model, cfg)
    dtype = DTYPES[cfg.options["dtype"]]
    optimize = cfg.options["optimize"]
    if optimize == "ipex":
        import intel_extension_for_pytorch as ipex

        model, optimizer = ipex.optimize(model, optimizer=optimizer, dtype=dtype)
        # IPEX's own kernels are invisible to torch's FLOP counter: no count rather than a wrong one.
        return loop.Trainable(model, autocast_step(model, optimizer, ctx.device, dtype), count_flops=False,
                              predict=autocast_predict(model, ctx.device, dtype),
                              notes=[f"intel-extension-for-pytorch {ipex.__version__}"])
    if optimize == "compile":
        torch._dynamo.reset()  # variants must not share compiled graphs
        compiled = torch.compile(model)
        return loop.Trainable(model, autocast_step(compiled, optimizer, ctx.device, dtype),
                              predict=autocast_predict(compiled, ctx.device, dtype))
    return loop.Trainable(model, autocast_step(model, optimizer, ctx.device, dtype),
                          predict=autocast_predict(model, ctx.device, dtype))
