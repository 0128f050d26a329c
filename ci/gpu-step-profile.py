#!/usr/bin/env python3
"""Where a training step's time goes on a GPU: host (Python and kernel launches) or the GPU's kernels.

The talk's step 04 pair (ViT-B/16, Adam, true fp32 against bf16-mixed) at its batch of 16 and at a larger one,
on one synthetic batch kept on the GPU, so that data loading is out of the picture (the loop's records give
the data wait of the real runs). Per arm: warm-up steps, then timed steps (wall clock between two
synchronizations, and CUDA events per step), then a few steps under torch.profiler, from which the kernels'
own time per step and the number of kernel launches per step are read; `gpu_busy_fraction` is that kernel time
over the unprofiled steps' wall time, so a value a little above 1 is the profiler's own cost and means the
GPU never waited. A step whose kernels take a small
part of its wall time is bound by the host: the GPU waits for launches, and a faster GPU or a cheaper number
format cannot shorten it. FLOPs per step come from torch's FLOP counter on one step of the same model.

Usage: python ci/gpu-step-profile.py [--batch-sizes 16,128] [--steps 20] [--profile-steps 5] [--peak FILE]
                                     [--out FILE.json]
--peak takes ci/matmul-peak.py's JSON, to state each arm's rate as a fraction of the measured bf16 and fp32
peaks. Needs a CUDA device (one line and exit 2 without one).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

ARMS = {"fp32-highest": None, "bf16-mixed": torch.bfloat16}  # the talk's step 03 and step 04


def one_arm(model_name: str, batch: int, dtype: torch.dtype | None, warmup: int, steps: int,
            profile_steps: int, device: str) -> dict:
    from torch.profiler import ProfilerActivity, profile
    from torch.utils.flop_counter import FlopCounterMode

    from pipelines.core.train import models

    torch.manual_seed(0)
    gpu = device == "cuda"
    sync = torch.cuda.synchronize if gpu else (lambda: None)
    model = models.build(model_name, classes=10).to(device).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-5)  # book_optimizer's, at the talk's lr
    x = torch.randn(batch, 3, 224, 224, device=device)
    y = torch.randint(0, 10, (batch,), device=device)

    def step() -> torch.Tensor:
        with torch.autocast(device, dtype=dtype or torch.float32, enabled=dtype is not None):
            loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss

    with FlopCounterMode(display=False) as counter:
        step()
    flops = counter.get_total_flops()
    for _ in range(warmup):
        step()
    sync()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) if gpu else None
              for _ in range(steps)]
    began = time.perf_counter()
    for pair in events:
        pair and pair[0].record()
        step()
        pair and pair[1].record()
    sync()
    wall_ms = (time.perf_counter() - began) * 1e3 / steps
    event_ms = [start.elapsed_time(end) for start, end in events] if gpu else [wall_ms]
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if gpu else [])) as prof:
        for _ in range(profile_steps):
            step()
        sync()
    # device-side events (kernels, copies, memsets) of one stream: their spans add up to the GPU's busy time
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    kernel_us = sum(e.time_range.elapsed_us() for e in kernels)
    loss = float(step().item())
    return {"batch": batch, "wall_ms_per_step": round(wall_ms, 3),
            "event_ms_per_step_median": round(statistics.median(event_ms), 3),
            "kernel_ms_per_step": round(kernel_us / 1e3 / profile_steps, 3),
            "kernels_per_step": round(len(kernels) / profile_steps, 1),
            "gpu_busy_fraction": round(kernel_us / 1e3 / profile_steps / wall_ms, 3),
            "flops_per_step": flops, "achieved_tflops": round(flops / (wall_ms / 1e3) / 1e12, 1),
            "samples_per_s": round(batch / (wall_ms / 1e3), 1), "final_loss": round(loss, 4)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="vit_b_16")
    parser.add_argument("--batch-sizes", default="16,128", help="comma-separated (default 16,128; 16 is the talk's)")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--profile-steps", type=int, default=5)
    parser.add_argument("--peak", default=None, help="ci/matmul-peak.py's JSON file")
    parser.add_argument("--out", default=None, help="write the JSON here as well as to stdout")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                        help="cpu exercises the script's code path only (no kernel figures; tests)")
    args = parser.parse_args()
    try:
        sizes = [int(b) for b in args.batch_sizes.split(",")]
    except ValueError:
        print(f"gpu-step-profile: error: --batch-sizes {args.batch_sizes!r} is not a comma-separated list of "
              "whole numbers (e.g. --batch-sizes 16,128)", file=sys.stderr)
        return 2
    if args.device == "cuda" and not torch.cuda.is_available():
        print("gpu-step-profile: error: no CUDA device; this profiles GPU steps (run it on a GPU machine)",
              file=sys.stderr)
        return 2
    peak = {}
    if args.peak and Path(args.peak).is_file():
        peak = json.loads(Path(args.peak).read_text())["tflops"]
    elif args.peak:
        print(f"gpu-step-profile: no {args.peak}: rates are not stated as fractions of a peak", file=sys.stderr)
    torch.set_float32_matmul_precision("highest")  # step 03's true fp32; bf16-mixed's matmuls are bf16 anyway
    result = {"device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu", "torch": torch.__version__,
              "model": args.model, "synthetic_batch_on_gpu": True, "arms": []}
    for batch in sizes:
        for name, dtype in ARMS.items():
            row = {"arm": name, **one_arm(args.model, batch, dtype, args.warmup, args.steps, args.profile_steps,
                                          args.device)}
            for unit in ("bf16", "fp32"):
                if unit in peak:
                    row[f"fraction_of_{unit}_peak"] = round(row["achieved_tflops"] / peak[unit]["median"], 3)
            result["arms"].append(row)
            if args.device == "cuda":  # the arm's model and optimizer are gone with one_arm's frame
                torch.cuda.empty_cache()
            print(json.dumps(row), flush=True)
    for batch in sizes:
        rows = {r["arm"]: r for r in result["arms"] if r["batch"] == batch}
        result[f"bf16_over_fp32_batch{batch}"] = round(rows["fp32-highest"]["wall_ms_per_step"]
                                                      / rows["bf16-mixed"]["wall_ms_per_step"], 3)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
