"""The machine card: what this machine can do, measured in a second or two, so that a ratio can be explained.

A verdict says how an arm compares with its published figure; the card says what the machine offered the
arms, in the quantities a step's time is made of:

- `gemm_gflops`: the matrix-multiply ceiling, fp32 and bf16, at 1 thread and at the process's threads
  (a square `torch.mm` of `gemm_n`, the size of a small model's layers, not a vendor's peak; bf16 at half
  the size, and at a quarter on a CPU without bf16 units, which emulates it some 50x slower);
- `triad_gbs` / `triad_gbs_1_thread`: memory bandwidth, STREAM's triad `a = b + s * c` in torch on three 64 MiB
  fp32 arrays (larger than the last-level caches of the CPUs seen), 12 bytes moved an element, at the process's
  threads and at 1;
- `tiny_op_us`: one elementwise op on a one-element tensor: the per-op cost of dispatch, which a small
  model's step pays for every op whatever its size;
- `parallel_region_us`: what one OpenMP parallel region adds: an elementwise op on 64 Ki floats (above
  ATen's grain size, so it goes parallel) at the process's threads, minus a perfect split of its 1-thread
  time; None with one thread;
- `allreduce_gbs`: with a process group, the all-reduce bus bandwidth (2 (n-1) / n x 16 MiB / time, NCCL's
  definition) of the run's own backend, every rank taking part;
- `topology`: usable logical CPUs, physical cores among them, SMT siblings a core, sockets, the last-level
  cache and the vector units (record/envinfo.py's ISA flags).

Times come from torch.utils.benchmark's Timer over 7 blocks of about 10 ms, with the thread count set per
measurement and put back: a ceiling (GEMM, triad) is the fastest block, since a neighbour on a shared machine
only ever slows a block down (the median read the 2-thread GEMM anywhere from 0.9x to 2.1x the 1-thread one
between processes of one run on a 2-core VM), and a cost (the tiny op, the parallel region) the median block.
The card is measured once a process, before its first unit is built, with the clock of every arm stopped, and
each record of the process keeps it (`card`). Smoke runs, which are never judged, skip it (`measured: false`
and why). In a launch every rank measures its own card at the same moment, as the ranks share the machine
while they train; the records keep rank 0's.
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path
from typing import Any

import logging

import torch

from pipelines.core.record import envinfo

# torch.utils.benchmark imports cpp_extension, which warns on a machine without CUDA that it found none
logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
from torch.utils import benchmark  # noqa: E402

GEMM_N = {"fp32": 512, "bf16": 256}  # bf16 at 128 where no bf16 units are seen (`gemm_sizes`)
BF16_UNITS = ("avx512_bf16", "amx_bf16", "sve")
TRIAD_ELEMENTS = 16 * 2**20  # 64 MiB of fp32 an array
REGION_ELEMENTS = 64 * 2**10
ALLREDUCE_BYTES = 16 * 2**20
BLOCK_S, BLOCKS = 0.01, 7  # per measurement: 7 blocks of about 10 ms, the fastest or the median kept
CPU_SYS = Path("/sys/devices/system/cpu")

_CARD: dict[str, Any] | None = None  # this process's card, measured once


def _seconds(stmt: str, threads: int, ceiling: bool = False, **values: Any) -> float:
    """Seconds a call over BLOCKS blocks of about BLOCK_S each (torch.utils.benchmark's Timer, which sets the
    thread count and puts it back): for a `ceiling` (what the machine can do) the fastest block, as anything
    else on a shared machine only slows a block down; for a cost, the median block. The block's call count
    comes from the faster of two single calls, the first of which also warms the statement up."""
    timer = benchmark.Timer(stmt=stmt, globals={"torch": torch, **values}, num_threads=threads)
    once = min(timer.timeit(1).median for _ in range(2))
    number = max(1, int(BLOCK_S / max(once, 1e-7)))
    blocks = [timer.timeit(number).median for _ in range(BLOCKS)]
    return min(blocks) if ceiling else statistics.median(blocks)


def gemm_gflops(dtype: torch.dtype, threads: int, n: int) -> float:
    a, b = (torch.randn(n, n).to(dtype) for _ in range(2))
    out = torch.empty(n, n, dtype=dtype)
    seconds = _seconds("torch.mm(a, b, out=out)", threads, ceiling=True, a=a, b=b, out=out)
    return round(2 * n**3 / seconds / 1e9, 1)


def triad_gbs(threads: int) -> float:
    b, c, a = torch.full((TRIAD_ELEMENTS,), 1.0), torch.full((TRIAD_ELEMENTS,), 2.0), torch.empty(TRIAD_ELEMENTS)
    seconds = _seconds("torch.add(b, c, alpha=3.0, out=a)", threads, ceiling=True, a=a, b=b, c=c)
    return round(3 * 4 * TRIAD_ELEMENTS / seconds / 1e9, 2)


def tiny_op_us() -> float:
    x, y, out = torch.ones(1), torch.ones(1), torch.empty(1)
    return round(_seconds("torch.add(x, y, out=out)", 1, x=x, y=y, out=out) * 1e6, 2)


def parallel_region_us(threads: int) -> float | None:
    if threads < 2:
        return None
    x, out = torch.rand(REGION_ELEMENTS), torch.empty(REGION_ELEMENTS)
    one = _seconds("torch.mul(x, 2.0, out=out)", 1, x=x, out=out)
    many = _seconds("torch.mul(x, 2.0, out=out)", threads, x=x, out=out)
    return round(max(0.0, many - one / threads) * 1e6, 2)


def allreduce_gbs() -> float | None:
    """All-reduce bus bandwidth of the initialized process group (every rank must call it), else None."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
        return None
    n = dist.get_world_size()
    device = "cuda" if dist.get_backend() == "nccl" else "cpu"
    tensor = torch.ones(ALLREDUCE_BYTES // 4, device=device)
    dist.all_reduce(tensor)  # warm: the first one sets up the connections
    times = []
    for _ in range(3):
        dist.barrier()
        start = time.perf_counter()
        dist.all_reduce(tensor)
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return round(2 * (n - 1) / n * ALLREDUCE_BYTES / sorted(times)[1] / 1e9, 3)


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def topology(cpus: list[int] | None = None) -> dict[str, Any]:
    """Physical cores, SMT siblings and sockets among the usable CPUs, from /sys (None where it is absent)."""
    cpus = sorted(os.sched_getaffinity(0)) if cpus is None else cpus
    cores: dict[tuple[str, str], int] = {}
    for cpu in cpus:
        package = _read(CPU_SYS / f"cpu{cpu}/topology/physical_package_id")
        core = _read(CPU_SYS / f"cpu{cpu}/topology/core_id")
        if package is None or core is None:
            cores = {}
            break
        cores[(package, core)] = cores.get((package, core), 0) + 1
    llc = None
    for index in sorted(CPU_SYS.glob(f"cpu{cpus[0]}/cache/index*")) if cpus else []:
        if _read(index / "type") in ("Unified", "Data"):
            llc = f"L{_read(index / 'level')} {_read(index / 'size')}"
    return {"usable_cpus": len(cpus), "physical_cores": len(cores) or None,
            "smt_siblings": max(cores.values()) if cores else None,
            "sockets": len({package for package, _ in cores}) or None, "last_level_cache": llc,
            "isa": envinfo.cpu_class()["cpu_isa"]}


def gemm_sizes(isa: str | None) -> dict[str, int]:
    """The GEMM sizes for this CPU: bf16 emulated (no bf16 units) at 128, so it costs what the others do."""
    if isa is not None and any(flag in isa.split() for flag in BF16_UNITS):
        return dict(GEMM_N)
    return {**GEMM_N, "bf16": 128}


def measure(threads: int | None = None) -> dict[str, Any]:
    """Measure the card at `threads` (default: torch's intra-op threads now); about 1.5 s on a 2-core VM."""
    threads = threads or torch.get_num_threads()
    start = time.perf_counter()
    sizes = gemm_sizes(envinfo.cpu_class()["cpu_isa"])
    card = {
        "measured": True, "threads": threads,
        "gemm_gflops": {name: {"1_thread": gemm_gflops(dtype, 1, sizes[name]),
                               "all_threads": gemm_gflops(dtype, threads, sizes[name])}
                        for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16))},
        "gemm_n": sizes,
        "triad_gbs": triad_gbs(threads), "triad_gbs_1_thread": triad_gbs(1), "tiny_op_us": tiny_op_us(),
        "parallel_region_us": parallel_region_us(threads), "allreduce_gbs": allreduce_gbs(),
        "topology": topology(),
    }
    torch.set_num_threads(threads)  # benchmark.Timer puts its own back; this keeps the process's exact
    card["seconds"] = round(time.perf_counter() - start, 2)
    return card


