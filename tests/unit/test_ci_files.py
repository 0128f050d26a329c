"""The CI definitions users copy (.github/workflows/accel.yml, .gitlab-ci.yml) are valid for their CI
system, run only make targets the README names, and a broken copy of each is caught.

Validated with check-jsonschema (PyPI) against the schemas it vendors: GitHub's workflow schema
(`vendor.github-workflows`) and GitLab's CI schema (`vendor.gitlab-ci`); nothing is fetched. The workflow also
passes actionlint (tests/unit/test_actionlint.py).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FILES = {REPO / ".github/workflows/accel.yml": "vendor.github-workflows", REPO / ".gitlab-ci.yml": "vendor.gitlab-ci"}
CHECK = shutil.which("check-jsonschema", path=str(Path(sys.executable).parent))


def check(path: Path, schema: str) -> subprocess.CompletedProcess:
    return subprocess.run([CHECK, "--builtin-schema", schema, str(path)], capture_output=True, text=True,
                          timeout=120)


pytestmark = pytest.mark.skipif(CHECK is None, reason="check-jsonschema not installed (make venv installs the "
                                                      "test extra)")


@pytest.mark.parametrize("path", list(FILES), ids=lambda p: p.name)
def test_the_ci_file_is_valid_for_its_ci_system(path):
    done = check(path, FILES[path])
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("path,breakage", [
    (REPO / ".github/workflows/accel.yml", ("timeout-minutes: 90", "timeout-minutes: ninety")),
    (REPO / ".github/workflows/accel.yml", ("    runs-on: ubuntu-24.04\n", "")),
    (REPO / ".gitlab-ci.yml", ("  stage: test\n", "  stage: test\n  when: sometimes\n")),
    (REPO / ".gitlab-ci.yml", ("  script:\n    - ci/install-test-deps.sh",
                               "  scripts:\n    - ci/install-test-deps.sh")),
], ids=["workflow-timeout", "workflow-no-runner", "gitlab-when", "gitlab-script-key"])
def test_a_broken_copy_is_caught(tmp_path, path, breakage):
    old, new = breakage
    text = path.read_text()
    assert old in text
    broken = tmp_path / path.name
    broken.write_text(text.replace(old, new, 1))
    assert check(broken, FILES[path]).returncode != 0


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
@pytest.mark.parametrize("path", list(FILES), ids=lambda p: p.name)
def test_every_command_is_a_make_target_or_the_test_prerequisites(path, tmp_path):
    """No logic a user cannot run by hand: each command line is `make TARGET ...`, which make accepts as
    written (`make -n`, against a venv that is not there: every step it would run is printed, none runs),
    or ci/install-test-deps.sh."""
    commands = re.findall(r"^\s+(?:run:|-)\s+((?:sudo )?(?:make|ci/)\S*.*)$", path.read_text(), re.M)
    assert commands
    for command in commands:
        words = shlex.split(command.removeprefix("sudo "))
        assert words[0] in ("make", "ci/install-test-deps.sh"), command
        if words[0] == "make":
            dry = subprocess.run(["make", "-n", "--no-print-directory", *words[1:], f"VENV={tmp_path / 'venv'}"],
                                 cwd=REPO, capture_output=True, text=True, timeout=60)
            assert dry.returncode == 0 and dry.stdout.strip(), (command, dry.stdout, dry.stderr)
        else:
            assert (REPO / words[0]).is_file() and os.access(REPO / words[0], os.X_OK), command
