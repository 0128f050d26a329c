"""launch/_container.sh: the IMAGE= hook every launcher puts in front of its command (launch/_common.sh's
image_command): around the single process or torchrun, around each rank under the host's mpirun/srun.

The Podman path is tested for real in test_container_build.py. Apptainer cannot run on the CI machine
(no setuid/user-namespace install, no SIF), so its branch is checked by the exact argv and environment it
would hand to `apptainer`: a stand-in `apptainer` on PATH records them. A stand-in `nvidia-smi` likewise
plays the GPU node, since the CI machine has no GPU, and stand-in `mpirun`/`srun` record the host
launcher's command line (no SLURM cluster runs for these fast checks; the real mpirun also starts one
stand-in container per rank below, and test_slurm.py runs the real srun without IMAGE).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import REPO
from distutil import free_port
from pipelines.core.record import envinfo

# Each stand-in answers the launcher's image check (`podman image inspect`, `apptainer inspect --labels`) with
# the label an image built from containers/ carries, and records every other call.
LABEL_ANSWER = """import sys
if sys.argv[1:2] in (["inspect"], ["image"]):
    print("accel.build-info: /opt/accel/build-info.json" if sys.argv[1] == "inspect" else "/opt/accel/build-info.json")
    sys.exit(0)
"""
RECORDER = """#!/usr/bin/env python3
import json, os, sys
""" + LABEL_ANSWER + """
with open(os.environ["RECORD_TO"], "w") as out:
    json.dump({"argv": sys.argv[1:], "env": {k: v for k, v in os.environ.items()
                                              if k.startswith("APPTAINERENV_")}}, out)
"""
# One JSON line a call (ranks share the file): argv, and the rank the host launcher gave this container.
RANK_RECORDER = """#!/usr/bin/env python3
import json, os, sys
""" + LABEL_ANSWER + """
with open(os.environ["RECORD_TO"], "a") as out:
    rank = os.environ.get("APPTAINERENV_OMPI_COMM_WORLD_RANK")
    out.write(json.dumps({"argv": sys.argv[1:], "rank": rank}) + "\\n")
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


@pytest.mark.parametrize("engine,gpu_args",
                         [("docker", ["--gpus", "all"]), ("podman", ["--device", "nvidia.com/gpu=all"])])
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


WRAPPER = str(REPO / "launch" / "_container.sh")
ACCEL_ARGS = ["run", "ch8-ddp-template", "--scale", "smoke", "--dataset", "synthetic"]  # the pre-flight checks data


def _launcher(name: str, bin_dir: Path, env: dict) -> subprocess.CompletedProcess:
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp"), "THREADS": "1",
           "MASTER_PORT": str(free_port()), **env}
    return subprocess.run([f"launch/{name}.sh", *ACCEL_ARGS], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env=env)


@pytest.mark.parametrize("launcher,count", [("mpirun", {"NP": "2"}), ("srun", {"NTASKS": "2"})])
def test_host_launcher_is_outermost_and_wraps_each_rank_once(tmp_path, sif, launcher, count):
    """mpirun/srun run on the host and start `_container.sh python3 -m pipelines ...` per rank: the launcher
    is never inside the container and the container hook appears exactly once."""
    bin_dir = tmp_path / "bin"
    _tool(bin_dir, launcher, RECORDER)  # the stand-in host launcher records its argv
    _tool(bin_dir, "apptainer", RECORDER)  # answers the launcher's pre-flight image check on this host
    record = tmp_path / "launcher.json"
    run = _launcher(launcher, bin_dir, {"IMAGE": str(sif), "RECORD_TO": str(record), **count})
    assert run.returncode == 0, run.stderr
    argv = json.loads(record.read_text())["argv"]
    assert argv.count(WRAPPER) == 1 and "mpirun" not in argv and "srun" not in argv
    at = argv.index(WRAPPER)
    assert argv[at + 1:] == ["python3", "-m", "pipelines", *ACCEL_ARGS]
    assert ("-np" if launcher == "mpirun" else "--ntasks") in argv[:at]
    assert f"\n+ {launcher} " in run.stderr, "the echoed command starts with the host's launcher"


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="Open MPI is not installed (Debian: openmpi-bin)")
def test_real_mpirun_starts_one_container_per_rank(tmp_path, sif):
    bin_dir = tmp_path / "bin"
    _tool(bin_dir, "apptainer", RANK_RECORDER)
    record = tmp_path / "containers.jsonl"
    real = Path(shutil.which("mpirun")).parent
    run = _launcher("mpirun", bin_dir, {"IMAGE": str(sif), "RECORD_TO": str(record), "NP": "2",
                                        "PATH": f"{bin_dir}:{real}:/usr/bin:/bin"})
    assert run.returncode == 0, run.stderr
    calls = [json.loads(line) for line in record.read_text().splitlines()]
    assert sorted(call["rank"] for call in calls) == ["0", "1"], calls
    for call in calls:
        assert call["argv"][0] == "exec"
        assert call["argv"][-len(ACCEL_ARGS) - 3:] == ["python3", "-m", "pipelines", *ACCEL_ARGS]
        assert "mpirun" not in call["argv"], "no launcher inside the container"


