"""The host's oneCCL wheels are the image's: containers/locks/ccl.lock (what `make venv` installs with
--require-hashes) pins pyproject.toml's ccl group at the versions and hashes of the cpu-intel image's lock."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LOCKS = REPO / "containers" / "locks"


def pins(text: str) -> dict[str, tuple[str, frozenset[str]]]:
    """name -> (version, hashes) of every requirement in a pip-compile style lock."""
    out = {}
    for block in re.finditer(r"^([A-Za-z0-9_.-]+)==(\S+)((?:\s*\\\n\s+--hash=sha256:[0-9a-f]+)+)", text, re.M):
        out[block.group(1).lower()] = (block.group(2), frozenset(re.findall(r"sha256:([0-9a-f]+)", block.group(3))))
    return out


def test_the_host_s_ccl_wheels_are_pinned_by_the_image_s_hashes():
    host, image = pins((LOCKS / "ccl.lock").read_text()), pins((LOCKS / "ipex.lock").read_text())
    group = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["ccl"]
    wanted = dict(requirement.lower().split("==") for requirement in group)
    assert {name: version for name, (version, _) in host.items()} == wanted
    for name, pinned in host.items():
        assert pinned == image[name] and pinned[1], name


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_venv_installs_them_with_hashes_before_the_project(tmp_path):
    """`make -n venv` for a venv that is not there (every step shows): the venv's pip installs ccl.lock with
    --require-hashes, without dependencies, and only then the project with its ccl group."""
    venv = tmp_path / "venv"
    run = subprocess.run(["make", "-n", "--no-print-directory", "venv", f"VENV={venv}"], cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    installs = [words[3:] for words in (shlex.split(line) for line in run.stdout.splitlines()
                                        if not line.startswith("#"))
                if words[:3] == [f"{venv}/bin/pip", "install", "--quiet"]]
    locked = installs.index(["--no-compile", "--require-hashes", "--no-deps", "-r", "containers/locks/ccl.lock"])
    project = installs.index(["--no-compile", "-e", ".[test,zero,history,ccl]"])
    assert locked < project, installs
    # Byte-compiled once, on every core: with PYTHONDONTWRITEBYTECODE=1 nothing is cached at run time
    compiles = [line for line in run.stdout.splitlines() if "-m compileall" in line]
    assert len(compiles) == 1 and "-j 0" in compiles[0] and compiles[0].startswith(f"{venv}/bin/python"), compiles
