"""The CI scripts that make reference timings, run as subprocesses. ci/gpu-reference.sh --dry-run prints the
exact `accel launch` command of each GPU entry and creates no output folder; it exits 2 on an unknown id in
IDS or a knob that is not a whole number. ci/reference-timings.sh --dry-run lists the commands of the ready
ids (time-matched blocks; one `accel compare` for ids joined by +, less their excluded members), names
excluded and uncatalogued ids as not run, and exits 2 on an EXCLUDE that names an unknown id. One real run of
ci/reference-timings.sh at two steps and two rounds measures a +-joined comparison with one process per id
and round, writes the report (an excluded id listed as not run, the Harness overhead section), summary and
verdicts, and, given only committed references of other machine classes in REFERENCES, checks the
invariants they agree on instead of drift. ci/gpu-lease.sh, rehearsed on the CPU at smoke scale, skips every
stage that does not fit its deadline and still packs the records folder, refuses a bad knob in one line,
and runs its data and profile stages for real (ci/gpu-step-profile.py's rows per arm and batch; exit 2 on
a machine without CUDA)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from conftest import REPO
from pipelines.core.record import machine_class
from pipelines.core.record.results import load
from pipelines.core.report import drift as report_drift
from recordutil import CPU_REFERENCES, table_rows


def script(name: str, *args: str, env: dict | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([str(REPO / "ci" / name), *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHON": sys.executable, **(env or {})})


@pytest.mark.slow  # a real subprocess (accel, a CI script) or a full report: end to end
def test_gpu_reference_dry_run_prints_commands_and_rejects_unknown_ids(tmp_path):
    result = script("gpu-reference.sh", "--dry-run", str(tmp_path / "g"))
    assert result.returncode == 0, result.stderr
    assert f"launch ch3-compile-densenet-gpu --scale bench --steps 30 --device cuda --rounds 3 " \
           f"--data-root data --results-dir {tmp_path / 'g'} --no-baseline" in result.stdout  # pairs are listed
    # the talk's step 04 ratio: its two sides alternate in one comparison, not two launches
    assert "compare vit-fabric-baseline vit-bf16-mixed --device cuda --rounds 3" in result.stdout
    assert "launch vit-bf16-mixed" not in result.stdout
    # a spec's extras come after the size, so they win; ids joined by + are one comparison
    ids = "ch7-amp:--steps=6:--variant=fp32 ch5-pipeline@w2+ch5-pipeline@w4"
    spec = script("gpu-reference.sh", "--dry-run", env={"IDS": ids})
    assert spec.returncode == 0, spec.stderr
    assert "launch ch7-amp --scale bench --steps 30 --device cuda --steps=6 --variant=fp32 --rounds 3" in spec.stdout
    assert "compare ch5-pipeline@w2 ch5-pipeline@w4 --device cuda --rounds 3" in spec.stdout
    assert not (tmp_path / "g").exists()
    bad = script("gpu-reference.sh", "--dry-run", env={"IDS": "ch7-amp no-such-id"})
    assert bad.returncode == 2 and "unknown experiment id no-such-id" in bad.stderr


@pytest.mark.slow  # a real subprocess (accel, a CI script) or a full report: end to end
def test_reference_timings_refuses_an_unknown_excluded_id(tmp_path):
    result = script("reference-timings.sh", "--dry-run", env={"REF_OUT": str(tmp_path / "r"), "EXCLUDE": "ch7-amq"})
    assert result.returncode == 2 and "EXCLUDE names unknown experiment id ch7-amq" in result.stderr
    assert not (tmp_path / "r").exists()


@pytest.mark.slow  # a real subprocess (accel, a CI script) or a full report: end to end
def test_ids_that_leave_nothing_to_run_are_refused_before_ref_out_is_touched(tmp_path):
    out = tmp_path / "r"
    out.mkdir()
    (out / "kept.jsonl").write_text("{}\n")
    result = script("reference-timings.sh", env={"REF_OUT": str(out), "IDS": "ch99-x", "EXCLUDE": ""})
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        "reference-timings: error: nothing to run: IDS='ch99-x' EXCLUDE='' leave no ready experiment; name ids "
        "from accel list"]
    assert [p.name for p in out.iterdir()] == ["kept.jsonl"]


@pytest.mark.slow  # a real subprocess (accel, a CI script) or a full report: end to end
def test_reference_timings_dry_run_lists_ready_and_not_run(tmp_path):
    result = script("reference-timings.sh", "--dry-run", env={"REF_OUT": str(tmp_path / "r"), "EXCLUDE": "ch2-nobias",
                                                               "IDS": "ch2-baseline ch2-nobias ch99-x"})
    assert result.returncode == 0, result.stderr
    assert "launch ch2-baseline --scale bench --blocks 6 --rounds 3" in result.stdout  # time-matched blocks
    assert "ch2-nobias is excluded (EXCLUDE): reported as not run" in result.stdout
    assert "ch99-x is not in the catalog" in result.stdout and "launch ch2-nobias" not in result.stdout


@pytest.mark.slow  # a real subprocess (accel, a CI script) or a full report: end to end
def test_the_default_list_runs_the_threads_arm_of_tables_9_1_and_9_2_once_a_round(tmp_path):
    """Table 9.1's sweep and Table 9.2's same-cores arm are one comparison; CI's HARNESS_REPEATS=0 is said."""
    result = script("reference-timings.sh", "--dry-run", env={"REF_OUT": str(tmp_path / "r"), "HARNESS_REPEATS": "0"})
    assert result.returncode == 0, result.stderr
    ch9 = [line for line in result.stdout.splitlines() if "ch9-cpu-" in line]
    assert len(ch9) == 1 and " compare ch9-cpu-threads@threads=1 " in ch9[0] and "ch9-cpu-gloo@ranks=" in ch9[0]
    assert "harness overhead: not run (HARNESS_REPEATS=0)" in result.stdout
    assert "ci/harness-overhead.py" in script("reference-timings.sh", "--dry-run",
                                              env={"REF_OUT": str(tmp_path / "r")}).stdout


