#!/usr/bin/env python3
"""Check a test tier's recorded wall time against its budget, and name the tests that grew.

Usage:
  ci/test-budget.py check TIER JUNIT [--budgets tests/budgets.toml]
      print the tier's wall time against its budget and its 15 slowest tests; exit 1 when the wall time is
      more than 25 % over the budget, naming each test that grew (slower than its recorded time by more
      than 25 % and 2 s, or a test with no recorded time that takes longer than the file's `record_above_s`)
  ci/test-budget.py record TIER JUNIT [--budgets tests/budgets.toml]
      rewrite the tier's recorded per-test times (every test over `record_above_s`) from JUNIT, after a
      measured run on the machine class the budgets are for

It reads pytest's JUnit XML (`make test` writes it; pytest's junit_duration_report "total": each test's
set-up, call and tear-down, a session fixture's set-up counted in the first test that asks for it). It checks
recorded times, after the run: no test is ever timed against a goal while it runs.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from junitparser import JUnitXml

REPO = Path(__file__).resolve().parents[1]
OVER = 1.25  # a tier fails above budget x OVER; a test "grew" above its recorded time x OVER (+ SLACK_S)
SLACK_S = 2.0
SLOWEST = 15


def fail(message: str) -> None:
    print(f"test-budget: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def load_budgets(path: Path) -> dict:
    try:
        return tomllib.loads(path.read_text())
    except FileNotFoundError:
        fail(f"no budgets file {path}: pass --budgets PATH (the repository's is tests/budgets.toml)")
    except tomllib.TOMLDecodeError as exc:
        fail(f"{path} is not valid TOML ({exc}): fix the file or restore it with git checkout")


def tier_of(budgets: dict, tier: str, path: Path) -> dict:
    tiers = budgets.get("tiers", {})
    if tier not in tiers:
        fail(f"tier {tier!r} has no budget in {path}: use one of {', '.join(sorted(tiers))}")
    return tiers[tier]


def read_junit(path: Path) -> tuple[float, dict[str, float]]:
    """(the session's wall seconds, {test id: seconds}); a test id is pytest's: file::name[params]."""
    try:
        xml = JUnitXml.fromfile(str(path))
    except (OSError, SyntaxError) as exc:  # ParseError is a SyntaxError
        fail(f"cannot read JUnit XML {path} ({exc}): run the tier first (make test writes it)")
    suites = [xml] if xml._tag == "testsuite" else list(xml)
    wall, times = 0.0, {}
    for suite in suites:
        wall += float(suite.time or 0.0)
        for case in suite:
            times[test_id(case.classname or "", case.name or "")] = float(case.time or 0.0)
    return wall, times


def test_id(classname: str, name: str) -> str:
    """pytest's node id from JUnit's dotted classname: tests.dist.test_x.TestY + name ->
    tests/dist/test_x.py::TestY::name."""
    parts = classname.split(".")
    for cut in range(len(parts), 0, -1):
        module = Path(*parts[:cut]).with_suffix(".py")
        if (REPO / module).is_file() or cut == 1:
            return "::".join([module.as_posix(), *parts[cut:], name])
    return name


def pace(times: dict[str, float], recorded: dict[str, float]) -> float:
    """How much slower this machine ran the recorded tests: the median of now / recorded over them (at least
    MIN_PACED of them), never below 1. A slower machine scales the budget and every recorded time, so a tier
    fails for a test that grew, not for a host that is slower than the one that recorded them."""
    ratios = sorted(times[t] / s for t, s in recorded.items() if t in times and s > 0)
    return max(1.0, ratios[len(ratios) // 2]) if len(ratios) >= MIN_PACED else 1.0


MIN_PACED = 5


def grown(times: dict[str, float], recorded: dict[str, float], above_s: float,
          factor: float = 1.0) -> list[tuple[str, float, float | None]]:
    """The tests slower than their recorded time (x `factor`, the machine's pace) by more than 25 % and 2 s,
    or unrecorded and over above_s, most added seconds first: (test id, seconds now, recorded seconds or None)."""
    found = []
    for test, seconds in times.items():
        before = recorded.get(test)
        if before is None and seconds > above_s * factor:
            found.append((test, seconds, None))
        elif before is not None and seconds > before * factor * OVER + SLACK_S:
            found.append((test, seconds, before))
    return sorted(found, key=lambda g: g[1] - (g[2] or 0.0), reverse=True)


def check(tier: str, junit: Path, path: Path) -> int:
    budgets = load_budgets(path)
    spec = tier_of(budgets, tier, path)
    budget, above_s = float(spec["budget_s"]), float(budgets.get("record_above_s", 15.0))
    wall, times = read_junit(junit)
    recorded = budgets.get("recorded", {}).get(tier, {})
    factor = pace(times, recorded)
    if factor > 1:
        print(f"test-budget: this machine ran the recorded tests {factor:.2f}x slower (median): budget "
              f"{budget:.0f} s scaled to {budget * factor:.0f} s")
        budget *= factor
    print(f"test-budget: {tier}: {len(times)} tests in {wall:.0f} s ({wall / 60:.1f} min), budget {budget:.0f} s "
          f"({100 * wall / budget:.0f} %; it fails above {100 * OVER:.0f} %)")
    print(f"the {min(SLOWEST, len(times))} slowest:")
    for test, seconds in sorted(times.items(), key=lambda t: t[1], reverse=True)[:SLOWEST]:
        print(f"  {seconds:7.1f} s  {test}")
    if wall <= budget * OVER:
        return 0
    grew = grown(times, recorded, above_s, factor)
    print(f"test-budget: FAILED: {tier} took {wall:.0f} s, more than {100 * OVER:.0f} % of its {budget:.0f} s "
          f"budget ({path.relative_to(REPO) if path.is_relative_to(REPO) else path})", file=sys.stderr)
    for test, seconds, before in grew:
        was = f"recorded {before:.1f} s" if before is not None else f"not recorded (new, or under {above_s:.0f} s)"
        print(f"  grew: {test}: {seconds:.1f} s, {was}", file=sys.stderr)
    if not grew:
        print("  no single test grew: many small ones did; compare `--durations` with the recorded times",
              file=sys.stderr)
    return 1


# A recorded table: its header and the lines up to the next blank line or table header
RECORDED = re.compile(r"^\[recorded\.(?P<tier>[\w-]+)\]\n(?:[^\[\n].*\n?)*", re.M)


def record(tier: str, junit: Path, path: Path) -> int:
    budgets = load_budgets(path)
    tier_of(budgets, tier, path)
    above_s = float(budgets.get("record_above_s", 15.0))
    _, times = read_junit(junit)
    slow = sorted(((t, s) for t, s in times.items() if s > above_s), key=lambda t: t[1], reverse=True)
    table = f"[recorded.{tier}]\n" + "".join(f'"{t}" = {s:.1f}\n' for t, s in slow)
    text = path.read_text()
    kept = [m for m in RECORDED.finditer(text) if m["tier"] == tier]
    text = text[:kept[0].start()] + table + text[kept[0].end():] if kept else text.rstrip("\n") + "\n\n" + table
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)
    print(f"test-budget: {tier}: {len(slow)} tests over {above_s:.0f} s recorded in {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=["check", "record"])
    parser.add_argument("tier")
    parser.add_argument("junit", type=Path)
    parser.add_argument("--budgets", type=Path, default=REPO / "tests" / "budgets.toml")
    args = parser.parse_args(argv)
    return (check if args.action == "check" else record)(args.tier, args.junit, args.budgets.resolve())


if __name__ == "__main__":
    sys.exit(main())
