"""Machine state around a repeat: was this machine quiet enough for the repeat's numbers to mean something?

A verdict is only as good as the machine it ran on. Two snapshots, at a repeat's start and end, give:
- the load average at both ends;
- the CPU time other processes took on the usable cores during the repeat: busy time of those cores
  (psutil's per-CPU counters, idle and iowait excluded) minus the CPU time of this run's own process
  family (the tree under the outermost `accel` process, `ACCEL_RUN_ROOT`, so a torchrun's other ranks
  and a comparison's workers are not "others");
- the CPU clock (current, min and max over the usable cores), the cpufreq governor and the kernel's
  thermal-throttle counters where /sys has them;
- available memory and swap traffic (pages swapped in or out during the repeat).

`judge` flags the repeat `noisy`, with each reason, when others kept more than `OTHERS_CORES` of the
usable cores busy on average (a training run that uses every core it may waits on its slowest thread, so
one stolen core matters on any machine; background daemons stay far below), the throttle counters moved,
or the machine swapped. Readings a machine does not
offer (no cpufreq in a VM, no psutil in an image) are None, never a guess; their absence flags nothing.
On CUDA the GPU's side comes from NVML (nvidia-ml-py) for every GPU this process sees: SM clock against
its maximum, temperature, power draw, the clock-event (throttle) reasons, and the processes on the GPU.
A repeat is noisy there when the GPU slowed down for power or heat (not for idling or an application
clock setting), or when a process outside this run's family held the GPU. Without NVML `gpu` names why.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

ROOT_ENV = "ACCEL_RUN_ROOT"  # pid of the outermost accel process of this run: its tree is "ours"
OTHERS_CORES = 0.25  # others' average load on the usable cores, in cores: one busy loop is 1.0
CPU_SYS = Path("/sys/devices/system/cpu")


def mark_root(env: dict[str, str] | None = None) -> None:
    """Make this process the root of the run's family unless an outer accel process already is."""
    target = os.environ if env is None else env
    target.setdefault(ROOT_ENV, str(os.getpid()))


def usable_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))


def _psutil():
    try:
        import psutil
    except ImportError:  # a slim image: the readings that need it are None
        return None
    return psutil


def _busy_s(psutil, cpus: list[int]) -> float | None:
    per_cpu = psutil.cpu_times(percpu=True)
    busy = 0.0
    for cpu in cpus:
        if cpu >= len(per_cpu):
            return None
        times = per_cpu[cpu]
        busy += sum(times) - times.idle - getattr(times, "iowait", 0.0)
    return busy


def _family_cpu_s(psutil) -> float | None:
    """CPU seconds of the run's process tree: every live member's own time plus what it reaped."""
    try:
        root = psutil.Process(int(os.environ.get(ROOT_ENV, os.getpid())))
        members = [root, *root.children(recursive=True)]
    except (psutil.Error, ValueError):
        return None
    total = 0.0
    for proc in members:
        try:
            t = proc.cpu_times()
        except psutil.Error:  # ended between the listing and the reading: its time went to its parent
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _throttle_count(cpus: list[int]) -> int | None:
    counts = [_read_int(CPU_SYS / f"cpu{c}" / "thermal_throttle" / "core_throttle_count") for c in cpus]
    known = [c for c in counts if c is not None]
    return sum(known) if known else None


def _governor(cpus: list[int]) -> str | None:
    try:
        return (CPU_SYS / f"cpu{cpus[0]}" / "cpufreq" / "scaling_governor").read_text().strip()
    except (OSError, IndexError):
        return None


def _clock_mhz(psutil, cpus: list[int]) -> dict[str, float] | None:
    try:
        freqs = psutil.cpu_freq(percpu=True)
    except (AttributeError, OSError, NotImplementedError):
        return None
    picked = [freqs[c] for c in cpus if c < len(freqs)] if freqs else []
    if not picked or not any(f.current for f in picked):
        return None
    top = max(f.max for f in picked)
    return {"current": round(min(f.current for f in picked), 1), "max": round(top, 1) if top else None}


# NVML's clock-event reasons that mean "slowed down" (nvmlClocksEventReason*): idling (0x1), an application
# clock setting (0x2), sync boost (0x10) and display clocks (0x100) are not the machine's fault.
GPU_SLOWDOWNS = {0x4: "software power cap", 0x8: "hardware slowdown", 0x20: "software thermal slowdown",
                 0x40: "hardware thermal slowdown", 0x80: "hardware power brake"}


def _nvml():
    """pynvml, initialised, or the reason it cannot be read."""
    try:
        import pynvml
    except ImportError:
        return None, "nvidia-ml-py is not installed"
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001  (NVMLError: no driver, no device)
        return None, f"NVML: {exc}"
    return pynvml, None


