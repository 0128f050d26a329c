"""Torch's process-wide state (core/train/torch_state.py): the engine sets an arm's declared process options
and puts the process's state back after the unit, so technique files never set or restore it themselves."""

from __future__ import annotations

import torch

import pipelines.amp as amp
import pipelines.data_parallel as data_parallel
import pipelines.plain_training as plain_training
from pipelines.core.config.runconfig import RunConfig
from pipelines.core.train import torch_state


def config(pipeline, options, device: str = "cpu") -> RunConfig:
    return RunConfig(experiment="x", pipeline="p", variant="v", model="cnn_fmnist", dataset="synthetic",
                     device=device, options=options)


def test_declared_options_hold_inside_the_unit_and_the_state_returns_after():
    before = torch_state.snapshot()
    threads = config(plain_training.PIPELINE, plain_training.Options(threads=1))
    values = (*plain_training.PIPELINE.process_values(threads),
              *data_parallel.PIPELINE.process_values(config(data_parallel.PIPELINE,
                                                            data_parallel.Options(matmul_precision="medium"))))
    with torch_state.settings(values):
        assert torch.get_num_threads() == 1 and torch.get_float32_matmul_precision() == "medium"
    assert torch_state.snapshot() == before


def test_chapter_7_flags_are_set_on_cuda_arms_and_restored_even_after_a_failure():
    before = torch_state.snapshot()
    options = amp.Options(tf32="on", reduced_precision_reduction="off", cudnn_benchmark=True)
    values = amp.PIPELINE.process_values(config(amp.PIPELINE, options, device="cuda"))
    try:
        with torch_state.settings(values):
            assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
            assert not torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction
            assert torch.backends.cudnn.benchmark
            raise KeyError("the unit failed")
    except KeyError:
        pass
    assert torch_state.snapshot() == before
    assert amp.PIPELINE.process_values(config(amp.PIPELINE, options)) == ()  # CPU: no effect, not set


def test_default_switches_give_torch_s_own_defaults():
    with torch_state.settings({"tf32": "on"}):
        with torch_state.settings({"tf32": "default"}):
            for path, attr in torch_state.FLAGS["tf32"]:
                assert getattr(torch_state._holder(path), attr) == torch_state.TORCH_DEFAULTS[(path, attr)]


def test_every_declared_process_option_is_a_torch_setting_or_the_pipeline_s_own():
    """An option named in `process_options` either has a setter here or is applied by its pipeline (chapter
    3's inductor caches, whose value depends on the scale); a typo would silently set nothing."""
    import importlib
    import pkgutil

    import pipelines

    own = {"cache"}
    for info in pkgutil.iter_modules(pipelines.__path__):
        if info.ispkg or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"pipelines.{info.name}")
        pipeline = getattr(module, "PIPELINE", None)
        for name in getattr(pipeline, "process_options", ()):
            assert name in torch_state.SETTINGS or name in own, f"{info.name}: {name}"
            assert name in pipeline.Options.__dataclass_fields__, f"{info.name}: {name} is no option"


def test_holders_this_torch_lacks_are_skipped_not_fatal(monkeypatch):
    """torch 2.8 (the cpu-intel image, .venv-ipex) has no `cudnn.conv` or per-backend `fp32_precision`: the
    snapshot and restore skip such holders and flags instead of failing every unit of that torch."""
    assert torch_state._holder("cudnn.no_such_holder") is None
    monkeypatch.setattr(torch_state, "PRECISION_HOLDERS", torch_state.PRECISION_HOLDERS + ("no_such.holder",))
    monkeypatch.setattr(torch_state, "KEPT_FLAGS", torch_state.KEPT_FLAGS + (("no_such", "flag"),))
    before = torch_state.snapshot()
    assert all(path != "no_such.holder" for path, _ in before.precisions)
    with torch_state.settings({"threads": 1}):
        pass
    assert torch_state.snapshot() == before
