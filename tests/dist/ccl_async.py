"""Run by tests/dist/test_ccl.py under torchrun (2 or 3 ranks): what an asynchronous backend must get right,
against gloo in the same processes. Rank 0 prints `ok <check>` per check; a mismatch raises.

`python ccl_async.py` checks that a collective returns once posted, non-contiguous tensors, async_op=True work,
and DDP with a comm hook;
`python ccl_async.py timeout` lets rank 0 wait on a collective no other rank joins, and checks that it fails
within the group's timeout and that the broken group refuses the next call, each in one line."""

from __future__ import annotations

import datetime
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

import accel_ccl  # noqa: F401  (registers the ccl backend)


def ok(name: str) -> None:
    if dist.get_rank() == 0:
        print(f"ok {name}", flush=True)


def non_contiguous(gloo, world: int) -> None:
    rank = dist.get_rank()
    base = torch.arange(30, dtype=torch.float32).reshape(5, 6) * (rank + 1)
    a, b = base.t(), base.t().clone().t().t()  # a transposed view, and gloo's copy of it
    assert not a.is_contiguous()
    dist.all_reduce(a)
    dist.all_reduce(b, group=gloo)
    assert torch.equal(a, b) and torch.equal(base.t(), a)  # written back into the caller's view
    root = world - 1
    c = torch.zeros(6, 5).t() if rank != root else torch.arange(30.0).reshape(6, 5).t()
    dist.broadcast(c, src=root)
    assert torch.equal(c, torch.arange(30.0).reshape(6, 5).t())
    outs = [torch.empty(4, 3).t() for _ in range(world)]
    dist.all_gather(outs, torch.full((3, 4), float(rank)))
    assert all(torch.equal(out, torch.full((3, 4), float(r))) for r, out in enumerate(outs))
    ok("non-contiguous tensors written back")


def async_ops(gloo) -> None:
    rank = dist.get_rank()
    xs = [torch.full((1000 + i,), float(rank + i)) for i in range(8)]
    ys = [x.clone() for x in xs]
    works = [dist.all_reduce(x, async_op=True) for x in xs]  # all posted before any is waited on
    for y in ys:
        dist.all_reduce(y, group=gloo)
    futures = [w.get_future() for w in works]
    for work in works:
        assert work.wait()
        assert work.is_completed()
    assert all(torch.equal(x, y) for x, y in zip(xs, ys))
    assert all(torch.equal(f.value()[0], x) for f, x in zip(futures, xs))
    ok("async_op=True: 8 posted, then waited, equal to gloo's")


def returns_when_posted(world: int) -> None:
    """An all-reduce that rank 1 joins 2 s late: rank 0's call returns at once, incomplete, and its wait()
    ends once the peer joined (a synchronous backend would return only then)."""
    rank = dist.get_rank()
    x = torch.ones(10)
    if rank != 0:
        time.sleep(2)
    started = time.monotonic()
    work = dist.all_reduce(x, async_op=True)
    posted, pending = time.monotonic() - started, not work.is_completed()
    work.wait()
    if rank == 0:
        assert posted < 0.5 and pending, (posted, pending)
    assert torch.equal(x, torch.full((10,), float(world)))
    ok("a collective returns once posted, incomplete, and completes when its peers join")


def ddp_with_hook(gloo) -> None:
    """DDP over ccl with the bf16-compression comm hook against DDP over gloo with the same hook: the same
    gradients (each hook's all-reduce sums in bf16; both sums are within bf16 rounding of each other)."""
    def model():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))

    torch.manual_seed(100 + dist.get_rank())
    x, y = torch.randn(16, 32), torch.randint(0, 4, (16,))
    grads = []
    for group in (None, gloo):
        net = DDP(model(), process_group=group, bucket_cap_mb=0.001)  # several buckets in flight at once
        net.register_comm_hook(group, default_hooks.bf16_compress_hook)
        torch.nn.functional.cross_entropy(net(x), y).backward()
        grads.append([p.grad.clone() for p in net.parameters()])
    for ours, theirs in zip(*grads):
        tolerance = 2 * torch.finfo(torch.bfloat16).eps * max(1.0, float(theirs.abs().max()))
        assert float((ours - theirs).abs().max()) <= tolerance
    ok("DDP with a comm hook (bf16 compression) equals gloo's")


def timeout_check() -> None:
    rank = dist.get_rank()
    if rank == 0:
        started = time.monotonic()
        try:
            dist.all_reduce(torch.ones(10))
            raise AssertionError("an all-reduce no other rank joined completed")
        except dist.DistBackendError as exc:
            first = str(exc).splitlines()[0]
        took = time.monotonic() - started
        assert "did not complete within 3 s" in first and took < 30, (first, took)
        print(f"ok timed out in {took:.1f} s: {first}", flush=True)
        try:
            dist.all_reduce(torch.ones(10))
            raise AssertionError("a broken group ran a collective")
        except dist.DistBackendError as exc:
            refused = str(exc).splitlines()[0]
        assert "refused: this process group is broken" in refused, refused
        print(f"ok then refused: {refused}", flush=True)
    else:
        time.sleep(8)  # never joins rank 0's all-reduce
    sys.stdout.flush()
    os._exit(0)  # as Session.abort: oneCCL is not torn down under a collective that never completed


def main() -> None:
    seconds = 3 if sys.argv[1:] == ["timeout"] else 60
    dist.init_process_group("ccl", timeout=datetime.timedelta(seconds=seconds))
    if sys.argv[1:] == ["timeout"]:
        timeout_check()
    gloo = dist.new_group(backend="gloo")
    world = dist.get_world_size()
    returns_when_posted(world)
    non_contiguous(gloo, world)
    async_ops(gloo)
    ddp_with_hook(gloo)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
