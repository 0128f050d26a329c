"""Container images for the tests, built for real with Podman once per session (the layer cache makes a
second call cheap), and the arguments rootful Podman needs inside this sandbox.

Two substitutions, both because CI reaches no container registry: the base is a debootstrap'd Debian
bookworm minbase (ci/debootstrap-base.sh; same distro and the same apt python3.11 as the pinned
debian:bookworm-*-slim default, which stays the recipes' default) pinned by its own digest, and the wheels
come from the air-gapped wheelhouse made from the hashed lock (`make wheelhouse TARGET=...`).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO

CONTAINERS = REPO / "containers"
# Rootful Podman inside an unprivileged sandbox (no CAP_SYS_RESOURCE): runc and lowered rlimits.
SANDBOX_ARGS = "--runtime runc --ulimit nofile=4096:4096 --ulimit nproc=4096:4096"
CACHED_BASE = Path(os.environ.get("CACHE", "/var/cache/accel")) / "bookworm-minbase.tar"
# `make test` builds cpu and mpi; the heavy cuda and cpu-intel builds are `pytest -m images_all`.
DEFAULT_TARGETS = ("cpu", "mpi")
ALL_TARGETS = ("cpu", "mpi", "cuda", "cpu-intel")

needs_podman = [
    pytest.mark.skipif(shutil.which("podman") is None, reason="podman not installed (ci/install-test-deps.sh)"),
    pytest.mark.skipif(shutil.which("debootstrap") is None and not CACHED_BASE.exists(),
                       reason="neither debootstrap nor a cached base tarball (ci/install-test-deps.sh)"),
]


def requires_podman(test):
    """The needs_podman skips on one test."""
    for mark in needs_podman:
        test = mark(test)
    return test


def target_params(targets=ALL_TARGETS) -> list:
    """pytest params: the default targets plain, the others in the images_all group."""
    return [pytest.param(t, marks=() if t in DEFAULT_TARGETS else pytest.mark.images_all) for t in targets]


def run(cmd: list[str], timeout: int, cwd: Path = REPO, **env: str) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env={**os.environ, **env})
    assert done.returncode == 0, f"{' '.join(cmd)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@contextlib.contextmanager
def one_build_at_a_time():
    """Podman builds of this suite's images, one at a time on the machine: two pytest workers (make test runs
    two) would otherwise build the same tags side by side, twice the work, and import the base twice."""
    CACHED_BASE.parent.mkdir(parents=True, exist_ok=True)
    with open(CACHED_BASE.parent / "test-images.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


@functools.cache
def base_image() -> dict:
    """The local bookworm base and its own digest (what the build pins it by)."""
    with one_build_at_a_time():
        ref = run(["ci/debootstrap-base.sh"], timeout=900).stdout.split()[-1]
    digest = run(["podman", "image", "inspect", "--format", "{{.Digest}}", ref], 60).stdout.strip()
    return {"ref": ref, "digest": digest}


@functools.cache
def wheelhouse(target: str) -> None:
    run(["containers/build.sh", "wheelhouse", target], timeout=1800, PYTHON=sys.executable)


@functools.cache
def built(target: str) -> dict:
    """`containers/build.sh image TARGET` from the local base and the wheelhouse, air-gapped (OFFLINE=1)."""
    base = base_image()
    tag = f"localhost/accel-{target}:test"
    with one_build_at_a_time():
        wheelhouse(target)
        start = time.monotonic()
        log = run(["containers/build.sh", "image", target], timeout=3600, BASE_IMAGE=base["ref"], OFFLINE="1",
                  IMAGE_TAG=tag)
    return {"tag": tag, "base": base, "seconds": time.monotonic() - start, "log": log.stdout + log.stderr}


def in_image(tag: str, *command: str, timeout: int = 300, **env: str) -> subprocess.CompletedProcess:
    """COMMAND in the image through launch/_container.sh, as the launchers run it."""
    return run(["launch/_container.sh", *command], timeout=timeout, IMAGE=f"podman:{tag}",
               CONTAINER_ARGS=SANDBOX_ARGS, **env)


def def_arguments(text: str) -> dict[str, str]:
    """The %arguments defaults of an Apptainer definition (what `apptainer build` substitutes)."""
    body = re.search(r"^%arguments\n((?:[ \t]+\S.*\n)+)", text, re.M)
    return dict(line.strip().split("=", 1) for line in body.group(1).splitlines()) if body else {}
