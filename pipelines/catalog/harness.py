"""The harness's own entries: not a source's experiment, but what checks the method that judges them.

`harness-calibration` is ch2-baseline's workload (the book's CNN on Fashion-MNIST) in seven arms that share
one process: `a` (batch 64) and `a-again`, built exactly as `a` (an A/A pair, whose true ratio is 1); `big`
(batch 256) and `big-again`, an A/A pair unlike its neighbours (four times the step, another working set),
judged against `big`; and `a` slowed by a known 3 %, 5 % and 10 % of its step
(pipelines/selfcheck/calibration.py). `harness-calibration-compile` is the same workload eager beside
torch.compile's default mode, and a second compiled arm judged against the first: an A/A pair whose arms run
a graph inductor generated, beside an arm that does not. `ci/calibrate-intervals.py` runs either through the
whole stopping rule many times and reports coverage and detection (docs/timing.md).
"""

from pipelines.core.config.experiments import Experiment, Variant

FMNIST = {"model": "cnn_fmnist", "dataset": "fashion_mnist", "batch_size": 64, "epochs": 10,
          "lr": 1e-5, "weight_decay": 0.005}

EXPERIMENTS = (
    Experiment(
        id="harness-calibration", compares="A/A pairs at batch 64 and 256, arms slowed by 3, 5 and 10 %",
        reproduces="harness: calibration of the paired intervals (no published figure)",
        pipeline="selfcheck.calibration", settings=FMNIST, knobs={"OMP_RUNTIME": "gnu"},
        variants=(Variant("a"), Variant("a-again"), Variant("slow-3pct", options={"slowdown": 0.03}),
                  Variant("slow-5pct", options={"slowdown": 0.05}), Variant("slow-10pct", options={"slowdown": 0.10}),
                  Variant("big", settings={"batch_size": 256}),
                  Variant("big-again", settings={"batch_size": 256}, baseline="big")),
        expect="a-again and big-again: 1.00 inside their intervals about 95 % of runs; slow-*: below 1, the "
               "injected ratio inside the interval."),
    Experiment(
        id="harness-calibration-compile", compares="eager beside torch.compile, compiled against itself (A/A)",
        reproduces="harness: calibration of the paired intervals (no published figure)",
        pipeline="torch_compile", settings=FMNIST, knobs={"OMP_RUNTIME": "gnu"},
        variants=(Variant("eager", options={"compile": False}), Variant("compiled"),
                  Variant("compiled-again", baseline="compiled")),
        expect="compiled-again: 1.00 inside its interval about 95 % of runs."),
)
