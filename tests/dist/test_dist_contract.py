"""The rank/world contract, core maps, backend refusals, checkpoints and launcher knob validation.

Pure functions are tested directly; scripts and the CLI run for real as subprocesses.
"""

from __future__ import annotations

import os
import random
import socket
import sys
import subprocess

import numpy as np
import pytest
import torch

from conftest import REPO, accel, accel_here, without_ccl
from pipelines.core.distributed import backends, placement
from pipelines.core.train import checkpoint, loop, resume
from pipelines.core.errors import ConfigError
from pipelines.core.errors import NotRunnable

TORCHRUN = {"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "1",
            "MASTER_ADDR": "10.1.0.1", "MASTER_PORT": "29511"}
OMPI = {"OMPI_COMM_WORLD_RANK": "5", "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_SIZE": "8",
        "OMPI_COMM_WORLD_LOCAL_SIZE": "4"}
SRUN = {"SLURM_PROCID": "2", "SLURM_LOCALID": "0", "SLURM_NTASKS": "4", "SLURM_NODEID": "1",
        "SLURM_STEP_ID": "0", "SLURM_STEP_TASKS_PER_NODE": "2(x2)"}
BATCH = {"SLURM_PROCID": "0", "SLURM_NTASKS": "4", "SLURM_JOB_ID": "7"}  # the batch script: no step


@pytest.mark.parametrize("env,expected", [
    ({}, ("single", 0, 0, 1, 1)),
    (TORCHRUN, ("torchrun", 3, 1, 4, 2)),
    (OMPI, ("mpirun", 5, 1, 8, 4)),
    (SRUN, ("srun", 2, 0, 4, 2)),
    (BATCH, ("single", 0, 0, 1, 1)),  # the batch script itself is one process, not rank 0 of 4
    ({**SRUN, **TORCHRUN}, ("torchrun", 3, 1, 4, 2)),  # srun torchrun: the worker's RANK wins
    ({**BATCH, **OMPI}, ("mpirun", 5, 1, 8, 4)),  # mpirun inside an allocation: OMPI wins over SLURM
    ({**SRUN, **OMPI}, ("mpirun", 5, 1, 8, 4)),
])
def test_placement_precedence(env, expected):
    place = placement.placement(env)
    assert (place.source, place.rank, place.local_rank, place.world_size, place.local_world_size) == expected


def test_placement_reads_the_rendezvous_and_rejects_nonsense():
    place = placement.placement({**OMPI, "MASTER_ADDR": "10.2.0.1", "MASTER_PORT": "29600"})
    assert (place.master_addr, place.master_port, place.node_rank) == ("10.2.0.1", 29600, 1)
    with pytest.raises(ConfigError, match="RANK='x'"):
        placement.placement({"RANK": "x", "WORLD_SIZE": "2"})
    with pytest.raises(ConfigError, match="outside world size"):
        placement.placement({"RANK": "2", "WORLD_SIZE": "2"})


@pytest.mark.parametrize("backend,device,error,needle", [
    ("tcp", "cpu", ConfigError, "unknown backend 'tcp'"),
    ("nccl", "cpu", NotRunnable, "backend nccl needs CUDA GPUs"),
])
def test_backends_refused_here_say_why(backend, device, error, needle):
    if backend == "nccl" and torch.cuda.is_available():
        pytest.skip("a GPU is present: nccl is runnable here")
    with pytest.raises(error, match=needle):
        backends.check_backend(backend, device)


def test_ccl_without_a_binding_that_loads_says_which_failed_and_how_to_build_one(monkeypatch):
    monkeypatch.setitem(sys.modules, "accel_ccl", None)  # an import of it fails, as an unbuilt one's does
    with pytest.raises(NotRunnable, match=r"backend ccl needs oneCCL .*accel_ccl: .*`make venv` and `make ipex-venv` "
                                          r"build .*the cpu-intel one carries it"):
        backends.check_backend("ccl", "cpu")


@pytest.mark.skipif(torch.distributed.is_mpi_available(), reason="this torch has MPI: the mpi backend runs here")
def test_mpi_backend_refused_without_an_mpi_build():
    with pytest.raises(NotRunnable, match=r"built with MPI \(USE_MPI=1\)"):
        backends.check_backend("mpi", "cpu")
    from pipelines.core.distributed import doctor

    assert doctor.backend_availability()["gloo"] == "ok"


