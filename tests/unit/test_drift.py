"""Drift against a reference of another machine class (another CPU family or ISA): the report is written
in full with the drift check skipped and the reason naming both machines, `accel report --against` exits 0
and prints the skip even with --fail-on-reversal, while a reference of the same class still gets its drift
table and `drift.against` refuses the other class; a reference without usable records is refused before
any output. Hand-made record pairs (tests/recordutil.py's drift_pair) stand in for the two machines."""

from __future__ import annotations

import pytest

from conftest import accel
from pipelines.core.errors import ConfigError
from pipelines.core.record.results import load
from pipelines.core.report import drift
from pipelines.core.report import summary as report
from pipelines.core.stats import rows as report_rows
from recordutil import ch2, drift_pair, table_rows


# The golden record's machine is AMD family 25 model 1 with avx2; the reference's is the next generation.
OTHER_CLASS = {"cpu_id": "AuthenticAMD family 26 model 2", "cpu_isa": "avx2 avx512f avx512_vnni avx512_bf16"}


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
        drift.against(report_rows.build(loaded), loaded, other_ref)
