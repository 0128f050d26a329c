"""Chapter 1's ONNX export: the file passes onnx's checker and onnxruntime gives torch's logits; the
comparison is real (a model that no longer matches its file fails it)."""

import importlib.util

import pytest
import torch

from pipelines import onnx_export
from pipelines.core.train import models


def test_exported_cnn_gives_torchs_logits_in_onnxruntime_at_another_batch_size(tmp_path):
    torch.manual_seed(0)
    model = models.build("cnn_fmnist")
    path = tmp_path / "cnn.onnx"
    onnx_export.export(model, torch.rand(2, 1, 28, 28), path, opset=18)
    assert model.training  # export puts the model back in training mode
    sample = torch.rand(7, 1, 28, 28)  # not the traced batch size: the batch axis is dynamic
    result = onnx_export.check(path, model, sample, atol=1e-4, rtol=1e-3)
    assert result["onnx_checker"] == "passed" and result["onnx_file_bytes"] == path.stat().st_size
    if importlib.util.find_spec("onnxruntime") is None:
        pytest.skip("onnxruntime is not installed: the checker alone ran")
    assert result["onnx_max_abs_diff"] <= 1e-4 and result["onnx_compared_samples"] == 7
    with torch.no_grad():
        model.classifier[-1].bias.add_(0.5)  # the model moves on; the file does not
    with pytest.raises(RuntimeError, match="onnxruntime's logits differ from torch's by up to 0.5"):
        onnx_export.check(path, model, sample, atol=1e-4, rtol=1e-3)
