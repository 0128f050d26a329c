"""Book chapters 4-6: CPU libraries (OpenMP, IPEX), the data pipeline, pruning."""

from pipelines.core.catalog import Experiment, Published as P

SINGLE_DEVICE = "single-device techniques issue (#3)"
CNN_CIFAR = {"model": "cnn_cifar10", "dataset": "cifar10", "batch_size": 64, "epochs": 10, "lr": 1e-5,
             "weight_decay": 0.005}
CH4_HW = "Intel CPU, 16 physical / 32 logical cores"
CH4_BAND = "The book used 16 physical cores; this machine has fewer: expect the direction, not the size."

EXPERIMENTS = (
    Experiment(
        id="ch4-gomp-default-cnn", compares="reference: CNN/CIFAR-10, 10 ep, GNU OpenMP defaults",
        pipeline=None, status="planned", planned_reason=SINGLE_DEVICE, args=CNN_CIFAR,
        published=(P("train_time_s", 178, "book:ch4"), P("ratio", 1.0, "book:ch4")),
        hardware=CH4_HW, band=CH4_BAND),
    Experiment(
        id="ch4-gomp-pinned-cnn", compares="GNU default -> GNU pinned (PROC_BIND/SCHEDULE/GOMP_CPU_AFFINITY)",
        pipeline=None, status="planned", planned_reason=SINGLE_DEVICE, baseline="ch4-gomp-default-cnn",
        args=CNN_CIFAR,
        published=(P("train_time_s", 114, "book:ch4"), P("ratio", 1.56, "book:ch4", "derived 178/114")),
        hardware=CH4_HW, band=CH4_BAND),
    Experiment(
        id="ch4-iomp-cnn", compares="GNU pinned -> Intel OpenMP (KMP env)", pipeline=None, status="planned",
        planned_reason=SINGLE_DEVICE, baseline="ch4-gomp-pinned-cnn", args=CNN_CIFAR,
        published=(P("train_time_s", 102, "book:ch4"),
                   P("ratio", 1.12, "book:ch4", "derived 114/102; 1.75 vs the GNU default")),
        hardware=CH4_HW, band=CH4_BAND),
    Experiment(
        id="ch4-ipex-densenet", compares="Intel-OpenMP baseline -> + ipex.optimize (DenseNet121)",
        pipeline=None, status="planned", planned_reason=SINGLE_DEVICE, target="cpu-intel",
        requires=("ipex",),
        args={"model": "densenet121", "dataset": "cifar10", "batch_size": 64, "epochs": 10, "lr": 1e-5,
              "head_classes": 1000},
        published=(P("train_time_s", 1318, "book:ch4", "baseline"), P("train_time_s", 946, "book:ch4", "IPEX"),
                   P("ratio", 1.39, "book:ch4", "derived 1318/946")),
        hardware=CH4_HW, band=CH4_BAND),
    Experiment(
        id="ch5-pipeline", compares="DataLoader workers 0, no pin -> 8 workers + pinned (heavy 224 transform)",
        pipeline=None, status="planned", planned_reason=SINGLE_DEVICE, target="cuda",
        args={"model": "densenet121", "dataset": "cifar10", "batch_size": 128, "epochs": 10, "lr": 1e-5,
              "head_classes": 1000},
        published=(P("train_time_s", 1892, "book:ch5", "baseline"), P("train_time_s", 846, "book:ch5", "variant"),
                   P("ratio", 2.24, "book:ch5", "derived 1892/846"),
                   P("test_accuracy_pct", 92.34, "book:ch5", "variant")),
        hardware="1x NVIDIA A100 (host CPU unstated)",
        band="The worker benefit depends on the host's cores; 2 cores cannot feed 8 workers."),
    Experiment(
        id="ch6-prune", compares="unpruned -> L1-norm filter pruning 10..80 % + compression",
        pipeline=None, status="planned", planned_reason=SINGLE_DEVICE, args=CNN_CIFAR,
        published=(P("train_time_s", 122, "book:ch6:table6.1", "unpruned"),
                   P("ratio", 1.37, "book:ch6:table6.1", "derived 122/89 at 50 %"),
                   P("test_accuracy_pct", 47.10, "book:ch6:table6.1", "unpruned")),
        hardware="CPU-only machine, unstated"),
)
