"""Drift against a reference of another machine class (another CPU family or ISA): the report is written
in full with the drift check skipped and the reason naming both machines, `accel report --against` exits 0
and prints the skip even with --fail-on-reversal, while a reference of the same class still gets its drift
table and `drift.against` refuses the other class; a reference without usable records is refused before
any output. Against a reference of the same class, the drift table flags a reversed conclusive verdict and
--fail-on-reversal exits 1 on it (0 without one), each committed CPU reference drifts against itself with no
reversal, and `drift.reference_for_this_machine` picks the committed reference of this machine's class.
Hand-made record pairs (tests/recordutil.py's drift_pair) stand in for the two machines."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import REPO, accel
from pipelines.core.errors import ConfigError
from pipelines.core.record import machine_class
from pipelines.core.record.results import load
from pipelines.core.report import drift
from pipelines.core.report import views as report
from pipelines.core.stats import intervals
from pipelines.core.stats import rows as stats_rows
from recordutil import CPU_REFERENCES, ch2, drift_pair, record, table_rows, write


# The golden record's machine is AMD family 25 model 1 with avx2; the reference's is the next generation.
OTHER_CLASS = {"cpu_id": "AuthenticAMD family 26 model 2", "cpu_isa": "avx2 avx512f avx512_vnni avx512_bf16"}

REFERENCE = REPO / "results" / "reference" / "cpu-2core-bench"


def test_a_reference_of_another_machine_class_gives_the_full_report_and_says_why(tmp_path):
    mine, ref = drift_pair(tmp_path, 1.18, 1.18, **OTHER_CLASS)
    written = report.write_report(mine, tmp_path / "out", formats=("md",), against=ref)
    assert written.judged.drift is None
    reason = written.judged.drift_skipped
    assert reason.startswith(f"{ref} is from another machine class: reference ")
    reference_part, this_part = reason.split(" vs this run ")
    assert "family 26 model 2, avx2 avx512f avx512_vnni avx512_bf16;" in reference_part
    assert "family 25 model 1, avx2;" in this_part and "family 26" not in this_part
    md = written.paths[0].read_text()
    assert f"Drift check skipped: {reason}." in md.split("## Drift against the reference\n", 1)[1]
    assert ["ch2-nobias", "nobias", "bench", "3"] in [c[:4] for c in table_rows(md, "Results")]
    assert "REVERSED" not in md


@pytest.mark.slow  # a real subprocess (accel, a CI script) or a full report: end to end
def test_accel_report_against_another_class_exits_0_and_prints_the_skip(tmp_path):
    mine, ref = drift_pair(tmp_path, 2.0, 0.5, **OTHER_CLASS)  # would reverse, if it were comparable
    out = tmp_path / "out"
    run = accel("report", "--results-dir", str(mine), "--out", str(out), "--against", str(ref),
                "--fail-on-reversal")
    assert run.returncode == 0, run.stderr
    skip = [line for line in run.stdout.splitlines() if "drift check skipped" in line]
    assert len(skip) == 1 and "family 26 model 2" in skip[0] and "family 25 model 1" in skip[0], run.stdout
    assert (out / "report.md").is_file() and (out / "report.html").is_file()


def test_a_reference_without_usable_records_is_refused_before_any_output(tmp_path):
    ch2(tmp_path / "mine", (1.18,))
    (tmp_path / "empty-ref").mkdir()
    (tmp_path / "empty-ref" / "x.jsonl").write_text("not json\n")
    out = tmp_path / "out"
    with pytest.raises(ConfigError, match="holds no usable records"):
        report.write_report(tmp_path / "mine", out, against=tmp_path / "empty-ref")
    assert not out.exists()


def test_same_class_reference_still_gets_its_drift_table(tmp_path):
    mine, ref = drift_pair(tmp_path, 1.18, 1.3)
    written = report.write_report(mine, tmp_path / "out", formats=("md",), against=ref)
    assert written.judged.drift is not None and written.judged.drift_skipped is None
    with pytest.raises(drift.OtherMachineClass, match="another machine class"):
        other_mine, other_ref = drift_pair(tmp_path / "b", 1.18, 1.18, **OTHER_CLASS)
        loaded = load(other_mine)
        drift.against(stats_rows.build(loaded), loaded, other_ref)


@pytest.mark.slow  # a real subprocess (accel, a CI script) or a full report: end to end
def test_drift_table_and_a_reversed_conclusive_verdict(tmp_path):
    mine, ref = drift_pair(tmp_path, 2.0, 0.5)
    loaded = load(mine)
    found = drift.against(stats_rows.build(loaded), loaded, ref)
    line = found.data.set_index("variant").loc["nobias"]
    assert line.ratio == pytest.approx(2.0) and line.ref_ratio == pytest.approx(0.5)
    assert line.difference == pytest.approx(1.5) and line.reversed
    assert line.ref_ci_low < 0.5 < line.ref_ci_high
    assert found.reversals == ["ch2-nobias [nobias] (bench): slower than published -> faster than published"]
    failed = accel("report", "--results-dir", str(mine), "--out", str(tmp_path / "o"), "--against", str(ref),
                   "--format", "md", "--fail-on-reversal")
    assert failed.returncode == 1 and failed.stderr.strip().count("\n") == 0
    assert failed.stderr.startswith("accel: error: conclusive verdict changed")
    assert "ch2-nobias" in failed.stderr
    md = (tmp_path / "o" / "report.md").read_text()
    drift_cells = [c[:4] for c in table_rows(md, "Drift against the reference")]
    assert "REVERSED" in md and ["ch2-nobias", "nobias", "bench", "2.00"] in drift_cells


@pytest.mark.slow  # a real subprocess (accel, a CI script) or a full report: end to end
def test_drift_without_reversal_passes(tmp_path):
    mine, ref = drift_pair(tmp_path, 1.18, 1.22)
    ok = accel("report", "--results-dir", str(mine), "--out", str(tmp_path / "o"), "--against", str(ref),
               "--format", "md", "--fail-on-reversal")
    assert ok.returncode == 0, ok.stderr
    md = (tmp_path / "o" / "report.md").read_text()
    assert "No conclusive verdict reversed, no reproduction lost or gained." in md


@pytest.mark.slow  # a real subprocess (accel, a CI script) or a full report: end to end
def test_a_reference_from_another_machine_class_gives_the_report_and_says_the_drift_check_is_skipped(tmp_path):
    mine, ref = drift_pair(tmp_path, 1.18, 1.18, cpu_model="other cpu", logical_cpus=64)
    loaded = load(mine)
    with pytest.raises(ConfigError, match="another machine class"):
        drift.against(stats_rows.build(loaded), loaded, ref)
    for flags in ([], ["--fail-on-reversal"]):  # nothing to reverse against another class: exit 0
        skipped = accel("report", "--results-dir", str(mine), "--out", str(tmp_path / "o"), "--against", str(ref),
                        *flags)
        lines = [line for line in skipped.stdout.splitlines() if "drift check skipped" in line]
        assert skipped.returncode == 0 and len(lines) == 1 and "other cpu (" in lines[0], skipped.stderr
        assert "64 logical CPUs" in lines[0] and (tmp_path / "o" / "report.md").is_file()
    flag = accel("report", "--results-dir", str(mine), "--out", str(tmp_path / "o"), "--fail-on-reversal")
    assert flag.returncode == 2 and "--fail-on-reversal needs --against" in flag.stderr


def test_a_reference_from_another_cpu_generation_behind_the_same_model_name_is_refused(tmp_path):
    """Cloud VMs may call two CPU generations "AMD EPYC": bf16 without avx512_bf16 is emulated (ch7's bf16
    arm measured 0.84x on one such host and 0.07x on the other), so the vector units are part of the class."""
    mine, ref = drift_pair(tmp_path, 1.18, 1.18, cpu_id="AuthenticAMD family 25 model 17",
                           cpu_isa="avx2 avx512f avx512_vnni avx512_bf16")
    loaded = load(mine)
    with pytest.raises(ConfigError, match="another machine class") as refused:
        drift.against(stats_rows.build(loaded), loaded, ref)
    assert "avx512_bf16" in str(refused.value) and "family 25 model 17" in str(refused.value)


@pytest.mark.parametrize("reference", CPU_REFERENCES, ids=[p.name for p in CPU_REFERENCES])
@pytest.mark.slow  # a real subprocess (accel, a CI script) or a full report: end to end
def test_the_committed_reference_has_an_interval_for_every_ratio_and_drifts_against_itself(tmp_path, reference):
    """Each committed CPU reference was made from a clean commit: every measured ratio has its bootstrap
    interval, Table 9.1's threads=2 row a published ratio and a verdict, and nothing reverses against itself."""
    assert REFERENCE in CPU_REFERENCES and len({drift.machine_classes(load(p).records).pop()
                                                  for p in CPU_REFERENCES}) == len(CPU_REFERENCES)
    assert all(r["env"]["git_dirty"] is False for r in load(reference).records)
    written = report.write_report(reference, tmp_path, formats=("md",), against=reference)
    md = written.paths[0].read_text()
    rows = table_rows(md, "Results")
    measured = [cells for cells in rows if cells[9] != "-"]
    assert measured and all(cells[10].startswith("[") for cells in measured), "a measured ratio lacks its interval"
    threads2 = next(cells for cells in rows if cells[:2] == ["ch9-cpu-threads", "threads=2"])
    assert threads2[5] == "1.646" and threads2[13] in (intervals.REPRODUCED, intervals.FASTER,
                                                     intervals.SLOWER, intervals.INCONCLUSIVE)
    assert not written.judged.drift.reversals
    assert "No conclusive verdict reversed, no reproduction lost or gained." in md


