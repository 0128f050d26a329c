"""Every image target built for real with Podman, smoke-run, and every generated `.def`'s %post executed.

`make test` builds `cpu` and `mpi` (they share the Python layer, so the second is cheap); `cuda` and
`cpu-intel` are heavy (another 6-7 GB each), and so is each `.def` built through spython (about 9 GB: the
wheelhouse stays in a layer): they form the `images_all` group that `make test` leaves out (CI has one
hour and a shared disk); `make test` keeps the `.def` checks that build no environment (a failing %post
line fails the build):
`.venv/bin/python -m pytest -m images_all tests/containers/test_container_build.py` (or `make test-images`) runs them.
Each image runs a smoke pipeline through launch/_container.sh, as the launchers do, and its record carries
the image's build info. The local base and the wheelhouse stand in for the registry (tests/imageutil.py).

Apptainer cannot be installed here, so each `.def` is converted to a Dockerfile with spython and built
with Podman: its %files and every %post line run for real (a failing line fails the build) and its %test
runs in the result. What the conversion cannot carry is done as `apptainer build` would do it: the
`{{ ARG }}` templates are filled from %arguments (OFFLINE=1: the wheelhouse), the base is the local one,
and %test runs as a command (spython writes it as a HEALTHCHECK, which a build never runs).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys

import pytest

from conftest import REPO, records
from imageutil import (ALL_TARGETS, CONTAINERS, SANDBOX_ARGS, base_image, built, def_arguments, in_image, needs_podman,
                       run, target_params, wheelhouse)

pytestmark = [pytest.mark.slow, *needs_podman]
SMOKE = ("run", "ch2-baseline", "--scale", "smoke", "--dataset", "synthetic")


@pytest.mark.parametrize("target", target_params())
def test_image_builds_runs_unprivileged_and_smoke_runs_a_pipeline(target, tmp_path):
    image = built(target)
    user = run(["podman", "image", "inspect", "--format", "{{.Config.User}}", image["tag"]], 60).stdout
    assert user.strip() not in ("", "0", "root")
    results = tmp_path / "results"
    done = run(["launch/local.sh", *SMOKE, "--results-dir", str(results)], timeout=900,
               IMAGE=f"podman:{image['tag']}", CONTAINER_ARGS=SANDBOX_ARGS, THREADS="2")
    assert "podman run --rm" in done.stderr and "--ipc=host" in done.stderr and f"{REPO}:{REPO}:ro" in done.stderr
    [record] = [r for r in records(results) if r["status"] == "ok"]
    env = record["env"]
    lock = CONTAINERS / "locks" / ("ipex.lock" if target == "cpu-intel" else "torch.lock")
    assert env["image"]["target"] == target
    assert env["image"]["lock_sha256"] == hashlib.sha256(lock.read_bytes()).hexdigest()
    base = image["base"]
    assert env["image"]["base_image"] == f"{base['ref']}@{base['digest']}", "the local base, pinned by digest"
    assert env["image"]["base_digest"] == base["digest"]
    assert env["executable"].startswith("/opt/venv/"), "the run used the image's Python, not the host's"
    assert env["vars"]["OMP_NUM_THREADS"] == "2", "the launcher's knobs cross into the container"


def test_a_start_the_host_refuses_ends_in_one_line_naming_container_args(tmp_path):
    """Without CONTAINER_ARGS, rootful Podman on a host without CAP_SYS_RESOURCE fails in runc
    ("error setting rlimit type 7"); the wrapper adds one `launch: error:` line naming the knob. On a host
    that allows it the run simply succeeds, and there is nothing to check."""
    image = built("cpu")
    env = {k: v for k, v in os.environ.items() if k != "CONTAINER_ARGS"}
    done = subprocess.run(["launch/local.sh", *SMOKE, "--results-dir", str(tmp_path)], cwd=REPO, capture_output=True,
                          text=True, timeout=300, env={**env, "IMAGE": f"podman:{image['tag']}", "THREADS": "2"})
    if done.returncode == 0:
        pytest.skip("this host lets the container runtime set its rlimits: no start failure to name")
    assert done.returncode == 126 and "error setting rlimit" in done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "launch: error: podman could not start the container (exit 126): the host does not let the container "
        "runtime raise its rlimits (no CAP_SYS_RESOURCE); set CONTAINER_ARGS='--runtime runc --ulimit "
        "nofile=4096:4096 --ulimit nproc=4096:4096' (docs/containers.md)")
    assert "Traceback" not in done.stderr


def test_cpu_and_mpi_share_the_python_layer():
    """One lock, one layer: the mpi build reuses the venv layer the cpu build made (same layer id)."""
    layers = {t: run(["podman", "image", "inspect", "--format", "{{json .RootFS.Layers}}", built(t)["tag"]],
                     60).stdout for t in ("cpu", "mpi")}
    cpu, mpi = (json.loads(layers[t]) for t in ("cpu", "mpi"))
    venv = max(i for i in range(min(len(cpu), len(mpi))) if cpu[i] == mpi[i])
    assert venv >= 3, f"only {venv + 1} shared layers: the Python environment was built twice"


def test_accel_inside_the_image_runs_the_mounted_checkout(tmp_path):
    done = in_image(built("cpu")["tag"], "accel", "list", "--status", "ready", RESULTS_DIR=str(tmp_path))
    assert "ch2-baseline" in done.stdout


def test_mpi_image_holds_debian_open_mpi_matching_the_host():
    image = built("mpi")
    done = in_image(image["tag"], "ompi_info", "--version")
    assert re.search(r"Open MPI\)? v?4\.1\.\d", done.stdout), done.stdout
    host = subprocess.run(["mpirun", "--version"], capture_output=True, text=True)
    if host.returncode == 0:
        host_version = re.search(r"(\d+\.\d+\.\d+)", host.stdout).group(1)
        assert host_version in done.stdout, "the host's mpirun and the image's Open MPI must be one release"


@pytest.mark.images_all
def test_cuda_image_imports_torch_and_reports_no_gpu_cleanly(tmp_path):
    done = in_image(built("cuda")["tag"], "/opt/accel/check-env.sh", RESULTS_DIR=str(tmp_path))
    assert "no GPU visible (CUDA build" in done.stdout and "Traceback" not in done.stderr
    assert re.search(r"cuda 13\.\d", done.stdout), "PyPI's torch is the CUDA 13 build"


@pytest.mark.images_all
def test_cpu_intel_image_runs_ipex_and_says_oneccl_is_absent(tmp_path):
    tag = built("cpu-intel")["tag"]
    done = in_image(tag, "/opt/accel/check-env.sh", "intel_extension_for_pytorch", RESULTS_DIR=str(tmp_path))
    assert "absent: oneccl_bind_pt:" in done.stdout
    results = tmp_path / "results"
    run(["launch/local.sh", "run", "ch4-ipex-densenet", "--scale", "smoke", "--dataset", "synthetic",
         "--variant", "ipex-fp32", "--results-dir", str(results)], timeout=1200, IMAGE=f"podman:{tag}",
        CONTAINER_ARGS=SANDBOX_ARGS)
    [record] = [r for r in records(results) if r["status"] == "ok"]
    assert record["variant"] == "ipex-fp32" and record["env"]["image"]["torch"].startswith("2.8.")
    assert "oneccl_bind_pt" in record["env"]["image"]["absent"]


@pytest.mark.images_all
def test_cpu_intel_image_carries_the_ccl_backend_built_against_its_torch(tmp_path):
    """install-ccl.sh compiled backends/ccl in the image (and removed the compiler): its collectives equal
    gloo's on 2 ranks there, and chapter 9's oneCCL arm runs through the launcher in the image."""
    tag = built("cpu-intel")["tag"]
    assert run(["podman", "run", "--rm", *SANDBOX_ARGS.split(), tag, "sh", "-c", "command -v g++ || echo none"],
               60).stdout.strip() == "none", "the compiler is removed in the step that used it"
    done = in_image(tag, "python3", "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                    "tests/dist/ccl_vs_gloo.py", RESULTS_DIR=str(tmp_path))
    assert "ok all_reduce torch.float32 sum within torch.float32 rounding" in done.stdout, done.stdout[-2000:]
    assert done.stdout.count("ok ") == 8, done.stdout[-2000:]
    results = tmp_path / "results"
    run([sys.executable, "-m", "pipelines", "launch", "ch9-cpu-oneccl", "--variant", "ranks=2", "--scale", "smoke",
         "--dataset", "synthetic", "--steps", "2", "--results-dir", str(results)], timeout=900,
        IMAGE=f"podman:{tag}", CONTAINER_ARGS=SANDBOX_ARGS, NPROC="2")
    ok = [r for r in records(results) if r["status"] == "ok"]
    assert ok and all(r["dist"]["backend"] == "ccl" and r["dist"]["ccl"]["binding"] == "accel_ccl" for r in ok)
    assert ok[0]["env"]["image"]["ccl"] == {"binding": "accel-ccl 1.0.0", "oneccl": "oneccl-cpu 2021.16.2"}
    assert ok[0]["env"]["image"]["torch"].startswith("2.8.")


def converted_def(target: str, base: str) -> str:
    """The target's .def as spython writes it as a Dockerfile, with what `apptainer build` would do itself:
    templates filled from %arguments (air-gapped), the base replaced by the local one, %test kept as a file."""
    from spython.main.parse.parsers import SingularityParser
    from spython.main.parse.writers import DockerWriter

    path = CONTAINERS / target / f"{target}.def"
    arguments = {**def_arguments(path.read_text()), "OFFLINE": "1", "BASE_DIGEST": base_image()["digest"]}
    text = DockerWriter(SingularityParser(str(path)).recipe).convert()
    text = re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: arguments[m.group(1)], text)
    text = re.sub(r"^FROM \S+", f"FROM {base}", text, count=1, flags=re.M)
    return re.sub(r"^HEALTHCHECK .*$", "", text, flags=re.M)


@pytest.fixture(scope="module")
def def_tags():
    """Tags of the images built from converted .defs, removed when the module ends (about 9 GB each, since
    the wheelhouse that %files copies stays in a layer; cpu and mpi share theirs while both exist)."""
    tags: list[str] = []
    yield tags
    for tag in tags:
        subprocess.run(["podman", "rmi", "-f", tag], capture_output=True, timeout=600)


@pytest.mark.images_all  # about 9 GB and 5 minutes a target: make test-images
@pytest.mark.parametrize("target", ALL_TARGETS)
def test_def_post_runs_for_real_via_spython(target, tmp_path, def_tags):
    base = base_image()
    wheelhouse(target)
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(converted_def(target, f"{base['ref']}@{base['digest']}"))
    assert re.search(r"^RUN .*install-python.sh ", dockerfile.read_text(), re.M), "the %post lines became RUNs"
    tag = f"localhost/accel-{target}-def:test"
    def_tags.append(tag)
    run(["podman", "build", "--format", "docker", "--network", "host", "-f", str(dockerfile), "-t", tag,
         str(CONTAINERS)], timeout=3600)
    sandbox = ["podman", "run", "--rm", *SANDBOX_ARGS.split(), tag]
    test = run([*sandbox, "/bin/bash", "/tests.sh"], timeout=600)
    assert "build info:" in test.stdout, "%test ran the self-check"
    info = json.loads(run([*sandbox, "cat", "/opt/accel/build-info.json"], 60).stdout)
    assert info["target"] == target and info["base_digest"] == base["digest"]
    assert run([*sandbox, "ls", "/opt/accel"], 60).stdout.split() == [
        "build-info.json", "check-env.sh", *(["install-ccl.sh"] if target == "cpu-intel" else []), "install-env.sh",
        "install-python.sh", "requirements.lock"], "%post removed the wheelhouse (and the ccl source)"


@pytest.mark.parametrize("script", ["install-python.sh", "install-env.sh"])
def test_a_failing_post_line_fails_the_build(script, tmp_path):
    """%post lines stand alone (Apptainer runs %post under `sh -e`; spython makes each a RUN), and a failing
    install step stops the build instead of leaving a half-made image: the converted cpu.def with only one
    install line, made to fail (a missing lock; step 2 without step 1's Python environment)."""
    base = base_image()
    lines = [line for line in converted_def("cpu", f"{base['ref']}@{base['digest']}").splitlines()
             if not line.startswith(("RUN ", "ADD wheelhouse/")) or f"/opt/accel/{script} " in line]
    text = "\n".join(lines).replace("install-python.sh /opt/accel/requirements.lock",
                                    "install-python.sh /opt/accel/missing.lock")
    (tmp_path / "Dockerfile").write_text(text + "\n")
    tag = "localhost/accel-broken:test"
    done = subprocess.run(["podman", "build", "--format", "docker", "--network", "host", "-f",
                           str(tmp_path / "Dockerfile"), "-t", tag, str(CONTAINERS)],
                          capture_output=True, text=True, timeout=900)
    subprocess.run(["podman", "rmi", "-f", tag], capture_output=True)
    expected = {"install-python.sh": "install-python: no lock /opt/accel/missing.lock",
                "install-env.sh": "install-env: no /opt/venv; run install-python.sh first"}[script]
    assert done.returncode != 0 and expected in done.stdout + done.stderr, done.stderr[-2000:]
