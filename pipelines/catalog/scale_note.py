"""The lecture note "Training Strategies at Scale" (s004-*): its recipes and rules of thumb.

The note names no model, data or machine: its factors ("2x speed", "~2-3x memory") are rules of thumb, so
every entry here is judged on a CPU run and on a GPU run alike and labelled generic (NOTE_HARDWARE), never
"published on CPU" or "on GPU". The workload is a registered torchvision model on CIFAR-10 (NOTE_SETUP).
"""

import dataclasses

from pipelines.core.config.experiments import Experiment, Published as P, Variant

NOTE = "lecture-note (seed 004)"
NOTE_TITLE = "scale note (seed 004)"
# What each entry reproduces (the map's column), applied by core/config/experiments.py to the entries below
# that do not set `reproduces` themselves.
REPRODUCES = {
    "s004-amp": f"{NOTE_TITLE}: automatic mixed precision",
    "s004-gradaccum": f"{NOTE_TITLE}: gradient accumulation",
    "s004-ckpt": f"{NOTE_TITLE}: activation checkpointing",
    "s004-dp-vs-ddp": f"{NOTE_TITLE}: DataParallel vs DDP",
    "s004-pp": f"{NOTE_TITLE}: pipeline parallelism",
    "s004-tp": f"{NOTE_TITLE}: tensor parallelism",
    "s004-fsdp": f"{NOTE_TITLE}: FSDP",
    "s004-deepspeed": f"{NOTE_TITLE}: DeepSpeed ZeRO",
    "s004-dataloader": f"{NOTE_TITLE}: DataLoader settings",
}


# s004-deepspeed: the reference (DDP), DeepSpeed's stages, the note's own config, then torch's own equivalents.
# deepspeed-note is the note's snippet: ZeRO-3, parameters and optimizer offloaded to the CPU, global batch 256
# = micro-batch 32 per rank x 4 accumulation steps x 2 ranks (NPROC=2), fp16 on CUDA (precision=auto).
ZERO_ARMS = (Variant("ddp", options={"impl": "torch", "stage": 0}),
             *(Variant(f"deepspeed-{stage}", options={"stage": stage}) for stage in range(4)),
             Variant("deepspeed-3-offload", options={"stage": 3, "offload": True}),
             Variant("deepspeed-note", settings={"batch_size": 32},  # 256 / (4 x 2 ranks)
                     options={"stage": 3, "offload": True, "train_batch": 256, "accum_steps": 4, "precision": "auto"}),
             Variant("torch-zero-1", options={"impl": "torch", "stage": 1}),
             Variant("fsdp2-zero-2", options={"impl": "torch", "stage": 2}),
             Variant("fsdp2-zero-3", options={"impl": "torch", "stage": 3}),
             Variant("fsdp2-zero-3-offload", options={"impl": "torch", "stage": 3, "offload": True}))


# The note's factors are rules of thumb for no stated machine: judged on a CPU run and on a GPU run alike,
# and labelled as such (never "published on CPU" or "on GPU").
NOTE_HARDWARE = "generic: no hardware stated (the note's precision advice names A100 / H100)"
NOTE_SETUP = {"dataset": "cifar10", "batch_size": 64, "epochs": 1, "lr": 1e-4, "weight_decay": 0.01}
NOTE_DECISION = ("The note names no model or data: a registered torchvision model on CIFAR-10, AdamW "
                 "lr 1e-4 as the note's AMP snippet.")

