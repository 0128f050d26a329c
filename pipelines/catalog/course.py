"""Deep Learning Fundamentals unit 9 and the lecture note "Training Strategies at Scale" (s004-*)."""

from pipelines.core.catalog import Experiment, Published as P

SINGLE = "single-device techniques issue (#3)"
MULTI = "distributed training issue (#4)"
A100 = "1x NVIDIA A100-SXM4-40GB"
NOTE = "lecture-note (seed 004)"

EXPERIMENTS = (
    Experiment(id="dlf-u9-amp", compares="DistilBERT/IMDB 32-true -> 16-mixed / bf16-mixed", pipeline=None,
               status="planned", planned_reason=SINGLE, target="cuda", requires=("gpu",),
               published=(P("fit_time_min", 21.64, "repo-output", "32-true"),
                          P("ratio", 2.99, "repo-output", "derived 21.64/7.24 (16-mixed); bf16 2.84")),
               hardware=A100),
    Experiment(id="dlf-u9-multigpu", compares="1 GPU -> 4-GPU DDP / FSDP / DeepSpeed", pipeline=None,
               status="planned", target="cuda", launcher="torchrun",
               planned_reason="DistilBERT on IMDB through Lightning's Trainer on 4 GPUs (DeepSpeed too): needs "
                              "GPUs and the NLP stack; the DDP/FSDP technique itself runs as ch8-ddp-template "
                              "and s004-fsdp",
               requires=("gpu", "multi-gpu"),
               published=(P("fit_time_min", 5.55, "repo-output", "1 GPU"),
                          P("ratio", 2.92, "repo-output", "derived 5.55/1.9 (FSDP); DDP 2.38")),
               hardware="A100 (count 4)"),
    Experiment(id="dlf-u9-compile", compares="eager -> torch.compile (no published number)", pipeline=None,
               status="planned", planned_reason=SINGLE),
    Experiment(id="dlf-u9-bsfinder", compares="batch-size finder -> bs 128, 16-mixed", pipeline=None,
               status="planned", planned_reason=SINGLE,
               published=(P("chosen_batch_size", 128, "repo-output"), P("fit_time_min", 4.92, "repo-output")),
               hardware=A100),
    Experiment(id="dlf-u9-ex1", compares="exercise: 5 precision settings (no reference numbers)", pipeline=None,
               status="planned", planned_reason=SINGLE),
    Experiment(id="s004-amp", compares="autocast + GradScaler (claim: 2x speed, 2x memory)", pipeline=None,
               status="planned", planned_reason=SINGLE,
               published=(P("stated_speed_factor_x", 2, NOTE, "rule of thumb, not measured"),)),
    Experiment(id="s004-gradaccum", compares="micro-batch 64 x 4 accumulation = effective batch 256",
               pipeline=None, status="planned", planned_reason=SINGLE,
               published=(P("effective_batch_size", 256, NOTE, "exercise target, not a result"),)),
    Experiment(id="s004-ckpt", compares="activation checkpointing per block (claim: ~0.7x speed)",
               pipeline=None, status="planned", planned_reason=SINGLE,
               published=(P("stated_speed_factor_x", 0.7, NOTE, "rule of thumb, not measured"),)),
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
               args={"model": "vit_tiny", "dataset": "cifar10", "image_size": 224, "batch_size": 8, "epochs": 1,
                     "lr": 5e-5, "weight_decay": 0.0},
               options={"strategy": "fsdp", "precision": "bf16", "backend": "gloo"},
               band="runs on CPU with Gloo (2 ranks, tiny ViT): proves the sharding path; the note's memory and "
                    "speed factors are rules of thumb for N GPUs, not measured figures",
               decisions=("Auto-wrap = fully_shard per transformer encoder block (FSDP2), bf16 via FSDP's "
                          "MixedPrecisionPolicy with fp32 gradient reduction",)),
    Experiment(id="s004-deepspeed", compares="DeepSpeed ZeRO-3 with CPU offload (qualitative only)",
               pipeline=None, status="planned", planned_reason=MULTI, requires=("gpu",)),
    Experiment(id="s004-dataloader", compares="efficient DataLoader settings (workers, pin, prefetch)",
               pipeline=None, status="planned", planned_reason=SINGLE),
)
