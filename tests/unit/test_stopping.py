"""`--rounds auto` and `--repeats auto` (core/stats/stopping.py, core/harness/execute.py): the stop rule, the
ABBA schedule inside one process, rank 0's decision on every rank, and a real run whose records say which rule
stopped it."""

from __future__ import annotations

import json
import statistics

import numpy as np
import pytest

from conftest import accel, records
from pipelines.core.config.arm import Arm
from pipelines.core.harness import execute
from pipelines.core.errors import ConfigError
from pipelines.core.config import repeat_rule
from pipelines.core.stats import intervals, stopping
from pipelines.core.config.runconfig import resolve

NARROW, WIDE = {"x [a]": 0.01}, {"x [a]": 0.30}


def test_precision_stops_only_after_the_rounds_a_verdict_needs():
    rule = stopping.AutoStop(budget_s=1000)
    decisions = []
    for _ in range(5):
        decisions.append(rule.should_start(elapsed_s=0))
        if not decisions[-1]:
            break
        rule.after_round(NARROW, round_s=1)
    assert decisions == [True] * stopping.PRECISION_ROUNDS + [False]
    assert rule.stopped_by == "precision" and rule.rounds == stopping.PRECISION_ROUNDS


def coverage_of_the_rule(process_sd: float, runs: int) -> float:
    """How often a run that `AutoStop` stopped holds the true ratio in its t interval: each round adds one
    process's log ratio (process-to-process noise `process_sd`); the budget admits 6 rounds."""
    rng = np.random.default_rng(11)
    held = 0
    for _ in range(runs):
        logs: list[float] = []
        rule = stopping.AutoStop(budget_s=6.5)
        while rule.should_start(float(len(logs))):
            logs.append(rng.normal(0.0, process_sd))
            width = intervals.paired_halfwidth(np.asarray(logs)) if len(logs) > 1 else None
            rule.after_round({"x [b]": width}, round_s=1.0)
        held += abs(statistics.fmean(logs)) <= intervals.paired_halfwidth(np.asarray(logs))
    return held / runs


@pytest.mark.parametrize("process_sd", [0.02, 0.05, 0.08])
def test_stopping_for_precision_keeps_the_coverage_a_verdict_claims(process_sd):
    """A run that stops because its interval came out narrow stops when its spread was small by chance. The
    precision rule waits for PRECISION_ROUNDS, one more than a verdict needs: the runs it stops still hold the
    true ratio in >= 93 % (stopping at 3 held it in 92.3-92.9 % at 5-8 % noise)."""
    assert coverage_of_the_rule(process_sd, 4000) >= 0.93


def test_the_budget_stops_before_a_round_that_would_overrun_it():
    rule = stopping.AutoStop(budget_s=65)
    elapsed = 0.0
    while rule.should_start(elapsed):
        rule.after_round(WIDE, round_s=20)
        elapsed += 20
    assert (rule.stopped_by, rule.rounds) == ("budget", 3)  # a fourth round would end at 80 s


def test_a_slow_first_round_stands_for_the_next_only_until_a_second_round_ran():
    """Chapter 3's first round compiles (25 s), the next ones take 4 s: after the second round the first's
    one-time cost no longer predicts a round, so the budget admits the cheap rounds it has room for."""
    rule = stopping.AutoStop(budget_s=60)
    elapsed, durations = 0.0, iter([25.0] + [4.0] * 20)
    while rule.should_start(elapsed):
        took = next(durations)
        rule.after_round(WIDE, round_s=took)
        elapsed += took
    assert (rule.stopped_by, rule.rounds) == ("budget", 9)  # 25 + 8 x 4 = 57 s; a tenth would end at 61 s
    late = stopping.AutoStop(budget_s=45)
    assert late.should_start(0.0)
    late.after_round(WIDE, round_s=25.0)
    assert not late.should_start(25.0) and late.stopped_by == "budget"  # 25 + 25 > 45: no second round


def test_a_missing_interval_is_never_precise_and_the_backstop_holds():
    rule = stopping.AutoStop(budget_s=1e9, max_rounds=4)
    while rule.should_start(0):
        rule.after_round({"x [a]": None, "x [b]": 0.01}, round_s=1)
    assert (rule.stopped_by, rule.rounds) == ("max_repeats", 4)
    summary = rule.as_record()
    assert summary["rule"] == "auto" and summary["widths"] == {"x [a]": None, "x [b]": 0.01}


