#!/usr/bin/env python3
"""Harness overhead: one CNN workload through the shared loop and through a minimal hand-written loop.

Usage: [THREADS=N] python ci/harness-overhead.py [--steps 60] [--warmup 5] [--repeats 5]
           [--model cnn_cifar10] [--batch-size 64] [--device cpu] [--results-dir DIR]
       python ci/harness-overhead.py --scale book [--epochs 2] [--repeats 4] [--experiment ch2-baseline]
           [--dataset fashion_mnist] [--data-root data] [--results-dir DIR]

Both arms run in this one process, interleaved (shared, hand, hand, shared, ...), on the same in-memory
synthetic batches, the same model initialisation and the same step (pipelines/core/steps.plain_step).
The hand-written loop is what a person would write without the harness: iterate, move, step, clock.
It prints shared/hand throughput and the overhead read against the goal (the shared loop within 2 %) by
its 95 % interval over the repeats (report_tables.overhead: a point value alone is never called within
the goal, and a negative one is said to be noise), and writes result records (record/results.py)
(experiment "harness-overhead", variants shared-loop / hand-loop) that `accel report` shows in its own
section. Timings are reported, never asserted.

`--scale book` compares whole epochs on a data set instead: the shared arm is what `accel run
ch2-baseline --scale book --epochs N` runs (the catalog entry's settings, its pipeline's setup, the loaders of
pipelines/core/data/datasets.py, the loop with the runner's progress hook; its record's train_s), the other arm the
book's chapter-2 code as it runs (`book_loop`: its own DataLoader with ToTensor over the same checked
Fashion-MNIST, its SubsetRandomSampler over indices[split:] of np.random.seed(42)'s shuffle, Adam, the
zero_grad / forward / loss / backward / step loop, time.time() around the epochs). Each repeat builds its
data and model afresh, seeded as the runner seeds a repeat, and the arms alternate (AB BA AB ...). It prints
the time ratio per adjacent pair (median and range: the issue's "project / book"), the throughput ratio with
its 95 % interval read against the goal (as the bench mode), and each arm's run-to-run spread (coefficient of
variation of its training time: the goal is no wider than the book loop's). Records carry scale "book",
the dataset and epochs in their config, and per arm the steps and samples it ran, its CPU time and minor
page faults per step (a host-side cost that varies between processes, so a spread can be traced to it).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import resource
import statistics
import sys
import time
from pathlib import Path

# This checkout's package, not whichever one the interpreter has installed (an editable install of another
# clone would otherwise be measured, and its commit recorded).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from pipelines.core.errors import ConfigError  # noqa: E402

if __name__ == "__main__":  # before torch loads: libgomp would print its own warning for a bad value first
    from pipelines.core.config.runconfig import check_environment

    try:
        check_environment()
    except ConfigError as exc:
        print(f"harness-overhead: error: {exc}", file=sys.stderr)
        sys.exit(2)  # a user mistake, as argparse's own refusals

import torch  # noqa: E402, I001  (before numpy, as pipelines/core/harness/arms.py: libgomp binds threads first)
import numpy as np  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, SubsetRandomSampler  # noqa: E402
from torchvision import transforms  # noqa: E402

from pipelines.core.data import datasets, files
from pipelines.core.record import envinfo, results
from pipelines.core.harness import arms, plan as planning, refusals
from pipelines.core.config import experiments
from pipelines.core.train import clocks, loop, memory, models, progress
from pipelines.core.stats import intervals
from pipelines.core.report import tables as tables
from pipelines.core.config.runconfig import resolve  # noqa: E402
from pipelines.core.config.options import NoOptions  # noqa: E402
from pipelines.core.harness.pipeline import Preparation, warmup_config  # noqa: E402
from pipelines.core.train.steps import book_optimizer, plain_step  # noqa: E402

EXPERIMENT = "harness-overhead"
ARMS = ("shared-loop", "hand-loop")
BOOK_EXPERIMENT = "ch2-baseline"  # the entry whose `accel run --scale book` is set against the book's loop
BOOK_DATASETS = ("fashion_mnist",)  # the book's chapter-2 loop is written for Fashion-MNIST
BOOK_SPLIT_SEED, BOOK_VALID_SIZE = 42, 0.1  # its build_data_loader: np.random.seed(42), valid_size=0.1


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


def summary(shared_runs: list[float], hand_runs: list[float], steps: int) -> str:
    """The printed line: both loops' mean throughput, the ratio with its 95 % interval over the repeats (the
    report's own, so the two never disagree), and the overhead read against the goal by that interval."""
    shared, hand = statistics.fmean(shared_runs), statistics.fmean(hand_runs)
    ratio, interval = intervals.ratio_interval(intervals.whole_repeats(shared_runs),
                                               intervals.whole_repeats(hand_runs))
    cost = tables.overhead(ratio, interval, min(len(shared_runs), len(hand_runs)))
    return (f"harness overhead: shared loop {shared:.1f} samples/s, hand-written loop {hand:.1f} samples/s, "
            f"ratio {ratio:.3f} {interval.text(3)}; overhead {cost.text}; "
            f"{len(shared_runs)} interleaved repeats of {steps} steps")


