"""Book chapter 7: automatic mixed precision (fp32 / bf16 / fp16 + GradScaler)."""

from pipelines.core.catalog import Experiment, Published as P

SINGLE_DEVICE = "single-device techniques issue (#3)"

EXPERIMENTS = (
    Experiment(
        id="ch7-amp", compares="FP32 (+cudnn.benchmark) -> AMP bf16 / AMP fp16 (EfficientNet-B7)",
        pipeline=None, status="planned", planned_reason=SINGLE_DEVICE, target="cuda",
        args={"model": "efficientnet_b7", "dataset": "cifar10", "batch_size": 2048, "epochs": 50, "lr": 1e-3,
              "head_classes": 1000},
        published=(P("train_time_s", 811, "book:ch7", "FP32"), P("train_time_s", 754, "book:ch7", "bf16"),
                   P("train_time_s", 486, "book:ch7", "fp16"),
                   P("ratio", 1.67, "book:ch7", "derived 811/486 (fp16); bf16 1.08")),
        hardware="1x NVIDIA A100"),
)
