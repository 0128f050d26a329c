"""Deep Learning Fundamentals unit 9 and the lecture note "Training Strategies at Scale" (s004-*).

DistilBERT and IMDB cannot be downloaded here, so the course's techniques run on a stand-in: the
registered ViT (vit_b_16 at bench/book scale, vit_tiny at smoke scale) on CIFAR-10. Variant names
start with "vit-" and every such entry says so in its decisions: its numbers are not the course's.
"""

from pipelines.core.experiments import Experiment, Published as P, Variant

SINGLE = "single-device techniques issue (#3)"
MULTI = "distributed training issue (#4)"
A100 = "1x NVIDIA A100-SXM4-40GB"
NOTE = "lecture-note (seed 004)"
STANDIN = {"model": "vit_b_16", "dataset": "cifar10", "image_size": 224, "batch_size": 12, "epochs": 3,
           "lr": 5e-5, "weight_decay": 0.0, "num_workers": 4, "shuffle": True, "head_classes": 10}
STANDIN_DECISION = ("Stand-in workload: DistilBERT/IMDB cannot be downloaded here, so the technique runs on "
                    "torchvision's ViT-B/16 (random init; --weights for a local file) on CIFAR-10 at 224, "
                    "bs 12, Adam lr 5e-5, 3 epochs. The published figures are DistilBERT's: compare the "
                    "direction of a ratio, never the minutes or the accuracy.")
STANDIN_BAND = "Stand-in model and data: expect the direction of the published ratio, not its size."
FABRIC = {"fabric": True}
# unit 9.3 notes.txt: fit time of 3 epochs (min) per Lightning strategy, 1 GPU or 4 GPUs
MULTIGPU_MIN = {"single-gpu": 5.55, "ddp": 2.33, "fsdp": 1.9, "deepspeed-2": 1.74,
                "deepspeed-2-offload": 5.34, "deepspeed-3": 1.72}


# s004-deepspeed: the reference (DDP), DeepSpeed's stages, then torch's own equivalents
ZERO_ARMS = (Variant("ddp", options={"impl": "torch", "stage": 0}),
             *(Variant(f"deepspeed-{stage}", options={"stage": stage}) for stage in range(4)),
             Variant("deepspeed-3-offload", options={"stage": 3, "offload": True}),
             Variant("torch-zero-1", options={"impl": "torch", "stage": 1}),
             Variant("fsdp2-zero-2", options={"impl": "torch", "stage": 2}),
             Variant("fsdp2-zero-3", options={"impl": "torch", "stage": 3}),
             Variant("fsdp2-zero-3-offload", options={"impl": "torch", "stage": 3, "offload": True}))


# dlf-u9-multigpu: the course's strategies (published names), then the labelled extra arm that runs on CPU
MULTIGPU_ARMS = (Variant("single-gpu", options={"strategy": "single"}), Variant("ddp", options={"strategy": "ddp"}),
                 Variant("fsdp", options={"strategy": "fsdp"}),
                 Variant("deepspeed-2", options={"strategy": "deepspeed", "zero_stage": 2}),
                 Variant("deepspeed-2-offload", options={"strategy": "deepspeed", "zero_stage": 2, "offload": True}),
                 Variant("deepspeed-3", options={"strategy": "deepspeed", "zero_stage": 3}),
                 Variant("fsdp2", options={"strategy": "fsdp2"}))


def precision(name: str) -> Variant:
    return Variant(f"vit-{name}", options={**FABRIC, "precision": name})


NOTE_SETUP = {"dataset": "cifar10", "batch_size": 64, "epochs": 1, "lr": 1e-4, "weight_decay": 0.01}
NOTE_DECISION = ("The note names no model or data: a registered torchvision model on CIFAR-10, AdamW "
                 "lr 1e-4 as the note's AMP snippet.")