# ----- book scale: whole epochs on a data set, the shared loop against the book's own chapter-2 loop -----

def book_train_indices(num_train: int) -> list[int]:
    """The book's build_data_loader, as written: a list of indices shuffled in place after np.random.seed(42),
    the first valid_size (10 %) kept for validation, training on indices[split:]."""
    indices = list(range(num_train))
    np.random.seed(BOOK_SPLIT_SEED)
    np.random.shuffle(indices)
    split = int(np.floor(BOOK_VALID_SIZE * num_train))
    return indices[split:]


def book_loop(model: nn.Module, cfg, epochs: int) -> dict:
    """The book's chapter-2 training as it runs: its DataLoader (ToTensor, SubsetRandomSampler, batch size),
    Adam with its learning rate and weight decay, zero_grad / forward / loss / backward / step, one clock
    around the epochs (the book's time.time(); perf_counter here: monotonic, the same region). The dataset is
    torchvision's FashionMNIST class (item access and transform are its own) over the arrays of the checked
    reader, as the shared arm's: torchvision's constructor would torch.load a processed/ cache when one
    exists. Only `steps += 1; samples += ...` is added (so both arms' work can be checked equal), a few
    hundred nanoseconds a step."""
    dataset = datasets.CheckedFashionMNIST(Path(cfg.data_root), True, transforms.ToTensor())
    train_loader = DataLoader(dataset, batch_size=cfg.batch_size, sampler=SubsetRandomSampler(
        book_train_indices(len(dataset))))
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    steps = samples = 0
    start = time.perf_counter()
    for _ in range(epochs):
        model.train()
        for images, labels in train_loader:
            optimizer.zero_grad()
            out = model(images)
            loss = criterion(out, labels)
            loss.backward()
            optimizer.step()
            steps += 1
            samples += len(labels)
    train_s = time.perf_counter() - start  # the book's loop runs on the CPU: nothing to synchronize
    return {"train_s": train_s, "measured_steps": steps, "samples_seen": samples, "epochs_completed": epochs,
            "samples_per_step": cfg.batch_size, "throughput_samples_per_s": steps * cfg.batch_size / train_s,
            "final_loss": float(loss.detach()), "warmup_steps": 0}


def book_shared(pipeline, cfg, ctx, label: str) -> dict:
    """What `accel run <entry> --scale book` runs for one repeat, up to the test pass (timed by neither arm):
    the loaders, the pipeline's setup and before_training, the loop with the runner's progress hook."""
    loaders = datasets.loaders(cfg, datasets.input_shape(cfg))
    trainable = pipeline.setup(cfg, ctx)
    prep = Preparation(loaders, ctx, lambda t: loop.train(t, loaders, warmup_config(cfg), ctx))
    trainable = pipeline.before_training(trainable, prep, cfg, ctx)
    memory.reset_peak(ctx.device)
    counter = progress.RepeatProgress(label, cfg.epochs, None, progress.OFF)
    metrics = loop.train(trainable, loaders, cfg, ctx, hooks=[counter])
    metrics["samples_seen"] = len(loaders.train.sampler) * metrics["epochs_completed"]
    metrics["steps_counted"] = counter.how_far()["steps_done"]
    return metrics


