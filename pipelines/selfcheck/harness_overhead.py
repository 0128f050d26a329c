"""The harness's own cost on a fixed workload: one CNN through the shared loop (`loop.train`) and through a
minimal hand-written loop, in one process, interleaved (shared, hand, hand, shared, ...), on the same in-memory
synthetic batches, the same model initialisation and the same step (train/steps.py plain_step).

The hand-written loop is what a person would write without the harness: iterate, move, step, clock. Its
records (experiment "harness-overhead", variants shared-loop / hand-loop) are read by the report's Harness
overhead section (report/tables.py `harness`). Its reading is a one-sided goal (the shared loop within 2 % of
the hand loop, by the overhead's 95 % interval), not a published figure's band, so this measurement is no
catalog entry. ci/harness-overhead.py is its command line; the book-scale form is selfcheck/book_loop.py.
"""

from __future__ import annotations

import itertools
import statistics
import time

import torch

from pipelines.core.config.options import NoOptions
from pipelines.core.config.runconfig import resolve
from pipelines.core.data import datasets
from pipelines.core.record import envinfo, results
from pipelines.core.stats.bases import harness
from pipelines.core.stats import intervals
from pipelines.core.train import clocks, loop, models
from pipelines.core.train.steps import book_optimizer, plain_step

EXPERIMENT = harness.ID
ARMS = ("shared-loop", "hand-loop")
LOCAL = {"launcher": "local", "backend": None, "world_size": 1, "nodes": 1}  # every record's `dist`


def hand_loop(step, loader, warmup: int, steps: int, batch_size: int, device: torch.device) -> dict:
    """The minimal loop: no hooks, no per-step clocks, one clock around the measured steps."""
    batches = itertools.chain.from_iterable(itertools.repeat(loader))
    loss = None
    for _ in range(warmup):
        x, y = next(batches)
        loss = step(x.to(device), y.to(device))
    clocks.synchronize(device)
    started = time.perf_counter()
    for _ in range(steps):
        x, y = next(batches)
        loss = step(x.to(device), y.to(device))
    clocks.synchronize(device)
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


def result_line(shared_runs: list[float], hand_runs: list[float], steps: int) -> str:
    """The printed line: both loops' mean throughput, the ratio with its 95 % interval over the repeats (the
    report's own, so the two never disagree), and the overhead read against the goal by that interval."""
    shared, hand = statistics.fmean(shared_runs), statistics.fmean(hand_runs)
    ratio, interval = intervals.ratio_interval(intervals.whole_repeats(shared_runs),
                                               intervals.whole_repeats(hand_runs))
    cost = harness.overhead(ratio, interval, min(len(shared_runs), len(hand_runs)))
    return (f"harness overhead: shared loop {shared:.1f} samples/s, hand-written loop {hand:.1f} samples/s, "
            f"ratio {ratio:.3f} {interval.text(3)}; overhead {cost.text}; "
            f"{len(shared_runs)} interleaved repeats of {steps} steps")


def main_bench(args) -> int:
    ctx = loop.RunContext(device=torch.device(args.device))
    configs = {arm: resolve({"model": args.model, "dataset": "synthetic", "batch_size": args.batch_size},
                            NoOptions(), {"steps": args.steps, "warmup_steps": args.warmup,
                                          "repeats": args.repeats, "device": args.device},
                            experiment=EXPERIMENT, pipeline="harness_overhead", variant=arm, scale="bench")
               for arm in ARMS}
    cfg = configs[ARMS[0]]
    loaders = datasets.loaders(cfg, models.spec(cfg.model).input_shape)
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
                dist=LOCAL,
                env=envinfo.fingerprint()))
    path = results.write(results.result_path(args.results_dir, EXPERIMENT, run_id), records)
    print(result_line(throughput["shared-loop"], throughput["hand-loop"], args.steps) + f"; wrote {path}")
    return 0