def for_process(scale: str) -> dict[str, Any]:
    """This process's card: measured on the first call (bench and book scale), then the same dict."""
    global _CARD
    if _CARD is None:
        _CARD = measure() if scale != "smoke" else {"measured": False,
                                                    "why": "smoke scale: its numbers are never judged"}
    return _CARD


def lines(card: dict[str, Any]) -> list[str]:
    """The card as `accel doctor --bench` prints it: one quantity a line, with its unit and how it was taken."""
    if not card.get("measured"):
        return [f"machine card: not measured ({card.get('why', 'no reason recorded')})"]
    threads, gemm, sizes = card["threads"], card["gemm_gflops"], card.get("gemm_n", GEMM_N)
    top = card["topology"]
    isa = top.get("isa") or "unknown"
    bf16_units = any(flag in isa.split() for flag in BF16_UNITS)
    emulated = "" if bf16_units else "; no bf16 units seen: emulated"
    region = card["parallel_region_us"]
    out = [f"machine card ({threads} thread(s), measured in {card['seconds']} s):"]
    for name in ("fp32", "bf16"):
        n = sizes[name]
        out.append(f"  GEMM {name}     {gemm[name]['1_thread']:7.1f} GFLOP/s at 1 thread, "
                   f"{gemm[name]['all_threads']:.1f} at {threads} ({n}x{n}x{n} torch.mm"
                   f"{emulated if name == 'bf16' else ''})")
    one = f", {card['triad_gbs_1_thread']:.2f} at 1" if card.get("triad_gbs_1_thread") else ""
    out.append(f"  memory        {card['triad_gbs']:7.2f} GB/s at {threads} thread(s){one} (STREAM triad in torch)")
    out.append(f"  tiny op       {card['tiny_op_us']:7.2f} us (one elementwise op on one element: dispatch)")
    out.append("  OMP region    " + ("      - (one thread: no parallel region)" if region is None else
                                     f"{region:7.2f} us (what one parallel region adds at {threads} threads)"))
    if card.get("allreduce_gbs") is not None:
        out.append(f"  all-reduce    {card['allreduce_gbs']:7.3f} GB/s (bus bandwidth, 16 MiB)")
    cores = (f"{top['physical_cores']} physical core(s), {top['smt_siblings']} thread(s) each, "
             f"{top['sockets']} socket(s)" if top.get("physical_cores") else "physical cores unknown (no /sys)")
    cache = top.get("last_level_cache") or "cache ?"
    out.append(f"  cores         {top['usable_cpus']} usable CPU(s): {cores}; {cache}; {isa}")
    return out