def host_costs() -> tuple[float, int]:
    """(CPU seconds of this process, minor page faults so far)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime, usage.ru_minflt


def book_one(arm: str, pipeline, cfg, ctx, repeat: int) -> dict:
    arms.seed_everything(None if cfg.seed is None else cfg.seed + repeat)  # as the runner seeds a repeat
    cpu0, faults0 = host_costs()
    if arm == "shared-loop":
        metrics = book_shared(pipeline, cfg, ctx, f"{EXPERIMENT} [{arm}] #{repeat}")
    else:
        metrics = book_loop(models.build(cfg.model, classes=cfg.head_classes), cfg, cfg.epochs)
    cpu1, faults1 = host_costs()
    steps = metrics["measured_steps"] or 1
    # around the whole call: the shared arm's includes its untimed FLOP count (one step's work) and loaders
    metrics.update(cpu_s=cpu1 - cpu0, minor_faults_per_step=(faults1 - faults0) / steps)
    return metrics


def spread_pct(values: list[float]) -> float | None:
    """Run-to-run spread: the coefficient of variation (sample standard deviation / mean), in %."""
    return 100 * statistics.stdev(values) / statistics.fmean(values) if len(values) > 1 else None


def book_summary(train_s: dict[str, list[float]], throughput: dict[str, list[float]], epochs: int,
                 steps: int) -> str:
    """The issue's reading (shared / book training time per adjacent pair: median, range), the report's
    reading (throughput ratio, 95 % interval, overhead against the goal) and each arm's spread."""
    pairs = [s / h for s, h in zip(train_s["shared-loop"], train_s["hand-loop"])]
    spreads = {arm: spread_pct(values) for arm, values in train_s.items()}
    spread = ", ".join(f"{name} {'n/a' if spreads[arm] is None else f'{spreads[arm]:.1f} %'}"
                       for arm, name in (("shared-loop", "shared"), ("hand-loop", "book")))
    return (f"book scale ({epochs} epoch(s), {steps} steps a repeat): training time shared / book loop, per "
            f"pair: median {statistics.median(pairs):.3f}, range {min(pairs):.3f}-{max(pairs):.3f}; "
            f"spread (CV of training time): {spread}\n"
            + summary(throughput["shared-loop"], throughput["hand-loop"], steps).replace(
                "hand-written loop", "book loop"))


def book_configs(args) -> tuple[object, dict]:
    """The entry's `accel run --scale book` config (its settings, the user's overrides) for the shared arm's
    pipeline, and one record config per arm (experiment harness-overhead, variant = arm)."""
    entry = experiments.get(args.experiment)
    overrides = {"epochs": args.epochs, "data_root": args.data_root, "device": args.device,
                 "results_dir": args.results_dir, "dataset": args.dataset, "model": args.model,
                 "batch_size": args.batch_size}
    the_plan = planning.plan(entry, "book", overrides, {})
    refusals.preflight(the_plan, world_size=1, rank=0)  # accel run's refusals: data, runtime, results folder
    cfg = the_plan.configs[0]
    if cfg.dataset not in BOOK_DATASETS:
        raise ConfigError(f"--scale book runs the book's Fashion-MNIST loop; {args.experiment} trains on "
                          f"{cfg.dataset}: pass --dataset fashion_mnist")
    configs = {arm: dataclasses.replace(cfg, experiment=EXPERIMENT, pipeline="harness_overhead", variant=arm)
               for arm in ARMS}
    return the_plan, configs


