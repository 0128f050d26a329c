"""Intel Extension for PyTorch, an optional extension chapter 4 measures: whether this environment can run
it, and where it does run when not.

IPEX was released for each torch minor version separately (its last CPU release pairs with torch 2.8), so
the host venv of the pinned stack never has it: `make ipex-venv` builds `.venv-ipex`, and the cpu-intel
image holds it.
"""

from __future__ import annotations

import importlib.util
from importlib import metadata

import torch

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


def ipex_has_bf16_kernels() -> bool:
    """IPEX's own answer to "can ipex.optimize(dtype=bfloat16) prepack on this CPU?".

    Asked before the run so that a CPU without AVX-512 (common on AMD and cloud VMs) gets a `skipped`
    record with the reason instead of IPEX's AssertionError in the middle of a sweep.
    """
    from intel_extension_for_pytorch import _C as ipex_core  # optional: only where IPEX runs

    return bool(ipex_core.onednn_has_bf16_support())
