"""The step profile (train/profiler.py `step_profile`): real training steps' ops with their FLOPs and bytes, one
step's worth (the mean of the profiled steps), the profiler's warm-up step apart, and libkineto's start/stop
lines kept off stderr while other lines pass."""

from __future__ import annotations

import os

import torch

from pipelines.core.train import profiler


def test_a_linear_step_s_matmul_flops_are_counted_and_its_bytes_are_the_outermost_ops(one_torch_thread):
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(16, 8), torch.randint(0, 4, (16,))
    steps = []

    def step():
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
        steps.append(1)

    found = profiler.step_profile(step, cuda=False)
    assert len(steps) == 1 + profiler.STEP_PROFILE_STEPS  # the profiler's warm-up step, then the kept ones
    assert found["steps"] == profiler.STEP_PROFILE_STEPS
    ops = {row["op"]: row for row in found["ops"]}  # a step's worth: each op once a step, as in one step
    # forward addmm 2*16*8*4; backward one mm, the weight's gradient 2*4*16*8 (the input needs none)
    assert ops["aten::addmm"]["flops"] == 2 * 16 * 8 * 4 and ops["aten::mm"]["flops"] == 2 * 4 * 16 * 8
    assert ops["aten::addmm"]["calls"] == 1
    assert found["total"]["calls"] >= len(found["ops"]) and found["total"]["self_ms"] > 0
    assert found["total"]["bytes"] >= 4 * (16 * 8 + 4 * 8 + 4)  # at least the forward's input, weight and bias
    assert found["element_bytes_assumed"] == 4 and found["between_ops_ms"] >= 0


def test_libkineto_s_lines_are_dropped_and_every_other_line_goes_back_to_stderr(capfd):
    with profiler._quiet_kineto():
        os.write(2, b"USDT:2026-12-02 17:49:57 1:1 SyncActivityProfilerHandler.cpp:39] profiler_start\n")
        os.write(2, b"a warning of the step itself\n")
        os.write(2, b"ERROR:2026-12-02 17:49:57 1:1 DeviceProperties.cpp:56] gpuGetDeviceCount failed with code 35\n")
    assert capfd.readouterr().err == "a warning of the step itself\n"
