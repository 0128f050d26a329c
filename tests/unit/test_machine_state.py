"""Machine state (core/record/machine.py): the noisy flag follows from the readings, and a real busy loop
beside this process is seen as another process's load, while this run's own children are not."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from distutil import wait_for
from pipelines.core.record import machine

QUIET = {"time": 0.0, "cpus": 2, "psutil": True, "busy_s": 100.0, "family_cpu_s": 50.0, "throttle_count": 7,
         "swap_io_pages": 1000, "load_avg": [0.1, 0.1, 0.1]}


def later(**changes) -> dict:
    return {**QUIET, "time": 10.0, **changes}


def test_a_quiet_repeat_is_not_noisy():
    # 10 s: our family used 19 s of the 20 core-seconds, others 0.5 s (0.05 cores)
    state = machine.judge(QUIET, later(busy_s=119.5, family_cpu_s=69.0))
    assert state["noisy"] is False and state["noisy_reasons"] == []
    assert state["others_cores"] == pytest.approx(0.05) and state["throttle_events"] == 0


def test_others_on_one_core_throttling_and_swap_each_give_a_reason():
    state = machine.judge(QUIET, later(busy_s=120.0, family_cpu_s=60.0, throttle_count=9, swap_io_pages=1064))
    assert state["noisy"] is True
    assert [r.split()[0:2] for r in state["noisy_reasons"]] == [["other", "processes"], ["the", "CPU"],
                                                              ["the", "machine"]]
    assert "1.00 of the 2 usable cores" in state["noisy_reasons"][0]
    assert state["throttle_events"] == 2 and state["swap_io_pages"] == 64


def test_missing_readings_flag_nothing_and_say_so():
    bare = {"time": 0.0, "cpus": 2, "psutil": False, "throttle_count": None, "load_avg": None}
    state = machine.judge(bare, {**bare, "time": 5.0})
    assert state["noisy"] is False and state["others_cores"] is None
    assert "psutil is not installed" in state["not_measured"]


def test_a_busy_loop_elsewhere_is_noisy_and_our_own_child_is_not(monkeypatch):
    monkeypatch.delenv(machine.ROOT_ENV, raising=False)
    loop = [sys.executable, "-c", "while 1: pass"]
    # started by a shell that exits at once: the loop is orphaned, so it is not in this process's family
    started = subprocess.run(["sh", "-c", f"'{sys.executable}' -c 'while 1: pass' >/dev/null 2>&1 & echo $!"],
                             capture_output=True, text=True, check=True)
    other = int(started.stdout)
    try:
        assert "usable cores busy" in (machine.busy_now(1.0) or "")
    finally:
        os.kill(other, signal.SIGKILL)
    monkeypatch.setenv(machine.ROOT_ENV, str(os.getpid()))
    ours = subprocess.Popen(loop)  # a child: one of this run's processes (a rank, say)
    try:
        start, own = machine.snapshot(), time.process_time()

        def childs_cpu_s() -> float:  # the family's CPU time since `start`, less this process's own
            return machine.snapshot()["family_cpu_s"] - start["family_cpu_s"] - (time.process_time() - own)

        # the child's core is counted as the run's own time, so it is never "other processes"
        assert wait_for(lambda: childs_cpu_s() > 0.6, timeout=30), childs_cpu_s()
    finally:
        ours.kill()
        ours.wait()


class StandInNVML:
    """A stand-in for pynvml: no GPU can exist on this test machine, so NVML's answers are given here, in
    NVML's own shapes (milliwatts, MHz, the clock-event reasons bitmask, process objects with .pid)."""
    NVML_CLOCK_SM, NVML_TEMPERATURE_GPU = 1, 0

    def __init__(self, reasons: int, pids: list[int]):
        self.reasons, self.pids = reasons, pids

    def nvmlDeviceGetCount(self):
        return 1

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetClockInfo(self, handle, kind):
        return 1755

    def nvmlDeviceGetMaxClockInfo(self, handle, kind):
        return 1980

    def nvmlDeviceGetTemperature(self, handle, kind):
        return 71

    def nvmlDeviceGetPowerUsage(self, handle):
        return 412345

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        return self.reasons

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        return [type("Proc", (), {"pid": pid})() for pid in self.pids]


@pytest.mark.parametrize("reasons,pids,expected", [
    (0x1, [100], []),  # idle clocks and only our own process: quiet
    (0x4 | 0x40, [100], ["GPU 0 slowed down: software power cap, hardware thermal slowdown"]),
    (0x0, [100, 555], ["GPU 0 also ran other processes (pids 555)"]),
    (0x0, [7001, 7002], []),  # a container's NVML lists host pids: none of ours, so nothing to compare
])
def test_gpu_readings_flag_slowdowns_and_other_processes(reasons, pids, expected):
    readings = machine.gpu_readings(StandInNVML(reasons, pids))
    assert readings[0]["power_w"] == 412.3 and readings[0]["sm_clock_mhz"] == 1755
    end = {**QUIET, "time": 10.0, "gpu": readings, "family_pids": [100, 101]}
    state = machine.judge(QUIET, end)
    assert [r for r in state["noisy_reasons"] if r.startswith("GPU")] == expected
    assert state["gpu"][0]["temperature_c"] == 71