EXPERIMENTS = (
    Experiment(id="dlf-u9-amp", compares="32-true -> 16-mixed / bf16-mixed (stand-in ViT; course: DistilBERT)",
               pipeline="vit_ladder", target="cuda", requires=("gpu",), settings={**STANDIN, "device": "cuda"},
               variants=(precision("32-true"), precision("16-mixed"), precision("bf16-mixed")),
               published=(P("fit_time_min", 21.64, "repo-output", "DistilBERT 32-true", variant="vit-32-true"),
                          P("fit_time_min", 7.24, "repo-output", "DistilBERT 16-mixed", variant="vit-16-mixed"),
                          P("fit_time_min", 7.62, "repo-output", "DistilBERT bf16-mixed", variant="vit-bf16-mixed"),
                          P("ratio", 2.99, "repo-output", "derived 21.64/7.24 (DistilBERT)", variant="vit-16-mixed"),
                          P("ratio", 2.84, "repo-output", "derived 21.64/7.62 (DistilBERT)",
                            variant="vit-bf16-mixed")),
               hardware=A100, expect=STANDIN_BAND,
               decisions=(STANDIN_DECISION,
                          "Precision through Lightning Fabric's plugin (the course used the Trainer's, the same "
                          "plugin). 16-mixed is skipped on CPU with a reason: Lightning would silently run "
                          "bf16-mixed there.")),
    Experiment(id="dlf-u9-multigpu", compares="1 device -> DDP / FSDP / DeepSpeed through Lightning Fabric, 2+ "
               "processes (Gloo on CPU, NCCL on GPUs)", pipeline="fabric_strategies", target="cuda",
               launcher="torchrun", knobs={"NPROC": "2"}, settings=STANDIN, variants=MULTIGPU_ARMS,
               published=(*(P("fit_time_min", t, "repo-output", f"strategy {name}", variant=name)
                            for name, t in MULTIGPU_MIN.items()),
                          *(P("ratio", round(MULTIGPU_MIN["single-gpu"] / t, 2), "repo-output",
                              f"derived {MULTIGPU_MIN['single-gpu']}/{t}", variant=name)
                            for name, t in MULTIGPU_MIN.items() if name != "single-gpu")),
               hardware="A100 (count 4)",
               expect="On CPU processes (make dlf-u9-multigpu NPROC=2) ddp and fsdp2 run, the GPU-only strategies "
                      "are skipped with the reason, and single-gpu runs alone (accel run dlf-u9-multigpu --variant "
                      "single-gpu): expect no speed-up from ranks sharing a few cores, fsdp2 holding half of ddp's "
                      "parameter, gradient and optimizer bytes per rank (metrics.bytes_per_rank), and equal losses. "
                      "On 4 GPUs (NPROC=4 ARGS='--device cuda -o backend=nccl') expect the direction of the "
                      "published ratios, not their size (stand-in model).",
               decisions=(STANDIN_DECISION,
                          "The course ran Lightning's Trainer at precision=16; precision=auto is 16-mixed on GPUs "
                          "and 32-true on CPU (Lightning would silently turn 16-mixed into bf16 there).",
                          "Lightning 2.6 runs strategy='fsdp' (FSDP1) and its DeepSpeedStrategy on GPUs only, so "
                          "those arms are skipped on CPU with the reason; the extra arm fsdp2 (Fabric's "
                          "ModelParallelStrategy + fully_shard per block, not in the course) shows the sharding on "
                          "CPU processes. The course's deterministic=True is not set: the stand-in's ratios are "
                          "compared by direction only.")),
    Experiment(id="dlf-u9-compile", compares="eager -> torch.compile (stand-in ViT; no published number)",
               pipeline="vit_ladder", settings={**STANDIN, "batch_size": 64},
               variants=(Variant("vit-eager"), Variant("vit-compiled", options={"compile": True})),
               expect="No published number: the course gives none. Compilation time lands in warm-up.",
               decisions=(STANDIN_DECISION.replace("bs 12", "bs 64"),
                          "fp32 plain loop so it runs on CPU too; the course ran 16-mixed on one GPU: add "
                          "--device cuda -o fabric=true -o precision=16-mixed for that setting.")),
    Experiment(id="dlf-u9-bsfinder", compares="batch-size finder: doubling until memory runs out (stand-in ViT)",
               pipeline="batch_size_finder", settings={**STANDIN, "num_workers": 0},
               published=(P("chosen_batch_size", 128, "repo-output", "DistilBERT 16-mixed on an A100-40GB"),
                          P("first_failed_batch_size", 256, "repo-output", "DistilBERT 16-mixed on an A100-40GB"),
                          P("fit_time_min", 4.92, "repo-output", "3 epochs at bs 128 (not run by the finder)")),
               hardware=A100, expect="The chosen size depends on the model, precision and memory: not comparable.",
               decisions=(STANDIN_DECISION,
                          "Random inputs of the data's shape (memory depends on shapes only; one batch is "
                          "read for the shape); fp32, where the "
                          "course's finder ran 16-mixed. On CPU the search stops at a memory cap (default half "
                          "of this machine's memory; -o memory_cap_mib=N) since running out kills the process.",
                          "The finder reports the size and the throughput curve; it does not go on to train.")),
    Experiment(id="dlf-u9-ex1", compares="exercise: 5 precision settings (stand-in ViT; no reference numbers)",
               pipeline="vit_ladder", settings=STANDIN,
               variants=tuple(precision(name) for name in ("32-true", "16-true", "64-true", "16-mixed", "bf16-mixed")),
               expect="No reference numbers. 16-true trains with fp16 weights and Adam state: expect instability.",
               decisions=(STANDIN_DECISION, "16-mixed is skipped on CPU (recorded with the reason); the other "
                          "four run on CPU, all five with --device cuda.")),
    Experiment(id="s004-amp", compares="fp32 -> autocast bf16 / fp16 + GradScaler (claim: 2x speed, 2x memory)",
               pipeline="ch07_amp", settings={**NOTE_SETUP, "model": "efficientnet_b0"},
               options={"optimizer": "adamw", "cudnn_benchmark": False},
               variants=(Variant("fp32"), Variant("bf16", options={"precision": "bf16"}),
                         Variant("fp16", options={"precision": "fp16"})),
               published=(P("stated_speed_factor_x", 2, NOTE, "rule of thumb, not measured"),),
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
               expect="Same effective batch: similar samples/s on CPU; the accumulated arm needs less activation memory.",
               decisions=(NOTE_DECISION.replace("a registered torchvision model", "the book's CIFAR-10 CNN (no "
                                                "BatchNorm, so micro-batches and the full batch agree exactly)"),
                          "fp32 by default (-o precision=bf16|fp16 adds the note's autocast and GradScaler); a "
                          "test proves the accumulated gradients equal the full batch's.")),
    Experiment(id="s004-ckpt", compares="plain -> activation checkpointing per block (claim: ~0.7x speed)",
               pipeline="activation_ckpt", settings={**NOTE_SETUP, "model": "vit_b_16", "image_size": 224, "batch_size": 32},
               variants=(Variant("plain", options={"checkpoint": False}), Variant("checkpointed")),
               published=(P("stated_speed_factor_x", 0.7, NOTE, "rule of thumb, not measured"),),
               expect="Expect a lower speed and a much lower saved_for_backward_mib for the checkpointed arm.",
               decisions=(NOTE_DECISION.replace("a registered torchvision model", "ViT-B/16 (its 12 encoder "
                                                "blocks are the block list)"),
                          "Memory is saved_for_backward_mib on every device plus peak_gpu_mib on CUDA; CPU peak "
                          "RSS is process-wide across variants, so it is not the comparison.")),
    Experiment(id="s004-dp-vs-ddp", compares="nn.DataParallel vs DistributedDataParallel", pipeline=None,
               status="planned", launcher="torchrun",
               planned_reason="nn.DataParallel splits batches across GPUs of one process and does nothing on "
                              "CPU; the DDP half runs as ch8-ddp-template (torchrun + gloo)"),
    Experiment(id="s004-pp", compares="naive pipeline split over 3 devices", pipeline=None, status="planned",
               planned_reason=MULTI, requires=("gpu", "multi-gpu")),
    Experiment(id="s004-tp", compares="column-parallel linear (tensor parallel)", pipeline=None,
               status="planned", launcher="torchrun",
               planned_reason="tensor parallelism (torch.distributed.tensor.parallel) needs its own pipeline; "
                              "the data-parallel pipeline (ddp.py) does not shard layers column-wise"),
    Experiment(id="s004-fsdp", compares="FSDP with transformer auto-wrap and bf16 MixedPrecision",
               pipeline="ddp", launcher="torchrun", knobs={"NPROC": "2"},
               settings={"model": "vit_tiny", "dataset": "cifar10", "image_size": 224, "batch_size": 8, "epochs": 1,
                     "lr": 5e-5, "weight_decay": 0.0},
               options={"strategy": "fsdp", "precision": "bf16", "backend": "gloo"},
               expect="runs on CPU with Gloo (2 ranks, tiny ViT): proves the sharding path; the note's memory and "
                    "speed factors are rules of thumb for N GPUs, not measured figures",
               decisions=("Auto-wrap = fully_shard per transformer encoder block (FSDP2), bf16 via FSDP's "
                          "MixedPrecisionPolicy with fp32 gradient reduction",)),
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
                      "arms slower than ddp and offload slowest; losses equal ddp's within float tolerance.",
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
                          "allocate 5e8-element buffers.")),
    Experiment(id="s004-dataloader", compares="DataLoader defaults -> the note's settings (8 workers, pin, prefetch)",
               pipeline="ch02_layers", settings={**NOTE_SETUP, "model": "cnn_cifar10", "lr": 1e-5, "weight_decay": 0.005},
               variants=(Variant("defaults"),
                         Variant("note", settings={"shuffle": True, "num_workers": 8, "pin_memory": True,
                                               "prefetch_factor": 2, "persistent_workers": True})),
               expect="Workers help when decoding costs more than the step; on 2 cores 8 workers may not help.",
               decisions=("The note's settings on the book's CIFAR-10 CNN (Adam lr 1e-5); pin_memory is recorded "
                          "as having no effect without a GPU.",)),
    Experiment(id="scale-channels-last", compares="NCHW -> channels_last memory format (ResNet-18, CIFAR-10)",
               pipeline="channels_last", settings={**NOTE_SETUP, "model": "resnet18", "batch_size": 128},
               variants=(Variant("nchw"), Variant("channels_last", options={"channels_last": True})),
               expect="channels_last helps Tensor Core convolutions on GPUs; on CPU the effect depends on oneDNN.",
               decisions=("Not from a seed source: the issue asks for it beside the course's compile entry. "
                          "ResNet-18 (BatchNorm + convolutions) at 32x32, AdamW lr 1e-4 is replaced by the book's "
                          "Adam (wd 0.005) at lr 1e-4.",)),
)
