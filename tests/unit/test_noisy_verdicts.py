"""A verdict resting on repeats from a noisy machine says so in the report, and `accel report --strict`
gives no conclusive verdict from it."""

import json

import recordutil
from pipelines.core.stats import intervals, rows
from pipelines.core.record.results import load


def _mark_noisy(folder, name: str, repeat: int) -> None:
    path = folder / f"{name}.jsonl"
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    for rec in recs:
        noisy = rec["repeat"] == repeat
        rec["machine"] = {"noisy": noisy, "noisy_reasons": ["other processes kept 0.90 of the 2 usable cores busy"]
                          if noisy else []}
    recordutil.write(folder, name, recs)


def test_a_noisy_arm_keeps_its_verdict_with_a_note_and_loses_it_under_strict(tmp_path):
    recordutil.ch2(tmp_path)
    quiet = recordutil.rows_for(tmp_path)[("ch2-nobias", "nobias")]
    assert quiet.verdict in intervals.CONCLUSIVE and "noisy" not in quiet.why
    _mark_noisy(tmp_path, "nobias", 1)
    marked = recordutil.rows_for(tmp_path)[("ch2-nobias", "nobias")]
    assert marked.verdict == quiet.verdict and marked.noisy_repeats == 1
    assert "1 repeat(s) of this arm and its baseline ran on a noisy machine (other processes kept" in marked.why
    strict = {(r.experiment, r.variant): r for r in rows.build(load(tmp_path), strict=True)}
    assert strict[("ch2-nobias", "nobias")].verdict == intervals.INCONCLUSIVE
    assert strict[("ch2-nobias", "nobias")].why.startswith("--strict:")


def test_a_noisy_baseline_counts_too(tmp_path):
    recordutil.ch2(tmp_path)
    _mark_noisy(tmp_path, "base", 0)
    strict = {(r.experiment, r.variant): r for r in rows.build(load(tmp_path), strict=True)}
    assert strict[("ch2-nobias", "nobias")].verdict == intervals.INCONCLUSIVE


def test_the_report_shows_noisy_repeats_and_energy_beside_throughput(tmp_path, accel_in_process):
    recordutil.ch2(tmp_path / "r")
    _mark_noisy(tmp_path / "r", "nobias", 1)
    run = accel_in_process("report", "--results-dir", str(tmp_path / "r"), "--out", str(tmp_path / "o"),
                           "--format", "md")
    assert run.returncode == 0, run.stderr
    table = recordutil.table_rows((tmp_path / "o" / "report.md").read_text(), "Machine state and energy")
    nobias = next(line for line in table if line[0] == "ch2-nobias")
    assert nobias[3].startswith("1 of 3: other processes kept") and nobias[5] == "-"


def test_a_faster_arm_that_costs_more_energy_says_so(tmp_path, accel_in_process):
    recordutil.ch2(tmp_path / "r")
    for name, joules in (("base", 0.010), ("nobias", 0.013)):
        path = tmp_path / "r" / f"{name}.jsonl"
        recs = [json.loads(line) for line in path.read_text().splitlines()]
        for rec in recs:
            rec["energy"] = {"measured": True, "joules": joules * 6400, "joules_per_sample": joules}
        recordutil.write(tmp_path / "r", name, recs)
    run = accel_in_process("report", "--results-dir", str(tmp_path / "r"), "--out", str(tmp_path / "o"),
                           "--format", "md")
    text = (tmp_path / "o" / "report.md").read_text()
    assert run.returncode == 0 and "ch2-nobias [nobias] is faster (1.18x) but costs more energy per sample" in text
    table = recordutil.table_rows(text, "Machine state and energy")
    assert [line[5] for line in table] == ["0.01", "0.013"]
