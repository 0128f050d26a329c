"""The course's unit 9.3 (dlf-u9-multigpu) and the talk's steps 06/07: Lightning Fabric's strategy swapped.

The course trains the same model on 1 GPU and then on 4 with Lightning's `strategy=` flag: "ddp"
(a full replica per process, gradients all-reduced), "fsdp" (parameters, gradients and optimizer state
sharded) and DeepSpeed's ZeRO stages 2 and 3 (stage 2 also with the optimizer offloaded to the CPU).
Here the step is the talk's Fabric step (`fabric.backward`, from fabric_ladder.py) and only the strategy
given to `Fabric(...)` changes. The talk's steps 06 and 07 are this file too: `Fabric(strategy="fsdp",
precision="bf16-mixed")` on 4 GPUs, step 07 adding ExponentialLR(0.9) per epoch (`lr_gamma`), both with
`torch.set_float32_matmul_precision("medium")` (`matmul_precision`).
Processes come from the launcher (torchrun, mpirun, srun) and the runner has joined the process group,
so Fabric is handed the runner's ranks (`RunnerEnvironment`) and
creates no processes itself. The same code uses Gloo on CPU processes and NCCL on GPUs.

What runs where, and why (Lightning 2.6):
- "ddp" runs anywhere.
- "fsdp" is FSDP1 (FullyShardedDataParallel), which needs an accelerator: Fabric refuses it on CPU and
  torch raises "FSDP needs a non-CPU accelerator device". The extra arm `fsdp2` is the same sharding
  through Fabric's ModelParallelStrategy with FSDP2's `fully_shard` per transformer block, which runs
  on CPU processes as well.
- "deepspeed" is Lightning's DeepSpeedStrategy, which runs on CUDA GPUs only (DeepSpeed itself runs on
  CPU: see s004-deepspeed).
The bytes each rank holds are measured as in s004-deepspeed (core/distributed/sharding.py).

What the sources' loops did besides the step, inside their clocks (core/train/bookkeeping.py): a
validation pass after every epoch over each rank's share of the split's held-out part (the talk's images
45,000-49,999; the course's 5,000 reviews, which its Trainer validated every epoch), through Fabric's
wrapper; for the talk's entries also a torchmetrics train accuracy from every batch's argmax and the loss
read every 300 batches.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import click
import torch
from lightning.fabric import Fabric
from lightning.fabric.strategies import DeepSpeedStrategy, ModelParallelStrategy
from torch.distributed.fsdp import fully_shard

from pipelines.core.distributed import placement
from pipelines.core.train import bookkeeping, models
from pipelines.core.distributed.fabric import RunnerEnvironment
from pipelines.core.harness.pipeline import (
    BACKENDS, BookkeepingOptions, DistOptions, Hooks, Needs, Supports, Trainable, TrainingPipeline
)
from pipelines.core.distributed.sharding import RankBytes
from pipelines.core.train.steps import book_optimizer
from pipelines.core.distributed.sharded import GatherFullCopy, GatherPartitioned, import_deepspeed
from pipelines.core.train.steps import StepLrEachEpoch, fabric_step

SHARDED = ("fsdp", "fsdp2", "deepspeed")


@dataclass(frozen=True)
class Options(DistOptions, BookkeepingOptions):
    strategy: Literal["single", "ddp", "fsdp", "fsdp2", "deepspeed"] = "ddp"
    zero_stage: Annotated[int, click.IntRange(min=0, max=3)] = 2  # strategy=deepspeed: ZeRO stage
    offload: bool = False  # strategy=deepspeed: optimizer state in host memory
    precision: Literal["auto", "32-true", "16-mixed", "bf16-mixed"] = "auto"  # auto: the course's 16 on GPUs
    matmul_precision: Literal["highest", "high", "medium"] = "highest"  # the talk's scripts: medium
    lr_gamma: Annotated[float, click.FloatRange(min=0, max=1)] = 0.0  # ExponentialLR per epoch; 0: none
    # processes this arm is launched with (0: the launch's NPROC): the single-device arm is 1, so the rounds
    # start it in a launch of its own beside the strategies' NPROC ranks
    ranks: Annotated[int, click.IntRange(min=0)] = 0


def resolved_precision(opts: Options, device: torch.device) -> str:
    """`auto` is the course's precision=16 (16-mixed) on GPUs and 32-true on CPU."""
    if opts.precision != "auto":
        return opts.precision
    return "16-mixed" if device.type == "cuda" else "32-true"


def shard_blocks(model: torch.nn.Module, mesh) -> torch.nn.Module:
    """ModelParallelStrategy's parallelize_fn: FSDP2 on each transformer block, then on the root."""
    for unit in [*models.transformer_blocks(model), model]:
        fully_shard(unit, mesh=mesh["data_parallel"])
    return model