def test_checkpoint_round_trip_restores_model_optimizer_epoch_and_rng(tmp_path):
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    model(torch.ones(3, 4)).sum().backward()
    optimizer.step()
    trainable = loop.Trainable(model, step=None, optimizer=optimizer)
    hooks = resume.CheckpointHooks(tmp_path, every=2, is_main=True)
    hooks.trainable = trainable
    hooks.epoch_end(0, 1.0)
    assert not (tmp_path / checkpoint.FILENAME).exists()  # every 2 epochs: not after the first
    torch.manual_seed(1), np.random.seed(2), random.seed(3)
    hooks.epoch_end(1, 1.0)
    expected = (torch.rand(1), np.random.rand(), random.random())
    saved = {k: v.clone() for k, v in model.state_dict().items()}
    fresh = torch.nn.Linear(4, 2)
    fresh_opt = torch.optim.Adam(fresh.parameters(), lr=0.1)
    resumed = resume.CheckpointHooks(tmp_path, every=2, is_main=True).train_start(
        loop.Trainable(fresh, step=None, optimizer=fresh_opt), None)
    assert resumed == 2
    assert all(torch.equal(fresh.state_dict()[k], saved[k]) for k in saved)
    assert fresh_opt.state_dict()["state"][0]["step"] == 1
    assert (torch.rand(1), np.random.rand(), random.random()) == expected
    marker = checkpoint.marker_of(tmp_path / checkpoint.FILENAME)
    assert sorted(p.name for p in tmp_path.iterdir()) == [checkpoint.FILENAME, marker.name]  # no temp files left
    hooks.train_end(trainable, 2)  # a finished run: the next run starts from scratch
    assert resume.CheckpointHooks(tmp_path, 2, True).train_start(trainable, None) is None


def _script(name, env, *args, timeout=60):
    return subprocess.run([f"launch/{name}", *args], cwd=REPO, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **env})


@pytest.mark.parametrize("script,env,needle", [
    ("torchrun.sh", {"NPROC": "0"}, "NPROC=0 is not a positive integer"),
    ("torchrun.sh", {"NPROC": "-1"}, "NPROC=-1 is not a positive integer"),
    ("torchrun.sh", {"NPROC": "abc"}, "NPROC=abc is not a positive integer"),
    ("torchrun.sh", {"NNODES": "2", "NODE_RANK": "2"}, "NODE_RANK=2 must be an integer from 0 to NNODES-1"),
    ("torchrun.sh", {"RDZV": "etcd"}, "RDZV=etcd is not static or c10d"),
    ("torchrun.sh", {"MASTER_PORT": "70000"}, "MASTER_PORT=70000 is not a TCP port"),
    ("torchrun.sh", {"THREADS": "0"}, "THREADS=0 is not a positive integer"),
    ("mpirun.sh", {"NP": "0"}, "NP=0 is not a positive integer"),
    ("mpirun.sh", {"NP": "abc"}, "NP=abc is not a positive integer"),
    ("mpirun.sh", {"HOSTS": "a b"}, "is not host[:slots]"),
    ("mpirun.sh", {"HOSTS": "no-such-host.invalid:2"}, "host no-such-host.invalid does not resolve"),
    ("mpirun.sh", {"MAP_BY": "diagonal"}, "MAP_BY=diagonal is not"),
    ("srun.sh", {"NTASKS": "-1"}, "NTASKS=-1 is not a positive integer"),
])
def test_launchers_reject_bad_knobs(script, env, needle):
    if script != "torchrun.sh" and not _have(script.split(".")[0]):
        pytest.skip(f"{script.split('.')[0]} is not installed (make test installs it)")
    run = _script(script, env, "run", "ch8-ddp-template", "--scale", "smoke")
    assert run.returncode == 2, run.stderr
    assert needle in run.stderr and "Traceback" not in run.stderr


def _have(command):
    return subprocess.run(["sh", "-c", f"command -v {command}"], capture_output=True).returncode == 0


def test_torchrun_refuses_a_port_in_use_and_starts_nothing():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        run = _script("torchrun.sh", {"MASTER_PORT": str(port)}, "run", "ch8-ddp-template", "--scale", "smoke")
    assert run.returncode == 2 and f"MASTER_PORT={port} is already in use" in run.stderr
    assert "pipelines.core.distributed.agent" not in run.stderr  # refused before anything started