@pytest.mark.slow  # a real subprocess (accel, a CI script) or a full report: end to end
def test_the_reference_of_this_machines_class_is_picked_among_the_committed_ones(tmp_path):
    """CI's drift check runs against the committed reference of the class it runs on (Zen 3, Zen 5, ...)."""
    model, cpu_id, isa, cpus, _ = machine_class.this_machine()
    write(tmp_path / "cpu-2core-bench", "r", [record("ch2-nobias", "nobias", 1.0, cpu_model="elsewhere")])
    write(tmp_path / "cpu-2core-x-bench", "r", [record("ch2-nobias", "nobias", 1.0, cpu_model=model, cpu_id=cpu_id,
                                                       cpu_isa=isa, logical_cpus=cpus, gpus=[])])
    candidates = sorted(tmp_path.iterdir())
    assert drift.reference_for_this_machine(candidates) == tmp_path / "cpu-2core-x-bench"
    assert drift.reference_for_this_machine(candidates[:1]) is None
    printed = subprocess.run([sys.executable, "-m", "pipelines.core.report.drift", "pick", *map(str, candidates)],
                             cwd=REPO, capture_output=True, text=True, timeout=60)
    assert printed.returncode == 0 and printed.stdout.strip() == str(tmp_path / "cpu-2core-x-bench")



