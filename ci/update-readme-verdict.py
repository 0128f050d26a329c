"""Rewrite README.md's sample verdict table from the committed demo run (results/reference/demo-sample/: the
chapter 2 ladder of one `make demo`, its records as written), so the sample says what today's code says on real
records: the verdict table and its reasons as `make demo` prints them, each line over WIDTH wrapped; and its
time figures from a measured fresh clone (TIMES), each with its machine and date. tests/unit/test_readme.py
checks both blocks against the same inputs. Run: .venv/bin/python ci/update-readme-verdict.py
"""

import json
import re
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from pipelines.core.record.results import load  # noqa: E402
from pipelines.core.stats import verdict  # noqa: E402

RUN = ROOT / "results" / "reference" / "demo-sample"
IDS = ("ch2-baseline", "ch2-nobias", "ch2-bs256")
WIDTH = 118  # the README's lines stay within 120 characters: a longer reason is wrapped, indented
PATTERN = re.compile(r"(<!-- verdict-table:begin -->\n).*?(\n<!-- verdict-table:end -->)", re.S)
FIGURES = re.compile(r"(<!-- timing-figures:begin -->\n).*?(<!-- timing-figures:end -->)", re.S)
TIMES = ROOT / "tests" / "fresh-clone-times.json"  # a measured fresh clone's phases (tests/README.md says how)


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 600 else f"{int(seconds // 60)} min {int(seconds % 60)} s"


def figures() -> str:
    """README's time figures, each from the measured fresh clone in TIMES, with its machine, date and commit.

    TIMES holds the phases that run measured (`phases_s`, in the order they ran); only those are written.
    """
    run = json.loads(TIMES.read_text())
    phases = ", ".join(f"{name} {minutes(seconds)}" for name, seconds in run["phases_s"].items())
    return textwrap.fill(
        f"How long, on a fresh clone ({run['machine']}, {run['date']}, at {run['commit']}, {run['tests']} tests): "
        f"{phases}.", width=WIDTH, break_long_words=False, break_on_hyphens=False) + "\n"


def block() -> str:
    """The table as `make demo` prints it for these records, and the line that says where and when it ran."""
    records = load(RUN).records
    ok = [r for r in records if r["status"] == "ok"]
    env = ok[0]["env"]
    day = min(r["run_id"] for r in ok)[:8]
    table = verdict.text(records, IDS, [], Path("results/demo-<time>")).rsplit("\n", 1)[0]
    table = table.split("\ncounts and settings:", 1)[0]  # the verdicts; the counts that follow are left out
    lines = [wrapped for line in table.splitlines() for wrapped in
             (textwrap.wrap(line, width=WIDTH, subsequent_indent="    ", break_long_words=False,
                            break_on_hyphens=False) if len(line) > WIDTH else [line])]
    table = "\n".join(lines)
    rounds = len({r["run_id"] for r in ok})
    return f"```text\n{table}\n```\n" + textwrap.fill(
        f"(the chapter 2 ladder of one `make demo`: {rounds} rounds, on {env['cpu_id']} ({env['cpu_model']}, "
            f"{env['logical_cpus']} logical CPUs), {day[:4]}-{day[4:6]}-{day[6:]}; records: "
            f"[results/reference/demo-sample/](results/reference/demo-sample/))", width=115, break_long_words=False,
        break_on_hyphens=False)


def main() -> int:
    readme = ROOT / "README.md"
    text = readme.read_text()
    if len(PATTERN.findall(text)) != 1:
        sys.exit("README.md must hold the verdict-table markers exactly once")
    if len(FIGURES.findall(text)) != 1:
        sys.exit("README.md must hold the timing-figures markers exactly once")
    text = PATTERN.sub(lambda m: m.group(1) + block() + m.group(2), text)
    readme.write_text(FIGURES.sub(lambda m: m.group(1) + figures() + m.group(2), text))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