def gpu_readings(nvml) -> list[dict[str, Any]]:
    """One dict per GPU: SM clock and its maximum (MHz), temperature (C), power (W), the clock-event
    reasons bitmask, and the pids of the compute processes on it. A reading a GPU does not offer is None."""
    def read(call, *args):
        try:
            return call(*args)
        except Exception:  # noqa: BLE001  (NVMLError_NotSupported and kin: that reading is absent)
            return None

    reasons_call = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
        getattr(nvml, "nvmlDeviceGetCurrentClocksThrottleReasons")
    out = []
    for index in range(nvml.nvmlDeviceGetCount()):
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        power = read(nvml.nvmlDeviceGetPowerUsage, handle)
        procs = read(nvml.nvmlDeviceGetComputeRunningProcesses, handle) or []
        out.append({"index": index, "sm_clock_mhz": read(nvml.nvmlDeviceGetClockInfo, handle, nvml.NVML_CLOCK_SM),
                    "sm_clock_max_mhz": read(nvml.nvmlDeviceGetMaxClockInfo, handle, nvml.NVML_CLOCK_SM),
                    "temperature_c": read(nvml.nvmlDeviceGetTemperature, handle, nvml.NVML_TEMPERATURE_GPU),
                    "power_w": None if power is None else round(power / 1000, 1),
                    "clock_event_reasons": read(reasons_call, handle),
                    "pids": sorted(p.pid for p in procs)})
    return out


def _family_pids(psutil) -> set[int]:
    try:
        root = psutil.Process(int(os.environ.get(ROOT_ENV, os.getpid())))
        return {root.pid, *(p.pid for p in root.children(recursive=True))}
    except (psutil.Error, ValueError):
        return {os.getpid()}


def snapshot(device_type: str = "cpu") -> dict[str, Any]:
    """One reading of the machine (cheap: a few /proc and /sys files; on CUDA a few NVML calls)."""
    cpus = usable_cpus()
    psutil = _psutil()
    shot: dict[str, Any] = {"time": time.monotonic(), "cpus": len(cpus),
                            "load_avg": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None,
                            "throttle_count": _throttle_count(cpus), "governor": _governor(cpus)}
    if device_type == "cuda":
        nvml, why = _nvml()
        shot["gpu"] = gpu_readings(nvml) if nvml is not None else f"not read: {why}"
        if nvml is not None and psutil is not None:
            shot["family_pids"] = sorted(_family_pids(psutil))
    if psutil is None:
        return {**shot, "psutil": False}
    memory, swap = psutil.virtual_memory(), psutil.swap_memory()
    return {**shot, "psutil": True, "busy_s": _busy_s(psutil, cpus), "family_cpu_s": _family_cpu_s(psutil),
            "clock_mhz": _clock_mhz(psutil, cpus), "mem_available_mib": round(memory.available / 2**20),
            "swap_used_mib": round(swap.used / 2**20), "swap_io_pages": swap.sin + swap.sout}


def judge(start: dict[str, Any], end: dict[str, Any]) -> dict[str, Any]:
    """The record's `machine` field: the readings at both ends, what others took, and the noisy flag."""
    wall = max(end["time"] - start["time"], 1e-9)
    state: dict[str, Any] = {"load_avg_start": start.get("load_avg"), "load_avg_end": end.get("load_avg"),
                             "usable_cpus": end["cpus"], "governor": end.get("governor"),
                             "clock_mhz": end.get("clock_mhz"), "mem_available_mib": end.get("mem_available_mib"),
                             "swap_used_mib": end.get("swap_used_mib"),
                             "gpu": end.get("gpu", "not read: a CPU run")}
    reasons: list[str] = []
    if None not in (start.get("busy_s"), end.get("busy_s"), start.get("family_cpu_s"), end.get("family_cpu_s")):
        others = (end["busy_s"] - start["busy_s"]) - (end["family_cpu_s"] - start["family_cpu_s"])
        cores = max(others, 0.0) / wall
        state.update(others_cpu_s=round(max(others, 0.0), 3), others_cores=round(cores, 3))
        if cores > OTHERS_CORES:
            reasons.append(f"other processes kept {cores:.2f} of the {end['cpus']} usable cores busy "
                           f"(more than {OTHERS_CORES})")
    else:
        state.update(others_cpu_s=None, others_cores=None)
    if None not in (start.get("throttle_count"), end.get("throttle_count")):
        throttled = end["throttle_count"] - start["throttle_count"]
        state["throttle_events"] = throttled
        if throttled > 0:
            reasons.append(f"the CPU was thermally throttled {throttled} times")
    if None not in (start.get("swap_io_pages"), end.get("swap_io_pages")):
        swapped = end["swap_io_pages"] - start["swap_io_pages"]
        state["swap_io_pages"] = swapped
        if swapped > 0:
            reasons.append(f"the machine swapped ({swapped} pages in or out)")
    if isinstance(end.get("gpu"), list):
        ours = set(end.get("family_pids") or [os.getpid()])
        for gpu in end["gpu"]:
            slowed = [name for bit, name in GPU_SLOWDOWNS.items() if (gpu.get("clock_event_reasons") or 0) & bit]
            if slowed:
                reasons.append(f"GPU {gpu['index']} slowed down: {', '.join(slowed)}")
            pids = set(gpu.get("pids") or [])
            others = sorted(pids - ours)
            # in a container NVML may list host pids: they compare only when one of ours is among them
            if others and pids & ours:
                reasons.append(f"GPU {gpu['index']} also ran other processes (pids {', '.join(map(str, others))})")
    if not end.get("psutil", False):
        state["not_measured"] = "psutil is not installed: other processes, memory and swap were not read"
    return {**state, "noisy": bool(reasons), "noisy_reasons": reasons}