@pytest.mark.slow  # a real subprocess (accel report --fail-on-reversal)
def test_a_lost_reproduction_gets_its_own_line_and_fails_the_gate(tmp_path):
    """The reference reproduced the book's 1.184 (its interval inside [1.088, 1.288]); this run is slower than
    published. Not a reversal, but a conclusion lost: its own word in the drift table, exit 1 under the gate."""
    mine, ref = drift_pair(tmp_path, 0.9, 148 / 125)
    loaded = load(mine)
    found = drift.against(stats_rows.build(loaded), loaded, ref)
    line = found.data.set_index("variant").loc["nobias"]
    assert (line.ref_verdict, line.verdict) == (intervals.REPRODUCED, intervals.SLOWER)
    assert line.changed == drift.LOST and not line.reversed
    assert found.reversals == ["ch2-nobias [nobias] (bench): reproduced -> slower than published (reproduction lost)"]
    failed = accel("report", "--results-dir", str(mine), "--out", str(tmp_path / "o"), "--against", str(ref),
                   "--format", "md", "--fail-on-reversal")
    assert failed.returncode == 1 and failed.stderr.startswith("accel: error: conclusive verdict changed")
    assert "reproduction lost" in failed.stderr and "REPRODUCTION LOST" in (tmp_path / "o" / "report.md").read_text()


def test_a_lost_reproduction_on_a_copy_of_a_committed_reference_is_gated(tmp_path):
    """Each committed CPU reference against itself changes nothing; with one of its reproduced arms judged
    slower (as a run that lost it would be), the gate names exactly that arm."""
    for reference in CPU_REFERENCES:
        loaded = load(reference)
        rows = stats_rows.build(loaded)
        assert not drift.against(rows, loaded, reference).reversals
        kept = next((row for row in rows if row.verdict == intervals.REPRODUCED), None)
        if kept is None:
            continue
        kept.verdict = intervals.SLOWER
        found = drift.against(rows, loaded, reference)
        assert found.reversals == [f"{kept.experiment} [{kept.variant}] ({kept.scale}): reproduced -> slower than "
                                   "published (reproduction lost)"]


@pytest.mark.slow  # a real subprocess: accel report --fail-on-reversal on a copy of a committed reference
def test_a_copy_of_a_reference_that_lost_a_reproduction_fails_the_gate(tmp_path):
    """A copy of the Intel reference in which Table 9.1's threads=2 arm ran 1.6 times slower (its blocks' and steps'
    seconds scaled): reproduced in the reference, slower than published in the copy; the gate exits 1 and names it."""
    import json
    import shutil

    reference = REPO / "results" / "reference" / "cpu-2core-intel-f6m207-bench"
    mine = tmp_path / "mine"
    shutil.copytree(reference, mine, ignore=shutil.ignore_patterns("report*", "*.png", "*.html"))
    slowed = 0
    for path in mine.glob("ch9-cpu-threads--*.jsonl"):
        recs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        for rec in recs:
            if rec.get("variant") != "threads=2" or rec.get("status") != "ok":
                continue
            metrics = rec["metrics"]
            metrics["blocks"] = [[*block[:2], block[2] * 1.6, *block[3:]] for block in metrics.get("blocks") or ()]
            metrics["step_times_s"] = [t * 1.6 for t in metrics.get("step_times_s") or ()]
            for key in ("train_s", "warmup_s"):
                if metrics.get(key):
                    metrics[key] *= 1.6
            if metrics.get("throughput_samples_per_s"):
                metrics["throughput_samples_per_s"] /= 1.6
            slowed += 1
        path.write_text("".join(json.dumps(rec) + "\n" for rec in recs))
    assert slowed >= 3
    ref_row = next(r for r in stats_rows.build(load(reference)) if (r.experiment, r.variant) == ("ch9-cpu-threads",
                                                                                                  "threads=2"))
    assert ref_row.verdict == intervals.REPRODUCED
    failed = accel("report", "--results-dir", str(mine), "--out", str(tmp_path / "o"), "--against", str(reference),
                   "--format", "md", "--fail-on-reversal")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert failed.stderr.count("\n") == 1 and "ch9-cpu-threads [threads=2] (bench): reproduced -> slower than " \
        "published (reproduction lost)" in failed.stderr
    assert "REPRODUCTION LOST" in failed.stdout