def strategy_for(opts: Options, ctx):
    """What `Fabric(strategy=...)` gets: the course's strategy strings, or an instance where one is needed."""
    if opts.strategy == "single":
        return "auto"
    if opts.strategy == "fsdp2":
        return ModelParallelStrategy(shard_blocks, data_parallel_size=ctx.world_size, tensor_parallel_size=1)
    if opts.strategy == "deepspeed":
        return DeepSpeedStrategy(stage=opts.zero_stage, offload_optimizer=opts.offload)
    return opts.strategy


class FabricStrategies(TrainingPipeline[Options]):
    Options = Options
    supports = Supports(backends=BACKENDS)  # Fabric joins the launcher's process group
    smoke_settings = {"model": "vit_tiny", "batch_size": 4, "num_workers": 0, "pin_memory": False}
    process_options = ("matmul_precision",)  # torch's float32 matmul precision: the engine sets it

    needs = (Needs("", ranks_option="ranks"),  # the single-device arm: 1
             Needs("the single-device arm is one process", when={"strategy": "single"}, max_ranks=1),
             Needs("a distributed strategy", when={"strategy": ("ddp", "fsdp", "fsdp2", "deepspeed")}, min_ranks=2),
             Needs("a sharded strategy gathers parameters and reduce-scatters gradients", when={"strategy": SHARDED},
                   collectives=("all_gather", "reduce_scatter")),
             Needs("Lightning's strategy='fsdp' is FSDP1, which needs an accelerator (Fabric refuses it on CPU, "
                   "torch raises 'FSDP needs a non-CPU accelerator device'); the arm with strategy fsdp2 (FSDP2 "
                   "per block) shards the same way on CPU", when={"strategy": "fsdp"}, device="cuda"),
             Needs("Lightning's DeepSpeedStrategy runs on CUDA GPUs only; DeepSpeed's ZeRO on CPU processes is "
                   "s004-deepspeed", when={"strategy": "deepspeed"}, device="cuda", module="deepspeed"))

    def skip(self, cfg, ctx) -> str | None:
        opts: Options = cfg.options
        if resolved_precision(opts, ctx.device) == "16-mixed" and ctx.device.type != "cuda":
            return ("16-mixed (fp16 autocast + GradScaler) needs CUDA; on CPU Lightning would silently run "
                    "bf16-mixed instead, so it is not run here")
        return None

    def setup(self, cfg, ctx) -> Trainable:
        opts: Options = cfg.options
        place = placement.placement()
        precision = resolved_precision(opts, ctx.device)
        deepspeed = import_deepspeed(ctx.device) if opts.strategy == "deepspeed" else None
        fabric = Fabric(accelerator=ctx.device.type, devices=place.local_world_size, num_nodes=place.nodes,
                        strategy=strategy_for(opts, ctx), precision=precision,
                        plugins=[RunnerEnvironment(place)] if place.launched else None)
        fabric.launch()  # the processes exist: this only sets up the strategy on the joined group
        model = models.build(cfg.model, classes=cfg.head_classes, weights=cfg.weights)
        if deepspeed is not None:  # DeepSpeed builds its engine from the model and the optimizer together
            fabric_model, optimizer = fabric.setup(model, book_optimizer(model, cfg))
        else:  # sharded strategies replace the parameters: the optimizer is built on the set-up module
            fabric_model = fabric.setup_module(model)
            optimizer = fabric.setup_optimizers(book_optimizer(fabric_model, cfg))
        if deepspeed is not None:
            engine = fabric_model._forward_module
            held = lambda: [t for p in model.parameters() for t in (p, getattr(p, "ds_tensor", None))]  # noqa: E731
        else:
            held = model.parameters
        observe, extras = bookkeeping.source_loop(opts, cfg, ctx, forward=fabric_model)
        hooks: list[Hooks] = [RankBytes(held, model, optimizer, ctx), *extras]
        if opts.lr_gamma:
            hooks.append(StepLrEachEpoch(torch.optim.lr_scheduler.ExponentialLR(optimizer, opts.lr_gamma)))
        if opts.strategy in ("fsdp", "fsdp2"):
            hooks.append(GatherFullCopy(fabric_model._forward_module, cfg, ctx))
        elif deepspeed is not None and opts.zero_stage == 3:
            hooks.append(GatherPartitioned(deepspeed, engine, cfg, ctx))
        return Trainable(model, fabric_step(fabric, fabric_model, optimizer, observe=observe), hooks=hooks,
                         count_flops=opts.strategy not in SHARDED,
                         notes=[f"Fabric strategy {type(fabric.strategy).__name__}, precision {precision}"])


PIPELINE = FabricStrategies()
