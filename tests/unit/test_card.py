"""The machine card (record/card.py): measured for real in this process, rendered, and skipped at smoke scale."""

from __future__ import annotations

import json
import os

import torch

from pipelines.core.record import card


def test_the_card_measures_every_quantity_and_puts_the_thread_count_back():
    threads = torch.get_num_threads()
    measured = card.measure()
    assert torch.get_num_threads() == threads and measured["threads"] == threads
    for name in ("fp32", "bf16"):
        assert measured["gemm_gflops"][name]["1_thread"] > 0 and measured["gemm_gflops"][name]["all_threads"] > 0
    assert measured["triad_gbs"] > 0 and measured["triad_gbs_1_thread"] > 0 and measured["tiny_op_us"] > 0
    assert (measured["parallel_region_us"] is None) == (threads < 2)
    assert measured["allreduce_gbs"] is None  # no process group here: the dist tests see Gloo's
    top = measured["topology"]
    assert top["usable_cpus"] == len(os.sched_getaffinity(0))
    assert top["physical_cores"] is None or 1 <= top["physical_cores"] <= top["usable_cpus"]
    text = "\n".join(card.lines(measured))
    for word in ("GEMM fp32", "GEMM bf16", f"GB/s at {threads} thread(s)", "(STREAM triad", "tiny op", "OMP region",
                 "usable CPU"):
        assert word in text, text
    assert "all-reduce" not in text


def test_a_ceiling_is_the_fastest_block_and_a_cost_the_median_block(monkeypatch):
    """A neighbour only slows a block down: the GEMM and triad ceilings keep the fastest of the blocks, the tiny
    op's and the parallel region's costs the median."""
    blocks = iter([1.0, 1.0, 0.5, 0.4, 0.6, 0.9, 0.8, 0.7, 0.45])  # two single calls, then 7 blocks

    class Timer:
        def __init__(self, **_):
            pass

        def timeit(self, number):
            return type("Measurement", (), {"median": next(blocks)})()

    monkeypatch.setattr(card.benchmark, "Timer", Timer)
    assert card._seconds("x", 1, ceiling=True) == 0.4
    blocks = iter([1.0, 1.0, 0.5, 0.4, 0.6, 0.9, 0.8, 0.7, 0.45])
    assert card._seconds("x", 1) == 0.6


def test_a_smoke_process_records_why_it_has_no_card(monkeypatch):
    monkeypatch.setattr(card, "_CARD", None)
    skipped = card.for_process("smoke")
    assert skipped == {"measured": False, "why": "smoke scale: its numbers are never judged"}
    assert card.for_process("bench") is skipped  # once a process
    assert card.lines(skipped) == ["machine card: not measured (smoke scale: its numbers are never judged)"]


def test_topology_counts_smt_siblings_from_sys(tmp_path, monkeypatch):
    """Two logical CPUs on one core (SMT) and one on another, in one package: 2 physical cores, 2 siblings."""
    for cpu, core in ((0, 0), (1, 0), (2, 1)):
        folder = tmp_path / f"cpu{cpu}" / "topology"
        folder.mkdir(parents=True)
        (folder / "physical_package_id").write_text("0\n")
        (folder / "core_id").write_text(f"{core}\n")
    monkeypatch.setattr(card, "CPU_SYS", tmp_path)
    top = card.topology([0, 1, 2])
    assert (top["usable_cpus"], top["physical_cores"], top["smt_siblings"], top["sockets"]) == (3, 2, 2, 1)


def test_doctor_bench_prints_the_card_after_its_fitness_and_records_both(accel_in_process, tmp_path):
    """Exit 0 or 1 by the machine's load (a test machine is often busy); the card is printed either way."""
    out = accel_in_process("doctor", "--bench", "--record", str(tmp_path / "doctor.json"))
    assert out.returncode in (0, 1), out.stderr
    assert out.stdout.index("memory ") < out.stdout.index("machine card (") < out.stdout.index("GEMM fp32")
    written = json.loads((tmp_path / "doctor.json").read_text())
    assert written["card"]["measured"] and [row[0] for row in written["fitness"]][0] == "load"
