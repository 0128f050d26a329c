import pytest

from pipelines.core.config import SCALE_DEFAULTS, ConfigError, RunConfig, merge_options, resolve

BASE = dict(experiment="x", pipeline="p", variant="v")


def test_resolve_layers_scale_then_entry_then_user():
    entry = {"model": "cnn_fmnist", "dataset": "fashion_mnist", "batch_size": 64, "epochs": 10}
    cfg = resolve(entry, {}, {"batch_size": 128, "steps": None}, scale="bench", **BASE)
    assert cfg.batch_size == 128  # user wins
    assert cfg.epochs == 10  # entry kept
    assert cfg.steps == SCALE_DEFAULTS["bench"].steps  # None override does not erase the scale's value
    book = resolve(entry, {}, {}, scale="book", **BASE)
    assert book.steps is None and book.warmup_steps == 0 and book.repeats == 1


def test_config_is_frozen_and_recordable():
    cfg = RunConfig(model="cnn_fmnist", dataset="synthetic", options={"bias": False}, **BASE)
    with pytest.raises(AttributeError):
        cfg.batch_size = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        cfg.options["bias"] = True  # type: ignore[index]
    record = cfg.to_record()
    assert record["options"] == {"bias": False} and record["data_root"] == "data"


@pytest.mark.parametrize("field,value,needle", [
    ("batch_size", 0, "--batch-size must be at least 1, got 0"),
    ("batch_size", -4, "got -4"),
    ("epochs", 0, "--epochs"),
    ("steps", 0, "--steps"),
    ("repeats", 0, "--repeats"),
    ("num_workers", -1, "--num-workers"),
    ("lr", 0.0, "--lr"),
    ("dataset", "imagenet", "unknown dataset 'imagenet'"),
    ("device", "tpu", "unknown device 'tpu'"),
    ("weights", "/nonexistent/w.pt", "weights file /nonexistent/w.pt does not exist"),
])
def test_bad_values_name_the_value(field, value, needle):
    kwargs = dict(model="cnn_fmnist", dataset="synthetic", **BASE)
    kwargs[field] = value
    with pytest.raises(ConfigError, match=needle.replace("(", r"\(")):
        RunConfig(**kwargs)


def test_conflicting_loader_flags():
    with pytest.raises(ConfigError, match="prefetch-factor needs --num-workers"):
        RunConfig(model="m", dataset="synthetic", prefetch_factor=2, num_workers=0, **BASE)


def test_options_typed_by_declared_default():
    declared = {"bias": True, "mode": "default", "sparsity": 0.5, "top": 3}
    merged = merge_options(declared, {"mode": "max-autotune"}, {"bias": "false", "sparsity": "0.25", "top": "7"})
    assert merged == {"bias": False, "mode": "max-autotune", "sparsity": 0.25, "top": 7}
    with pytest.raises(ConfigError, match="unknown option 'bogus'"):
        merge_options(declared, {"bogus": 1})
    with pytest.raises(ConfigError, match="not a valid bool"):
        merge_options(declared, {"bias": "maybe"})
    with pytest.raises(ConfigError, match="not a valid float"):
        merge_options(declared, {"sparsity": "half"})
