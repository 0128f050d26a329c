"""One call profiled with torch.profiler: every op's self-CPU share, the compiled-mode events' shares, and the
table a person reads; and every bench arm's step profile (`step_profile`: per op calls, time, FLOPs, bytes a
step), which the engine takes after the arm's timed blocks in every round (harness/execute.py).

The shares are the comparable numbers (a source printed the tables of an older PyTorch on another CPU);
the times are this machine's. Two users: the profiling technique file, whose whole measurement is a profile
(chapters 1 and 3), and `ProfileAfterTraining`, a hook a training technique adds so that its timing entry
also records the profile the source printed beside its times (chapter 3's forward-pass tables, chapter 4's
training profiles), after the timed steps, with the clock stopped.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import warnings
from typing import Any, Callable, Iterator

import torch
from torch.profiler import ProfilerActivity, profile

from pipelines.core.train.loop import Hooks, Trainable

COMPILED_EVENTS = ("CompiledFunction", "CompiledFunctionBackward")


def profile_call(call: Callable[[], object], top: int, cuda: bool) -> tuple[dict[str, Any], str]:
    """Profile one call: the self-CPU share of every op (`op_share_pct`, by today's profiler names), the
    compiled-mode events' shares (CPU time including children, over the total), and the table of the `top`
    ops."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        call()
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events) or 1
    ranked = sorted(events, key=lambda e: e.self_cpu_time_total, reverse=True)
    shares = {e.key: round(100.0 * e.self_cpu_time_total / total, 2) for e in ranked}
    metrics: dict[str, Any] = {"self_cpu_total_ms": total / 1e3, "op_share_pct": shares}
    for name in COMPILED_EVENTS:
        inside = sum(e.cpu_time_total for e in events if e.key == name)
        metrics[f"share_{name}_pct"] = round(100.0 * inside / total, 2)
    return metrics, events.table(sort_by="self_cpu_time_total", row_limit=top)


class ProfileAfterTraining(Hooks):
    """When training ends (the clock stopped, before evaluation): `call(x, y)` on the first training batch,
    profiled into the record's metrics (`op_share_pct`, which the report's profile-share section judges) and
    artifacts (`profile_table`). `forward_pass` makes the call a forward pass through the module the step
    trains (a compiled one reuses its warm training graph), with autograd on as a source's
    `model(input_sample)`: no weight changes. A training step as the call trains one step more, which the
    technique says in its record's notes."""

    def __init__(self, call: Callable[[torch.Tensor, torch.Tensor], object], device: torch.device, top: int = 20):
        self.call, self.device, self.top = call, device, top
        self.loaders = None

    @classmethod
    def forward_pass(cls, module: Callable[[torch.Tensor], object], device: torch.device) -> "ProfileAfterTraining":
        return cls(lambda x, _: module(x), device)

    def train_start(self, trainable: Trainable, loaders) -> int | None:
        self.loaders = loaders
        return None

    def train_end(self, trainable: Trainable, epoch: int) -> None:
        x, y = next(iter(self.loaders.train))
        x, y = x.to(self.device), y.to(self.device)
        metrics, table = profile_call(lambda: self.call(x, y), self.top, x.is_cuda)
        trainable.metrics.update(metrics)
        trainable.artifacts["profile_table"] = table


KINETO_NOISE = re.compile(rb"^(USDT:.*profiler_(start|stop)|ERROR:.*gpuGetDeviceCount failed.*)$")


