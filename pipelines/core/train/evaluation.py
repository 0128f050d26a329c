"""The test pass: a trained model's accuracy on the test loader, with the clock stopped, in eval mode.

It runs after the loop (train/loop.py) has ended its timed windows, so no evaluation time is in `train_s`.
A source's own per-epoch validation pass is another thing (train/bookkeeping.py), timed inside the loop.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from pipelines.core.config.runconfig import RunConfig
from pipelines.core.train import interrupt
from pipelines.core.train.loop import RunContext, Trainable


def evaluate(trainable: Trainable, loader, cfg: RunConfig, ctx: RunContext) -> dict[str, Any]:
    """Test accuracy with the clock stopped, in eval mode (the book skipped model.eval(); we do not)."""
    predict = trainable.predict if trainable.predict is not None else trainable.model
    model = trainable.model
    model.eval()
    correct = seen = 0
    started = time.perf_counter()
    with torch.no_grad():
        for index, (x, y) in enumerate(loader):
            interrupt.check()
            if cfg.eval_batches is not None and index >= cfg.eval_batches:
                break
            logits = predict(x.to(ctx.device))
            correct += int((logits.argmax(dim=1).cpu() == y).sum())
            seen += len(y)
    model.train()
    return {"test_accuracy_pct": 100.0 * correct / seen if seen else None, "test_samples": seen,
            "eval_s": time.perf_counter() - started}