def test_bench_scale_defaults_to_auto_rounds_with_a_budget_and_a_count_is_fixed():
    """Rounds of processes and repeats inside one are two counts: bench scale's default is auto rounds (one
    repeat a process), smoke scale's one repeat in this process; `auto` makes either the rule's."""
    settings = {"model": "cnn_fmnist", "dataset": "fashion_mnist"}
    bench = resolve(settings, None, {}, scale="bench", experiment="x", pipeline="p", variant="v")
    assert bench.auto and bench.budget_s == repeat_rule.DEFAULT_BUDGET_S
    assert (bench.rounds, bench.repeats) == (repeat_rule.MAX_AUTO_REPEATS, 1)
    fixed = resolve(settings, None, {"rounds": 3}, scale="bench", experiment="x", pipeline="p", variant="v")
    assert (fixed.auto, fixed.rounds, fixed.repeats, fixed.budget_s) == (False, 3, 1, None)
    smoke = resolve(settings, None, {"repeats": "auto", "budget_s": 20}, scale="smoke", experiment="x",
                    pipeline="p", variant="v")
    assert smoke.auto and smoke.budget_s == 20
    assert (smoke.rounds, smoke.repeats) == (None, repeat_rule.MAX_AUTO_REPEATS)
    book = resolve(settings, None, {"rounds": "auto"}, scale="book", experiment="x", pipeline="p", variant="v")
    assert book.auto and (book.rounds, book.repeats) == (repeat_rule.MAX_AUTO_REPEATS, 1)
    with pytest.raises(ConfigError, match="--budget-s 0 must be a positive"):
        resolve(settings, None, {"rounds": "auto", "budget_s": 0}, scale="bench", experiment="x",
                pipeline="p", variant="v")


def _configs(*variants: str, **overrides):
    return [resolve({"model": "cnn_fmnist", "dataset": "synthetic"}, None, {"repeats": "auto", **overrides},
                    scale="smoke", experiment="x", pipeline="p", variant=v) for v in variants]


def _schedule(monkeypatch, configs, skips, widths, agree=lambda mine: mine):
    """The (round, variant) order the runner would run, with `widths` as every round's half-widths."""
    rule = stopping.AutoStop(budget_s=1e9)
    fed = iter(widths)
    monkeypatch.setattr(execute.rows, "arm_halfwidths", lambda records, ids: next(fed))
    keyed = {Arm("x", variant): why for variant, why in skips.items()}
    return [(r, c.variant) for r, unit in execute.work_order(configs, keyed, rule, [], agree) for c in unit], rule


def test_auto_rounds_run_every_arm_in_abba_order_and_a_skipped_arm_once(monkeypatch):
    order, rule = _schedule(monkeypatch, _configs("a", "b", "gpu"), {"gpu": "needs a GPU"}, [NARROW] * 5)
    assert order == [(0, "a"), (0, "b"), (0, "gpu"), (1, "b"), (1, "a"), (2, "a"), (2, "b"), (3, "b"), (3, "a")]
    assert rule.stopped_by == "precision"


def test_rank_zeros_decision_is_every_ranks(monkeypatch):
    """A rank whose own records are precise enough still runs the round rank 0 asked for (else the ranks'
    collectives would not match and the run would hang until the timeout)."""
    rank0_says = iter([True, True, True, True, True, False])  # rank 0 wants a fifth round
    order, _ = _schedule(monkeypatch, _configs("a"), {}, [NARROW] * 6, agree=lambda mine: next(rank0_says))
    assert [r for r, _ in order] == [0, 1, 2, 3, 4]


def _check_stop_reason(stop: dict, rounds: int, widths: dict, max_rounds: int = repeat_rule.MAX_AUTO_REPEATS) -> None:
    """Which part of the rule fires depends on the machine's noise and speed (a fast, noisy machine can reach
    the round cap before the budget): each reason must hold for what was recorded. The budget is the user's
    limit: on a slow or busy machine it may stop a run before MIN_ROUNDS (stats/stopping.py); no other reason
    stops one that early."""
    if stop["stopped_by"] == "precision":
        assert rounds >= stopping.PRECISION_ROUNDS
        assert all(w is not None and w <= stop["halfwidth"] for w in widths.values())
    elif stop["stopped_by"] == "budget":
        assert 1 <= rounds < max_rounds
    else:
        assert stop["stopped_by"] == "max_repeats" and rounds == max_rounds


