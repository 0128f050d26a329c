"""Bad input: one line naming the value and the fix, the right exit code, no traceback, no result file."""

import pytest

from conftest import accel

# The table of refused inputs (exit code, one line, no traceback, nothing written, no process left) lives in
# test_bad_inputs.py; these are the refusals that need a real subprocess and a look at what was written.


@pytest.mark.slow  # a real subprocess (accel, a CI script) or a full report: end to end
def test_missing_data_root_names_the_fix(tmp_path):
    run = accel("run", "ch2-baseline", "--scale", "smoke", "--data-root", str(tmp_path / "none"),
                "--results-dir", str(tmp_path / "r"))
    assert run.returncode == 2
    assert "dataset fashion_mnist not found" in run.stderr and "accel data generate fashion_mnist" in run.stderr
    assert not (tmp_path / "r").exists() or not list((tmp_path / "r").iterdir())


@pytest.mark.slow  # a real subprocess (accel, a CI script) or a full report: end to end
def test_unwritable_results_dir(tmp_path, data_root):
    blocker = tmp_path / "file"
    blocker.write_text("")
    run = accel("run", "ch2-baseline", "--scale", "smoke", "--data-root", str(data_root),
                "--results-dir", str(blocker / "sub"))
    assert run.returncode == 2 and "not writable" in run.stderr and "--results-dir" in run.stderr


@pytest.mark.slow  # a real subprocess (accel, a CI script) or a full report: end to end
def test_runtime_failure_writes_an_error_record(tmp_path, data_root):
    """A failure after work started (here: 3-channel CIFAR images into the 1-channel CNN) leaves an
    error record, so a report shows the hole; the traceback is kept because this is not a typo."""
    from conftest import records

    run = accel("run", "ch2-baseline", "--scale", "smoke", "--data-root", str(data_root),
                "--results-dir", str(tmp_path), "--dataset", "cifar10")
    assert run.returncode == 1 and "Traceback" in run.stderr
    (record,) = records(tmp_path)
    assert record["status"] == "error" and record["error"]["type"] == "RuntimeError"
    assert record["config"]["dataset"] == "cifar10" and record["env"]["torch"]
