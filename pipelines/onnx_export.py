"""Chapter 1: the trained CNN exported to ONNX, and the exported file checked against the model.

The CNN trains through the shared loop as in chapter 1. When training ends (a `Hooks.train_end`), the
model is exported with `torch.onnx.export` (the dynamo exporter, one self-contained file, a dynamic
batch axis) and the file is checked the way a deployment would check it:
- loaded back and passed through `onnx.checker.check_model(full_check=True)` (graph, types, shapes);
- where onnxruntime is installed, a batch of real inputs (taken before training; larger than the batch
  the export traced, so the dynamic axis is exercised) run through an onnxruntime CPU session: its
  logits must equal the PyTorch model's within `atol` + `rtol` (a mismatch fails the run), and
  `onnx_max_abs_diff` records how close they are. Without onnxruntime the record says the checker
  alone ran.
The file lands in `<results dir>/artifacts/` and the record names it, with its size and SHA-256.
"""

from __future__ import annotations

import importlib.util
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import click
import numpy as np
import torch

from pipelines.core.data import files
from pipelines.core.train import models
from pipelines.core.harness.pipeline import Hooks, Trainable, TrainingPipeline
from pipelines.core.train.steps import book_optimizer, plain_step

POSITIVE = click.FloatRange(min=0, min_open=True)


@dataclass(frozen=True)
class Options:
    opset: Annotated[int, click.IntRange(min=18)] = 18  # the dynamo exporter's lowest supported opset
    atol: Annotated[float, POSITIVE] = 1e-4
    rtol: Annotated[float, POSITIVE] = 1e-3
    check_batch: Annotated[int, click.IntRange(min=1)] = 16  # inputs compared between torch and onnxruntime


def export(model: torch.nn.Module, sample: torch.Tensor, path: Path, opset: int) -> None:
    """One self-contained .onnx file whose batch dimension is dynamic."""
    batch = torch.export.Dim("batch", min=1)
    model.eval()
    try:
        torch.onnx.export(model, (sample,), str(path), input_names=["inputs"], output_names=["logits"],
                          dynamic_shapes=({0: batch},), opset_version=opset, external_data=False, dynamo=True)
    finally:
        model.train()


def check(path: Path, model: torch.nn.Module, sample: torch.Tensor, atol: float, rtol: float) -> dict:
    """The exported file through onnx's checker, then (if installed) through onnxruntime against torch."""
    import onnx

    onnx.checker.check_model(onnx.load(str(path)), full_check=True)
    out = {"onnx_checker": "passed", "onnx_file_bytes": path.stat().st_size, "onnxruntime": None}
    if importlib.util.find_spec("onnxruntime") is None:
        return out
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    model.eval()
    with torch.no_grad():
        expected = model(sample).float().cpu().numpy()
    model.train()
    got = session.run(["logits"], {"inputs": sample.cpu().numpy()})[0]
    diff = float(np.abs(got - expected).max())
    if not np.allclose(got, expected, atol=atol, rtol=rtol):
        raise RuntimeError(f"onnxruntime's logits differ from torch's by up to {diff:.3g} (atol {atol}, rtol {rtol})")
    return {**out, "onnxruntime": onnxruntime.__version__, "onnx_max_abs_diff": diff,
            "onnx_compared_samples": len(sample)}


class ExportAtEnd(Hooks):
    """After the last step: export the trained model, check the file, put the facts on the Trainable."""

    def __init__(self, folder: Path, name: str, opts: Options):
        self.folder, self.name, self.opts = folder, name, opts
        self.sample: torch.Tensor | None = None  # set before training from a real batch

    def train_end(self, trainable: Trainable, epoch: int) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"{self.name}-{secrets.token_hex(3)}.onnx"
        export(trainable.model, self.sample[:2], path, self.opts.opset)
        trainable.metrics.update(check(path, trainable.model, self.sample, self.opts.atol, self.opts.rtol))
        trainable.artifacts["onnx_file"] = {"path": str(path), "sha256": files.digest(path),
                                            "opset": self.opts.opset, "input": "inputs", "output": "logits",
                                            "dynamic_axes": {"inputs": [0], "logits": [0]}}
        if trainable.metrics["onnxruntime"] is None:
            trainable.notes.append("onnxruntime is not installed: the export was checked with onnx's checker alone")


class OnnxExport(TrainingPipeline[Options]):
    Options = Options

    def setup(self, cfg, ctx) -> Trainable:
        opts: Options = cfg.options
        model = models.build(cfg.model, classes=cfg.head_classes, weights=cfg.weights).to(ctx.device)
        hook = ExportAtEnd(Path(cfg.results_dir) / "artifacts", f"{cfg.experiment}--{cfg.variant}", opts)
        return Trainable(model, plain_step(model, book_optimizer(model, cfg)), hooks=[hook])

    def before_training(self, trainable, prep, cfg, ctx) -> Trainable:
        opts: Options = cfg.options
        (hook,) = [h for h in trainable.hooks if isinstance(h, ExportAtEnd)]
        hook.sample = prep.batch()[0][: opts.check_batch]
        return trainable


PIPELINE = OnnxExport()
