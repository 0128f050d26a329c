"""Hints that work: every command a refusal suggests is taken from the message as printed and run (smoke
scale, generated data); it must succeed. A hint that sends users into another error is a bug. (Moved from
tests/refusals: each test trains for real, so it is end to end and slow.)

Not run here, each with its reason: `accel data fetch` (needs internet), the IPEX venv (`make ipex-venv`,
about 7 GB; tests/e2e/test_cpu_libs.py covers it under ACCEL_TEST_IPEX=1) and the cpu-intel image (IMAGE=...).
`make ID` is `accel launch ID $(ARGS)` (Makefile), so hints naming it are run as `accel launch`.
"""

from __future__ import annotations

import ctypes.util
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import REPO, accel, records, without_ccl
from distutil import free_port
from pipelines.core.config import experiments

GPU_ENTRIES = [e for e in experiments.all_experiments().values() if e.status == "ready" and "gpu" in e.requires]
NO_GPU = pytest.mark.skipif(torch.cuda.is_available() or any(Path("/dev").glob("nvidia[0-9]*")),
                            reason="a GPU is present: the no-GPU hint is not printed")


def refusal(run: subprocess.CompletedProcess, code: int) -> str:
    """The one `accel: error:` line of a refused command (every rank of a launcher may print it)."""
    lines = {line for line in run.stderr.splitlines() if line.startswith("accel: error:")}
    assert run.returncode == code and len(lines) == 1, run.stderr[-3000:]
    assert "Traceback" not in run.stderr
    return lines.pop()


def suggested(message: str, prefix: str) -> list[str]:
    """The command a message suggests: from `prefix` to the end of the line or the closing backtick."""
    found = re.search(re.escape(prefix) + r"[^`]*", message)
    assert found, f"no `{prefix}...` in: {message}"
    return shlex.split(found.group(0).strip().rstrip(";."))


