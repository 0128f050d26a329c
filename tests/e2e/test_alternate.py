"""Arms alternated across processes (core/harness/rounds.py, `accel compare`): ABBA order, the stop rules, the
workers' requests, and a real two-experiment comparison whose rounds the report pools."""

from __future__ import annotations

import json

import pytest

from distutil import check_one_orchestrator, counting_starts, starts_in
from conftest import accel, records
from pathlib import Path

from pipelines.core.cli.run_command import build_plan
from pipelines.core.config import request as requests
from pipelines.core.harness import rounds as alternate
from pipelines.core.stats import orders, stopping
from pipelines.core.errors import ConfigError


def test_rounds_alternate_abba():
    assert [orders.abba("ABC", r) for r in range(3)] == [list("ABC"), list("CBA"), list("ABC")]


class FakeClock:
    """Each started process advances time by `per_process` seconds (the rule logic, not a timing)."""

    def __init__(self, per_process: float):
        self.now, self.per_process = 0.0, per_process

    def __call__(self) -> float:
        return self.now

    def start(self, argv, env):
        asked = _asked(argv)
        self.started.append((LABELS[asked.plans[0][0]], asked.pairing.process))
        self.now += self.per_process
        return 0


LABELS = {"ch2-baseline": "a", "ch2-nobias": "b"}


def _asked(argv) -> requests.Request:
    """The request a round's command line hands its worker (the launcher script, --worker FILE)."""
    assert argv[1] == requests.FLAG and len(argv) == 3
    return requests.read(argv[2])


def _slots():
    return [alternate.Slot(label, (entry,), (build_plan(entry, "smoke", (), (), {}),), Path("/bin/true"), {})
            for entry, label in LABELS.items()]


def _run(tmp_path, monkeypatch, rule, widths_by_round, per_process=10.0):
    clock = FakeClock(per_process)
    clock.started = []
    widths = iter(widths_by_round)
    monkeypatch.setattr(alternate, "halfwidths", lambda records, ids: next(widths))
    measured = alternate.measure_rounds(_slots(), tmp_path, rule, start=clock.start, clock=clock, echo=lambda m: None)
    return measured.summary, clock.started


def test_auto_stops_on_precision_after_the_minimum_rounds(tmp_path, monkeypatch):
    narrow = {"b [x]": 0.01}
    summary, started = _run(tmp_path, monkeypatch, alternate.StopRule(None, 1000), [narrow] * 5)
    assert summary.stopped_by == "precision" and summary.rounds == stopping.PRECISION_ROUNDS
    assert [s[0] for s in started] == ["a", "b", "b", "a", "a", "b", "b", "a"][:2 * stopping.PRECISION_ROUNDS]
    assert len({s[1].rsplit(":", 1)[0] for s in started}) == stopping.PRECISION_ROUNDS  # group:round per round
    assert len({s[1] for s in started}) == 2 * stopping.PRECISION_ROUNDS  # and group:round:slot per process
    saved = json.loads(next(tmp_path.glob("comparison--*.json")).read_text())
    assert saved["stopped_by"] == "precision" and saved["halfwidths"] == narrow


def test_auto_stops_before_a_round_that_would_overrun_the_budget(tmp_path, monkeypatch):
    wide = {"b [x]": 0.30}
    summary, started = _run(tmp_path, monkeypatch, alternate.StopRule(None, 65), [wide] * 5)
    assert summary.stopped_by == "budget" and summary.rounds == 3  # 20 s a round: a fourth would end at 80 s
    assert summary.halfwidths == wide


def test_a_missing_interval_never_counts_as_precise(tmp_path, monkeypatch):
    summary, _ = _run(tmp_path, monkeypatch, alternate.StopRule(3, 1000), [{"b [x]": None}] * 3)
    assert summary.stopped_by == "rounds" and summary.rounds == 3


def test_a_failed_process_stops_the_comparison_and_keeps_the_summary(tmp_path):
    rule = alternate.StopRule(None, 100)
    with pytest.raises(alternate.RoundFailed, match="b exited with code 1 in round 1"):
        alternate.measure_rounds(_slots(), tmp_path, rule, echo=lambda m: None,
                                 start=lambda argv, env: int(_asked(argv).plans[0][0] == "ch2-nobias"))
    assert json.loads(next(tmp_path.glob("comparison--*.json")).read_text())["stopped_by"] == "failure"


@pytest.mark.parametrize("rounds,budget,halfwidth,needle", [
    ("0", 100, 0.05, "--rounds '0'"), ("two", 100, 0.05, "--rounds 'two'"),
    ("auto", 0, 0.05, "--budget-s 0"), ("auto", -5, 0.05, "--budget-s -5"),
    ("auto", float("nan"), 0.05, "--budget-s nan"), ("auto", 100, 1.5, "--halfwidth 150"),
])
def test_bad_stop_rules_are_refused_naming_the_value(rounds, budget, halfwidth, needle):
    with pytest.raises(ConfigError, match=needle.replace("(", r"\(")):
        alternate.StopRule(alternate.parse_rounds(rounds), budget, halfwidth)


