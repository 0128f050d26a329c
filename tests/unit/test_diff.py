"""`accel diff` (core/stats/diff.py): per-arm changes with intervals, the gate on significant regressions,
and the fingerprint fields that differ. Hand-made records (tests/recordutil.py) with known step times."""

from __future__ import annotations

import pytest

from recordutil import record, steps
from pipelines.core.stats import diff


def arm(ratio: float, repeats: int = 3, spread: float = 0.02, **env) -> list[dict]:
    return [record("ch2-baseline", "baseline", repeat=i, step_times=steps(ratio, spread=spread * (1 + i / 10)),
                   **env) for i in range(repeats)]


def test_a_planted_20_percent_regression_is_significant_and_fails_a_5_percent_gate():
    (d,), only_a, only_b = diff.compare(arm(1.0), arm(0.8))
    assert only_a == only_b == []
    assert d.change_pct == pytest.approx(-20, abs=0.5) and d.interval_pct[1] < 0 and d.word == "slower"
    assert diff.regressions([d], 5) == [d]
    assert diff.regressions([d], 25) == []  # a 20 % slow-down is within a 25 % gate


def test_two_runs_of_the_same_code_pass_the_gate():
    (d,), _, _ = diff.compare(arm(1.0), arm(1.0, spread=0.03))
    assert abs(d.change_pct) < 2 and diff.regressions([d], 5) == []


def test_fewer_than_three_repeats_are_never_significant():
    (d,), _, _ = diff.compare(arm(1.0, repeats=2), arm(0.5, repeats=2))
    assert not d.significant and "too few processes" in d.word and diff.regressions([d], 5) == []


def test_other_work_is_shown_but_never_judged_or_gated():
    """2 timed steps against 20 carry start-up costs 20 do not: a 50 % slow-down there is not a regression
    (CI's reference-timings test ran 2 steps against the committed 20-step reference)."""
    short = arm(0.5)
    for rec in short:
        rec["config"]["steps"] = 2
    (d,), _, _ = diff.compare(arm(1.0), short)
    assert not d.significant and d.word.startswith("not the same work: timed steps 40 vs 2")
    assert diff.regressions([d], 5) == []
    for rec in short:  # 30 against 40: per-step throughput of the same work, judged
        rec["config"]["steps"] = 30
    (d,), _, _ = diff.compare(arm(1.0), short)
    assert d.significant and diff.regressions([d], 5) == [d]
    for rec in short:
        rec["config"]["batch_size"] = 256
    (d,), _, _ = diff.compare(arm(1.0), short)
    assert d.word == "not the same work: batch_size 64 vs 256"


def test_the_fingerprint_diff_names_only_what_changed():
    before, after = arm(1.0), arm(0.8, torch="2.15.0", openmp_runtime="intel")
    changed = {name: (a, b) for name, a, b in diff.fingerprint_diff(before, after)}
    assert changed["torch"] == ("2.14.1", "2.15.0") and changed["OpenMP runtime"] == ("gnu", "intel")
    assert "ISA" not in changed and changed["noisy repeats"] == ("not recorded", "not recorded")


def test_arms_on_one_side_only_are_listed(tmp_path):
    other = [dict(r, experiment="ch2-nobias", variant="nobias") for r in arm(1.0)]
    diffs, only_a, only_b = diff.compare(arm(1.0) + other, arm(1.0))
    assert len(diffs) == 1 and only_a == [("ch2-nobias", "nobias", "bench")] and only_b == []


def test_accel_diff_gates_a_planted_regression_and_passes_the_same_code(tmp_path, capfd):
    from recordutil import write

    from pipelines.core.cli.main import main as accel_main

    write(tmp_path / "before", "a.jsonl", arm(1.0))
    write(tmp_path / "after", "b.jsonl", arm(0.8))
    write(tmp_path / "again", "c.jsonl", arm(1.0, spread=0.03))

    def run(*args: str) -> tuple[int, str, str]:
        try:
            accel_main(["diff", *args])
            code = 0
        except SystemExit as exc:
            code = exc.code or 0
        out, err = capfd.readouterr()
        return code, out, err

    code, out, err = run(str(tmp_path / "before"), str(tmp_path / "after"), "--fail-above", "5")
    assert code == 1 and "ch2-baseline / baseline" in out and "slower" in out
    assert err.strip().splitlines()[-1].startswith("accel: error: significantly slower by more than 5 %")
    code, out, _ = run(str(tmp_path / "before"), str(tmp_path / "again"), "--fail-above", "5")
    assert code == 0 and "no arm is significantly slower" in out
    code, _, err = run(str(tmp_path / "before"), str(tmp_path / "nowhere"))
    assert code == 2 and "does not exist" in err and "Traceback" not in err


def test_relative_gate_follows_the_machine_not_the_host():
    """A host 40 % slower on every arm fails an absolute 25 % gate but not the relative one; one arm 40 %
    slower than its peers on that host still fails the relative gate (CI's drift check uses --relative:
    quiet VMs of one class ran 4-33 % and 23-45 % below the committed reference)."""
    names = ("a", "b", "c", "d")
    before = [dict(r, variant=v) for v in names for r in arm(1.0)]
    slower_host = [dict(r, variant=v) for v in names for r in arm(0.6)]
    diffs, _, _ = diff.compare(before, slower_host)
    shift = diff.machine_shift(diffs)
    assert shift == pytest.approx(0.6, abs=0.01)
    assert len(diff.regressions(diffs, 25)) == 4 and diff.regressions(diffs, 25, shift) == []
    one_arm_worse = [dict(r, variant=v) for v in names for r in arm(0.36 if v == "d" else 0.6)]
    diffs, _, _ = diff.compare(before, one_arm_worse)
    shift = diff.machine_shift(diffs)
    [bad] = diff.regressions(diffs, 25, shift)
    assert bad.variant == "d" and diff.relative_pct(bad.change_pct, shift) == pytest.approx(-40, abs=1.5)


def test_machine_shift_needs_three_judged_arms():
    (d,), _, _ = diff.compare(arm(1.0), arm(0.6))
    assert diff.machine_shift([d]) is None
    assert diff.regressions([d], 25, 1.0) == [d]


def test_accel_diff_relative_prints_the_shift_and_gates_on_it(tmp_path, capfd):
    from recordutil import write

    from pipelines.core.cli.main import main as accel_main

    names = ("a", "b", "c")
    write(tmp_path / "before", "a.jsonl", [dict(r, variant=v) for v in names for r in arm(1.0)])
    write(tmp_path / "after", "b.jsonl", [dict(r, variant=v) for v in names for r in arm(0.6)])
    for relative, expected in ((False, 1), (True, 0)):
        args = ["diff", str(tmp_path / "before"), str(tmp_path / "after"), "--fail-above", "25"]
        try:
            accel_main(args + ["--relative"] * relative)
            code = 0
        except SystemExit as exc:
            code = exc.code or 0
        out, err = capfd.readouterr()
        assert code == expected, out + err
    assert "machine shift: -40." in out and "no arm is significantly slower than the machine's shift" in out
