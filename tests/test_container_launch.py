"""launch/_container.sh: the IMAGE= hook every launcher goes through (launch/_common.sh's run_accel).

The Podman path is tested for real in test_container_build.py. Apptainer cannot run on the CI machine
(no setuid/user-namespace install, no SIF), so its branch is checked by the exact argv and environment it
would hand to `apptainer`: a stand-in `apptainer` on PATH records them. That is the one stand-in here;
a stand-in `nvidia-smi` likewise plays the GPU node, since the CI machine has no GPU.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import REPO

RECORDER = """#!/usr/bin/env python3
import json, os, sys
with open(os.environ["RECORD_TO"], "w") as out:
    json.dump({"argv": sys.argv[1:], "env": {k: v for k, v in os.environ.items()
                                              if k.startswith("APPTAINERENV_")}}, out)
"""
FAKE_GPU = "#!/bin/sh\necho 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)'\n"


def _tool(folder: Path, name: str, body: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(body)
    (folder / name).chmod(0o755)


def _launch(*args: str, env: dict, path: str = "/usr/bin:/bin") -> subprocess.CompletedProcess:
    return subprocess.run(["launch/local.sh", *args], cwd=REPO, capture_output=True, text=True, timeout=60,
                          env={"PATH": path, "HOME": os.environ.get("HOME", "/tmp"), **env})


@pytest.fixture
def sif(tmp_path) -> Path:
    image = tmp_path / "cpu.sif"
    image.write_bytes(b"not a real SIF: the stand-in apptainer never opens it")
    return image


@pytest.mark.parametrize("gpu", [False, True], ids=["no-gpu", "gpu"])
def test_apptainer_argv_binds_data_ro_results_rw_and_passes_knobs(tmp_path, sif, gpu):
    bin_dir = tmp_path / "bin"
    _tool(bin_dir, "apptainer", RECORDER)
    if gpu:
        _tool(bin_dir, "nvidia-smi", FAKE_GPU)
    data, results, record = tmp_path / "data", tmp_path / "results", tmp_path / "argv.json"
    data.mkdir()
    run = _launch("run", "ch2-baseline", "--scale", "smoke", "--data-root", str(data), f"--results-dir={results}",
                  env={"IMAGE": str(sif), "THREADS": "3", "RECORD_TO": str(record), "KMP_AFFINITY": "a,b,1,0",
                       "NOT_A_KNOB": "x"},
                  path=f"{bin_dir}:/usr/bin:/bin")
    assert run.returncode == 0, run.stderr
    got = json.loads(record.read_text())
    expected = ["exec", "--cleanenv", "--bind", f"{REPO}:{REPO}:ro", "--bind", f"{data}:{data}:ro",
                "--bind", f"{results}:{results}:rw", "--pwd", str(REPO), *(["--nv"] if gpu else []),
                str(sif), "python3", "-m", "pipelines", "run", "ch2-baseline", "--scale", "smoke",
                "--data-root", str(data), f"--results-dir={results}"]
    assert got["argv"] == expected
    assert got["env"]["APPTAINERENV_OMP_NUM_THREADS"] == "3" and got["env"]["APPTAINERENV_OMP_RUNTIME"] == "gnu"
    assert got["env"]["APPTAINERENV_KMP_AFFINITY"] == "a,b,1,0", "values with commas must cross intact"
    assert "APPTAINERENV_NOT_A_KNOB" not in got["env"]
    assert results.is_dir(), "the results folder is created before it is bound"
    assert "+ env APPTAINERENV_" in run.stderr and " apptainer exec --cleanenv " in run.stderr


def _container(tmp_path, *args, env: dict, path: str = "/usr/bin:/bin") -> subprocess.CompletedProcess:
    return subprocess.run(["launch/_container.sh", *args], cwd=REPO, capture_output=True, text=True, timeout=30,
                          env={"PATH": path, "RESULTS_DIR": str(tmp_path / "r"), **env})


@pytest.mark.parametrize("image,needle", [
    ("oci:accel-cpu", "unknown scheme; use path/to/image.sif, podman:TAG or docker:TAG"),
    ("containers/nope.sif", "does not exist; build it with: make sif TARGET=cpu"),
    ("podman:", "names no image; use podman:TAG"),
])
def test_bad_image_values_fail_with_the_fix(tmp_path, image, needle):
    run = _container(tmp_path, "true", env={"IMAGE": image})
    assert run.returncode == 2 and needle in run.stderr, run.stderr


def test_sif_without_apptainer_names_the_fix(tmp_path, sif):
    run = _container(tmp_path, "true", env={"IMAGE": str(sif), "APPTAINER": "apptainer-not-installed"})
    assert run.returncode == 2 and "needs apptainer, which is not installed" in run.stderr, run.stderr


@pytest.mark.parametrize("env,args,needle", [
    ({"GPUS": "yes"}, ["true"], "GPUS=yes but no NVIDIA GPU is visible here"),
    ({}, ["python3", "-m", "pipelines", "run", "x", "--device", "cuda"], "--device cuda but no GPU is passed"),
    ({"GPUS": "maybe"}, ["true"], "GPUS=maybe is not auto, yes or no"),
])
def test_gpu_requested_where_none_exists_is_an_error(tmp_path, sif, env, args, needle):
    bin_dir = tmp_path / "bin"
    _tool(bin_dir, "apptainer", RECORDER)
    run = _container(tmp_path, *args, env={"IMAGE": str(sif), **env}, path=f"{bin_dir}:/usr/bin:/bin")
    assert run.returncode == 2 and needle in run.stderr, run.stderr


@pytest.mark.parametrize("engine,gpu_args", [("docker", ["--gpus", "all"]), ("podman", ["--device", "nvidia.com/gpu=all"])])
def test_oci_engines_get_gpus_only_on_a_gpu_node(tmp_path, engine, gpu_args):
    """No GPU and no Docker engine here: recording stand-ins for the engine and nvidia-smi show the GPU
    arguments each engine gets (the Podman path itself runs for real in test_container_build.py)."""
    bin_dir = tmp_path / "bin"
    _tool(bin_dir, engine, RECORDER)
    record = tmp_path / "argv.json"
    env = {"IMAGE": f"{engine}:accel-cuda:local", "RECORD_TO": str(record), "NCCL_DEBUG": "INFO"}
    assert _container(tmp_path, "true", env=env, path=f"{bin_dir}:/usr/bin:/bin").returncode == 0
    argv = json.loads(record.read_text())["argv"]
    assert argv[:2] == ["run", "--rm"] and "--ipc=host" in argv and "NCCL_DEBUG=INFO" in argv
    assert gpu_args[0] not in argv
    _tool(bin_dir, "nvidia-smi", FAKE_GPU)
    assert _container(tmp_path, "true", env=env, path=f"{bin_dir}:/usr/bin:/bin").returncode == 0
    argv = json.loads(record.read_text())["argv"]
    at = argv.index(gpu_args[0])
    assert argv[at:at + 2] == gpu_args and argv[-2:] == ["accel-cuda:local", "true"]
