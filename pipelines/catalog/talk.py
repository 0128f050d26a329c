"""The CVPR 2023 talk's ViT ladder (rasbt/cvpr2023): scratch -> finetune -> Fabric -> bf16 -> DDP/FSDP."""

from pipelines.core.catalog import Experiment, Published as P

VIT = {"model": "vit_b_16", "dataset": "cifar10", "batch_size": 16, "epochs": 3, "lr": 5e-5,
       "weight_decay": 0.0, "image_size": 224, "num_workers": 4, "drop_last": True, "device": "cuda"}
SINGLE = "single-device techniques issue (#3)"
MULTI = "distributed training issue (#4)"
GPU_HW = "1 GPU, model unrecorded (bf16-capable)"
# Talk steps 04/05 (multi-GPU) run through pipelines/ddp.py: Fabric's strategy=ddp|fsdp + bf16-mixed.
TALK_DIST = {"backend": "nccl", "precision": "bf16"}
TALK_BAND = ("4 GPUs at book scale; on CPU: NPROC=2 launch/torchrun.sh run ID --scale smoke --model vit_tiny "
             "--device cpu --dataset synthetic -o backend=gloo proves the path, not the speed")
TALK_DECISIONS = ("Lightning Fabric replaced by plain torch DDP / FSDP2 (fully_shard per encoder block, "
                  "bf16 MixedPrecisionPolicy) so the technique is visible in pipelines/ddp.py",
                  "bs 16 per device as the talk (global 64 on 4 GPUs); lr not scaled")

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
    Experiment(id="vit-ddp-4gpu", compares="bf16 on 1 GPU -> bf16 + DDP on 4 GPUs", pipeline="ddp",
               target="cuda", launcher="torchrun", requires=("gpu", "multi-gpu"), args=VIT,
               options=TALK_DIST, knobs={"NPROC": "4"}, baseline="vit-bf16-mixed",
               published=(P("train_time_min", 2.19, "repo-output"), P("ratio", 2.90, "repo-output")),
               hardware="4 GPUs", band=TALK_BAND, decisions=TALK_DECISIONS),
    Experiment(id="vit-fsdp-4gpu", compares="bf16 on 1 GPU -> bf16 + FSDP on 4 GPUs", pipeline="ddp",
               target="cuda", launcher="torchrun", requires=("gpu", "multi-gpu"), args=VIT,
               options={**TALK_DIST, "strategy": "fsdp"}, knobs={"NPROC": "4"}, baseline="vit-bf16-mixed",
               published=(P("train_time_min", 2.23, "repo-output"), P("ratio", 2.85, "repo-output")),
               hardware="4 GPUs", band=TALK_BAND, decisions=TALK_DECISIONS),
    Experiment(id="vit-fsdp-4gpu-sched", compares="FSDP -> FSDP + ExponentialLR(0.9)", pipeline="ddp",
               target="cuda", launcher="torchrun", requires=("gpu", "multi-gpu"), args=VIT,
               options={**TALK_DIST, "strategy": "fsdp", "lr_gamma": 0.9}, knobs={"NPROC": "4"},
               baseline="vit-fsdp-4gpu",
               published=(P("train_time_min", 2.26, "repo-output"), P("ratio", 0.99, "repo-output")),
               hardware="4 GPUs", band=TALK_BAND, decisions=TALK_DECISIONS),
)
