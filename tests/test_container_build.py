"""The `cpu` image built for real with Podman, then a smoke pipeline run inside it via IMAGE=podman:...

Two substitutions, both because the CI machine reaches no container registry: the base is a debootstrap'd
Debian bookworm minbase (ci/debootstrap-base.sh; same distro and the same apt python3.11 as the pinned
debian:bookworm-*-slim default, which stays the Dockerfile's default), and the wheels come from the
air-gapped wheelhouse made from the lock (`make wheelhouse TARGET=cpu`), i.e. the real torch 2.14.1 +
torchvision 0.29.1. Slow: about 5-10 minutes on 2 cores; the base is cached under /var/cache/accel.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, records

TAG = "localhost/accel-cpu:test"
# Rootful Podman inside an unprivileged sandbox (no CAP_SYS_RESOURCE): runc and lowered rlimits.
SANDBOX_ARGS = "--runtime runc --ulimit nofile=4096:4096 --ulimit nproc=4096:4096"
CACHED_BASE = Path(os.environ.get("CACHE", "/var/cache/accel")) / "bookworm-minbase.tar"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("podman") is None, reason="podman not installed (ci/install-test-deps.sh)"),
    pytest.mark.skipif(shutil.which("debootstrap") is None and not CACHED_BASE.exists(),
                       reason="neither debootstrap nor a cached base tarball (ci/install-test-deps.sh)"),
]


def _run(cmd: list[str], timeout: int, **env: str) -> subprocess.CompletedProcess:
    run = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout,
                         env={**os.environ, **env})
    assert run.returncode == 0, f"{' '.join(cmd)} failed:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    return run


@pytest.fixture(scope="module")
def cpu_image() -> dict:
    base = _run(["ci/debootstrap-base.sh"], timeout=900).stdout.split()[-1]
    _run(["containers/build.sh", "wheelhouse", "cpu"], timeout=900, PYTHON=sys.executable)
    _run(["containers/build.sh", "image", "cpu"], timeout=1500, BASE_IMAGE=base, OFFLINE="1", IMAGE_TAG=TAG)
    return {"tag": TAG, "base": base}


def test_image_runs_as_an_unprivileged_user(cpu_image):
    user = _run(["podman", "image", "inspect", "--format", "{{.Config.User}}", cpu_image["tag"]], 60).stdout
    assert user.strip() not in ("", "0", "root")


def test_smoke_pipeline_in_the_image_records_its_build_info(cpu_image, tmp_path):
    results = tmp_path / "results"
    run = _run(["launch/local.sh", "run", "ch2-baseline", "--scale", "smoke", "--dataset", "synthetic",
                "--results-dir", str(results)], timeout=600,
               IMAGE=f"podman:{cpu_image['tag']}", CONTAINER_ARGS=SANDBOX_ARGS, THREADS="2")
    assert "podman run --rm" in run.stderr and "--ipc=host" in run.stderr and f"{REPO}:{REPO}:ro" in run.stderr
    [record, *_] = records(results)
    env = record["env"]
    lock = (REPO / "containers" / "cpu" / "requirements.lock").read_bytes()
    assert env["image"]["target"] == "cpu"
    assert env["image"]["lock_sha256"] == hashlib.sha256(lock).hexdigest()
    assert env["image"]["torch"] == "2.14.1" and env["image"]["base_image"] == cpu_image["base"]
    assert env["image"]["base_digest"] == "unresolved"
    assert env["executable"].startswith("/opt/venv/"), "the run used the image's Python, not the host's"
    assert env["vars"]["OMP_NUM_THREADS"] == "2", "the launcher's knobs cross into the container"


def test_accel_inside_the_image_runs_the_mounted_checkout(cpu_image, tmp_path):
    run = _run(["launch/_container.sh", "accel", "list", "--status", "ready"], timeout=300,
               IMAGE=f"podman:{cpu_image['tag']}", CONTAINER_ARGS=SANDBOX_ARGS, RESULTS_DIR=str(tmp_path))
    assert "ch2-baseline" in run.stdout
