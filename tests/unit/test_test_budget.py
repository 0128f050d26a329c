"""ci/test-budget.py on a real pytest run: a copy of a small suite within its budget passes, and the same copy
with one artificially slow test fails its tier and names that test (a check on recorded times, after the run)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from conftest import REPO

SCRIPT = REPO / "ci" / "test-budget.py"
SUITE = '''
def test_quick_one():
    assert sum(range(10)) == 45


def test_quick_two():
    assert "a" * 3 == "aaa"
'''
SLOW = '''

def test_artificially_slow():
    import time
    time.sleep(3)
'''


def pytest_run(folder: Path, junit: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
                           f"--junitxml={junit}", str(folder)], cwd=folder, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def budget(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=60)


@pytest.fixture
def suite(tmp_path):
    """A copy of a two-test suite, its budget set from a run of it, and that run's times recorded."""
    folder = tmp_path / "suite"
    folder.mkdir()
    (folder / "test_copy.py").write_text(SUITE)
    budgets = tmp_path / "budgets.toml"
    budgets.write_text("record_above_s = 1.0\n\n[tiers.mini]\nbudget_s = 2.0\n")
    junit = tmp_path / "before.xml"
    pytest_run(folder, junit)
    assert budget("record", "mini", junit, "--budgets", budgets).returncode == 0
    return folder, budgets


@pytest.mark.slow  # real pytest runs of a copied suite
def test_a_suite_within_its_budget_passes_and_lists_its_slowest(suite, tmp_path):
    folder, budgets = suite
    pytest_run(folder, tmp_path / "again.xml")
    done = budget("check", "mini", tmp_path / "again.xml", "--budgets", budgets)
    assert done.returncode == 0, done.stderr
    assert "test-budget: mini: 2 tests in" in done.stdout and "the 2 slowest:" in done.stdout


@pytest.mark.slow  # real pytest runs of a copied suite
def test_an_artificially_slow_test_fails_the_tier_and_is_named(suite, tmp_path):
    folder, budgets = suite
    (folder / "test_copy.py").write_text(SUITE + SLOW)
    pytest_run(folder, tmp_path / "after.xml")
    done = budget("check", "mini", tmp_path / "after.xml", "--budgets", budgets)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "test-budget: FAILED: mini took" in done.stderr
    grew = [line for line in done.stderr.splitlines() if line.strip().startswith("grew:")]
    assert len(grew) == 1 and "test_copy.py::test_artificially_slow" in grew[0], done.stderr
    assert "not recorded" in grew[0]


@pytest.mark.slow  # real pytest runs of a copied suite
def test_a_recorded_test_that_slowed_is_named_with_its_recorded_time(tmp_path):
    folder = tmp_path / "suite"
    folder.mkdir()
    (folder / "test_copy.py").write_text(SUITE + SLOW.replace("sleep(3)", "sleep(1.2)"))
    budgets = tmp_path / "budgets.toml"
    budgets.write_text("record_above_s = 1.0\n\n[tiers.mini]\nbudget_s = 2.0\n")
    pytest_run(folder, tmp_path / "before.xml")
    budget("record", "mini", tmp_path / "before.xml", "--budgets", budgets)
    assert '"test_copy.py::test_artificially_slow" = 1.' in budgets.read_text()
    (folder / "test_copy.py").write_text(SUITE + SLOW.replace("sleep(3)", "sleep(4.5)"))
    pytest_run(folder, tmp_path / "after.xml")
    done = budget("check", "mini", tmp_path / "after.xml", "--budgets", budgets)
    assert done.returncode == 1
    assert "grew: test_copy.py::test_artificially_slow: 4." in done.stderr and "recorded 1." in done.stderr


@pytest.mark.parametrize("args, needle", [
    (["check", "nope", "{junit}"], "tier 'nope' has no budget in"),
    (["check", "test", "{missing}"], "cannot read JUnit XML"),
])
def test_bad_input_is_one_line(tmp_path, args, needle):
    junit = tmp_path / "j.xml"
    junit.write_text('<testsuites><testsuite name="pytest" time="1.0"></testsuite></testsuites>')
    argv = [a.format(junit=junit, missing=tmp_path / "missing.xml") for a in args]
    done = budget(*argv)
    assert done.returncode == 2 and needle in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_the_repository_budgets_name_every_tier_the_makefile_runs():
    tiers = tomllib.loads((REPO / "tests" / "budgets.toml").read_text())["tiers"]
    makefile = (REPO / "Makefile").read_text()
    for tier in ("test-fast", "test", "test-all"):
        assert tier in tiers and f"\n{tier}: venv" in makefile
    assert tiers["test-fast"]["budget_s"] <= 180 and tiers["test"]["budget_s"] < tiers["test-all"]["budget_s"]


def test_a_slower_machine_scales_the_budget_and_still_names_a_test_that_grew():
    """Every recorded test 1.5x slower (another host) is the machine's pace, not growth: the budget scales
    with it; a test 3x its recorded time grew beyond that pace and is named."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("test_budget_script", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    recorded = {f"t{i}": 20.0 for i in range(6)}
    times = {t: 30.0 for t in recorded} | {"t0": 60.0}
    assert script.pace(times, recorded) == pytest.approx(1.5)
    assert [g[0] for g in script.grown(times, recorded, 15.0, script.pace(times, recorded))] == ["t0"]
    assert script.pace({t: 10.0 for t in recorded}, recorded) == 1.0  # a faster host never tightens it