def test_torchrun_runs_inside_one_container(tmp_path, sif):
    bin_dir = tmp_path / "bin"
    _tool(bin_dir, "apptainer", RANK_RECORDER)
    record = tmp_path / "containers.jsonl"
    run = _launcher("torchrun", bin_dir, {"IMAGE": str(sif), "RECORD_TO": str(record), "NPROC": "2"})
    assert run.returncode == 0, run.stderr
    [call] = [json.loads(line) for line in record.read_text().splitlines()]
    argv = call["argv"]
    at = argv.index(str(sif))
    # torchrun's agent, in accel's hands
    assert argv[at + 1:at + 4] == ["python3", "-m", "pipelines.core.distributed.agent"]
    assert argv[-len(ACCEL_ARGS) - 2:] == ["-m", "pipelines", *ACCEL_ARGS] and "--nproc-per-node" in argv


def test_one_knob_list_serves_the_fingerprint_and_the_container(tmp_path, sif):
    """pipelines/core/record/knobs.txt: plain lines are recorded and cross; `record` lines (set inside the container)
    are only recorded; `pass` lines (MPI/SLURM wiring) only cross."""
    bin_dir = tmp_path / "bin"
    _tool(bin_dir, "apptainer", RECORDER)
    record = tmp_path / "argv.json"
    env = {"IMAGE": str(sif), "RECORD_TO": str(record), "OMP_SCHEDULE": "static", "APPTAINER_NAME": "x.sif",
           "SLURM_STEP_ID": "0", "PMIX_RANK": "1"}
    assert _container(tmp_path, "true", env=env, path=f"{bin_dir}:/usr/bin:/bin").returncode == 0
    crossed = {name.removeprefix("APPTAINERENV_") for name in json.loads(record.read_text())["env"]}
    assert {"OMP_SCHEDULE", "SLURM_STEP_ID", "PMIX_RANK"} <= crossed and "APPTAINER_NAME" not in crossed
    recorded = envinfo.RECORDED_PREFIXES
    assert "OMP_SCHEDULE".startswith(recorded) and "APPTAINER_NAME".startswith(recorded)
    assert not "SLURM_STEP_ID".startswith(recorded) and not "PMIX_RANK".startswith(recorded)
    assert envinfo.knob_prefixes("pass", "A_\nB_ record\nC_ pass  # wiring\n# comment\n") == ("A_", "C_")


@pytest.fixture(scope="module")
def unlabelled_image(tmp_path_factory) -> str:
    """A real local image that is not one of ours: an empty filesystem imported into Podman, no labels."""
    if shutil.which("podman") is None:
        pytest.skip("podman not installed (ci/install-test-deps.sh)")
    archive = tmp_path_factory.mktemp("img") / "empty.tar"
    subprocess.run(["tar", "-cf", str(archive), "--files-from", "/dev/null"], check=True)
    tag = "localhost/accel-not-ours:test"
    subprocess.run(["podman", "import", str(archive), tag], check=True, capture_output=True, timeout=120)
    yield tag
    subprocess.run(["podman", "rmi", "-f", tag], capture_output=True, timeout=120)


@pytest.mark.parametrize("which,needle", [
    ("unlabelled", "has no accel build info (label accel.build-info); it was not built from containers/: "
                   "make image TARGET=<target>"),
    ("missing", "has no image localhost/accel-never-built:test on "),
])
def test_podman_image_must_exist_and_carry_the_build_info(tmp_path, unlabelled_image, which, needle):
    tag = unlabelled_image if which == "unlabelled" else "localhost/accel-never-built:test"
    run = _container(tmp_path, "true", env={"IMAGE": f"podman:{tag}"})
    assert run.returncode == 2 and needle in run.stderr, run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and not (tmp_path / "r").exists()


def test_sif_without_the_build_info_label_is_refused(tmp_path, sif):
    bin_dir = tmp_path / "bin"
    _tool(bin_dir, "apptainer",
          "#!/bin/sh\n[ \"$1\" = inspect ] && echo 'org.label-schema.build-arch: amd64'\nexit 0\n")
    run = _container(tmp_path, "true", env={"IMAGE": str(sif)}, path=f"{bin_dir}:/usr/bin:/bin")
    assert run.returncode == 2 and "has no accel build info" in run.stderr, run.stderr


def test_check_mode_is_silent_and_starts_nothing(tmp_path, sif):
    """`_container.sh --check`: the launchers' per-host pre-flight runs the checks only."""
    bin_dir = tmp_path / "bin"
    _tool(bin_dir, "apptainer", RECORDER)
    record = tmp_path / "argv.json"
    run = _container(tmp_path, "--check", env={"IMAGE": str(sif), "RECORD_TO": str(record)},
                     path=f"{bin_dir}:/usr/bin:/bin")
    assert run.returncode == 0 and run.stderr == "" and not record.exists(), run.stderr


