"""Run by tests/dist/test_ccl.py under torchrun: every collective the ccl backend offers (backends/ccl), against
gloo's on the same tensors in the same processes. Rank 0 prints `ok <check>` per check; a mismatch raises."""

from __future__ import annotations

import datetime

import torch
import torch.distributed as dist

import accel_ccl  # noqa: F401  (registers the ccl backend)


def same_sum(ccl: torch.Tensor, gloo: torch.Tensor, magnitude: torch.Tensor, world: int) -> bool:
    """Two correct float all-reduces of `world` tensors may add in another order: each partial sum is rounded
    once, so they differ by at most (world - 1) roundings of the largest partial sum, which is at most the
    sum of magnitudes: |ccl - gloo| <= (world - 1) * eps * sum_r |x_r| (eps: the dtype's)."""
    bound = (world - 1) * torch.finfo(ccl.dtype).eps * magnitude
    return bool(((ccl.double() - gloo.double()).abs() <= bound).all())


def main() -> None:
    dist.init_process_group("ccl", timeout=datetime.timedelta(seconds=60))
    gloo = dist.new_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    assert dist.get_backend() == "ccl"
    generator = torch.Generator().manual_seed(1000 + rank)  # each rank its own values
    ok = (lambda name: print(f"ok {name}", flush=True)) if rank == 0 else (lambda name: None)

    for dtype in (torch.int32, torch.int64):
        x = torch.randint(-(2 ** 20), 2 ** 20, (4099,), generator=generator, dtype=dtype)
        for op in (dist.ReduceOp.SUM, dist.ReduceOp.MAX, dist.ReduceOp.MIN):
            a, b = x.clone(), x.clone()
            dist.all_reduce(a, op=op)
            dist.all_reduce(b, op=op, group=gloo)
            assert torch.equal(a, b), (dtype, op)
        ok(f"all_reduce {dtype} sum/max/min bit for bit")
    for dtype in (torch.float32, torch.bfloat16):
        x = (torch.randn(100_003, generator=generator) * 10).to(dtype)
        a, b, magnitude = x.clone(), x.clone(), x.double().abs()
        dist.all_reduce(a)
        dist.all_reduce(b, group=gloo)
        dist.all_reduce(magnitude, group=gloo)
        assert same_sum(a, b, magnitude, world), dtype
        ok(f"all_reduce {dtype} sum within {dtype} rounding")
    for root in range(world):
        for x in (torch.randint(0, 2 ** 40, (777,), generator=generator), torch.randn(3, 5, generator=generator)):
            a, b = x.clone(), x.clone()
            dist.broadcast(a, src=root)
            dist.broadcast(b, src=root, group=gloo)
            assert torch.equal(a, b)
    ok("broadcast from every root bit for bit")
    x = torch.randn(4, 6, generator=generator)
    ours, theirs = [torch.empty_like(x) for _ in range(world)], [torch.empty_like(x) for _ in range(world)]
    dist.all_gather(ours, x)
    dist.all_gather(theirs, x, group=gloo)
    assert all(torch.equal(a, b) for a, b in zip(ours, theirs))
    flat_ours, flat_theirs = torch.empty(world * 24), torch.empty(world * 24)
    dist.all_gather_into_tensor(flat_ours, x.flatten())
    dist.all_gather_into_tensor(flat_theirs, x.flatten(), group=gloo)
    assert torch.equal(flat_ours, flat_theirs) and torch.equal(flat_ours, torch.cat([t.flatten() for t in ours]))
    ok("all_gather and all_gather_into_tensor bit for bit")
    dist.barrier()
    ok("barrier")
    for call, needle in ((lambda: dist.all_reduce(torch.ones(3), op=dist.ReduceOp.AVG), "ReduceOp.AVG"),
                         (lambda: dist.all_reduce(torch.ones(3, dtype=torch.bool)), "dtype Bool")):
        try:
            call()
        except RuntimeError as error:
            assert f"ccl backend: allreduce does not support {needle}" in str(error), error
        else:
            raise AssertionError(f"{needle} was accepted")
    ok("an unsupported op or dtype is named")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