@pytest.mark.slow  # a real subprocess (accel, a CI script) or a full report: end to end
def test_a_new_class_never_takes_the_folder_of_a_committed_one(tmp_path):
    """One CPU model seen with other vector units (with and without AMX) is another class: its default folder
    gets its best vector unit in the name instead of replacing the committed folder of that model."""
    refs = tmp_path / "refs"
    (refs / f"cpu-{os.cpu_count()}core-bench").mkdir(parents=True)  # the first class's, of another machine

    def default_out() -> str:
        result = script("reference-timings.sh", "--dry-run", env={"REFERENCES": str(refs)})
        assert result.returncode == 0, result.stderr
        return result.stdout.split("REF_OUT=", 1)[1].split()[0]

    first = default_out()
    assert first.startswith(f"{refs}/cpu-{os.cpu_count()}core-") and first.endswith("-bench")
    Path(first).mkdir()  # committed by a machine of this CPU model, but not of this class (no records here)
    second = default_out()
    assert second != first and second.startswith(first[:-len("bench")])


@pytest.mark.slow  # a real subprocess (accel, a CI script) or a full report: end to end
def test_reference_timings_measures_a_plus_joined_comparison_as_one(tmp_path):
    """Ids joined by + are one comparison (accel compare, ROUNDS rounds); its excluded members drop out."""
    result = script("reference-timings.sh", "--dry-run", env={"REF_OUT": str(tmp_path / "r"), "EXCLUDE": "ch2-nobias",
                                                               "IDS": "ch2-baseline+ch2-nobias+ch2-bs256 ch6-prune"})
    assert result.returncode == 0, result.stderr
    assert (f"compare ch2-baseline ch2-bs256 --rounds 3 --budget-s 86400 --results-dir {tmp_path / 'r'} "
            f"--scale bench --blocks 6") in result.stdout
    assert "launch ch6-prune --scale bench" in result.stdout and "ch2-nobias is excluded" in result.stdout


@pytest.mark.slow
def test_reference_timings_end_to_end(tmp_path, data_root):
    """Also the gate of a machine class with no committed reference: REFERENCES holds only the committed
    references of other classes than this machine's, and the script checks their invariants instead."""
    out, others = tmp_path / "ref", tmp_path / "references"
    here = machine_class.this_machine()
    for folder in CPU_REFERENCES:
        if report_drift.machine_classes(load(folder).records) != {here}:
            shutil.copytree(folder, others / folder.name)
    result = script("reference-timings.sh", env={"REF_OUT": str(out), "IDS": "ch2-baseline+ch2-nobias+ch2-bs128",
                                                  "EXCLUDE": "ch2-bs128", "STEPS": "2", "ROUNDS": "2",
                                                  "DATA": str(data_root), "REFERENCES": str(others),
                                                  "HARNESS_STEPS": "6", "HARNESS_REPEATS": "2"})
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "== invariants: no reference of this machine class" in result.stdout
    assert "invariants: none broken" in result.stdout and "than its baseline (" in result.stdout
    assert f"to make this run its reference: rm -rf {others}/cpu-" in result.stdout
    assert (out / "verdicts.xml").is_file() and "| ch2-nobias" in (out / "summary.md").read_text()
    md = (out / "report.md").read_text()
    assert ["ch2-bs128", "bs128", "-", "0"] in [cells[:4] for cells in table_rows(md, "Results")]
    assert "not run" in md
    assert "## Harness overhead" in md and "against a minimal hand-written loop" in md
    assert (out / "report.html").is_file()
    # The two ids ran as one comparison: two rounds, one process per id and round, ABBA.
    recs = [r for r in load(out).records if r["experiment"].startswith("ch2-")]
    rounds = sorted((str(r["pairing"]["round"]), r["experiment"]) for r in recs)
    assert rounds == [("0", "ch2-baseline"), ("0", "ch2-nobias"), ("1", "ch2-baseline"), ("1", "ch2-nobias")]
    assert len(list(out.glob("ch2-*.jsonl"))) == 4 and len(list(out.glob("comparison--*.json"))) == 1