def test_gpu_batch_script_asks_for_gpus_and_runs_one_container_per_task(tmp_path, sif):
    """launch/slurm-gpu.sbatch, the cluster example: its #SBATCH lines ask for GPUs, cores and tasks per node;
    without IMAGE it refuses in one line; with IMAGE the host's srun starts one container per task (stand-in
    srun/scontrol: the SLURM cluster of test_slurm.py has no GPUs)."""
    script = REPO / "launch" / "slurm-gpu.sbatch"
    text = script.read_text()
    for directive in ("--gpus-per-node=", "--cpus-per-task=", "--ntasks-per-node=", "--nodes="):
        assert f"#SBATCH {directive}" in text, directive
    slurm = {"SLURM_SUBMIT_DIR": str(REPO), "SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "gpu01",
             "SLURM_NTASKS": "8", "SLURM_JOB_NUM_NODES": "1", "SLURM_CPUS_PER_TASK": "8", "HOME": "/tmp"}
    run = subprocess.run([str(script), *ACCEL_ARGS], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                         env={"PATH": "/usr/bin:/bin", **slurm})
    assert run.returncode == 2 and run.stderr.strip().endswith("submit with IMAGE=containers/cuda.sif (make sif "
                                                              "TARGET=cuda on a build node)"), run.stderr
    bin_dir = tmp_path / "bin"
    _tool(bin_dir, "srun", RECORDER)
    _tool(bin_dir, "apptainer", RECORDER)
    _tool(bin_dir, "nvidia-smi", FAKE_GPU)
    _tool(bin_dir, "scontrol", "#!/bin/sh\necho gpu01\n")
    record = tmp_path / "srun.json"
    run = subprocess.run([str(script), *ACCEL_ARGS], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                         env={"PATH": f"{bin_dir}:/usr/bin:/bin", "IMAGE": str(sif), "RECORD_TO": str(record),
                              **slurm})
    assert run.returncode == 0, run.stderr
    argv = json.loads(record.read_text())["argv"]
    assert argv[:2] == ["--ntasks", "8"] and argv.count(WRAPPER) == 1
    assert "launch: OMP_NUM_THREADS=8" in run.stderr and "MASTER_ADDR=gpu01" in run.stderr


# What each engine prints when the host refuses the start (exit 125/126/127, the command inside never ran),
# and the knob the wrapper's one line names. A stand-in `podman` plays the refusing host: the CI machine can
# show the rlimit case for real (test_container_build.py), not the others.
START_FAILURES = [
    (126, "Error: runc: runc create failed: unable to start container process: error during container init: "
          "error setting rlimits for ready process: error setting rlimit type 7: operation not permitted",
     "set CONTAINER_ARGS='--runtime runc --ulimit nofile=4096:4096 --ulimit nproc=4096:4096'"),
    (125, "Error: cannot set up namespace using \"/usr/bin/newuidmap\": exit status 1",
     "add subordinate ids for your user in /etc/subuid and /etc/subgid"),
    (125, 'Error: default OCI runtime "crun" not found: invalid argument', "CONTAINER_ARGS='--runtime runc'"),
]


@pytest.mark.parametrize("status,message,fix", START_FAILURES)
def test_a_refused_container_start_ends_in_one_line_naming_the_fix(tmp_path, status, message, fix):
    _tool(tmp_path / "bin", "podman", "#!/usr/bin/env python3\nimport sys\n" + LABEL_ANSWER
          + f"print({message!r}, file=sys.stderr)\nsys.exit({status})\n")
    run = _launch("run", "ch2-baseline", "--scale", "smoke", "--dataset", "synthetic", "--results-dir",
                  str(tmp_path / "r"), env={"IMAGE": "podman:localhost/accel-cpu:test", "GPUS": "no"},
                  path=f"{tmp_path / 'bin'}:/usr/bin:/bin")
    last = run.stderr.strip().splitlines()[-1]
    assert run.returncode == status and message in run.stderr
    assert last.startswith(f"launch: error: podman could not start the container (exit {status}): ") and fix in last


def test_a_command_that_fails_inside_the_container_gets_no_engine_line(tmp_path):
    """Exit 1 from the command inside is the command's own failure: passed on as it is, nothing added."""
    _tool(tmp_path / "bin", "podman", "#!/usr/bin/env python3\nimport sys\n" + LABEL_ANSWER
          + "print('accel: error: something of the run', file=sys.stderr)\nsys.exit(2)\n")
    run = _launch("run", "ch2-baseline", "--scale", "smoke", "--dataset", "synthetic", "--results-dir",
                  str(tmp_path / "r"), env={"IMAGE": "podman:localhost/accel-cpu:test", "GPUS": "no"},
                  path=f"{tmp_path / 'bin'}:/usr/bin:/bin")
    assert run.returncode == 2 and "launch: error: podman could not start" not in run.stderr