def busy_now(interval_s: float = 0.5) -> str | None:
    """Before work: a line naming what already keeps this machine busy, or None when it looks quiet."""
    psutil = _psutil()
    cpus = usable_cpus()
    if psutil is None:
        return None
    start = {"time": time.monotonic(), "busy_s": _busy_s(psutil, cpus), "family_cpu_s": _family_cpu_s(psutil)}
    time.sleep(interval_s)  # the reading itself: CPU time is a rate, it needs a window
    end = {"time": time.monotonic(), "busy_s": _busy_s(psutil, cpus), "family_cpu_s": _family_cpu_s(psutil),
           "cpus": len(cpus)}
    state = judge(start, end)
    if state["noisy"]:
        return "; ".join(state["noisy_reasons"])
    return None


# ---------------------------------------------------------------- is this machine fit to benchmark?

Check = tuple[str, str, str]  # (what, the state found, "ok" or what to change)


def _sys_text(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def bench_fitness() -> list[Check]:
    """Read-only checks in the spirit of `pyperf system show`: what makes timings on this machine noisy,
    and what to change. Nothing is changed here (most fixes need root and belong to the administrator)."""
    cpus = usable_cpus()
    checks: list[Check] = []
    busy = busy_now()
    checks.append(("load", busy or "quiet (others keep less than a quarter core busy)",
                   "stop what else runs, or pin the run to other cores (taskset; THREADS=N)" if busy else "ok"))
    governor = _governor(cpus)
    checks.append(("CPU governor", governor or "not exposed (VM or no cpufreq)",
                   "ok" if governor in (None, "performance") else
                   "set the performance governor (cpupower frequency-set -g performance) for stable clocks"))
    boost = _sys_text(CPU_SYS / "cpufreq" / "boost")
    no_turbo = _sys_text(CPU_SYS / "intel_pstate" / "no_turbo")
    if boost is not None or no_turbo is not None:
        on = boost == "1" or no_turbo == "0"
        checks.append(("turbo / boost", "on" if on else "off",
                       "clocks follow temperature and load: fine for one-machine ratios (arms alternate), "
                       "turn it off for absolute numbers" if on else "ok"))
    else:
        checks.append(("turbo / boost", "not exposed", "ok"))
    isolated = _sys_text(CPU_SYS / "isolated")
    checks.append(("isolated CPUs", isolated or "none",
                   "ok" if isolated else "optional: isolcpus= / nohz_full= on the kernel command line keep "
                                          "the scheduler's other work off the benchmark's cores"))
    psutil = _psutil()
    if psutil is not None:
        swap = psutil.swap_memory()
        memory = psutil.virtual_memory()
        checks.append(("memory", f"{memory.available / 2**30:.1f} GiB available of {memory.total / 2**30:.1f}; "
                                 f"swap used {swap.used / 2**20:.0f} MiB",
                       "ok" if memory.percent < 80 else "free memory: a run that swaps is flagged noisy"))
    else:
        checks.append(("memory", "not read (psutil is not installed)", "install psutil to read memory and load"))
    throttle = _throttle_count(cpus)
    checks.append(("thermal throttling", "not exposed" if throttle is None else f"{throttle} events since boot",
                   "ok" if not throttle else "check cooling: runs during throttling are flagged noisy"))
    return checks


def fit_to_benchmark(checks: list[Check]) -> bool:
    """Fit when nothing except optional advice asks for a change: the load and memory checks decide."""
    return all(advice == "ok" or what not in ("load", "memory") for what, _, advice in checks)