def main_book(args) -> int:
    the_plan, configs = book_configs(args)
    pipeline, cfg = the_plan.pipeline, the_plan.configs[0]
    ctx = loop.RunContext(device=torch.device(cfg.device))
    run_id = results.new_run_id()
    records, train_s, throughput = [], {arm: [] for arm in ARMS}, {arm: [] for arm in ARMS}
    steps = None
    for repeat in range(args.repeats):
        for arm in (ARMS if repeat % 2 == 0 else ARMS[::-1]):
            metrics = book_one(arm, pipeline, cfg, ctx, repeat)
            steps = metrics["measured_steps"]
            train_s[arm].append(metrics["train_s"])
            throughput[arm].append(metrics["throughput_samples_per_s"])
            config = {**configs[arm].to_record(), "data_source": files.source(cfg.dataset, cfg.data_root),
                      "train_samples": metrics["samples_seen"] // cfg.epochs,
                      "harness_mode": "book", "book_experiment": args.experiment,
                      "hand_loop": "the book's chapter-2 DataLoader loop, time.time() around the epochs"}
            records.append(results.make_record(
                status="ok", run_id=run_id, config=config, repeat=repeat, metrics=metrics,
                dist={"launcher": "local", "backend": None, "world_size": 1, "nodes": 1},
                env=envinfo.fingerprint()))
            path = results.write(results.result_path(args.results_dir, EXPERIMENT, run_id), records)
    print(book_summary(train_s, throughput, cfg.epochs, steps) + f"; wrote {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", choices=("bench", "book"), default="bench",
                        help="bench: fixed steps on synthetic batches; book: whole epochs on a data set "
                             "against the book's own loop")
    parser.add_argument("--steps", type=int, default=None, help="bench: timed steps (default 60)")
    parser.add_argument("--warmup", type=int, default=None, help="bench: warm-up steps (default 5)")
    parser.add_argument("--epochs", type=int, default=None, help="book: epochs a repeat (default 1)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--model", default=None, help="default: cnn_cifar10 (bench), the entry's (book)")
    parser.add_argument("--batch-size", type=int, default=None,
                        help="default: 64 (bench), the entry's (book)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--experiment", default=BOOK_EXPERIMENT,
                        help="book: the catalog entry the shared arm runs as accel run does")
    parser.add_argument("--dataset", default=None, help="book: default the entry's (fashion_mnist)")
    parser.add_argument("--data-root", type=Path, default=Path("data"), help="book: the data sets' folder")
    parser.add_argument("--results-dir", type=Path, default=Path("results"))
    args = parser.parse_args(argv)
    if args.scale == "book":
        if args.steps is not None or args.warmup is not None:
            parser.error("--steps and --warmup are bench settings; book scale runs whole --epochs")
        if args.device != "cpu":
            parser.error("--scale book runs the book's chapter-2 loop, which is CPU code: pass --device cpu")
        args.epochs = 1 if args.epochs is None else args.epochs
        if min(args.epochs, args.repeats) < 1:
            parser.error("--epochs and --repeats must be >= 1")
        try:
            return main_book(args)
        except (ConfigError, experiments.UnknownExperiment) as exc:  # a user mistake: one line, as argparse's
            print(f"harness-overhead: error: {exc.args[0] if exc.args else exc}", file=sys.stderr)
            return 2
    if args.epochs is not None or args.dataset is not None:
        parser.error("--epochs and --dataset are book settings; pass --scale book")
    args.steps = 60 if args.steps is None else args.steps
    args.warmup = 5 if args.warmup is None else args.warmup
    args.model = args.model or "cnn_cifar10"
    args.batch_size = args.batch_size or 64
    if min(args.steps, args.repeats) < 1 or args.warmup < 0:
        parser.error("--steps and --repeats must be >= 1, --warmup >= 0")
    return main_bench(args)


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
                dist={"launcher": "local", "backend": None, "world_size": 1, "nodes": 1},
                env=envinfo.fingerprint()))
    path = results.write(results.result_path(args.results_dir, EXPERIMENT, run_id), records)
    print(summary(throughput["shared-loop"], throughput["hand-loop"], args.steps) + f"; wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
