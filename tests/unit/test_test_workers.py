"""The suite's own pytest-xdist plugins (tests/conftest.py) on a real two-worker run of a small copied suite:
a `whole_machine` test runs while no other test runs, and the others still run side by side."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import REPO

# The copy's conftest takes the suite's plugins from tests/conftest.py under another module name.
CONFTEST = f'''
import importlib.util

spec = importlib.util.spec_from_file_location("accel_tests_conftest", {str(REPO / "tests" / "conftest.py")!r})
accel = importlib.util.module_from_spec(spec)
spec.loader.exec_module(accel)
pytest_configure = accel.pytest_configure
'''
SUITE = '''
import json
import os
import time

import pytest


def stay(name, seconds):
    start = time.monotonic()
    time.sleep(seconds)
    with open(os.environ["SPANS"], "a") as spans:
        spans.write(json.dumps([name, start, time.monotonic()]) + "\\n")


@pytest.mark.whole_machine
def test_alone():
    stay("alone", 1.5)
''' + "".join(f'''

def test_beside_{n}():
    stay("beside_{n}", 0.4)
''' for n in range(8))


QUIET_ENV = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}  # not this run's


@pytest.mark.slow  # a real pytest run with two workers
def test_a_whole_machine_test_never_overlaps_another_and_the_others_run_side_by_side(tmp_path):
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text(CONFTEST)
    (suite / "test_copy.py").write_text(SUITE)
    spans_file = tmp_path / "spans.jsonl"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
                           "-n", "2", "--basetemp", str(tmp_path / "base"), str(suite)], cwd=suite,
                          capture_output=True, text=True, timeout=120, env={**QUIET_ENV, "SPANS": str(spans_file)})
    assert done.returncode == 0, done.stdout + done.stderr
    spans = {name: (start, end) for name, start, end in map(json.loads, spans_file.read_text().splitlines())}
    assert len(spans) == 9
    alone = spans.pop("alone")
    assert all(end <= alone[0] or start >= alone[1] for start, end in spans.values()), (alone, spans)
    overlapping = [(a, b) for a in spans for b in spans if a < b
                   and spans[a][0] < spans[b][1] and spans[b][0] < spans[a][1]]
    assert overlapping, spans  # two workers: the other tests did share the time
