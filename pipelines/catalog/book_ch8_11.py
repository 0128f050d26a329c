"""Book chapters 8-11: distributed training on CPUs, GPUs and several hosts (one ddp pipeline)."""

from pipelines.core.catalog import Experiment, Published as P

DISTRIBUTED = "distributed training issue (#4)"
CNN_CIFAR_DDP = {"model": "cnn_cifar10", "dataset": "cifar10", "batch_size": 32, "epochs": 5, "lr": 1e-5,
                 "weight_decay": 0.005}
EFFNET_DDP = {"model": "efficientnet_b7", "dataset": "cifar10", "batch_size": 256, "epochs": 25, "lr": 1e-4,
              "weight_decay": 0.005, "head_classes": 1000, "device": "cuda"}
CH9_HW = "1 CPU host, 16 physical cores"

EXPERIMENTS = (
    Experiment(id="ch8-ddp-template", compares="DDP code template (no measurement)", pipeline=None,
               status="planned", planned_reason=DISTRIBUTED, launcher="torchrun", args=CNN_CIFAR_DDP),
    Experiment(
        id="ch9-cpu-threads", compares="1 thread -> 2/4/8/12/16 threads (Table 9.1)", pipeline=None,
        status="planned", planned_reason=DISTRIBUTED, args=CNN_CIFAR_DDP,
        published=(P("train_time_s", 311, "book:ch9:table9.1", "1 thread"),
                   P("train_time_s", 73, "book:ch9:table9.1", "16 threads"),
                   P("ratio", 4.26, "book:ch9:table9.1", "derived 311/73 at 16 threads")),
        hardware=CH9_HW),
    Experiment(
        id="ch9-cpu-gloo", compares="1 proc x 16 thr -> Gloo DDP 2x8 / 4x4 / 8x2 (Table 9.2)", pipeline=None,
        status="planned", planned_reason=DISTRIBUTED, launcher="torchrun", args=CNN_CIFAR_DDP,
        baseline="ch9-cpu-threads",
        published=(P("train_time_s", 37, "book:ch9:table9.2", "8x2"),
                   P("ratio", 1.97, "book:ch9:table9.2", "derived 73/37 at 8x2; 1.26 at 2x8, 1.62 at 4x4")),
        hardware=CH9_HW),
    Experiment(
        id="ch9-cpu-oneccl", compares="1 x 16 -> oneCCL DDP 2x8 / 4x4 / 8x2 (Table 9.3)", pipeline=None,
        status="planned", planned_reason=DISTRIBUTED, launcher="torchrun", target="cpu-intel",
        requires=("ccl",), args=CNN_CIFAR_DDP, baseline="ch9-cpu-threads",
        published=(P("train_time_s", 35, "book:ch9:table9.3", "8x2"),
                   P("ratio", 2.09, "book:ch9:table9.3", "derived 73/35 at 8x2")),
        hardware=CH9_HW),
    Experiment(
        id="ch10-gpu-nccl", compares="1 GPU -> 2..8 GPUs, DDP + NCCL, torchrun (Table 10.2)", pipeline=None,
        status="planned", planned_reason=DISTRIBUTED, launcher="torchrun", target="cuda",
        requires=("gpu",), args=EFFNET_DDP,
        published=(P("train_time_s", 707, "book:ch10:table10.2", "1 GPU"),
                   P("train_time_s", 109, "book:ch10:table10.2", "8 GPUs"),
                   P("ratio", 6.49, "book:ch10:table10.2", "derived 707/109 at 8 GPUs")),
        hardware="1 node, 8x NVIDIA A100"),
    Experiment(
        id="ch11-multinode-mpi-nccl", compares="1 node x 8 GPUs -> 2 nodes x 8 GPUs (mpirun + NCCL)",
        pipeline=None, status="planned", planned_reason=DISTRIBUTED, launcher="mpirun", target="mpi",
        requires=("gpu",), args=EFFNET_DDP, baseline="ch10-gpu-nccl",
        published=(P("train_time_s", 64, "book:ch11", "16 GPUs"),
                   P("ratio", 1.70, "book:ch11", "derived 109/64 vs 1 node x 8")),
        hardware="2 nodes x 8x NVIDIA A100"),
    Experiment(id="ch11-mpi-backend-cpu", compares="CNN DDP with backend=mpi (repo only)", pipeline=None,
               status="planned", planned_reason=DISTRIBUTED, launcher="mpirun", requires=("mpi-backend",),
               args=CNN_CIFAR_DDP),
)
