"""Pipeline parallelism (lecture note): the model cut into consecutive stages, one per rank, fed micro-batches.

`torch.distributed.pipelining` runs it: each rank builds the same model (same seed), keeps its stage
(stage 0: patch embedding + the first blocks; the last stage: the last blocks + the head) and wraps it
in a `PipelineStage`; a schedule (`ScheduleGPipe`: all forwards, then all backwards; `Schedule1F1B`:
one forward, one backward in the steady state, so fewer activations are alive) splits the global batch
into `microbatches` and moves activations forward and gradients backward between neighbours.

The bubble: with p stages and m micro-batches, each stage idles while the pipeline fills and drains,
(p-1)/(m+p-1) of the step if every micro-batch costs the same. The pipeline measures it instead of
assuming it: every forward and backward chunk a stage computes is timed (`TimedStage`), and per stage
idle = 1 - busy / step, the step lasting until its slowest stage is done. The record has the per-stage
busy time, the step time, the measured bubble (mean over stages) and the theory beside it; the
micro-batch count is swept as variants.

Like tensor parallelism, the stages must see the same samples: the step gathers the ranks' sampler
shards into the global batch (per-rank batch x ranks), which stage 0 feeds and the last stage scores.
The loss exists on the last stage only; it is broadcast so that every rank's loop (and rank 0's
record) reports it. The schedule scales gradients by 1/m, so an update equals the unsplit model's on
the global batch (tested). Rank 0 evaluates a full copy gathered from the stages after training.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Annotated, Literal

import click
import numpy as np
import torch
import torch.distributed as tdist
import torch.nn.functional as F
from torch import nn
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

from pipelines.core.distributed import collectives
from pipelines.core.train import models
from pipelines.core.train.architectures import PatchTransformer
from pipelines.core.harness.pipeline import (
    BACKENDS, ConfigError, DistOptions, Hooks, Needs, Supports, Trainable, TrainingPipeline
)

SCHEDULES = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}


@dataclass(frozen=True)
class Options(DistOptions):
    microbatches: Annotated[int, click.IntRange(min=1)] = 4
    schedule: Literal["gpipe", "1f1b"] = "gpipe"


class Stage(nn.Module):
    """A contiguous run of a PatchTransformer's parts, under the full model's state_dict names.

    Stage 0 owns the patch embedding, the last stage the classifier head; blocks keep their index
    (`blocks.3...`), so the stages' state_dicts together are exactly the full model's."""

    def __init__(self, model: PatchTransformer, blocks: list[int], first: bool, last: bool):
        super().__init__()
        self.embed = model.embed if first else None
        self.blocks = nn.ModuleDict({str(index): model.blocks[index] for index in blocks})
        self.head = model.head if last else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.embed is not None:
            x = self.embed(x)
        for block in self.blocks.values():
            x = block(x)
        return self.head(x) if self.head is not None else x.contiguous()  # Gloo sends contiguous tensors


def split(model: PatchTransformer, stages: int, index: int) -> Stage:
    """Stage `index` of `stages`: blocks dealt out as evenly as possible, in order."""
    blocks = np.array_split(np.arange(model.depth), stages)[index].tolist()
    return Stage(model, blocks, first=index == 0, last=index == stages - 1)


class TimedStage(PipelineStage):
    """A PipelineStage that records how long each forward and backward chunk computes (its busy time)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.busy_s = 0.0

    def _busy(self, chunk, *args, **kwargs):
        started = time.perf_counter()
        try:
            return chunk(*args, **kwargs)
        finally:
            self.busy_s += time.perf_counter() - started

    def forward_one_chunk(self, *args, **kwargs):
        return self._busy(super().forward_one_chunk, *args, **kwargs)

    def backward_one_chunk(self, *args, **kwargs):
        return self._busy(super().backward_one_chunk, *args, **kwargs)


def bubble_theory(stages: int, microbatches: int) -> float:
    """Idle share of a fill-drain pipeline with equal-cost micro-batches (GPipe and 1F1B alike)."""
    return (stages - 1) / (microbatches + stages - 1)


def bubble(busy: list[list[float]], spans: list[list[float]], warmup: int) -> dict[str, list[float] | float]:
    """Per stage (rows) and measured step (columns): busy seconds and schedule.step seconds -> idle shares.

    A step of the pipeline lasts until its slowest stage is done (the next step's batch gather waits for
    all of them), so every stage's idle share is taken against the step's longest span: the first stage
    idles at the end of a fill-drain step, after its own schedule.step has returned. Each stage's share
    is the median over steps, so one step slowed by another process on the machine does not decide it."""
    busy_s, span_s = np.array(busy), np.array(spans).max(axis=0)
    if span_s.size > warmup:  # warm-up dropped when measured steps remain (stage set-up happens in step 1)
        busy_s, span_s = busy_s[:, warmup:], span_s[warmup:]
    idle = np.median(1 - busy_s / span_s, axis=1)
    return {"stage_busy_s": np.median(busy_s, axis=1).round(6).tolist(), "step_s": round(float(np.median(span_s)), 6),
            "stage_idle_fraction": idle.round(4).tolist(), "bubble_measured": round(float(idle.mean()), 4)}