def test_a_bench_comparison_refuses_a_port_in_use_in_one_line(capfd):
    """`accel run` at bench resolves its launcher's knobs itself (harness/comparison.py): the same one line."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        run = accel_here(capfd, "run", "ch8-ddp-template", "--rounds", "1", "--dataset", "synthetic",
                         env={"NPROC": "1", "MASTER_PORT": str(port)})
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr[-2000:]
    assert run.stderr.strip() == f"accel: error: MASTER_PORT={port} is already in use on 127.0.0.1; pick another " \
                                 f"(e.g. MASTER_PORT={port + 1})"


@pytest.mark.parametrize("option,code,needle", [
    ("backend=tcp", 2, "option backend='tcp' is unknown; choose one of: gloo, ccl, nccl, mpi"),
    ("backend=ccl", 3, "backend ccl needs oneCCL under torch.distributed, and neither binding loads here"),
    ("strategy=zero", 2, "option strategy='zero' is unknown"),
])
def test_cli_refuses_bad_backends_in_one_line(option, code, needle, results_dir, tmp_path):
    run = accel("run", "ch8-ddp-template", "--scale", "smoke", "--dataset", "synthetic", "-o", option,
                "--results-dir", str(results_dir), env=without_ccl(tmp_path))
    assert run.returncode == code and needle in run.stderr, run.stderr
    assert "Traceback" not in run.stderr and not results_dir.exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present: nccl would run")
def test_nccl_without_a_gpu_is_refused_by_the_cli(results_dir, accel_in_process):
    run = accel_in_process("run", "ch10-gpu-nccl", "--scale", "smoke", "--results-dir", str(results_dir))
    assert run.returncode == 3 and ("no CUDA GPU is visible" in run.stderr or "nccl needs CUDA" in run.stderr)
    run = accel_in_process("run", "ch8-ddp-template", "--scale", "smoke", "--dataset", "synthetic", "-o",
                           "backend=nccl", "--device", "cpu", "--results-dir", str(results_dir))
    assert run.returncode == 3 and "backend nccl needs CUDA GPUs" in run.stderr and "Traceback" not in run.stderr


def test_launch_refuses_ccl_without_a_binding_before_starting_ranks(tmp_path):
    run = accel("launch", "ch9-cpu-oneccl", "--scale", "smoke", "--dataset", "synthetic", env=without_ccl(tmp_path),
                timeout=60)
    assert run.returncode == 3 and "backend ccl needs oneCCL under torch.distributed" in run.stderr, run.stderr
    assert "accel_ccl: accel_ccl._C is not built (stand-in)" in run.stderr and "Traceback" not in run.stderr
    assert "pipelines.core.distributed.agent" not in run.stderr


@pytest.mark.skipif(torch.distributed.is_mpi_available(), reason="this torch is built with MPI: mpi would run")
@pytest.mark.parametrize("command", ["launch", "run"])
def test_mpi_backend_is_refused_in_one_line_before_any_rank(command, results_dir, accel_in_process):
    """No PyPI torch is built with MPI and no image here provides one: ch11-mpi-backend-cpu says so and
    what a site must build, before mpirun starts (exit 3)."""
    run = accel_in_process(command, "ch11-mpi-backend-cpu", "--scale", "smoke", "--dataset", "synthetic",
                           "--results-dir", str(results_dir))
    assert run.returncode == 3 and len(run.stderr.strip().splitlines()) <= 2, run.stderr
    assert "needs a torch built with MPI (USE_MPI=1)" in run.stderr and "no image of this project" in run.stderr
    assert "build torch from source with USE_MPI=1" in run.stderr and "Traceback" not in run.stderr
    assert "+ mpirun" not in run.stderr and not results_dir.exists()


def test_doctor_lists_problems_and_records_findings(tmp_path):
    record = tmp_path / "doctor.json"
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        run = accel("doctor", "--port", str(port), "--record", str(record), env={"KMP_AFFINITY": "compact"},
                    timeout=120)
    assert run.returncode == 1, run.stderr
    assert "openmp: KMP_AFFINITY set but the gnu OpenMP runtime is loaded" in run.stderr
    assert f"port {port} on 127.0.0.1 is in use" in run.stderr
    import json

    checks = {f["check"]: f for f in json.loads(record.read_text())["findings"]}
    assert {"shm", "rendezvous_port", "backend_gloo", "backend_nccl", "openmp", "slurm", "gpus"} <= set(checks)
    assert checks["backend_gloo"]["status"] == "ok"
