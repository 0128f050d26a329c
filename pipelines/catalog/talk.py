"""The CVPR 2023 talk's ViT ladder (rasbt/cvpr2023): scratch -> finetune -> Fabric -> bf16 -> DDP/FSDP."""

from pipelines.core.catalog import Experiment, Published as P

VIT = {"model": "vit_b_16", "dataset": "cifar10", "batch_size": 16, "epochs": 3, "lr": 5e-5,
       "weight_decay": 0.0, "image_size": 224, "num_workers": 4, "drop_last": True, "device": "cuda"}
SINGLE = "single-device techniques issue (#3)"
MULTI = "distributed training issue (#4)"
GPU_HW = "1 GPU, model unrecorded (bf16-capable)"

EXPERIMENTS = (
    Experiment(id="vit-scratch", compares="reference: ViT-B/16 random init, 10 ep", pipeline=None,
               status="planned", planned_reason=SINGLE, target="cuda", requires=("gpu",),
               args={**VIT, "epochs": 10},
               published=(P("train_time_min", 61.48, "talk-slides"), P("test_accuracy_pct", 62.85, "talk-slides")),
               hardware=GPU_HW),
    Experiment(id="vit-finetune", compares="scratch 10 ep -> ImageNet-pretrained 3 ep", pipeline=None,
               status="planned", planned_reason=SINGLE, target="cuda", requires=("gpu",), args=VIT,
               baseline="vit-scratch",
               published=(P("train_time_min", 18.70, "talk-slides"), P("test_accuracy_pct", 95.37, "talk-slides"),
                          P("ratio", 3.29, "talk-slides", "derived 61.48/18.70; 10 vs 3 epochs")),
               hardware=GPU_HW),
    Experiment(id="vit-compile", compares="finetune -> + torch.compile", pipeline=None, status="planned",
               planned_reason=SINGLE, target="cuda", requires=("gpu",), args=VIT, baseline="vit-finetune",
               published=(P("train_time_min", 18.01, "repo-output"), P("ratio", 1.04, "repo-output")),
               hardware=GPU_HW),
    Experiment(id="vit-fabric-baseline", compares="plain PyTorch -> Lightning Fabric, 1 GPU, fp32",
               pipeline=None, status="planned", planned_reason=SINGLE, target="cuda", requires=("gpu",),
               args=VIT, baseline="vit-finetune",
               published=(P("train_time_min", 18.49, "repo-output"), P("ratio", 1.01, "repo-output")),
               hardware=GPU_HW),
    Experiment(id="vit-bf16-mixed", compares="Fabric fp32 -> bf16-mixed", pipeline=None, status="planned",
               planned_reason=SINGLE, target="cuda", requires=("gpu",), args=VIT, baseline="vit-fabric-baseline",
               published=(P("train_time_min", 6.36, "repo-output"), P("ratio", 2.91, "repo-output")),
               hardware=GPU_HW),
    Experiment(id="vit-ddp-4gpu", compares="bf16 on 1 GPU -> bf16 + DDP on 4 GPUs", pipeline=None,
               status="planned", planned_reason=MULTI, target="cuda", launcher="torchrun",
               requires=("gpu", "multi-gpu"), args=VIT, baseline="vit-bf16-mixed",
               published=(P("train_time_min", 2.19, "repo-output"), P("ratio", 2.90, "repo-output")),
               hardware="4 GPUs"),
    Experiment(id="vit-fsdp-4gpu", compares="bf16 on 1 GPU -> bf16 + FSDP on 4 GPUs", pipeline=None,
               status="planned", planned_reason=MULTI, target="cuda", launcher="torchrun",
               requires=("gpu", "multi-gpu"), args=VIT, baseline="vit-bf16-mixed",
               published=(P("train_time_min", 2.23, "repo-output"), P("ratio", 2.85, "repo-output")),
               hardware="4 GPUs"),
    Experiment(id="vit-fsdp-4gpu-sched", compares="FSDP -> FSDP + ExponentialLR(0.9)", pipeline=None,
               status="planned", planned_reason=MULTI, target="cuda", launcher="torchrun",
               requires=("gpu", "multi-gpu"), args=VIT, baseline="vit-fsdp-4gpu",
               published=(P("train_time_min", 2.26, "repo-output"), P("ratio", 0.99, "repo-output")),
               hardware="4 GPUs"),
)