def run_suggestion(words: list[str], data_root: Path, results: Path, env: dict | None = None,
                   timeout: int = 900) -> subprocess.CompletedProcess:
    """Run a suggested command as a user would, pointed at the test's data and a fresh results folder.
    `accel ...` runs this checkout's CLI; `launch/...` scripts run with this interpreter (PYTHON)."""
    assignments = dict(word.split("=", 1) for word in words if re.match(r"^[A-Z_]+=", word))
    words = [word for word in words if not re.match(r"^[A-Z_]+=", word)]
    if words[0] == "accel":
        words = [sys.executable, "-m", "pipelines", *words[1:]]
    else:
        words = [str(REPO / words[0]), *words[1:]]
    # A port of its own, whatever the hint's launcher would pick (29500 for a hint across hosts).
    port = {"MASTER_PORT": str(free_port())}
    return subprocess.run([*words, "--data-root", str(data_root), "--results-dir", str(results)], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHON": sys.executable, **port, **assignments, **(env or {})})


def assert_ran(run: subprocess.CompletedProcess, results: Path, entry_id: str) -> None:
    assert run.returncode == 0, run.stderr[-3000:]
    recs = records(results)
    assert recs and all(r["experiment"] == entry_id for r in recs)
    assert all(r["status"] in ("ok", "skipped") for r in recs) and any(r["status"] == "ok" for r in recs)


# Paths whose only GPU entries cost minutes on 2 cores: DenseNet-121 compiled by inductor on the CPU (both
# torch_compile GPU entries) takes 160 s. The same path (torch_compile under the local launcher, reduce-overhead
# mode on the CPU) runs in full in test_smoke's ch3-compile-modes-cnn-cpu; here their hints are checked by
# every rank's preflight, as the other entries of a path are.
CHECKED_ONLY = {("torch_compile", "local")}


def first_of_each_path(entries) -> set[str]:
    """One entry per (pipeline, launcher): the others of a pair run the same code path with other settings."""
    seen: dict[tuple, str] = {}
    for entry in entries:
        if (entry.pipeline, entry.launcher) not in CHECKED_ONLY:
            seen.setdefault((entry.pipeline, entry.launcher), entry.id)
    return set(seen.values())


RUN_IN_FULL = first_of_each_path(GPU_ENTRIES)
# Full runs of a path another test of `make test` already runs the same way: `make test-all` runs them here too.
RUN_ELSEWHERE = {
    "ch7-amp": "test_run_without_gpu_hint_runs_on_cpu, the same suggestion from `accel run`",
    "ch10-gpu-nccl": "test_nccl_on_cpu_hint_runs and dist/test_dist_runs.py's GPU entries on CPU over Gloo",
    "dlf-u9-amp": "e2e/test_vit_ladder.py's course AMP run on the CPU",
    "vit-fsdp-4gpu": "dist/test_zero.py's talk FSDP step under torchrun",
}


def gpu_hint(entry, accel_in_process) -> list[str]:
    """The CPU smoke command `accel launch ID` (what `make ID` runs) suggests on a machine without GPUs; the
    refusal comes before any process starts, so it runs in this process."""
    message = refusal(accel_in_process("launch", entry.id), 3)
    command = suggested(message, f"accel launch {entry.id} ")
    assert "--device" in command and "--scale" in command
    return command


@NO_GPU
@pytest.mark.parametrize("entry", GPU_ENTRIES, ids=[e.id for e in GPU_ENTRIES])
def test_gpu_entry_hint_is_accepted_by_every_rank(entry, data_root, tmp_path, accel_in_process):
    """Every GPU entry's hint passes every rank's check of the same arguments (`accel preflight`, what the
    launchers call before starting ranks), writing nothing."""
    command = gpu_hint(entry, accel_in_process)
    assignments = dict(word.split("=", 1) for word in command if re.match(r"^[A-Z_]+=", word))
    ranks = int(assignments.get("NPROC", entry.knobs.get("NPROC", "1")))
    check = accel_in_process("preflight", "--world-size", str(ranks), "run", entry.id, *command[3:],
                             "--data-root", str(data_root), "--results-dir", str(tmp_path / "r"))
    assert check.returncode == 0, check.stderr[-3000:]
    assert not (tmp_path / "r").exists() or not list((tmp_path / "r").iterdir())


@NO_GPU
@pytest.mark.slow
@pytest.mark.parametrize("entry", [pytest.param(e, id=e.id, marks=[pytest.mark.long] if e.id in RUN_ELSEWHERE else [])
                                   for e in GPU_ENTRIES if e.id in RUN_IN_FULL])
def test_gpu_entry_hint_runs_on_cpu(entry, data_root, tmp_path, accel_in_process):
    """One entry per (pipeline, launcher) runs its hint in full, as printed."""
    command = gpu_hint(entry, accel_in_process)
    assert_ran(run_suggestion(command, data_root, tmp_path / "r"), tmp_path / "r", entry.id)


@NO_GPU
@pytest.mark.slow
def test_run_without_gpu_hint_runs_on_cpu(data_root, tmp_path):
    """`accel run` of a GPU entry names the same CPU arguments (ch7-amp refuses `-o backend`: none given)."""
    message = refusal(accel("run", "ch7-amp", "--data-root", str(data_root), "--results-dir", str(tmp_path)), 3)
    command = suggested(message, "accel run ch7-amp ")
    assert "backend=" not in " ".join(command)
    assert_ran(run_suggestion(command, data_root, tmp_path / "r"), tmp_path / "r", "ch7-amp")


@pytest.mark.slow
def test_nccl_on_cpu_hint_runs(data_root, tmp_path):
    message = refusal(accel("run", "ch10-gpu-nccl", "--device", "cpu", "--scale", "smoke", "--data-root",
                            str(data_root), "--results-dir", str(tmp_path)), 3)
    assert "on CPU use -o backend=gloo" in message
    run = run_suggestion(["accel", "run", "ch10-gpu-nccl", "--device", "cpu", "--scale", "smoke", "-o", "backend=gloo"],
                         data_root, tmp_path / "r")
    assert_ran(run, tmp_path / "r", "ch10-gpu-nccl")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs Open MPI's mpirun (Debian: openmpi-bin)")
@pytest.mark.skipif(torch.distributed.is_mpi_available(), reason="this torch has MPI: no hint is printed")
def test_mpi_backend_hint_runs_under_mpirun(data_root, tmp_path):
    """The mpi refusal names no image (none provides an MPI-built torch) and its gloo fallback runs."""
    run = accel("launch", "ch11-mpi-backend-cpu", "--scale", "smoke", "--data-root", str(data_root),
                "--results-dir", str(tmp_path), env={"PYTHON": sys.executable})
    message = refusal(run, 3)
    assert "container" not in message and "image of this project" in message
    assert "-o backend=gloo" in message
    run = run_suggestion(["accel", "launch", "ch11-mpi-backend-cpu", "--scale", "smoke", "-o", "backend=gloo"],
                         data_root, tmp_path / "r")
    assert_ran(run, tmp_path / "r", "ch11-mpi-backend-cpu")


@pytest.mark.slow
def test_oneccl_hint_runs_with_gloo(data_root, tmp_path):
    """Where no ccl binding loads (a stand-in environment: make venv builds one), the refusal's gloo hint runs."""
    message = refusal(accel("launch", "ch9-cpu-oneccl", "--scale", "smoke", env=without_ccl(tmp_path)), 3)
    assert "-o backend=gloo" in message
    run = run_suggestion(["accel", "launch", "ch9-cpu-oneccl", "--scale", "smoke", "-o", "backend=gloo"],
                         data_root, tmp_path / "r")
    assert_ran(run, tmp_path / "r", "ch9-cpu-oneccl")


@pytest.mark.slow
def test_runtime_knob_hint_runs_both_ways(data_root, tmp_path):
    """ch2-iomp in a plain process (GNU OpenMP loaded) names `accel launch` and the launcher with the knob."""
    env = {k: "" for k in ("OMP_RUNTIME", "LD_PRELOAD")}
    message = refusal(accel("run", "ch2-iomp", "--scale", "smoke", "--data-root", str(data_root),
                            "--results-dir", str(tmp_path), env=env), 3)
    for prefix, out in (("accel launch ch2-iomp", "a"), ("OMP_RUNTIME=intel launch/local.sh run ch2-iomp", "b")):
        command = [word for word in suggested(message, prefix) if word != "..."] + ["--scale", "smoke"]
        run = run_suggestion(command, data_root, tmp_path / out)
        assert_ran(run, tmp_path / out, "ch2-iomp")
        assert records(tmp_path / out)[0]["env"]["openmp_runtime"] == "intel"


@pytest.mark.skipif(ctypes.util.find_library("tcmalloc_minimal") is None,
                    reason="needs libtcmalloc-minimal4 for the allocator hint's command")
@pytest.mark.slow
def test_allocator_hint_runs(data_root, tmp_path):
    message = refusal(accel("run", "ch4-alloc-tcmalloc-cnn", "--scale", "smoke", "--data-root", str(data_root),
                            "--results-dir", str(tmp_path), env={"ALLOCATOR": "", "LD_PRELOAD": ""}), 3)
    command = [w for w in suggested(message, "ALLOCATOR=tcmalloc launch/local.sh") if w != "..."]
    run = run_suggestion([*command, "--scale", "smoke"], data_root, tmp_path / "r")
    assert_ran(run, tmp_path / "r", "ch4-alloc-tcmalloc-cnn")


@pytest.mark.slow  # a real subprocess (accel, a CI script) or a full report: end to end
def test_missing_data_hint_generates_what_the_run_needs(tmp_path):
    """The missing-data refusal's offline command, run as printed, makes the same run succeed."""
    empty = tmp_path / "data"
    message = refusal(accel("run", "ch2-baseline", "--scale", "smoke", "--data-root", str(empty),
                            "--results-dir", str(tmp_path / "r")), 2)
    command = suggested(message, "accel data generate ")
    generate = subprocess.run([sys.executable, "-m", "pipelines", *command[1:]], cwd=REPO, capture_output=True,
                              text=True, timeout=300)
    assert generate.returncode == 0, generate.stderr
    run = accel("run", "ch2-baseline", "--scale", "smoke", "--data-root", str(empty), "--results-dir",
                str(tmp_path / "r"))
    assert_ran(run, tmp_path / "r", "ch2-baseline")
