"""The command line a user meets first: --version, list with a header and --json, show --json, help text on
every option, `accel launch --help` naming every launcher knob, shell completion of ids, `make help`
equal to the Makefile's targets, and files that follow the umask."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys

import click
import pytest

from conftest import REPO, accel, records
from pipelines.core.record import atomic
from pipelines.core.config import experiments
from pipelines.core.cli.main import cli

ENTRIES = experiments.all_experiments()


def test_version_names_package_and_commit():
    run = accel("--version")
    assert run.returncode == 0 and not run.stderr
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short=7", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    if commit:
        assert re.fullmatch(rf"accel \d+\.\d+\.\d+\S* \(commit {commit}(\+dirty)?\)\n", run.stdout), run.stdout
    else:  # not a git checkout (e.g. an unpacked release): the version alone
        assert re.fullmatch(r"accel \S+\n", run.stdout), run.stdout


def test_list_has_a_header_row_and_one_row_per_id_within_100_columns():
    run = accel("list", env={"COLUMNS": "100"})
    lines = run.stdout.splitlines()
    assert run.returncode == 0 and lines[0].split() == ["id", "target", "launcher", "published", "compares"]
    assert set(lines[1].replace(" ", "")) == {"-"}
    assert [line.split()[0] for line in lines[2:]] == list(ENTRIES)
    assert max(map(len, lines)) <= 100, max(lines, key=len)
    narrow = accel("list", env={"COLUMNS": "80"}).stdout.splitlines()  # a narrower terminal: narrower still
    assert max(map(len, narrow)) <= 80


def test_list_wide_keeps_every_column():
    lines = accel("list", "--wide").stdout.splitlines()
    assert lines[0].split()[:5] == ["id", "status", "target", "launcher", "reproduces"]
    assert max(map(len, lines)) > 100  # the details `accel list` leaves to --wide and `accel show`


def test_list_json_is_the_catalog():
    run = accel("list", "--json", "--status", "ready")
    rows = json.loads(run.stdout)
    assert [row["id"] for row in rows] == [e.id for e in ENTRIES.values() if e.status == "ready"]
    assert set(rows[0]) == {"id", "status", "target", "launcher", "reproduces", "published_ratio", "compares"}
    assert all(row["reproduces"] for row in rows)


def test_show_json_holds_the_whole_entry():
    run = accel("show", "ch6-prune", "--json")
    entry = json.loads(run.stdout)
    assert entry["id"] == "ch6-prune" and entry["reproduces"] == "book ch6: Table 6.1"
    assert [v["name"] for v in entry["variants"]] == [v.name for v in ENTRIES["ch6-prune"].variants]
    assert {"metric": "ratio", "value": 122 / 76, "source": "book:ch6:table6.1", "note": "derived 122/76",
            "variant": "s80", "basis": "same-work throughput", "work_ratio": 1.0, "devices": 1, "low": None,
            "high": None, "margin": None, "margin_reason": "", "baseline_matmul": "",
            "band": [pytest.approx(122 / 76 / 1.15), pytest.approx(122 / 76 * 1.15)]} in entry["published"]
    # devices: one process, the book's and this entry's; band: the effect rule's cap, x/1.15


def test_show_names_every_figures_basis_and_the_fidelity_decisions():
    finetune = json.loads(accel("show", "vit-finetune", "--json").stdout)
    ratio = next(f for f in finetune["published"] if f["metric"] == "ratio")
    assert (ratio["value"], ratio["basis"], round(ratio["work_ratio"], 3)) == (61.48 / 18.70, "time-to-result", 3.333)
    fabric = json.loads(accel("show", "vit-fabric-baseline", "--json").stdout)
    published_arm = next(f["variant"] for f in fabric["published"] if f["metric"] == "ratio")
    arms = {v["name"]: {**fabric["options"], **v["options"]} for v in fabric["variants"]}
    assert arms[published_arm]["matmul_precision"] == "highest"  # the talk's logged step 03: true fp32
    text = accel("show", "ch3-backends-densenet-gpu").stdout
    assert "74.68" in text and "7,978,856" in text and "basis end-to-end" in text


def _commands(group: click.Group, path: str = "accel"):
    for name, command in group.commands.items():
        yield f"{path} {name}", command
        if isinstance(command, click.Group):
            yield from _commands(command, f"{path} {name}")


def test_every_option_of_every_command_has_help():
    missing = [f"{where} {param.opts[-1]}" for where, command in [("accel", cli), *_commands(cli)]
               for param in command.params if isinstance(param, click.Option) and not (param.help or "").strip()]
    assert not missing, f"options without help text: {missing}"


def _launcher_knobs() -> set[str]:
    """Every environment variable the launch scripts read as a user knob (`${NAME:-...}`, `for name in` lists,
    echo_knobs), minus what the scripts set themselves, read from SLURM or get from `accel launch`."""
    text = "\n".join(path.read_text() for path in (REPO / "launch").iterdir() if path.is_file())
    names = set(re.findall(r"\$\{([A-Z][A-Z0-9_]+)(?::-|:\?|:\+|})", text))
    # the knobs the scripts hand to pipelines/core/distributed/launchers.py, which reads them (as do the modules
    # it uses) with knobs.get("NAME")
    checks = "\n".join((REPO / "pipelines/core/distributed" / name).read_text()
                       for name in ("launchers.py", "knobs.py", "hosts.py", "containers.py"))
    names |= set(re.findall(r'knobs\.get\("([A-Z][A-Z0-9_]+)"', checks))
    for listing in re.findall(r"(?:for name in|echo_knobs) ([A-Z0-9_ \\\n]+?)(?:;|\n[^ ])", text):
        names |= set(re.findall(r"[A-Z][A-Z0-9_]+", listing))
    own = {"OMP_NUM_THREADS", "LD_PRELOAD", "OMP_PROC_BIND", "OMP_SCHEDULE", "GOMP_CPU_AFFINITY", "PYTHONPATH",
           "PATH", "ACCEL_REPO", "ACCEL_CHECKED_KNOBS", "SLURM_NTASKS", "SLURM_JOB_NUM_NODES", "SLURM_JOB_NODELIST",
           "SLURM_JOB_ID"}
    return {name for name in names if not name.startswith("SLURM_")} - own


def test_launch_help_lists_every_launcher_knob():
    text = accel("launch", "--help").stdout
    knobs = _launcher_knobs()
    assert {"NPROC", "THREADS", "NNODES", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT", "IMAGE", "OMP_RUNTIME",
            "ALLOCATOR", "PYTHON", "NP", "HOSTS", "NTASKS"} <= knobs
    missing = sorted(name for name in knobs if not re.search(rf"\b{name}\b", text))
    assert not missing, f"`accel launch --help` does not mention {missing}"


def complete(words: str) -> list[str]:
    """What bash completion offers after `words` (click's bash_complete protocol: type,value lines)."""
    env = {**os.environ, "_ACCEL_COMPLETE": "bash_complete", "COMP_WORDS": words,
           "COMP_CWORD": str(len(words.split()) - (0 if words.endswith(" ") else 1))}
    run = subprocess.run([sys.executable, "-m", "pipelines"], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0, run.stderr
    return [line.split(",", 1)[1] for line in run.stdout.splitlines()]


def test_shell_completion_of_ids_and_variants():
    assert complete("accel run ch2-b") == ["ch2-baseline", "ch2-bs128", "ch2-bs256", "ch2-both-layers"]
    assert complete("accel show ch6-") == ["ch6-prune"]
    assert "vit-ddp-4gpu" in complete("accel launch vit-")
    assert complete("accel run ch3-compile-cnn-cpu --variant ") == ["eager", "compiled"]
    script = subprocess.run([sys.executable, "-m", "pipelines"], cwd=REPO, capture_output=True, text=True,
                            env={**os.environ, "_ACCEL_COMPLETE": "bash_source"}).stdout
    assert "_ACCEL_COMPLETE=bash_complete" in script and "complete " in script
    assert 'eval "$(_ACCEL_COMPLETE=bash_source accel)"' in (REPO / "README.md").read_text()


def _phony_targets() -> set[str]:
    text = (REPO / "Makefile").read_text().replace("\\\n", " ")
    words = {w for line in re.findall(r"^\.PHONY:(.*)$", text, re.M) for w in line.split()}
    return {w for w in words if not w.startswith("$(")}  # $(CATALOG_IDS): the catalog ids, one line in the help


@pytest.mark.skipif(subprocess.run(["which", "make"], capture_output=True).returncode, reason="needs make")
def test_make_help_lists_exactly_the_phony_targets():
    run = subprocess.run(["make", "-s", "--no-print-directory", "help"], cwd=REPO, capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0, run.stderr
    assert "$(" not in run.stdout and "make <id>" in run.stdout
    listed = {line.split()[0] for line in run.stdout.splitlines() if line.startswith("  ")}
    phony = _phony_targets()
    assert {"gpu-reference", "harness-overhead", "image-digests", "recipes", "reference-timings"} <= listed
    assert phony <= listed, f"phony targets missing from `make help`: {phony - listed}"
    assert listed - phony <= set(ENTRIES), f"help lists unknown targets: {listed - phony - set(ENTRIES)}"


@pytest.mark.parametrize("mask,mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_atomic_files_follow_the_umask(tmp_path, mask, mode):
    previous = os.umask(mask)
    try:
        path = atomic.write_text(tmp_path / "f.jsonl", "x\n")
    finally:
        os.umask(previous)
    assert stat.S_IMODE(path.stat().st_mode) == mode


@pytest.mark.slow
def test_result_file_of_a_real_run_is_group_readable_under_umask_002(tmp_path):
    subprocess.run([sys.executable, "-m", "pipelines", "run", "ch2-baseline", "--scale", "smoke", "--dataset",
                    "synthetic", "--results-dir", str(tmp_path)], cwd=REPO, check=True, capture_output=True,
                   timeout=300, preexec_fn=lambda: os.umask(0o002))
    (path,) = tmp_path.glob("*.jsonl")
    assert stat.S_IMODE(path.stat().st_mode) == 0o664 and records(tmp_path)[0]["status"] == "ok"
