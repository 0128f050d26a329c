"""The source's machine from its own tables (stats/source_machine.py): the book's CPU fitted on Table 6.1
predicts chapter 2's batch ratios, fitted on chapter 2 it predicts Table 6.1's, neither fit sees the row it
explains, and an arm that changes no FLOPs (ch2-nobias) is "not the machine as modelled"."""

from __future__ import annotations

import re
import statistics

import pytest

from pipelines.core.config import experiments
from pipelines.core.stats import source_machine
from recordutil import record, rows_for, steps, write

BASE = ("ch2-baseline", "baseline")
(BOOK_CPU,) = experiments.source_machines()
CH2, TABLE_6_1 = BOOK_CPU.tables


def test_each_table_s_fit_predicts_the_other_table_within_9_percent():
    """Table 6.1: 9.3 ms fixed a step plus 414 GFLOP/s; chapter 2: 10.9 ms plus 331 GFLOP/s. Each predicts the
    other's published ratios: chapter 2's two within 4 %, Table 6.1's eight within 8.8 % (5.2 % mean)."""
    on_6_1, on_ch2 = source_machine.fit(BOOK_CPU, TABLE_6_1), source_machine.fit(
        BOOK_CPU, CH2)
    assert (on_6_1.fixed_s, on_6_1.rate) == (pytest.approx(9.27e-3, rel=1e-2), pytest.approx(413.5e9, rel=1e-2))
    assert (on_ch2.fixed_s, on_ch2.rate) == (pytest.approx(10.9e-3, rel=1e-2), pytest.approx(331.3e9, rel=1e-2))
    assert max(map(abs, on_6_1.errors(CH2))) < 0.04
    errors = [abs(e) for e in on_ch2.errors(TABLE_6_1)]
    assert max(errors) < 0.09 and statistics.mean(errors) == pytest.approx(0.052, abs=0.005)


def test_an_arm_is_explained_by_the_fit_of_the_other_table_never_its_own():
    used, check, predicted = source_machine.explain("ch2-bs256", "bs256", BASE)
    assert used.table is TABLE_6_1 and check.table is CH2 and predicted == pytest.approx(1.95, abs=0.01)
    used, _, predicted = source_machine.explain("ch6-prune", "s50", ("ch6-prune", "unpruned"))
    assert used.table is CH2 and predicted == pytest.approx(1.41, abs=0.01)  # the book prints 122/89 = 1.37
    assert source_machine.explain("ch2-iomp", "iomp", BASE) is None  # no FLOPs model of an OpenMP runtime
    assert source_machine.explain("ch6-prune", "s50", BASE) is None  # two tables: no ratio across them


def test_a_verdict_says_what_the_source_s_machine_explains_and_what_it_cannot(tmp_path):
    """bs256 measured 1.20 here against 1.95: the source's model predicts 1.95, its fixed part 65 % of a
    step there; without step profiles here no cause is given for the gap. ch2-nobias measured 1.00: the model
    predicts 1.00 at the source too, 16 % short of the book's 1.18, so the gap is not the machine as modelled."""
    write(tmp_path, "base", [record(*BASE, repeat=i, step_times=steps(1.0)) for i in range(3)])
    write(tmp_path, "bs256", [record("ch2-bs256", "bs256", repeat=i, step_times=steps(1.2)) for i in range(3)])
    write(tmp_path, "nobias", [record("ch2-nobias", "nobias", repeat=i, step_times=steps(1.0)) for i in range(3)])
    rows = rows_for(tmp_path)
    bs256, nobias = rows[("ch2-bs256", "bs256")], rows[("ch2-nobias", "nobias")]
    assert bs256.verdict == nobias.verdict == "slower than published"
    assert bs256.cause.startswith("not explained here: these records carry no machine card and step profiles")
    assert ("at the source (the book's CPU fitted on Table 6.1: 9.3 ms a step fixed + 414 GFLOP/s, within 4 % of "
            "this table's other arms) the model gives 1.95 (published 1.95: +0 %), the fixed part 65 % of the "
            "baseline's step there; no cause for the gap while this machine's model misses") in bs256.cause
    assert "the gap is not explained by the machine: at the source" in nobias.cause
    assert "the model gives 1.00 (published 1.18: -16 %), the fixed part 65 % of the baseline's step there, so it " \
        "lies in the source's code" in nobias.cause
    assert "at the source" not in bs256.why + nobias.why  # the verdict's reasons stay the verdict's


def test_the_tables_flops_are_what_our_runs_count_a_step():
    """The catalog's FLOPs a step are torch's count in committed records of the same arms at the same batch."""
    from conftest import REPO
    from pipelines.core.record.results import load

    counted = {(r["experiment"], r["variant"]): r["metrics"]["flops_per_step"]
               for r in load(REPO / "results" / "reference" / "cpu-2core-intel-f6m207-bench").records
               if r["status"] == "ok" and r["metrics"].get("flops_per_step")}
    rows = [row for table in BOOK_CPU.tables for row in (*table.rows, *table.others)]
    assert all(counted[row[:2]] == row[4] for row in rows), [(row, counted.get(row[:2])) for row in rows]


def test_the_gap_is_called_the_machine_s_only_where_both_models_hold(tmp_path):
    """bs256 measured 1.20 against the book's 1.95, with step profiles that this machine's model prices at 1.20
    (the arm's convolution at the baseline's rate): predicted within 10 % here and the source's model within
    15 % of the book, so the line names the gap the machine's, with the fixed part's share there and here. The
    same records measured at 1.50 leave the prediction 20 % short: no cause at all."""
    card = {"measured": True, "threads": 2, "tiny_op_us": 10.0, "parallel_region_us": 5.0, "triad_gbs": 10.0,
            "allreduce_gbs": None, "gemm_gflops": {"fp32": {"1_thread": 50.0, "all_threads": 100.0}}}

    def profiled(rec: dict, flops: float) -> dict:
        ops = [{"op": "aten::conv", "calls": 100, "self_ms": 20.0, "flops": flops, "bytes": 0}]
        rec["card"] = card
        rec["metrics"]["step_profile"] = {"ops": ops, "total": {"calls": 100, "self_ms": 20.0, "flops": flops,
                                                                "bytes": 0}, "between_ops_ms": 0.0}
        return rec

    arm_flops = 2e9 * (20 / 1.2 - 1.5) / 18.5  # 1.5 ms fixed (100 ops at 15 us) and the rest at the base's rate
    for measured, said in ((1.2, "the gap is the machine's: at the source"), (1.5, "not explained: the model")):
        folder = tmp_path / str(measured)
        write(folder, "base", [profiled(record(*BASE, repeat=i, step_times=steps(1.0)), 2e9) for i in range(3)])
        write(folder, "bs256", [profiled(record("ch2-bs256", "bs256", repeat=i, step_times=steps(measured)),
                                         arm_flops) for i in range(3)])
        row = rows_for(folder)[("ch2-bs256", "bs256")]
        assert row.verdict == "slower than published" and said in row.cause, row.cause
    machine = rows_for(tmp_path / "1.2")[("ch2-bs256", "bs256")].cause
    assert re.search(r"the fixed part 65 % of the baseline's step there, \d+ % here; the fit cannot separate the "
                     r"machine from PyTorch 2\.0\.0\+cpu$", machine), machine