def test_gpu_reference_refuses_a_knob_that_is_not_a_whole_number(tmp_path):
    bad = script("gpu-reference.sh", "--dry-run", str(tmp_path / "g"), env={"ENTRY_TIMEOUT": "10m"})
    assert bad.returncode == 2 and "ENTRY_TIMEOUT=10m is not a whole number" in bad.stderr
    assert not (tmp_path / "g").exists()



def lease(tmp_path, **knobs: str) -> subprocess.CompletedProcess:
    """ci/gpu-lease.sh rehearsed on this CPU at smoke scale, its folders under tmp_path."""
    return script("gpu-lease.sh", timeout=300, env={"DEVICE": "cpu", "SCALE": "smoke", "WORK": str(tmp_path / "w"),
                                                    "LEASE_OUT": str(tmp_path / "out"), **knobs})


def packed(tmp_path) -> dict[str, bytes]:
    with tarfile.open(tmp_path / "out" / "records.tgz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


@pytest.mark.slow
def test_gpu_lease_skips_the_stages_that_do_not_fit_and_packs_what_it_has(tmp_path):
    """A stage starts only when its minimum fits before DEADLINE_S; the records folder is packed whole at
    the end either way (the tool brings back what a lease measured, even when nothing fit)."""
    result = lease(tmp_path, DEADLINE_S="0")
    assert result.returncode == 0, result.stderr
    skipped = [line for line in result.stdout.splitlines() if " skipped: 0s left of DEADLINE_S=0" in line]
    assert [line.split()[1] for line in skipped] == ["machine", "data", "vit", "profile", "densenet", "ch5", "ch7"]
    assert b"vit skipped" in packed(tmp_path)["records/lease.log"]
    assert not list((tmp_path / "out").glob(".records*"))  # written whole, then renamed


def test_gpu_lease_refuses_bad_knobs_in_one_line(tmp_path):
    for knobs, said in (({"DEADLINE_S": "9m"}, "DEADLINE_S=9m is not a whole number of seconds"),
                        ({"PYTHON": "python3"}, "PYTHON=python3 is not an executable file; give its full path")):
        bad = lease(tmp_path, **knobs)
        assert bad.returncode == 2 and bad.stdout == "" and len(bad.stderr.splitlines()) == 1, bad.stderr
        assert said in bad.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.slow  # a real subprocess (accel, a CI script) or a full report: end to end
def test_gpu_lease_runs_its_stages_and_the_step_profile_reads_both_arms(tmp_path):
    """The data and profile stages for real (CPU, a 2-layer ViT): the profile's JSON lands in the pack with
    a row per arm and batch and the bf16 / fp32 ratio; on a CPU it has no kernel figures."""
    result = lease(tmp_path, STAGES="data profile", DEADLINE_S="200")
    assert result.returncode == 0, result.stderr
    assert "profile ended rc=0" in result.stdout
    profile = json.loads(packed(tmp_path)["records/step-profile.json"])
    assert [(row["arm"], row["batch"]) for row in profile["arms"]] == [("fp32-highest", 2), ("bf16-mixed", 2)]
    assert all(row["flops_per_step"] > 0 and row["kernels_per_step"] == 0 for row in profile["arms"])
    assert profile["bf16_over_fp32_batch2"] > 0
    no_gpu = subprocess.run([sys.executable, str(REPO / "ci" / "gpu-step-profile.py")], capture_output=True,
                            text=True, timeout=120)
    assert no_gpu.returncode == 2 and no_gpu.stderr.strip().endswith("(run it on a GPU machine)")


@pytest.mark.parametrize("name", ["reference-timings.sh", "gpu-reference.sh"])
def test_the_old_repeats_knob_is_refused_with_the_name_of_the_new_one(name, tmp_path):
    """ROUNDS counts rounds of processes (docs/design.md's glossary); the knob's old name is refused in one
    line that names the new one, before any work, never read as a silent alias."""
    result = script(name, "--dry-run", env={"REPEATS": "5", "REF_OUT": str(tmp_path / "r"),
                                            "GPU_OUT": str(tmp_path / "g")}, timeout=30)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [f"{name[:-3]}: REPEATS=5 is now called ROUNDS (rounds of processes): "
                                          "pass ROUNDS=5"]
