"""Bad input: one line naming the value and the fix, the right exit code, no traceback, no result file."""

import pytest

from conftest import accel

# The table of refused inputs (exit code, one line, no traceback, nothing written, no process left) lives in
# test_bad_inputs.py. Here: `accel run` refused through the real console path (a fresh interpreter), and a
# refusal in this process that looks at what was written. A failure mid-run (an error record) is end to end:
# tests/e2e/test_refusal_paths.py.


@pytest.mark.slow  # a real subprocess: `python -m pipelines run` imports torch and the pipeline (seconds)
def test_missing_data_root_names_the_fix(tmp_path):
    run = accel("run", "ch2-baseline", "--scale", "smoke", "--data-root", str(tmp_path / "none"),
                "--results-dir", str(tmp_path / "r"))
    assert run.returncode == 2
    assert "dataset fashion_mnist not found" in run.stderr and "accel data generate fashion_mnist" in run.stderr
    assert not (tmp_path / "r").exists() or not list((tmp_path / "r").iterdir())


def test_unwritable_results_dir(tmp_path, data_root, accel_in_process):
    blocker = tmp_path / "file"
    blocker.write_text("")
    run = accel_in_process("run", "ch2-baseline", "--scale", "smoke", "--data-root", str(data_root),
                           "--results-dir", str(blocker / "sub"))
    assert run.returncode == 2 and "not writable" in run.stderr and "--results-dir" in run.stderr
    assert "Traceback" not in run.stderr and not blocker.read_text()
