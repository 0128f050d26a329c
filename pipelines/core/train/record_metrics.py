"""The record's metrics of one arm's training: a loop.Training's totals turned into the numbers a record
holds.

Step times give the median and the 90th percentile (`percentile`, linear interpolation as numpy's default),
the timed windows' wall time the throughput and the achieved FLOP/s, the per-step losses the binned loss
curve (train/step_losses.py), the page faults their per-step rate and the interleaved blocks their fault bursts
(train/host_noise.py). A shared process (arms interleaved) leaves out what is not one arm's alone: epoch wall
times and the process's memory peaks.
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Sequence

import torch

from pipelines.core.train import memory
from pipelines.core.train.host_noise import fault_bursts
from pipelines.core.train.step_losses import loss_curve


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100), as numpy's default."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    position = (len(ordered) - 1) * q / 100
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def arm_metrics(run, shared: bool = False) -> dict[str, Any]:
    """The metrics of `run`, a loop.Training whose marks are settled, whose losses are on the host and whose
    hooks have ended. `shared`: other arms ran between this arm's blocks, so epoch wall times and the
    process's memory peak are not this arm's and are left out. Blocks, when the arm ran any, are kept with
    their switch time and dropped steps."""
    cfg, ctx, step_times, train_s = run.cfg, run.ctx, run.step_times, run.train_s
    final_loss = float(run.loss.detach())
    flops, measured = run.flops, len(step_times)
    epoch_times = [] if shared else run.epoch_times
    metrics = {
        "warmup_s": run.warmup_s,
        "warmup_steps": min(run.done, cfg.warmup_steps),
        "train_s": train_s,
        "measured_steps": measured,
        "step_times_s": [round(s, 7) for s in step_times],
        # the mean samples of a timed step (a last partial batch holds fewer), times the ranks
        "samples_per_step": (run.samples / measured if measured else cfg.batch_size) * ctx.world_size,
        "step_time_ms_median": statistics.median(step_times) * 1e3 if step_times else None,
        "step_time_ms_p90": percentile(step_times, 90) * 1e3 if step_times else None,
        "data_wait_s": run.data_wait,
        "compute_s": run.compute,
        "throughput_samples_per_s": run.samples * ctx.world_size / train_s if step_times and train_s > 0 else None,
        "final_loss": final_loss if math.isfinite(final_loss) else None,
        "epochs_completed": len(run.epoch_times),
        "epoch_times_s": epoch_times,
        "epoch_last_loss": run.epoch_losses,
        "loss_curve": loss_curve(torch.cat(run.loss_chunks).numpy()),
        "first_epoch_s": epoch_times[0] if epoch_times else None,
        "median_epoch_s": statistics.median(epoch_times[1:]) if len(epoch_times) > 1 else None,
        "flops_per_step": flops,
        "achieved_tflops": flops * measured * ctx.world_size / train_s / 1e12
        if flops and step_times and train_s > 0 else None,
        "page_faults_minor_per_step": run.faults[0] / measured if measured else None,
        "page_faults_major_per_step": run.faults[1] / measured if measured else None,
        "gc_paused_in_timed_steps": run.gc_paused,
    }
    if run.blocks:
        metrics.update(blocks=run.blocks, switch_s=run.switch_s, discarded_steps=run.discarded,
                       block_steps=run.block_steps, cycles_per_period=run.cycles_per_period,
                       recompiled_blocks=[b[0] for b in run.blocks if b[5]],
                       fault_burst_blocks=fault_bursts(run.blocks))
    if not shared:
        metrics.update(memory.process_peaks(run.device))
    if run.untimed_s:  # checkpoint saves, with the timed window paused (loop.Hooks.timed)
        metrics["checkpoint_save_s"] = run.untimed_s
    if run.start_epoch or run.start_batch:  # resumed from a checkpoint: what an earlier process trained
        metrics["start_epoch"] = run.start_epoch
        metrics["start_batch"] = run.start_batch  # batches of that epoch (a mid-epoch checkpoint)
    return metrics
