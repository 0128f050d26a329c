"""Bad input: one line naming the value and the fix, the right exit code, no traceback, no result file."""

import pytest

from conftest import accel
from pipelines.core import experiments

# Any entry still planned (ids become ready as issues land, so none is hard-coded here).
PLANNED = next((e.id for e in experiments.all_experiments().values() if e.status == "planned"), "none-planned")

CASES = [
    (["run", "ch2-nope"], 2, "unknown experiment id 'ch2-nope'"),
    (["run", "ch2-baseline", "--batch-size", "0"], 2, "--batch-size must be at least 1, got 0"),
    (["run", "ch2-baseline", "--batch-size", "-3"], 2, "got -3"),
    (["run", "ch2-baseline", "--batch-size", "abc"], 2, "'abc' is not a valid integer"),
    (["run", "ch2-baseline", "--steps", "0"], 2, "--steps must be at least 1"),
    (["run", "ch2-baseline", "--epochs", "0"], 2, "--epochs must be at least 1"),
    (["run", "ch2-baseline", "--dataset", "imagenet"], 2, "unknown dataset 'imagenet'"),
    (["run", "ch2-baseline", "-o", "model=lenet"], 2, "unknown option 'model'"),
    (["run", "ch2-baseline", "-o", "bias"], 2, "not KEY=VALUE"),
    (["run", "ch2-baseline", "--device", "tpu"], 2, "unknown device 'tpu'"),
    (["run", "ch2-baseline", "--weights", "/nonexistent.pt"], 2, "weights file /nonexistent.pt does not exist"),
    (["run", "ch2-baseline", "--prefetch-factor", "2"], 2, "No such option"),
    (["run", "ch2-baseline", "--num-workers", "-1"], 2, "--num-workers must be 0 or more"),
    (["run", "ch2-baseline", "--scale", "huge"], 2, "'huge' is not one of"),
    (["run", "ch3-compile-cnn-cpu", "--variant", "turbo"], 2, "unknown variant turbo"),
    (["run", "ch3-compile-cnn-cpu", "-o", "mode=ludicrous"], 2, "mode='ludicrous' is unknown"),
    (["run", "ch3-compile-cnn-cpu", "-o", "backend=nope"], 2, "backend='nope' is not available"),
    pytest.param(["run", PLANNED], 3, "planned, not implemented yet",
                 marks=pytest.mark.skipif(PLANNED == "none-planned", reason="every catalog entry is ready")),
    (["run", "ch3-compile-densenet-gpu", "--scale", "smoke"], 3, "no CUDA GPU is visible"),
    (["data", "generate", "mnist"], 2, "unknown dataset 'mnist'"),
    (["data", "generate", "cifar10", "--train", "0"], 2, "--train and --test must be at least 1"),
]


@pytest.mark.parametrize("args,code,needle", CASES, ids=[" ".join(getattr(c, "values", c)[0]) for c in CASES])
def test_bad_input(args, code, needle, tmp_path, data_root):
    import torch

    if "gpu" in " ".join(args) and torch.cuda.is_available():
        pytest.skip("a GPU is present, so the no-GPU refusal cannot be shown")
    extra = ["--data-root", str(data_root), "--results-dir", str(tmp_path / "r")] if args[0] == "run" else []
    if args[0] == "data":
        extra = ["--root", str(tmp_path / "d")]
    run = accel(*args, *extra)
    assert run.returncode == code, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("accel: error:"), run.stderr
    assert needle in lines[0]
    assert "Traceback" not in run.stderr
    assert not (tmp_path / "r").exists() or not list((tmp_path / "r").iterdir())


def test_missing_data_root_names_the_fix(tmp_path):
    run = accel("run", "ch2-baseline", "--scale", "smoke", "--data-root", str(tmp_path / "none"),
                "--results-dir", str(tmp_path / "r"))
    assert run.returncode == 2
    assert "dataset fashion_mnist not found" in run.stderr and "accel data generate fashion_mnist" in run.stderr
    assert not (tmp_path / "r").exists() or not list((tmp_path / "r").iterdir())


def test_unwritable_results_dir(tmp_path, data_root):
    blocker = tmp_path / "file"
    blocker.write_text("")
    run = accel("run", "ch2-baseline", "--scale", "smoke", "--data-root", str(data_root),
                "--results-dir", str(blocker / "sub"))
    assert run.returncode == 2 and "not writable" in run.stderr and "--results-dir" in run.stderr


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
