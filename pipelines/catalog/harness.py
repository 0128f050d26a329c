"""The harness's own entries: not a source's experiment, but what checks the method that judges them.

`harness-calibration` is ch2-baseline's workload (the book's CNN on Fashion-MNIST, batch 64) in four arms
that share one process: `a`, `a-again` (the same arm built twice: an A/A pair, whose true ratio is 1) and
two arms slowed by a known 5 % and 10 % of their step (pipelines/selfcheck/calibration.py). `ci/calibrate-intervals.py`
runs it through the whole stopping rule many times and reports coverage and detection (docs/timing.md).
"""

from pipelines.core.config.experiments import Experiment, Variant

FMNIST = {"model": "cnn_fmnist", "dataset": "fashion_mnist", "batch_size": 64, "epochs": 10,
          "lr": 1e-5, "weight_decay": 0.005}

EXPERIMENTS = (
    Experiment(
        id="harness-calibration", compares="A/A (the same arm twice) and arms slowed by 5 % and 10 %",
        reproduces="harness: calibration of the paired intervals (no published figure)",
        pipeline="selfcheck.calibration", settings=FMNIST, knobs={"OMP_RUNTIME": "gnu"},
        variants=(Variant("a"), Variant("a-again"), Variant("slow-5pct", options={"slowdown": 0.05}),
                  Variant("slow-10pct", options={"slowdown": 0.10})),
        expect="a-again: 1.00 inside its interval about 95 % of runs; slow-*: below 1, the injected ratio "
               "inside the interval."),
)