class BubbleReport(Hooks):
    """After training: every stage's timings and parameters to rank 0, which records the bubble and
    evaluates a full model assembled from the stages' state_dicts."""

    def __init__(self, stage: Stage, clock: dict[str, list[float]], cfg, opts: Options, ctx):
        self.stage, self.clock, self.cfg, self.opts, self.ctx = stage, clock, cfg, opts, ctx

    def train_end(self, trainable: Trainable, epoch: int) -> None:
        mine = {**self.clock, "param_bytes": sum(p.nbytes for p in self.stage.parameters()),
                "blocks": [int(name) for name in self.stage.blocks], "state": self.stage.state_dict()}
        stages = collectives.gather_objects(mine)
        if not self.ctx.is_main:
            return
        trainable.metrics.update({
            "stages": len(stages), "microbatches": self.opts.microbatches, "schedule": self.opts.schedule,
            "stage_blocks": [s["blocks"] for s in stages], "stage_param_bytes": [s["param_bytes"] for s in stages],
            **bubble([s["busy"] for s in stages], [s["span"] for s in stages], self.cfg.warmup_steps),
            "bubble_theory": round(bubble_theory(len(stages), self.opts.microbatches), 4)})
        full = models.build(self.cfg.model, classes=self.cfg.head_classes)
        full.load_state_dict({key: value for s in stages for key, value in s["state"].items()})
        trainable.model = full.to(self.ctx.device)


class PipelineParallel(TrainingPipeline[Options]):
    Options = Options
    supports = Supports(backends=BACKENDS)  # send/recv between stages over the Session's group
    smoke_settings = {"model": "transformer_tiny", "batch_size": 8, "num_workers": 0}

    def check(self, cfg, ctx) -> None:
        opts: Options = cfg.options
        model = models.splittable(cfg.model, cfg.head_classes)
        if ctx.world_size > model.depth:
            raise ConfigError(f"{ctx.world_size} pipeline stages (one per rank) but model {cfg.model} has "
                              f"{model.depth} transformer blocks; start at most {model.depth} ranks "
                              f"(NPROC={model.depth}) or use a deeper model")
        global_batch = cfg.batch_size * ctx.world_size
        if global_batch % opts.microbatches:
            raise ConfigError(f"global batch {global_batch} (--batch-size {cfg.batch_size} x {ctx.world_size} "
                              f"ranks) does not split into microbatches={opts.microbatches}; pick a divisor "
                              f"of {global_batch}")

    needs = (Needs("pipeline parallelism runs one stage per rank", min_ranks=2),
             Needs("stages hand activations and gradients on point to point", collectives=("send", "recv")))

    def skip(self, cfg, ctx) -> str | None:
        opts: Options = cfg.options
        if opts.schedule == "1f1b" and opts.microbatches < ctx.world_size:
            return (f"Schedule1F1B needs at least as many micro-batches as stages ({opts.microbatches} < "
                    f"{ctx.world_size}); use -o schedule=gpipe for this arm")
        return None

    def setup(self, cfg, ctx) -> Trainable:
        opts: Options = cfg.options
        rank, stages = ctx.rank, ctx.world_size
        first, last = rank == 0, rank == stages - 1
        model = models.build(cfg.model, classes=cfg.head_classes, weights=cfg.weights)  # same seed: same weights
        stage = split(model, stages, rank).to(ctx.device)
        del model  # the other stages' layers are freed: this rank holds its stage only
        timed = TimedStage(stage, rank, stages, ctx.device)
        schedule = SCHEDULES[opts.schedule](timed, opts.microbatches, loss_fn=F.cross_entropy)
        optimizer = torch.optim.AdamW(stage.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        clock: dict[str, list[float]] = {"busy": [], "span": []}

        def step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            x, y = collectives.global_batch(x), collectives.global_batch(y)
            optimizer.zero_grad(set_to_none=True)
            losses: list[torch.Tensor] = []
            timed.busy_s, started = 0.0, time.perf_counter()
            if first:
                schedule.step(x)
            elif last:
                schedule.step(target=y, losses=losses)
            else:
                schedule.step()
            clock["span"].append(time.perf_counter() - started)
            clock["busy"].append(timed.busy_s)
            optimizer.step()
            loss = torch.stack(losses).mean().detach() if last else torch.zeros((), device=ctx.device)
            tdist.broadcast(loss, src=stages - 1)  # the last stage's loss, so rank 0's record carries it
            return loss

        notes = [f"{stages} stages x {opts.microbatches} micro-batches ({opts.schedule}); every rank feeds the "
                 "global batch (the ranks' sampler shards all-gathered)"]
        return Trainable(stage, step, optimizer=optimizer, count_flops=False, notes=notes,
                         hooks=[BubbleReport(stage, clock, cfg, opts, ctx)])


PIPELINE = PipelineParallel()