@pytest.mark.parametrize("args,needle", [
    (["ch2-baseline", "--budget-s", "0"], "compare needs two or more"),
    (["ch2-baseline", "ch2-nobias", "--budget-s", "0"], "--budget-s 0 must be a positive"),
    (["ch2-baseline", "nope", "--budget-s", "10"], "nope"),
    (["ch2-baseline", "ch2-nobias", "--repeats", "3"], "use --rounds"),
    (["ch2-baseline", "ch2-nobias", "--variant", "nobias"], "ID@ARM for one arm of an entry"),
    (["ch2-baseline", "ch2-nobias@bias"], "unknown variant bias of ch2-nobias"),
    (["ch2-baseline", "ch2-baseline"], "names ch2-baseline more than once"),
    (["ch2-baseline", "ch2-nobias", "--dataset", "synthetic", "--steps", "0"], "--steps must be at least 1, got 0"),
])
def test_compare_refuses_bad_input_in_one_line(tmp_path, args, needle, accel_in_process):
    out = accel_in_process("compare", *args, "--results-dir", str(tmp_path / "r"))
    assert out.returncode == 2 and needle in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
    assert not list((tmp_path / "r").glob("*.jsonl")) if (tmp_path / "r").exists() else True


@pytest.mark.slow
def test_two_experiments_share_a_process_each_round_and_the_report_pools_them(tmp_path, data_root):
    """Also what the command costs in processes (docs/design.md): the orchestrator, then one worker a round."""
    env, log = counting_starts(tmp_path)
    out = accel("compare", "ch2-baseline", "ch2-nobias", "--rounds", "2", "--results-dir", str(tmp_path / "r"),
                "--scale", "smoke", "--data-root", str(data_root), "--allocator", "pinned", env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    starts = starts_in(log)
    assert len(check_one_orchestrator(starts, "compare")) == 2 and len(starts) == 3, starts
    tmp_path = tmp_path / "r"
    # arms share a process only under the pinned allocator (auto pins it at bench scale only)
    assert "ch2-baseline [baseline], ch2-nobias [nobias]: one process a round" in out.stderr  # the plan
    recs = records(tmp_path)
    by_round = sorted((r["pairing"]["process"], r["experiment"]) for r in recs)
    assert [(mark.split(":")[1:], e) for mark, e in by_round] == [
        (["0", "0"], "ch2-baseline"), (["0", "0"], "ch2-nobias"),
        (["1", "0"], "ch2-baseline"), (["1", "0"], "ch2-nobias")]
    assert all(r["status"] == "ok" for r in recs)
    # the terminal gets one line per round; each process's own output (launcher lines, plans) goes to a log
    rounds = [line for line in out.stderr.splitlines() if line.startswith("round ")]
    assert [line.split(":")[0] for line in rounds] == ["round 1/2", "round 2/2"], out.stderr
    assert "launch:" not in out.stderr and "stopped by rounds" in out.stderr
    log = next(tmp_path.glob("comparison--*.log")).read_text()
    assert log.count("$ ") == 2 and log.count(f"{requests.FLAG} ") >= 2  # the script, then its worker
    asked = requests.read(log.split(f"{requests.FLAG} ", 1)[1].split()[0])  # one request: both arms, one repeat
    assert [(e, [c["variant"] for c in cs]) for e, cs in asked.plans] == [("ch2-baseline", ["baseline"]),
                                                                           ("ch2-nobias", ["nobias"])]
    assert all(c["rounds"] is None and c["repeats"] == 1 and not c["auto"] for _, cs in asked.plans for c in cs)
    # the verdict is the last thing printed: a table of this comparison's arms, then the records line
    lines = out.stdout.strip().splitlines()
    assert lines[0] == "verdict:" and "ch2-nobias [nobias]" in out.stdout and lines[-1].startswith("records: ")
    assert "full report: accel report --results-dir" in lines[-1]
    report = accel("report", "--results-dir", str(tmp_path), timeout=120)
    assert report.returncode == 0 and "ch2-nobias" in report.stdout


@pytest.mark.slow
def test_the_ladder_shares_one_process_and_pairs_its_ratios_by_block(tmp_path, data_root):
    """The chapter 2 ladder at bench scale: one process a round for its three arms, interleaved blocks, the
    allocator pinned; every ratio paired within processes, with an interval (the precision itself is a
    benchmark's business: ci/calibrate-intervals.py, docs/timing.md)."""
    out = accel("compare", "ch2-baseline", "ch2-nobias", "ch2-bs256", "--rounds", "3", "--results-dir", str(tmp_path),
                "--data-root", str(data_root), "--blocks", "3", "--block-s", "0.1", "--warmup-steps", "1",
                "--json", timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    plan = " ".join(out.stderr.split())
    assert "ch2-baseline [baseline], ch2-nobias [nobias], ch2-bs256 [bs256]: one process a round, in interleaved " \
           "blocks" in plan and "allocator: pinned (glibc: mmap_threshold 32 MiB" in plan
    arms = {a["variant"]: a for a in json.loads(out.stdout)["arms"]}
    for name in ("nobias", "bs256"):
        assert arms[name]["ci_low"] <= arms[name]["ratio"] <= arms[name]["ci_high"]
        assert arms[name]["verdict"] in ("reproduced", "faster than published", "slower than published",
                                         "inconclusive")
    recs = records(tmp_path)
    assert len({r["pairing"]["process"] for r in recs}) == 3  # 3 rounds, one process each
    # --blocks 3 rounded up to whole periods of the 3 arms' order (2 cycles each): 4 blocks an arm
    assert all(len(r["metrics"]["blocks"]) == 4 and r["metrics"]["cycles_per_period"] == 2
               and r["env"]["allocator_settings"]["knob"] == "pinned" for r in recs)
    for process in {r["pairing"]["process"] for r in recs}:  # no block followed a block of its own arm
        ran = sorted((b[7], r["variant"]) for r in recs if r["pairing"]["process"] == process
                     for b in r["metrics"]["blocks"])
        assert [p for p, _ in ran] == list(range(12)) and all(x[1] != y[1] for x, y in zip(ran, ran[1:]))
