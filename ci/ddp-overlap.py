#!/usr/bin/env python3
"""DDP's overlap of communication with the backward pass, per backend: run under torchrun.

Usage: OMP_NUM_THREADS=1 python -m torch.distributed.run --standalone --nproc-per-node 2 ci/ddp-overlap.py
           [--steps 60] [--warmup 10] [--batch-size 32] [--model cnn_cifar10]

Chapter 9's CNN under DDP, one process group per backend (gloo, ccl) and a third arm without communication
(gloo's group with torch's no-op comm hook: the buckets are never reduced). The arms take turns step by step
(ABBA), the ranks lined up by a barrier before each backward. DDP's backward returns only when every
bucket's all-reduce has completed, so the backward time of an arm minus the no-communication arm's is the
communication the backward pass could not hide. Rank 0 prints each arm's median backward time and that
exposed part, the measure docs/cluster.md quotes for the ccl backend (synchronous, before its progress
thread, against asynchronous). Timings are reported, never asserted.
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks.debugging_hooks import noop_hook
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import accel_ccl  # noqa: E402  (registers ccl)

from pipelines.core.train import models  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--model", default="cnn_cifar10")
    args = parser.parse_args()
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
    groups = {"gloo": dist.group.WORLD, "ccl": dist.new_group(backend="ccl"), "none": dist.new_group(backend="gloo")}
    arms = {}
    for name, group in groups.items():
        torch.manual_seed(0)
        net = DDP(models.build(args.model, classes=10), process_group=group)
        if name == "none":
            net.register_comm_hook(None, noop_hook)
        arms[name] = (net, torch.optim.SGD(net.parameters(), lr=1e-3))
    torch.manual_seed(1 + dist.get_rank())
    x = torch.randn(args.batch_size, *models.spec(args.model).input_shape)
    y = torch.randint(0, 10, (args.batch_size,))
    times = {name: [] for name in arms}
    names = list(arms)
    for step in range(args.warmup + args.steps):
        for name in (names if step % 2 == 0 else names[::-1]):
            net, optimizer = arms[name]
            optimizer.zero_grad(set_to_none=True)
            loss = F.cross_entropy(net(x), y)
            dist.barrier()
            started = time.perf_counter()
            loss.backward()
            took = time.perf_counter() - started
            optimizer.step()
            if step >= args.warmup:
                times[name].append(took)
    if dist.get_rank() == 0:
        median = {name: statistics.median(values) * 1e3 for name, values in times.items()}
        print(f"ddp-overlap: {dist.get_world_size()} ranks x {torch.get_num_threads()} thread(s), {args.model}, "
              f"batch {args.batch_size}, {args.steps} steps per arm; ccl work: {getattr(accel_ccl, 'WORK', 'sync')}")
        for name in ("none", "gloo", "ccl"):
            exposed = "" if name == "none" else f", exposed communication {median[name] - median['none']:.2f} ms"
            print(f"  {name:5s} backward median {median[name]:.2f} ms{exposed}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
