#!/usr/bin/env python3
"""Measured dense matmul peak of this GPU: the denominator of the reports' "fraction of peak" figures.

Usage: python ci/matmul-peak.py [--size 8192] [--warmup 3] [--repeats 20] [--out FILE.json]

Why measured and not the datasheet: clocks, power caps and the driver differ per machine, and a fraction of
a datasheet peak that this card never reaches says little. One square product per dtype (bf16, fp16, and
fp32 with TF32 off and on), timed with CUDA events after warm-up calls; the best and median TFLOP/s of the
timed calls are written. The inputs are random (zeros run faster on some GPUs).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import torch


def timed_products(size: int, dtype: torch.dtype, warmup: int, repeats: int) -> list[float]:
    """TFLOP/s of each timed size x size x size product."""
    a = torch.randn(size, size, device="cuda", dtype=dtype)
    b = torch.randn(size, size, device="cuda", dtype=dtype)
    for _ in range(warmup):
        torch.mm(a, b)
    torch.cuda.synchronize()
    rates = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.mm(a, b)
        end.record()
        end.synchronize()
        rates.append(2 * size**3 / (start.elapsed_time(end) / 1e3) / 1e12)
    return rates


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=8192)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--out", default=None, help="write the JSON here as well as to stdout")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("matmul-peak: error: no CUDA device; this measures a GPU", file=sys.stderr)
        return 2
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "size": args.size,
              "timed_calls": args.repeats, "tflops": {}}
    arms = (("bf16", torch.bfloat16, False), ("fp16", torch.float16, False),
            ("fp32", torch.float32, False), ("tf32", torch.float32, True))
    for name, dtype, tf32 in arms:
        torch.backends.cuda.matmul.allow_tf32 = tf32
        rates = timed_products(args.size, dtype, args.warmup, args.repeats)
        result["tflops"][name] = {"best": round(max(rates), 1), "median": round(statistics.median(rates), 1)}
    torch.backends.cuda.matmul.allow_tf32 = False
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as handle:
            handle.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