EXPERIMENTS = (
    Experiment(id="s004-amp", compares="fp32 -> autocast bf16 / fp16 + GradScaler (claim: 2x speed, 2x memory)",
               pipeline="amp", settings={**NOTE_SETUP, "model": "efficientnet_b0"},
               options={"optimizer": "adamw", "cudnn_benchmark": False},
               variants=(Variant("fp32"), Variant("bf16", options={"precision": "bf16"}),
                         Variant("fp16", options={"precision": "fp16"})),
               published=(*(fig for arm in ("bf16", "fp16") for fig in (
                   P("stated_speed_factor_x", 2, NOTE, "rule of thumb, not measured", variant=arm),
                   P("stated_memory_factor_x", 2, NOTE, "recipe table; rule of thumb, not measured", variant=arm))),
                   *(P("max_finite_value", value, NOTE, f"precision table: {name} range +-{value:g}, the format's "
                       "largest finite value (torch.finfo(dtype).max, to the note's digits; "
                       "tests/unit/test_catalog.py checks it)", variant=arm)
                     for arm, name, value in (("fp32", "FP32", 3.4e38), ("fp16", "FP16", 65504),
                                              ("bf16", "BF16", 3.4e38)))),
               expect="The note's 2x is a GPU rule of thumb; on CPU bf16 gains only with native bf16 units (AMX).",
               decisions=(NOTE_DECISION.replace("a registered torchvision model", "EfficientNet-B0 (a CNN, the "
                                                "note's exercise 1)"),
                          "The scaler calls sit outside the autocast block (the note's lost indentation "
                          "leaves it open). fp16 is skipped on CPU with a reason.")),
    Experiment(id="s004-gradaccum", compares="true batch 256 -> micro-batch 64 x 4 accumulation (effective 256)",
               pipeline="grad_accum", settings={**NOTE_SETUP, "model": "cnn_cifar10"},
               variants=(Variant("batch256", settings={"batch_size": 256}, options={"accum_steps": 1}),
                         Variant("accum-64x4", settings={"batch_size": 64}, options={"accum_steps": 4})),
               published=(P("effective_batch_size", 256, NOTE, "exercise target, not a result"),),
               expect="Same effective batch: similar samples/s on CPU; "
                      "the accumulated arm needs less activation memory.",
               decisions=(NOTE_DECISION.replace("a registered torchvision model", "the book's CIFAR-10 CNN (no "
                                                "BatchNorm, so micro-batches and the full batch agree exactly)"),
                          "fp32 by default (-o precision=bf16|fp16 adds the note's autocast and GradScaler); a "
                          "test proves the accumulated gradients equal the full batch's.")),
    Experiment(id="s004-ckpt", compares="plain fp32 -> activation checkpointing per block (claim: ~2-3x memory, "
               "~30 % slower); bf16 autocast -> + checkpointing (the recipe table's 4x memory, 0.7x speed)",
               pipeline="activation_ckpt",
               settings={**NOTE_SETUP, "model": "vit_b_16", "image_size": 224, "batch_size": 32},
               variants=(Variant("plain", options={"checkpoint": False}), Variant("checkpointed"),
                         Variant("amp", options={"checkpoint": False, "precision": "bf16"}),
                         Variant("amp-checkpointed", options={"precision": "bf16"}, baseline="amp")),
               published=(P("stated_speed_factor_x", 0.7, NOTE, "the prose's '~30 % slower' (checkpointing alone); "
                            "rule of thumb, not measured", variant="checkpointed"),
                          P("stated_memory_factor_x", 2.5, NOTE, "the prose's '~2-3x' (checkpointing alone), judged "
                            "on its own range; rule of thumb, not measured", variant="checkpointed", low=2, high=3),
                          P("stated_speed_factor_x", 0.7, NOTE, "recipe table: 1 GPU mixed precision + gradient "
                            "checkpoint, against 1 GPU mixed precision (the amp arm); rule of thumb, not measured",
                            variant="amp-checkpointed"),
                          P("stated_memory_factor_x", 4, NOTE, "recipe table: 1 GPU mixed precision + gradient "
                            "checkpoint, against 1 GPU mixed precision (the amp arm); rule of thumb, not measured",
                            variant="amp-checkpointed")),
               expect="Expect a lower speed and a much lower saved_for_backward_mib for both checkpointed arms; bf16 "
                      "halves the activations checkpointing keeps, and gains speed only with native bf16 units.",
               decisions=(NOTE_DECISION.replace("a registered torchvision model", "ViT-B/16 (its 12 encoder "
                                                "blocks are the block list)"),
                          "Memory is saved_for_backward_mib on every device plus peak_gpu_mib on CUDA; CPU peak "
                          "RSS is process-wide across variants, so it is not the comparison. On CUDA too the "
                          "factors are judged on saved_for_backward_mib: they describe what checkpointing trades "
                          "(the activations kept for backward), while the CUDA peak also holds the weights, "
                          "gradients and Adam's two moments (ViT-B/16's 86 M parameters: 1.4 GB of them), which "
                          "checkpointing leaves alone, so the same saving reads smaller there and moves with the "
                          "batch; peak_gpu_mib is recorded beside it.",
                          "Each claim on the arm it describes: the prose's checkpointing-only '~2-3x' memory (a "
                          "range, the band itself) and '~30 % slower' on checkpointed, against plain fp32; the "
                          "recipe table's row 'mixed precision + gradient checkpoint: 4x memory, 0.7x speed' on "
                          "amp-checkpointed against the amp arm (the same ViT in bf16 autocast, no "
                          "checkpointing): the row sits under '1 GPU mixed precision' (s004-amp's 2x/2x) and "
                          "adds checkpointing to it, the reference pack lists s004-amp as its baseline, and its "
                          "0.7x speed is the prose's '~30 % slower' for checkpointing, which against fp32 would "
                          "contradict the row above it (2x from mixed precision). bf16 autocast: the note's "
                          "precision advice for A100/H100; fp16 + GradScaler is the CUDA-only s004-amp arm.")),
    Experiment(id="s004-dp-vs-ddp", compares="one device -> nn.DataParallel (1 process, 2 GPUs) / "
               "DistributedDataParallel (2 processes), global batch 64", pipeline="data_parallel", launcher="torchrun",
               knobs={"NPROC": "2"}, settings={**NOTE_SETUP, "model": "cnn_cifar10"},
               variants=(Variant("one-device", settings={"batch_size": 32}, options={"strategy": "ddp", "ranks": 1}),
                         Variant("dataparallel", settings={"batch_size": 64}, options={"strategy": "dp", "ranks": 2}),
                         Variant("ddp", settings={"batch_size": 32}, options={"strategy": "ddp", "ranks": 2})),
               published=(P("stated_memory_factor_x", 1, NOTE, "recipe table: multi-GPU DDP against one GPU (the "
                            "whole model on every GPU); rule of thumb, not measured", variant="ddp"),
                          P("stated_speed_factor_x", 2, NOTE, "recipe table: DDP speed 'N' x, N = 2 GPUs at this "
                            "entry's NPROC=2; DDP on N GPUs against one GPU (not against DataParallel); rule of "
                            "thumb, not measured", variant="ddp", devices=2)),
               expect="DataParallel is one process and one Python thread per GPU: it scatters the batch, copies the "
                      "model to every GPU each step and gathers the outputs on GPU 0, so DDP (one process per GPU, "
                      "gradients all-reduced during backward) is expected to be faster. On CPU only the DDP arm "
                      "runs (Gloo); the DataParallel arm is recorded as skipped with the reason.",
               decisions=("The recipe table's DDP row (memory 1x, speed N) is DDP against one GPU, so it is judged "
                          "on the ddp arm against one-device (1 process, the same 32 per device); DataParallel "
                          "against DDP is the note's exercise 3, with no figure: both arms' ratios to one-device "
                          "are measured side by side.",
                          "Same model and global batch: DataParallel takes the whole batch of 64 in one process and "
                          "splits it over 2 GPUs; DDP takes 32 per rank on 2 ranks. Both through "
                          "pipelines/data_parallel.py (-o strategy=dp|ddp); Adam (data_parallel.py's optimizer) at the "
                          "note's lr 1e-4, wd 0.01.",
                          "DataParallel needs 2 CUDA devices in one process: in a multi-process launch it is skipped "
                          "with the command that runs it (`make s004-dp-vs-ddp` runs it after the DDP launch "
                          "when 2+ GPUs are visible); on GPUs pass --device cuda -o backend=nccl to the DDP arm.",
                          "The book's CIFAR-10 CNN (no BatchNorm, so the replicas' buffers cannot differ between "
                          "the two wrappers).")),
    Experiment(id="s004-pp", compares="micro-batches 1 -> 2 / 4 / 8 through a 2-stage pipeline (GPipe; the bubble)",
               pipeline="pipeline_parallel", launcher="torchrun", knobs={"NPROC": "2"},
               settings={**NOTE_SETUP, "model": "transformer_small", "batch_size": 32, "drop_last": True},
               variants=tuple(Variant(f"microbatches={m}", options={"microbatches": m}) for m in (1, 2, 4, 8)),
               expect="The bubble (p-1)/(m+p-1) = 0.5, 0.33, 0.2, 0.11 for 2 stages: the measured idle share of "
                      "each stage falls with more micro-batches; the step time falls with it only while a "
                      "micro-batch stays big enough to compute efficiently (on CPU the per-chunk overhead and "
                      "the Gloo transfers grow with m).",
               decisions=("The note's naive 3-device split becomes torch.distributed.pipelining: one stage per rank "
                          "(NPROC stages; blocks dealt out evenly, embedding on the first stage, head on the "
                          "last), ScheduleGPipe by default, -o schedule=1f1b for Schedule1F1B (its arms with "
                          "fewer micro-batches than stages are skipped with the reason).",
                          "Global batch 64 = 32 per rank x 2 ranks, gathered on every rank: stage 0 feeds it, the "
                          "last stage scores it; the loss is broadcast from the last stage so rank 0 records it.",
                          "The bubble is measured, not inferred from the step time: each stage's timed "
                          "forward/backward chunks (busy) against the step's span, which lasts until the slowest "
                          "stage's schedule.step returns.")),
    Experiment(id="s004-tp", compares="replicated model (DDP) -> tensor-parallel blocks (column/row split), "
               "same global batch", pipeline="tensor_parallel", launcher="torchrun", knobs={"NPROC": "2"},
               settings={**NOTE_SETUP, "model": "transformer_small", "batch_size": 32},
               variants=(Variant("replicate", options={"parallel": "replicate"}), Variant("tensor")),
               expect="Each rank holds about 1/NPROC of the blocks' parameters (recorded per rank). On CPU "
                      "processes over Gloo the per-layer all-reduces cost more than the smaller matmuls save: "
                      "expect the tensor arm slower per step; its use is a model too big for one device.",
               decisions=("The note's column-parallel linear, grown into a transformer block with "
                          "torch.distributed.tensor.parallel: q/k/v and the MLP's first layer ColwiseParallel, "
                          "the attention output and the MLP's second layer RowwiseParallel; degree = NPROC, which "
                          "must divide the heads and the MLP width.",
                          "Same global batch in both arms (32 per rank x NPROC): DDP trains each rank on its own "
                          "shard, the tensor arm all-gathers the shards so every rank computes all samples.",
                          "A splittable transformer on CIFAR-10 4x4 patches (4 blocks, width 128, 4 heads), since "
                          "torchvision's ViT fuses q/k/v into one nn.MultiheadAttention weight.")),
    Experiment(id="s004-fsdp", compares="one device -> FSDP with transformer auto-wrap and bf16 MixedPrecision",
               pipeline="data_parallel", launcher="torchrun", knobs={"NPROC": "2"},
               settings={"model": "vit_tiny", "dataset": "cifar10", "image_size": 224, "batch_size": 8, "epochs": 1,
                     "lr": 5e-5, "weight_decay": 0.0},
               options={"precision": "bf16", "backend": "gloo"},
               variants=(Variant("one-device", options={"strategy": "ddp", "ranks": 1}),
                         Variant("fsdp", options={"strategy": "fsdp", "ranks": 2})),
               published=(P("stated_memory_factor_x", 2, NOTE, "recipe table: FSDP/ZeRO memory 'N' x, N = 2 GPUs "
                            "at this entry's NPROC=2 (each rank holds 1/N of the sharded state); rule of thumb, "
                            "not measured", variant="fsdp", devices=2),
                          P("stated_speed_factor_x", 2, NOTE, "recipe table: FSDP/ZeRO speed '~N' x (approximate), "
                            "N = 2 GPUs at this entry's NPROC=2, against one GPU; rule of thumb, not measured",
                            variant="fsdp", devices=2)),
               expect="runs on CPU with Gloo (2 ranks, tiny ViT): proves the sharding path; the note's memory and "
                    "speed factors are rules of thumb for N GPUs, not measured figures",
               decisions=("Auto-wrap = fully_shard per transformer encoder block (FSDP2), bf16 via FSDP's "
                          "MixedPrecisionPolicy with fp32 gradient reduction",
                          "The recipe table's FSDP row (memory N x, speed ~N x) is against one GPU, so the entry "
                          "has that arm: one-device, one process with the same per-device batch of 8 and bf16 "
                          "autocast, which the fsdp arm's two ranks are judged against (the note's N = 2 at "
                          "NPROC=2). Without it the two factors had nothing to be judged against.")),
    Experiment(id="s004-deepspeed", compares="DDP -> ZeRO stages 1/2/3 (+ CPU offload), DeepSpeed and torch's "
               "own: bytes per rank", pipeline="zero", launcher="torchrun", knobs={"NPROC": "2"},
               settings={**NOTE_SETUP, "model": "vit_b_16", "image_size": 224, "batch_size": 8},
               options={"backend": "gloo"}, variants=ZERO_ARMS,
               expect="metrics.bytes_per_rank has one value per rank and category. Against ddp, with N ranks: "
                      "optimizer_state is 1/N from stage 1, grads 1/N from stage 2, params_at_rest 1/N at stage 3; "
                      "DeepSpeed also keeps an fp32 copy of each rank's partition (master_params), even in fp32 "
                      "training. DeepSpeed's stage 1 hands the optimizer only its gradient partition too, so at "
                      "the step stages 1 and 2 look alike (by DeepSpeed's design stage 2 reduce-scatters in buckets "
                      "during backward; the transient this saves is not measured here). FSDP2 "
                      "reshards after backward in both of its arms: fsdp2-zero-2 differs from fsdp2-zero-3 in "
                      "params_in_forward. Time: sharding adds communication, so on CPU over Gloo expect the ZeRO "
                      "arms slower than ddp and offload slowest; losses equal ddp's within float tolerance. "
                      "deepspeed-note is the note's config, not a bytes comparison: a 4x larger batch per "
                      "rank and an optimizer step every 4th loop step (metrics.optimizer_steps = loop steps / 4), "
                      "so its losses and times do not compare with the other arms'; fp16 only with --device cuda.",
               decisions=(NOTE_DECISION.replace("a registered torchvision model", "ViT-B/16 at 224 (its encoder "
                                                "blocks are FSDP2's units), bs 8 per rank").replace(
                                                    "AdamW lr 1e-4 as", "AdamW lr 1e-4 in every arm, as"),
                          "DeepSpeed runs on CPU processes here (tried for real: 0.19.8 from its sdist, about 10 s "
                          "to build and install with its small dependencies): DS_ACCELERATOR=cpu selects its CPU "
                          "accelerator, which talks over Gloo when oneCCL's bindings are absent; it JIT-builds one "
                          "C++ op (deepspeed_shm_comm) on first use, about a minute on 2 cores, cached after. It is "
                          "the optional extra `zero`; without it the deepspeed-* arms are skipped with the reason "
                          "and the torch arms still run.",
                          "The note's snippet is DeepSpeed's config; the upstream equivalents run beside it: "
                          "ZeroRedundancyOptimizer (stage 1), FSDP2 fully_shard with reshard_after_forward=False "
                          "(stage 2) and True (stage 3), CPUOffloadPolicy (offload).",
                          "DeepSpeed gets torch's AdamW (torch_adam), gradient_clipping 0 (0.19 clips to norm 1.0 "
                          "by default, which DDP does not: found by a loss mismatch), bounded buckets "
                          "(bucket_elements, 4M) and "
                          "stage3_param_persistence_threshold=0, so every parameter is partitioned and the arms "
                          "differ only in sharding; DeepSpeed's defaults would keep small parameters whole and "
                          "allocate 5e8-element buffers.",
                          "deepspeed-note follows the note's config: ZeRO stage 3, offload_param and "
                          "offload_optimizer to the CPU, train_batch_size 256, gradient_accumulation_steps 4, fp16, "
                          "and the engine's own loop (engine(x), engine.backward(loss), engine.step() per "
                          "micro-batch; DeepSpeed divides the loss by 4 and steps the optimizer on every 4th). The "
                          "note leaves the micro-batch unsaid: DeepSpeed needs train_batch_size = micro-batch x "
                          "accumulation x ranks, so it is 256 / (4 x 2) = 32 per rank at NPROC=2 (--batch-size "
                          "32; another NPROC is refused with the --batch-size it needs, e.g. 16 at NPROC=4, and a "
                          "rank count that does not divide 64 is refused). Its other keys are the stage arms' "
                          "(torch AdamW, no clipping, bounded buckets).",
                          "fp16 is not run on CPU: DeepSpeed 0.19.8's CPU accelerator reports fp16 only where "
                          "oneDNN has fp16 kernels (is_fp16_supported() is "
                          "torch.ops.mkldnn._is_mkldnn_fp16_supported(): False on the AMD EPYC this was checked "
                          "on) and the engine refuses fp16 otherwise ('Type fp16 is not supported on your "
                          "device.'). The arm sets precision=auto: fp16 on CUDA as the note, fp32 "
                          "on CPU, and the record says so in its notes. fp32, not bf16, on CPU: bf16 is neither the "
                          "note's format nor that of the fp32 arms beside it, and without AMX it is no faster on "
                          "a CPU; -o precision=fp16 on a CPU is skipped with this reason.",
                          "Smoke scale runs every arm at the pipeline's tiny batch (4 per rank): deepspeed-note then "
                          "keeps accumulation 4 and DeepSpeed's train_batch_size follows the batch (4 x 4 x 2 = 32, "
                          "said in the record); bench and book scale run the note's 256.")),
    Experiment(id="s004-dataloader", compares="DataLoader defaults -> the note's settings (8 workers, pin, prefetch)",
               pipeline="plain_training",
               settings={**NOTE_SETUP, "model": "cnn_cifar10", "lr": 1e-5, "weight_decay": 0.005},
               variants=(Variant("defaults"),
                         Variant("note", settings={"shuffle": True, "num_workers": 8, "pin_memory": True,
                                               "prefetch_factor": 2, "persistent_workers": True})),
               expect="Workers help when decoding costs more than the step; on 2 cores 8 workers may not help.",
               decisions=("The note's settings on the book's CIFAR-10 CNN (Adam lr 1e-5); pin_memory is recorded "
                          "as having no effect without a GPU.",)),
)


# The note's factors are stated to one digit ("2x", "~N x", "0.7x"): a stated factor without a range of its own is
# judged within x/1.25 of itself, not on the effect rule's narrower band for a timed table.
RULE_OF_THUMB = {"margin": 0.25, "margin_reason": "a rule of thumb stated to one digit"}


def _rule_of_thumb(fig: P) -> P:
    stated = fig.metric.startswith("stated_") and fig.metric.endswith("_factor_x") and fig.low is None
    return dataclasses.replace(fig, **RULE_OF_THUMB) if stated else fig


# every entry: the note's factors are rules of thumb for no stated machine (NOTE_HARDWARE), judged as such
EXPERIMENTS = tuple(dataclasses.replace(entry, hardware=NOTE_HARDWARE, variants=entry.variants,
                                        published=tuple(map(_rule_of_thumb, entry.published)))
                    for entry in EXPERIMENTS)