@pytest.mark.slow  # a real subprocess (accel, a CI script) or a full report: end to end
def test_a_real_auto_run_in_one_process_records_which_rule_stopped_it(tmp_path):
    """Below bench scale `--repeats auto` runs ABBA repeats inside one process; every record carries the rule."""
    out = accel("run", "ch2-baseline", "--scale", "smoke", "--dataset", "synthetic", "--steps", "3",
                "--warmup-steps", "0", "--repeats", "auto", "--budget-s", "20",
                "--results-dir", str(tmp_path))
    assert out.returncode == 0, out.stderr[-2000:]
    recs = records(tmp_path)
    kept = [r["stopping"] for r in recs]
    assert all(k == kept[0] for k in kept) and kept[0]["rule"] == "auto"
    stop = kept[0]
    assert stop["rounds"] == len(recs)
    _check_stop_reason(stop, stop["rounds"], stop["widths"], stop["max_rounds"])
    assert [r["repeat"] for r in recs] == list(range(len(recs)))
    assert f"stopped by {kept[0]['stopped_by']}" in out.stdout


@pytest.mark.slow  # a real subprocess (accel, a CI script) or a full report: end to end
def test_a_real_auto_run_at_bench_scale_says_in_its_rounds_summary_which_rule_stopped_it(tmp_path):
    """At bench scale every round is its own process (core/harness/rounds.py): the rounds' summary file says
    which rule stopped them, and each round wrote one record of its own process."""
    out = accel("run", "ch2-baseline", "--scale", "bench", "--dataset", "synthetic", "--steps", "3",
                "--warmup-steps", "0", "--rounds", "auto", "--budget-s", "30",
                "--results-dir", str(tmp_path))
    assert out.returncode == 0, out.stderr[-2000:]
    summary = json.loads(next(tmp_path.glob("comparison--*.json")).read_text())
    assert summary["rule"]["rounds"] is None and summary["rule"]["budget_s"] == 30
    stop = {"stopped_by": summary["stopped_by"], "halfwidth": summary["rule"]["halfwidth"]}
    _check_stop_reason(stop, summary["rounds"], summary["halfwidths"])
    recs = records(tmp_path)
    assert len(recs) == summary["rounds"] == len({r["pairing"]["process"] for r in recs})
    assert f"stopped by {summary['stopped_by']}" in out.stderr


def test_a_rank_started_by_hand_runs_its_rounds_as_repeats_of_its_one_process(tmp_path):
    """`launch/torchrun.sh run ID` at bench scale: the launcher's ranks are the only process there is, so
    the plan's rounds (auto: the rule's, at most MAX_AUTO_REPEATS) become repeats in it, under the same rule."""
    from pipelines.core.cli.run_command import build_plan, in_one_process, in_rounds

    plan = build_plan("ch2-nobias", "bench", (), (), {"results_dir": tmp_path})
    assert in_rounds(plan.configs[0])
    here = in_one_process(plan)
    cfg = here.configs[0]
    assert not in_rounds(cfg) and (cfg.rounds, cfg.repeats, cfg.auto) == (None, repeat_rule.MAX_AUTO_REPEATS, True)
    assert execute._stop_rule(here.configs).max_rounds == repeat_rule.MAX_AUTO_REPEATS
    fixed = in_one_process(build_plan("ch2-nobias", "bench", (), (), {"results_dir": tmp_path, "rounds": 3}))
    assert (fixed.configs[0].repeats, fixed.configs[0].auto, execute._stop_rule(fixed.configs)) == (3, False, None)


def test_an_auto_round_line_says_how_many_rounds_the_budget_holds_at_this_pace():
    """Not the backstop of 50 when 90 s at 40 s a round holds 2."""
    from pipelines.core.harness import rounds

    summary = rounds.Summary("c", ["ch2-baseline"], rounds=1)
    line = rounds.round_line(summary, rounds.StopRule(None, 90), ["ch2-baseline 40 s"], 41.0)
    assert line.startswith("round 1 (of about 2 the budget holds): ch2-baseline 40 s; 41 s of 90 s budget spent")
    fixed = rounds.round_line(summary, rounds.StopRule(3, 90), ["ch2-baseline 40 s"], 41.0)
    assert fixed.startswith("round 1/3: ")