@contextlib.contextmanager
def _quiet_kineto() -> Iterator[None]:
    """Stderr at the file descriptor (libkineto writes there, not through Python) into a temporary file for
    the block; then every line but libkineto's profiler_start/stop and its failed GPU count on a machine
    without one goes back to stderr, in order."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as caught:
        os.dup2(caught.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            kept = [line for line in caught.read().splitlines(keepends=True) if not KINETO_NOISE.match(line.rstrip())]
            if kept:
                os.write(2, b"".join(kept))


STEP_PROFILE_TOP = 100  # the ops a step profile keeps by self time (every op of these models); the rest: `rest`
STEP_PROFILE_STEPS = 3  # profiled steps, averaged: one step's op times vary by 10-20 % on a shared 2-core VM


def _elements(shape: Any) -> int:
    """Elements of one recorded input: a tensor's shape (a list of ints), a tensor list's shapes, or a scalar."""
    if isinstance(shape, (list, tuple)) and shape and all(isinstance(d, int) for d in shape):
        count = 1
        for d in shape:
            count *= d
        return count
    if isinstance(shape, (list, tuple)):
        return sum(_elements(inner) for inner in shape if isinstance(inner, (list, tuple)))
    return 0


def step_profile(call: Callable[[], object], cuda: bool, element_bytes: int = 4,
                 steps: int = STEP_PROFILE_STEPS) -> dict[str, Any]:
    """`steps` training steps under torch.profiler, after one more as the profiler's own warm-up (its first
    events carry its start-up), averaged into one step. Per op and step: calls, self time, FLOPs (the
    profiler's count, for the ops it knows: matmuls, convolutions, elementwise arithmetic) and bytes read
    (its inputs' elements times
    `element_bytes`: the profiler records shapes, not dtypes; an op's bytes include what the ops it calls
    read, so the total counts the outermost ops only). The top STEP_PROFILE_TOP ops by self time are kept,
    the others summed in `rest`; `between_ops_ms` is the step's time outside every op (Python, the
    framework). The profiler's own cost is in the times, about the same for every op, so a
    step's op count weighs as much as its FLOPs (record/card.py's tiny op). libkineto's start and stop lines
    on stderr are dropped (`_quiet_kineto`)."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    # the first step a warm-up of the profiler itself (its first events carry its start-up), the others kept
    kept: list[Any] = []  # the active steps' events, handed over when their cycle ends
    with _quiet_kineto(), warnings.catch_warnings(), profile(activities=activities, record_shapes=True, with_flops=True,
                 schedule=torch.profiler.schedule(wait=0, warmup=1, active=steps),
                 on_trace_ready=lambda done: kept.extend(done.events())) as prof:
        warnings.simplefilter("ignore", UserWarning)  # "clears events at the end of each cycle": kept above
        for _ in range(1 + steps):
            call()
            if cuda:
                torch.cuda.synchronize()
            prof.step()
    ops: dict[str, dict[str, float]] = {}
    outer_bytes = 0  # the step's bytes: the inputs of the ops no other op called (an op's own include its callees')
    between = 0.0  # the step's own event's self time: Python and the framework between ops
    for event in kept:
        if event.name.startswith("ProfilerStep"):
            between += event.self_cpu_time_total / 1e3
            continue
        row = ops.setdefault(event.name, {"calls": 0, "self_ms": 0.0, "flops": 0, "bytes": 0})
        row["calls"] += 1
        row["self_ms"] += event.self_cpu_time_total / 1e3
        row["flops"] += int(event.flops or 0)
        read = element_bytes * sum(_elements(shape) for shape in event.input_shapes or [])
        row["bytes"] += read
        parent = event.cpu_parent
        outer_bytes += read if parent is None or parent.name.startswith("ProfilerStep") else 0
    for row in ops.values():  # one step's worth: the mean of the profiled steps
        for key in row:
            row[key] /= steps
    ranked = sorted(ops.items(), key=lambda item: item[1]["self_ms"], reverse=True)
    total = {key: sum(row[key] for _, row in ranked) for key in ("calls", "self_ms", "flops")}
    total["bytes"] = outer_bytes / steps
    rest = {key: total[key] - sum(row[key] for _, row in ranked[:STEP_PROFILE_TOP])
            for key in ("calls", "self_ms", "flops")}
    rounded = lambda row: {key: round(value, 4) for key, value in row.items()}  # noqa: E731
    return {"ops": [{"op": name, **rounded(row)} for name, row in ranked[:STEP_PROFILE_TOP]],
            "rest": rounded(rest), "total": rounded(total), "between_ops_ms": round(between / steps, 4),
            "steps": steps, "element_bytes_assumed": element_bytes}


def profile_one_step(training: Any) -> dict[str, Any]:
    """STEP_PROFILE_STEPS + 1 more steps of an arm after its timed blocks (`loop.Training`), the clock stopped,
    on the next batch of its stream, all but the first profiled (`step_profile`). Not counted in the arm's
    steps, losses or samples."""
    *_, (x, y) = next(training.stream)
    x, y = x.to(training.device), y.to(training.device)
    return step_profile(lambda: training.trainable.step(x, y), training.device.type == "cuda")
