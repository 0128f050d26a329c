"""Rewrite README.md's sample verdict table from the committed demo run (results/reference/demo-sample/: the
chapter 2 ladder of one `make demo`, its records as written), so the sample says what today's code says on real
records. tests/unit/test_readme.py checks the block against the same run. Run: .venv/bin/python
ci/update-readme-verdict.py
"""

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
PATTERN = re.compile(r"(<!-- verdict-table:begin -->\n).*?(\n<!-- verdict-table:end -->)", re.S)


def block() -> str:
    """The table as `make demo` prints it for these records, and the line that says where and when it ran."""
    records = load(RUN).records
    ok = [r for r in records if r["status"] == "ok"]
    env = ok[0]["env"]
    day = min(r["run_id"] for r in ok)[:8]
    table = verdict.text(records, IDS, [], Path("results/demo-<time>")).rsplit("\n", 1)[0]
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
    readme.write_text(PATTERN.sub(lambda m: m.group(1) + block() + m.group(2), text))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
