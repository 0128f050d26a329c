"""Torch's process-wide state: what one arm's settings change for the whole process, applied by the engine
from the pipeline's declarations (`Pipeline.process_options`) and put back after the arm.

torch keeps some settings per process, not per model: the float32 matmul precision, the intra-op thread
count, the cuDNN and CUDA matmul flags, the deterministic-algorithms switch, dynamo's compiled graphs and
inductor's cache switch. An arm that sets one would leave it for every arm after it in the process (the
next unit, the next round of a book run). So the engine (harness/execute.py) takes a `snapshot` before a
unit of arms, applies the unit's declared settings (`apply`), gives each arm a fresh compiler before it is
built (`fresh_compiler`), and restores the snapshot after the unit, whatever happened inside it. A
technique file declares which of its options are such settings; it never sets or restores them itself.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping

import torch

# torch.backends flags by their holder's path under torch.backends, and their values when this module loaded
# (torch's defaults in a fresh process): a Switch option ("default" | "on" | "off") sets a group of them.
FLAGS = {
    "tf32": (("cuda.matmul", "allow_tf32"), ("cudnn", "allow_tf32")),
    "reduced_precision_reduction": (("cuda.matmul", "allow_fp16_reduced_precision_reduction"),
                                    ("cuda.matmul", "allow_bf16_reduced_precision_reduction")),
}
KEPT_FLAGS = (("cuda.matmul", "allow_fp16_reduced_precision_reduction"),
              ("cuda.matmul", "allow_bf16_reduced_precision_reduction"),
              ("cudnn", "benchmark"), ("cudnn", "deterministic"), ("cudnn", "enabled"))
# torch 2.9+ keeps the float32 precision per backend (`fp32_precision`, the API that `allow_tf32` and
# set_float32_matmul_precision now write through); the generic holder first, as torch resolves them.
# torch 2.8 (the cpu-intel image, .venv-ipex) has none of these holders: the snapshot then skips them.
PRECISION_HOLDERS = ("", "cuda.matmul", "cudnn", "cudnn.conv", "cudnn.rnn", "mkldnn", "mkldnn.matmul",
                     "mkldnn.conv", "mkldnn.rnn")


def _holder(path: str):
    """The object under torch.backends at `path`, or None where this torch has no such holder."""
    obj = torch.backends
    for part in filter(None, path.split(".")):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _has(path: str, attr: str) -> bool:
    return hasattr(_holder(path), attr)


TORCH_DEFAULTS = {(path, attr): getattr(_holder(path), attr)
                  for group in FLAGS.values() for path, attr in group if _has(path, attr)}


def _switch(name: str) -> Callable[[str], None]:
    def apply(value: str) -> None:
        for path, attr in filter(lambda flag: flag in TORCH_DEFAULTS, FLAGS[name]):
            setattr(_holder(path), attr, TORCH_DEFAULTS[(path, attr)] if value == "default" else value == "on")
    return apply


def _threads(count: int) -> None:
    if count:  # 0: the launcher's (OMP_NUM_THREADS / torchrun's) count stays
        torch.set_num_threads(count)


# A declared process option -> how the engine applies its value. The option names are the pipelines' own
# (`-o matmul_precision=medium`, `--variant threads=2`); one name means one setting in every pipeline.
SETTINGS: dict[str, Callable[[Any], None]] = {
    "matmul_precision": torch.set_float32_matmul_precision,  # "highest" | "high" | "medium"
    "threads": _threads,  # Table 9.1: intra-op threads of this process
    "cudnn_benchmark": lambda on: setattr(torch.backends.cudnn, "benchmark", bool(on)),
    "tf32": _switch("tf32"),
    "reduced_precision_reduction": _switch("reduced_precision_reduction"),
}


@dataclass(frozen=True)
class State:
    matmul_precision: str | None  # None: unreadable (torch refuses to read a mix of its two precision APIs)
    precisions: tuple[tuple[str, str], ...]  # (holder, fp32_precision)
    threads: int
    flags: tuple[tuple[str, str, Any], ...]
    deterministic: tuple[bool, bool]  # use_deterministic_algorithms, and its warn_only
    inductor_caches_off: bool | None  # torch._inductor.config.force_disable_caches, when inductor is loaded


def _matmul_precision() -> str | None:
    try:
        return torch.get_float32_matmul_precision()
    except RuntimeError:
        return None


def snapshot() -> State:
    inductor = sys.modules.get("torch._inductor.config")
    return State(_matmul_precision(),
                 tuple((path, _holder(path).fp32_precision) for path in PRECISION_HOLDERS
                       if _has(path, "fp32_precision")),
                 torch.get_num_threads(),
                 tuple((path, attr, getattr(_holder(path), attr)) for path, attr in KEPT_FLAGS if _has(path, attr)),
                 (torch.are_deterministic_algorithms_enabled(),
                  torch.is_deterministic_algorithms_warn_only_enabled()),
                 None if inductor is None else bool(inductor.force_disable_caches))


def restore(state: State) -> None:
    if state.matmul_precision is not None:
        torch.set_float32_matmul_precision(state.matmul_precision)  # the legacy value, then the per-backend ones
    for path, precision in state.precisions:
        _holder(path).fp32_precision = precision
    if torch.get_num_threads() != state.threads:
        torch.set_num_threads(state.threads)
    for path, attr, value in state.flags:
        setattr(_holder(path), attr, value)
    torch.use_deterministic_algorithms(state.deterministic[0], warn_only=state.deterministic[1])
    inductor = sys.modules.get("torch._inductor.config")
    if inductor is not None:
        inductor.force_disable_caches = bool(state.inductor_caches_off)


def apply(values: Mapping[str, Any] | tuple[tuple[str, Any], ...]) -> None:
    """Apply the declared process options that name a torch setting (`SETTINGS`); the others (a pipeline's
    own process-wide switch, such as chapter 3's inductor caches) are the pipeline's to set in `setup`."""
    for name, value in dict(values).items():
        if name in SETTINGS and value is not None:
            SETTINGS[name](value)


def fresh_compiler() -> None:
    """No arm reuses another's compiled graphs or hits dynamo's recompile limit on their account: dynamo's
    caches cleared before each arm is built (nothing to clear when dynamo was never loaded)."""
    if "torch._dynamo" in sys.modules:
        torch._dynamo.reset()


@contextmanager
def settings(values: Mapping[str, Any] | tuple[tuple[str, Any], ...]) -> Iterator[None]:
    """The process's torch state while a unit of arms is built and measured under its declared settings, put
    back after it."""
    before = snapshot()
    try:
        apply(values)
        yield
    finally:
        restore(before)
