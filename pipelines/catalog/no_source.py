"""Entries that no source publishes: a technique measured beside the sources' own, with no figure to judge.

Their verdicts compare the arms with each other only (no published ratio, so no "reproduced").
"""

from pipelines.core.config.experiments import Experiment, Variant

REPRODUCES = {"scale-channels-last": "no source figure (beside the course's compile entry)"}

EXPERIMENTS = (
    Experiment(id="scale-channels-last", compares="NCHW -> channels_last memory format (ResNet-18, CIFAR-10)",
               pipeline="channels_last",
               settings={"dataset": "cifar10", "batch_size": 128, "epochs": 1, "lr": 1e-4, "weight_decay": 0.01,
                         "model": "resnet18"},
               variants=(Variant("nchw"), Variant("channels_last", options={"channels_last": True})),
               expect="channels_last helps Tensor Core convolutions on GPUs; on CPU the effect depends on oneDNN.",
               decisions=("Not from a source: none of them measures the memory format; it sits beside the course's "
                          "compile entry. ResNet-18 (BatchNorm + convolutions) at 32x32, AdamW lr 1e-4 is replaced "
                          "by the book's Adam (wd 0.005) at lr 1e-4.",)),
)
