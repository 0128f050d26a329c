"""The reproduction report: verdict maths on records built from the golden record, refusals, bad input,
the three output formats and plots, and the reference/GPU scripts' dry paths.

Hand-made records stand in for runs only where the maths needs exact throughputs (real runs are noisy)
or hardware this machine lacks (GPUs, many cores); the slow tests run the real scripts end to end.
"""

from __future__ import annotations

import copy
import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, accel
from pipelines.catalog import decisions
from pipelines.core import experiments, report, report_plots, report_rows

GOLDEN = json.loads((REPO / "tests" / "golden" / "result_v1.json").read_text())


def record(experiment: str, variant: str, throughput: float, repeat: int = 0, accuracy: float = 40.0,
           **env) -> dict:
    rec = copy.deepcopy(GOLDEN)
    rec.update(experiment=experiment, variant=variant, repeat=repeat)
    rec["config"].update(experiment=experiment, variant=variant)
    rec["metrics"].update(throughput_samples_per_s=throughput, test_accuracy_pct=accuracy)
    rec["env"].update(env)
    return rec


def write(folder: Path, name: str, records: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def rows_for(folder: Path, only=None) -> dict[tuple[str, str], report_rows.Row]:
    return {(r.experiment, r.variant): r for r in report_rows.build(report_rows.load(folder), only)}


def ch2(folder: Path, nobias: float, **env) -> None:
    write(folder, "base", [record("ch2-baseline", "baseline", 1000.0 + d, i) for i, d in enumerate((-10, 10))])
    write(folder, "nobias", [record("ch2-nobias", "nobias", nobias, i, **env) for i in range(2)])


@pytest.mark.parametrize("throughput, verdict", [(1180.0, "reproduced"), (2000.0, "faster than published"),
                                                 (500.0, "slower than published")])
def test_verdict_from_the_throughput_ratio_and_the_band(tmp_path, throughput, verdict):
    ch2(tmp_path, throughput)
    rows = rows_for(tmp_path)
    row = rows[("ch2-nobias", "nobias")]
    assert row.ratio == pytest.approx(throughput / 1000.0)
    assert row.verdict == verdict and row.published_ratio == 1.18 and row.band == "1.00-1.36"
    assert row.throughput.n == 2 and row.throughput.sd == 0.0
    base = rows[("ch2-baseline", "baseline")]
    assert base.verdict == "baseline" and base.throughput.mean == 1000.0
    assert base.throughput.sd == pytest.approx(14.142, abs=1e-3)


def test_ratio_refused_across_torch_versions_and_says_why(tmp_path):
    ch2(tmp_path, 1180.0, torch="2.7.0")
    row = rows_for(tmp_path)[("ch2-nobias", "nobias")]
    assert row.ratio is None and row.verdict == "not comparable"
    assert "torch 2.14.1 vs 2.7.0" in row.why


def test_gpu_experiment_run_on_cpu_is_a_different_hardware_class(tmp_path):
    write(tmp_path, "d", [record("ch3-compile-densenet-gpu", v, t) for v, t in (("eager", 10.0), ("compiled", 15.0))])
    row = rows_for(tmp_path)[("ch3-compile-densenet-gpu", "compiled")]
    assert row.ratio == pytest.approx(1.5)
    assert row.verdict == "not comparable" and "different hardware class" in row.why


# An entry that stays planned (needs hardware or software this project cannot provide).
PLANNED = next(e for e in experiments.all_experiments().values() if e.status == "planned")
PLANNED_KEY = (PLANNED.id, PLANNED.variants[0].name)


def test_not_run_rows_name_why(tmp_path):
    tmp_path.mkdir(exist_ok=True)
    rows = rows_for(tmp_path, [PLANNED.id, "ch2-bs128"])
    assert rows[PLANNED_KEY].verdict == "not run"
    assert rows[PLANNED_KEY].why.startswith("planned:")
    assert rows[("ch2-bs128", "bs128")].why == "no records"


def test_bad_input_is_skipped_with_reasons_and_the_rest_renders(tmp_path):
    ch2(tmp_path, 1180.0)
    other = record("ch2-bs256", "bs256", 1900.0)
    other["schema"] = "accel.result/9"
    write(tmp_path, "future", [other])
    (tmp_path / "half.jsonl").write_text(json.dumps(record("ch2-bs256", "bs256", 1.0))[:200])
    (tmp_path / "sub" / "reference").mkdir(parents=True)
    write(tmp_path / "sub" / "reference", "ref", [record("ch2-bs128", "bs128", 1.0)])
    loaded = report_rows.load(tmp_path)
    assert len(loaded.records) == 4
    assert any("unknown schema 'accel.result/9'" in s for s in loaded.skipped)
    assert any("half.jsonl:1: not JSON" in s for s in loaded.skipped)
    result = accel("report", "--results-dir", str(tmp_path), "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    text = (tmp_path / "out" / "report.md").read_text()
    assert "| ch2-nobias | nobias | bench | 2 |" in text and "skipped:" in text and "unknown schema" in text
    assert "ch2-bs128" not in text.split("## Results")[1].split("##")[0]  # reference/ folders are not mixed in


def test_missing_dir_is_one_line_exit_2_and_empty_dir_still_renders(tmp_path):
    missing = accel("report", "--results-dir", str(tmp_path / "nope"))
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1
    assert missing.stderr.startswith("accel: error: results dir") and "Traceback" not in missing.stderr
    (tmp_path / "empty").mkdir()
    empty = accel("report", "--results-dir", str(tmp_path / "empty"), "--out", str(tmp_path / "o"))
    assert empty.returncode == 0, empty.stderr
    assert "No usable records" in (tmp_path / "o" / "report.md").read_text()


def test_outputs_markdown_csv_html_and_plots(tmp_path):
    ch2(tmp_path / "r", 1180.0)
    write(tmp_path / "r", "bs", [record("ch2-bs256", "bs256", 2100.0, accuracy=35.0)])
    written, _ = report.write_report(tmp_path / "r", tmp_path / "out", note="test note",
                                     only=["ch2-baseline", "ch2-bs128"])
    names = {p.name for p in written}
    assert {"report.md", "report.csv", "report.html", "ch2-published-vs-reproduced.png",
            "accuracy-vs-speed.png"} <= names
    for path in written:
        if path.suffix == ".png":
            assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (tmp_path / "out" / "report.md").read_text()
    assert "**Note:** test note" in md and "## Accuracy vs speed" in md
    assert "![ch2: published vs reproduced" in md and f"decision: {experiments.get('ch2-nobias').decisions[0]}" in md
    assert "| ch2-bs256 | bs256 | 76 s | 80.01 | 1.95 | 2.10 | 35.0 | -3.98 | -5.00 |" in md
    rows = list(csv.DictReader(io.StringIO((tmp_path / "out" / "report.csv").read_text())))
    by = {(r["experiment"], r["variant"]): r for r in rows}
    assert by[("ch2-nobias", "nobias")]["verdict"] == "reproduced"
    assert by[("ch2-bs128", "bs128")]["verdict"] == "not run"
    page = (tmp_path / "out" / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 2 and 'src="ch2' not in page


def test_against_shows_the_reference_beside(tmp_path):
    ch2(tmp_path / "mine", 1180.0)
    write(tmp_path / "ref", "all", [record("ch2-baseline", "baseline", 1000.0, cpu_model="other cpu"),
                                     record("ch2-nobias", "nobias", 1500.0, cpu_model="other cpu")])
    result = accel("report", "--results-dir", str(tmp_path / "mine"), "--out", str(tmp_path / "o"),
                   "--against", str(tmp_path / "ref"), "--format", "md")
    assert result.returncode == 0, result.stderr
    md = (tmp_path / "o" / "report.md").read_text()
    assert "ref samples/s" in md and "| 1.18 | reproduced |  | 1500.0 | 1.50 | faster than published |" in md
    assert "other cpu" in md


def test_scaling_curves_from_record_fields(tmp_path):
    """Synthetic thread-sweep records (this machine has too few cores for a real sweep)."""
    recs = [record("ch2-baseline", "baseline", 100.0 * t ** 0.8, torch_threads=t) for t in (1, 2, 4, 8)]
    series = report_plots.scaling_series(recs)
    assert list(series[("ch2-baseline", "bench")]["points"]) == [1, 2, 4, 8]
    ranks = [record("ch2-baseline", "baseline", 100.0 + r, torch_threads=16 // r) for r in (1, 2, 4)]
    for rec, r in zip(ranks, (1, 2, 4)):
        rec["dist"]["world_size"] = r
    assert report_plots.scaling_series(ranks)[("ch2-baseline", "bench")]["axis"] == "ranks"
    made = report_plots.scaling(recs + [], tmp_path)
    assert [p.name for p, _ in made] == ["scaling-ch2-baseline-bench.png"]


def test_decision_constants_are_used_by_the_catalog():
    densenet = experiments.get("ch3-compile-densenet-gpu").decisions
    assert decisions.RESIZE_NOOP in densenet and decisions.LR_AS_CODED in densenet
    assert decisions.CUMULATIVE_BACKENDS in experiments.get("ch3-backends-densenet-gpu").decisions
    assert all(text.endswith(".") for text in decisions.ALL.values())


def script(name: str, *args: str, env: dict | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([str(REPO / "ci" / name), *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHON": sys.executable, **(env or {})})


def test_gpu_reference_dry_run_prints_commands_and_rejects_unknown_ids(tmp_path):
    result = script("gpu-reference.sh", "--dry-run", str(tmp_path / "g"))
    assert result.returncode == 0, result.stderr
    assert f"launch ch3-compile-densenet-gpu --scale bench --device cuda --steps 30 --repeats 3 " \
           f"--data-root data --results-dir {tmp_path / 'g'}" in result.stdout
    assert not (tmp_path / "g").exists()
    bad = script("gpu-reference.sh", "--dry-run", env={"IDS": "ch7-amp no-such-id"})
    assert bad.returncode == 2 and "unknown experiment id no-such-id" in bad.stderr


def test_reference_timings_dry_run_lists_ready_and_not_run(tmp_path):
    result = script("reference-timings.sh", "--dry-run", env={"REF_OUT": str(tmp_path / "r"),
                                                               "IDS": f"ch2-baseline {PLANNED.id} ch99-x"})
    assert result.returncode == 0, result.stderr
    assert "launch ch2-baseline --scale bench --steps 30 --repeats 3" in result.stdout
    assert f"{PLANNED.id} is planned, not ready" in result.stdout and "ch99-x is not in the catalog" in result.stdout
    assert f"launch {PLANNED.id}" not in result.stdout


@pytest.mark.slow
def test_reference_timings_end_to_end(tmp_path, data_root):
    out = tmp_path / "ref"
    result = script("reference-timings.sh", env={"REF_OUT": str(out), "IDS": f"ch2-baseline ch2-nobias {PLANNED.id}",
                                                  "STEPS": "2", "REPEATS": "1", "DATA": str(data_root)})
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    md = (out / "report.md").read_text()
    assert f"| {PLANNED.id} | {PLANNED_KEY[1]} | - | 0 |" in md and "not run" in md
    assert "## Harness overhead" in md and "shared / hand-written throughput" in md
    assert len(list(out.glob("ch2-*.jsonl"))) == 2 and (out / "report.html").is_file()


@pytest.mark.slow
def test_harness_overhead_reports_a_ratio(tmp_path):
    result = subprocess.run([sys.executable, str(REPO / "ci" / "harness-overhead.py"), "--steps", "3", "--warmup",
                             "1", "--repeats", "2", "--results-dir", str(tmp_path)], cwd=REPO,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "ratio" in result.stdout
    recs = report_rows.load(tmp_path).records
    assert sorted(r["variant"] for r in recs) == ["hand-loop", "hand-loop", "shared-loop", "shared-loop"]
    assert all(r["metrics"]["throughput_samples_per_s"] > 0 for r in recs)
