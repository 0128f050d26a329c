"""What a newcomer copies works when pasted into a fresh shell: `make demo`'s last line (the one that puts
`accel` on PATH), then each command the tool prints as a suggestion along the first run, pasted as printed
into `bash --norc` with an emptied environment: the refusal's offline-data hint, then the run's "full report"
command, whose page must exist afterwards. The run is a real smoke-scale run of chapter 2's baseline on the
generated data that hint writes. (Refusal hints of every kind run end to end in test_hint_commands_run.py.)
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from conftest import REPO


def demo_path_line() -> str:
    """The PATH line exactly as ci/demo.sh prints it last, for this test's interpreter's venv."""
    echo = [line for line in (REPO / "ci" / "demo.sh").read_text().splitlines() if "to type accel" in line]
    assert len(echo) == 1 and echo[0].startswith("echo "), "ci/demo.sh ends with the PATH line"
    printed = subprocess.run(["bash", "-c", echo[0]], env={"PYTHON": sys.executable, "PATH": "/usr/bin:/bin"},
                             capture_output=True, text=True, check=True).stdout.strip()
    found = re.fullmatch(r"to type accel as printed: (export PATH=\S+)", printed)
    assert found, printed
    return found.group(1)


def pasted(line: str, home: Path) -> subprocess.CompletedProcess:
    """`line` run in a fresh login-less shell: no rc file, an environment holding only HOME and a bare PATH."""
    return subprocess.run(["bash", "--norc", "--noprofile", "-c", line], cwd=home, capture_output=True, text=True,
                          timeout=600, env={"HOME": str(home), "PATH": "/usr/local/bin:/usr/bin:/bin"})


def suggestion(text: str, prefix: str) -> str:
    """The command `text` suggests: from `prefix` to a closing backtick, a semicolon or the end of the line."""
    found = re.search(re.escape(prefix) + r"[^`;\n]*", text)
    assert found, f"no `{prefix}...` in: {text[-2000:]}"
    return found.group(0).strip().rstrip(".")


def test_a_newcomer_pastes_the_demo_s_path_line_then_each_suggestion_as_printed(tmp_path):
    export = demo_path_line()
    assert pasted(f"{export}; command -v accel", tmp_path).stdout.strip() == str(Path(sys.executable).parent / "accel")
    assert pasted("command -v accel", tmp_path).returncode != 0  # the fresh shell has no accel without the line

    data, results = tmp_path / "data", tmp_path / "results"
    run = f"accel run ch2-baseline --scale smoke --data-root {data} --results-dir {results}"
    refused = pasted(f"{export}; {run}", tmp_path)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr[-2000:]
    generate = suggestion(refused.stderr, "accel data generate")
    made = pasted(f"{export}; {generate}", tmp_path)
    assert made.returncode == 0, made.stderr[-2000:]

    ran = pasted(f"{export}; {run}", tmp_path)
    assert ran.returncode == 0, ran.stderr[-2000:]
    report = suggestion(ran.stdout, "accel report")
    assert report == f"accel report --results-dir {results} --out {results}"
    shown = pasted(f"{export}; {report}", tmp_path)
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert (results / "report.html").is_file() and "ch2-baseline" in (results / "report.html").read_text()
