#!/usr/bin/env python3
"""Harness overhead: one CNN workload through the shared loop and through a minimal hand-written loop.

Usage: [THREADS=N] python ci/harness-overhead.py [--steps 60] [--warmup 5] [--repeats 5]
           [--model cnn_cifar10] [--batch-size 64] [--device cpu] [--results-dir DIR]

Both arms run in this one process, interleaved (shared, hand, hand, shared, ...), on the same in-memory
synthetic batches, the same model initialisation and the same step (pipelines/core/steps.plain_step).
The hand-written loop is what a person would write without the harness: iterate, move, step, clock.
It prints shared/hand throughput and the overhead read against the goal (the shared loop within 2 %) by
its 95 % interval over the repeats (report_tables.overhead: a point value alone is never called within
the goal, and a negative one is said to be noise), and writes accel.result/1 records
(experiment "harness-overhead", variants shared-loop / hand-loop) that `accel report` shows in its own
section. Timings are reported, never asserted.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from pathlib import Path

# This checkout's package, not whichever one the interpreter has installed (an editable install of another
# clone would otherwise be measured, and its commit recorded).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from pipelines.core.errors import ConfigError  # noqa: E402

if __name__ == "__main__":  # before torch loads: libgomp would print its own warning for a bad value first
    from pipelines.core.config import check_environment

    try:
        check_environment()
    except ConfigError as exc:
        print(f"harness-overhead: error: {exc}", file=sys.stderr)
        sys.exit(2)  # a user mistake, as argparse's own refusals

import torch  # noqa: E402

from pipelines.core import data, envinfo, loop, models, results  # noqa: E402
from pipelines.core import report_stats as stats  # noqa: E402
from pipelines.core import report_tables as tables  # noqa: E402
from pipelines.core.config import resolve  # noqa: E402
from pipelines.core.options import NoOptions  # noqa: E402
from pipelines.core.steps import book_optimizer, plain_step  # noqa: E402

EXPERIMENT = "harness-overhead"
ARMS = ("shared-loop", "hand-loop")


def hand_loop(step, loader, warmup: int, steps: int, batch_size: int, device: torch.device) -> dict:
    """The minimal loop: no hooks, no per-step clocks, one clock around the measured steps."""
    batches = itertools.chain.from_iterable(itertools.repeat(loader))
    loss = None
    for _ in range(warmup):
        x, y = next(batches)
        loss = step(x.to(device), y.to(device))
    loop.synchronize(device)
    started = time.perf_counter()
    for _ in range(steps):
        x, y = next(batches)
        loss = step(x.to(device), y.to(device))
    loop.synchronize(device)
    elapsed = time.perf_counter() - started
    return {"train_s": elapsed, "measured_steps": steps, "warmup_steps": warmup,
            "throughput_samples_per_s": steps * batch_size / elapsed, "final_loss": float(loss.detach())}


def one(arm: str, cfg, ctx, loaders) -> dict:
    torch.manual_seed(cfg.seed)
    model = models.build(cfg.model, classes=cfg.head_classes).to(ctx.device)
    step = plain_step(model, book_optimizer(model, cfg))
    if arm == "shared-loop":
        return loop.train(loop.Trainable(model, step, count_flops=False), loaders, cfg, ctx)
    return hand_loop(step, loaders.train, cfg.warmup_steps, cfg.steps, cfg.batch_size, ctx.device)


def summary(shared_runs: list[float], hand_runs: list[float], steps: int) -> str:
    """The printed line: both loops' mean throughput, the ratio with its 95 % interval over the repeats (the
    report's own, so the two never disagree), and the overhead read against the goal by that interval."""
    shared, hand = statistics.fmean(shared_runs), statistics.fmean(hand_runs)
    ratio, interval = stats.ratio_interval(stats.whole_repeats(shared_runs), stats.whole_repeats(hand_runs))
    cost = tables.overhead(ratio, interval, min(len(shared_runs), len(hand_runs)))
    return (f"harness overhead: shared loop {shared:.1f} samples/s, hand-written loop {hand:.1f} samples/s, "
            f"ratio {ratio:.3f} {interval.text(3)}; overhead {cost.text}; "
            f"{len(shared_runs)} interleaved repeats of {steps} steps")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--model", default="cnn_cifar10")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--results-dir", type=Path, default=Path("results"))
    args = parser.parse_args(argv)
    if min(args.steps, args.repeats) < 1 or args.warmup < 0:
        parser.error("--steps and --repeats must be >= 1, --warmup >= 0")
    ctx = loop.RunContext(device=torch.device(args.device))
    configs = {arm: resolve({"model": args.model, "dataset": "synthetic", "batch_size": args.batch_size},
                            NoOptions(), {"steps": args.steps, "warmup_steps": args.warmup,
                                          "repeats": args.repeats, "device": args.device},
                            experiment=EXPERIMENT, pipeline="harness_overhead", variant=arm, scale="bench")
               for arm in ARMS}
    cfg = configs[ARMS[0]]
    loaders = data.loaders(cfg, models.spec(cfg.model).input_shape)
    run_id = results.new_run_id()
    records, throughput = [], {arm: [] for arm in ARMS}
    for repeat in range(args.repeats):
        for arm in (ARMS if repeat % 2 == 0 else ARMS[::-1]):
            metrics = one(arm, configs[arm], ctx, loaders)
            throughput[arm].append(metrics["throughput_samples_per_s"])
            config = {**configs[arm].to_record(), "data_source": loaders.source,
                      "train_samples": loaders.train_samples, "test_samples_available": loaders.test_samples}
            records.append(results.make_record(
                status="ok", run_id=run_id, config=config, repeat=repeat, metrics=metrics,
                dist={"launcher": "local", "backend": None, "world_size": 1, "nodes": 1},
                env=envinfo.fingerprint()))
    path = results.write(results.result_path(args.results_dir, EXPERIMENT, run_id), records)
    print(summary(throughput["shared-loop"], throughput["hand-loop"], args.steps) + f"; wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
