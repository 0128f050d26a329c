"""Mixed precision (ch7-amp, s004-amp): autocast + GradScaler, backend flags, fp16 skipped on CPU."""

import pytest
import torch

from conftest import accel, assert_refused, records
from pipelines import amp
from pipelines.core.train import models

CPU = torch.device("cpu")


def _cnn():
    torch.manual_seed(0)
    return models.build("cnn_cifar10")


def test_bf16_autocast_runs_for_real_on_cpu():
    model = _cnn()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    step, predict = amp.make_step(model, optimizer, CPU, "bf16", True)
    x, y = torch.rand(8, 3, 32, 32), torch.randint(0, 10, (8,))
    before = [p.detach().clone() for p in model.parameters()]
    loss = step(x, y)
    assert loss.dtype == torch.float32 and torch.isfinite(loss)  # autocast keeps the loss in fp32
    assert predict(x).dtype == torch.bfloat16  # the matmuls really ran in bf16
    assert all(p.dtype == torch.float32 for p in model.parameters())  # master weights stay fp32
    assert any(not torch.equal(b, p) for b, p in zip(before, model.parameters()))


def test_fp32_step_has_no_autocast():
    model = _cnn()
    _, predict = amp.make_step(model, torch.optim.Adam(model.parameters()), CPU, "fp32", True)
    assert predict(torch.rand(2, 3, 32, 32)).dtype == torch.float32


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_fp16_with_grad_scaler_on_cuda():
    device = torch.device("cuda")
    model = _cnn().to(device)
    step, predict = amp.make_step(model, torch.optim.Adam(model.parameters()), device, "fp16", True)
    x, y = torch.rand(8, 3, 32, 32, device=device), torch.randint(0, 10, (8,), device=device)
    assert torch.isfinite(step(x, y)) and predict(x).dtype == torch.float16


@pytest.mark.slow
def test_ch7_on_cpu_runs_fp32_and_bf16_and_records_why_fp16_is_skipped(data_root, tmp_path):
    """The catalog entry asks for CUDA; its CPU dry path is the same code with --device cpu."""
    run = accel("run", "ch7-amp", "--scale", "smoke", "--device", "cpu", "--data-root", str(data_root),
                "--results-dir", str(tmp_path))
    assert run.returncode == 0, run.stderr[-3000:]
    recs = {r["variant"]: r for r in records(tmp_path)}
    assert set(recs) == {"fp32", "bf16", "fp16", "fp16-noscaler"}
    for name in ("fp32", "bf16"):
        assert recs[name]["status"] == "ok" and recs[name]["metrics"]["measured_steps"] == 3
        assert recs[name]["config"]["model"] == "efficientnet_b0" and recs[name]["config"]["device"] == "cpu"
    assert recs["bf16"]["config"]["options"]["tf32"] == "on"
    assert any("no effect on cpu" in note for note in recs["bf16"]["notes"])
    for name in ("fp16", "fp16-noscaler"):
        assert recs[name]["status"] == "skipped" and recs[name]["metrics"] == {}
        assert "--device cuda" in recs[name]["notes"][0]


def _refused(args, code, needle, tmp_path, data_root, run):
    """Refused before any work: through `cli.main` in this process (no interpreter start-up)."""
    assert_refused(args, code, needle, tmp_path / "r", data_root, run=run)


@pytest.mark.parametrize("args,code,needle", [
    (["run", "ch7-amp", "--scale", "smoke", "--device", "cpu", "--variant", "fp16"], 3,
     "nothing can run here"),
    (["run", "ch7-amp", "--scale", "smoke", "--device", "cpu", "-o", "precision=fp8"], 2, "precision='fp8'"),
    (["run", "ch7-amp", "--scale", "smoke", "--device", "cpu", "-o", "tf32=maybe"], 2, "tf32='maybe'"),
    (["run", "s004-amp", "--scale", "smoke", "-o", "optimizer=sgd"], 2, "optimizer='sgd'"),
], ids=["fp16-only-on-cpu", "unknown-precision", "bad-flag", "bad-optimizer"])
def test_bad_amp_input(args, code, needle, tmp_path, data_root, accel_in_process):
    _refused(args, code, needle, tmp_path, data_root, accel_in_process)


def test_make_ch7_on_a_cpu_machine_refuses_clearly(tmp_path, data_root, accel_in_process):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present, so the no-GPU refusal cannot be shown")
    _refused(["run", "ch7-amp", "--scale", "smoke"], 3, "no CUDA GPU is visible", tmp_path, data_root,
             accel_in_process)
