"""The harness against the book's own chapter-2 loop, whole epochs on Fashion-MNIST (`ci/harness-overhead.py
--scale book`).

The shared arm is what `accel run ch2-baseline --scale book --epochs N` runs (the catalog entry's settings, its
pipeline's setup, the loaders of core/data/datasets.py, the loop with the runner's progress hook; its record's
train_s), the other arm the book's chapter-2 code as it runs (`book_loop`: its own DataLoader with ToTensor over
the same checked Fashion-MNIST, its SubsetRandomSampler over indices[split:] of np.random.seed(42)'s shuffle,
Adam, the zero_grad / forward / loss / backward / step loop, time.time() around the epochs). Each repeat builds
its data and model afresh, seeded as the runner seeds a repeat, and the arms alternate (AB BA AB ...). It prints
the time ratio per adjacent pair (median and range: "project / book"), the throughput ratio with its 95 %
interval read against the goal (as the bench form, selfcheck/harness_overhead.py), and each arm's run-to-run
spread (coefficient of variation of its training time: the goal is no wider than the book loop's). Records
carry scale "book", the dataset and epochs in their config, and per arm the steps and samples it ran, its CPU
time and minor page faults per step (a host-side cost that varies between processes, so a spread can be
traced to it).
"""

from __future__ import annotations

import dataclasses
import resource
import statistics
import time
from pathlib import Path

import torch  # noqa: I001  (before numpy, as core/harness/arms.py: libgomp binds threads first)
import numpy as np
from torch import nn
from torch.utils.data import DataLoader, SubsetRandomSampler
from torchvision import transforms

from pipelines.core.config import experiments
from pipelines.core.data import datasets, files
from pipelines.core.errors import ConfigError
from pipelines.core.harness import arms, plan as planning, refusals
from pipelines.core.harness.pipeline import Preparation, warmup_config
from pipelines.core.record import envinfo, results
from pipelines.core.train import loop, memory, models, progress
from pipelines.selfcheck.harness_overhead import ARMS, EXPERIMENT, LOCAL, result_line

BOOK_EXPERIMENT = "ch2-baseline"  # the entry whose `accel run --scale book` is set against the book's loop
BOOK_DATASETS = ("fashion_mnist",)  # the book's chapter-2 loop is written for Fashion-MNIST
BOOK_SPLIT_SEED, BOOK_VALID_SIZE = 42, 0.1  # its build_data_loader: np.random.seed(42), valid_size=0.1


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


def book_result_line(train_s: dict[str, list[float]], throughput: dict[str, list[float]], epochs: int,
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
            + result_line(throughput["shared-loop"], throughput["hand-loop"], steps).replace(
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
                dist=LOCAL,
                env=envinfo.fingerprint()))
            path = results.write(results.result_path(args.results_dir, EXPERIMENT, run_id), records)
    print(book_result_line(train_s, throughput, cfg.epochs, steps) + f"; wrote {path}")
    return 0
