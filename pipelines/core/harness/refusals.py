"""Refusals before any work, the same on every rank and in the launchers' pre-flight (`accel preflight`).

What the machine cannot do (a GPU, the OpenMP runtime or allocator a launcher chose, the backend), what
the pipeline refuses (its `check`), missing or damaged data, unreadable weights and unwritable folders:
each is one line and an exit code before a single step runs. `skip_reasons` names the arms this device
cannot run (recorded as skipped); when none can run, that too is a refusal.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import torch

from pipelines.core.data import datasets, files
from pipelines.core.distributed import backends
from pipelines.core.errors import ConfigError, NotRunnable
from pipelines.core.record import atomic, envinfo, results
from pipelines.core.harness.collective_needs import missing_collectives
from pipelines.core.harness.plan import Plan, dist_options
from pipelines.core.config import experiments
from pipelines.core.config.runconfig import RunConfig
from pipelines.core.train import loop, models, pretrained


# (launcher knob, what it selects, what this process actually loaded)
RUNTIME_KNOBS = (("OMP_RUNTIME", "OpenMP runtime", lambda: envinfo.openmp_runtime()["openmp_runtime"]),
                 ("ALLOCATOR", "allocator", lambda: envinfo.allocator()["allocator"]))


def preflight(the_plan: Plan, world_size: int, rank: int, capabilities: bool = True, runtime: bool = True,
              data: bool = True) -> float:
    """A launcher's check before it starts any process (`accel preflight`): each rank's refusals, for the
    world it is about to start; returns the run's rendezvous wait (timeout_s) the launcher passes on.

    Without `capabilities` (the ranks run inside IMAGE, whose libraries this host may lack) only user
    mistakes are refused: what the device, runtime and backend can do is for the ranks to say. Without
    `runtime` (a comparison's own process, whose rounds start through the launchers) the OpenMP runtime and
    allocator this process loaded are not checked: the launcher sets them for the processes it starts.
    Without `data` (`accel launch --print`: nothing starts) missing data is not refused either."""
    ctx = loop.RunContext(torch.device(the_plan.configs[0].device), rank, world_size)
    for cfg in the_plan.configs:
        refuse_before_work(the_plan, cfg, ctx, capabilities, runtime, data)
    if capabilities:
        skip_reasons(the_plan, ctx)
    return dist_options(the_plan).timeout_s


def refuse_before_work(the_plan: Plan, cfg: RunConfig, ctx: loop.RunContext, capabilities: bool = True,
                       runtime: bool = True, data: bool = True) -> None:
    """Everything that can be refused before any work: device, runtime, backend, pipeline checks, data, results."""
    _refuse_unsupported(the_plan, cfg)
    if capabilities:
        _refuse_capabilities(the_plan, cfg, runtime)
    try:
        the_plan.pipeline.check(cfg, ctx)
    except NotRunnable:
        if capabilities:
            raise
    datasets.check(cfg)
    if cfg.dataset != "synthetic" and data:
        files.verify(cfg.dataset, cfg.data_root)  # missing or damaged data: refuse before any work
    if cfg.weights is not None and not (Path(cfg.weights).is_dir() and models.spec(cfg.model).from_folder):
        pretrained.read_state_dict(cfg.weights)  # a file of tensors (a folder model reads its folder in setup)
    if ctx.is_main:
        results.check_writable(cfg.results_dir)
        if the_plan.pipeline.supports.checkpoints and cfg.options.checkpoint_dir:
            atomic.check_folder(Path(cfg.options.checkpoint_dir), "checkpoint_dir",
                                "pass -o checkpoint_dir= with a writable folder")


def _refuse_unsupported(the_plan: Plan, cfg: RunConfig) -> None:
    """What the pipeline does not declare it supports (harness/pipeline.py Supports): a user mistake."""
    supports, name = the_plan.pipeline.supports, the_plan.experiment.id
    if cfg.device not in supports.devices:
        raise ConfigError(f"{name} runs on {' or '.join(supports.devices)}, not --device {cfg.device}")
    if supports.backends and cfg.options.backend not in supports.backends:
        raise ConfigError(f"{name} does not run over -o backend={cfg.options.backend}; its pipeline supports "
                          f"{', '.join(supports.backends)}")


def _refuse_capabilities(the_plan: Plan, cfg: RunConfig, runtime: bool = True) -> None:
    """What this machine cannot do for the run: a GPU, the OpenMP runtime or allocator, the backend."""
    experiment = the_plan.experiment
    if cfg.device == "cuda" and not torch.cuda.is_available():
        raise NotRunnable(f"{experiment.id} asks for --device cuda but no CUDA GPU is visible; run it on a GPU "
                          "machine, or smoke-test its code path on CPU: accel run "
                          f"{experiment.id} {' '.join(experiments.cpu_smoke_args(experiment))}")
    for knob, label, loaded_now in RUNTIME_KNOBS if runtime else ():  # launcher-owned: no silent fallback
        wanted = os.environ.get(knob) or experiment.knobs.get(knob)
        if wanted == "pinned" and not envinfo.allocator_settings()["glibc_malloc_tunables"]:
            raise NotRunnable(f"{experiment.id} asks for ALLOCATOR=pinned but this process started without "
                              "glibc's malloc tunables; start it through its launcher: `ALLOCATOR=pinned "
                              f"launch/local.sh run {experiment.id} ...` (accel run at bench scale does)")
        if wanted in ("gnu", "intel", "tcmalloc", "jemalloc") and (loaded := loaded_now()) != wanted:
            raise NotRunnable(f"{experiment.id} needs the {wanted} {label} but {loaded} is loaded; start it "
                              f"with `accel launch {experiment.id} ...` (what `make {experiment.id}` runs) or "
                              f"`{knob}={wanted} launch/local.sh run {experiment.id} ...`")
    if the_plan.pipeline.supports.backends:
        backends.check_backend(cfg.options.backend, cfg.device)


def skip_reason(pipeline, cfg: RunConfig, ctx: loop.RunContext) -> str | None:
    """Why this arm cannot run here: the pipeline's declared needs first, then its own `skip`."""
    return declared_skip(pipeline.needs, cfg, ctx) or pipeline.skip(cfg, ctx)


def declared_skip(needs, cfg: RunConfig, ctx: loop.RunContext) -> str | None:
    """The first declared need (harness/pipeline.py `Needs`) this arm selects and this process does not
    meet, as one line: the technique's reason and the command that runs the arm where it can."""
    for need in needs:
        if need.selects(cfg.options) and (unmet := _unmet(need, cfg, ctx)):
            return f"{need.why}; {unmet}" if need.why else unmet
    return None


def _unmet(need, cfg: RunConfig, ctx: loop.RunContext) -> str | None:
    arm = f"{cfg.experiment} --variant {cfg.variant}"
    if need.device and ctx.device.type != need.device:
        return f"it runs with --device {need.device}: accel run {arm} --device {need.device}"
    if need.bf16 and ctx.device.type == "cuda" and not torch.cuda.is_bf16_supported():
        return "this GPU has no bf16 arithmetic (Ampere or newer has)"
    wanted = getattr(cfg.options, need.ranks_option) if need.ranks_option else 0
    if wanted and wanted != ctx.world_size:  # a ranks=N arm, a one-device arm: the launch that fits it
        return (f"variant {cfg.variant} needs {wanted} processes but this run has {ctx.world_size}; start it "
                f"with NPROC={wanted} accel launch {arm}")
    if ctx.world_size < need.min_ranks:
        return f"start it with {need.min_ranks} or more processes: NPROC={need.min_ranks} accel launch {arm}"
    if need.max_ranks is not None and ctx.world_size > need.max_ranks:
        return f"this launch has {ctx.world_size} processes: run it alone with accel run {arm}"
    if need.module and importlib.util.find_spec(need.module) is None:
        return f"{need.module} is not installed here (make venv installs it)"
    backend = getattr(cfg.options, "backend", None)
    if missing := missing_collectives(backend, need.collectives):
        return (f"it calls {', '.join(missing)}, which the {backend} backend does not implement (it has "
                f"{', '.join(backends.COLLECTIVES[backend])}): accel launch {arm} -o backend=gloo")
    return None


def skip_reasons(the_plan: Plan, ctx: loop.RunContext) -> dict[str, str]:
    """Variant -> why it cannot run here (`skip_reason`); all skipped: NotRunnable."""
    reasons = {cfg.variant: reason for cfg in the_plan.configs
               if (reason := skip_reason(the_plan.pipeline, cfg, ctx))}
    if reasons and len(reasons) == len(the_plan.configs):
        raise NotRunnable(f"{the_plan.experiment.id}: nothing can run here: "
                          + "; ".join(sorted(set(reasons.values()))))
    return reasons
