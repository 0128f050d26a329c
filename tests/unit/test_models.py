import pytest
import torch

from pipelines.core.train import models
from pipelines.core.errors import ConfigError


@pytest.mark.parametrize("name,kwargs,classes,expected", [
    ("cnn_fmnist", {}, 10, 1_630_090),
    ("cnn_fmnist", {"bias": False}, 10, 1_629_472),
    ("cnn_fmnist", {"extra_fc": True}, 10, 1_758_858),
    ("cnn_cifar10", {}, 10, 2_122_186),
    ("densenet121", {}, 1000, 7_978_856),
    ("vit_b_16", {}, 10, 85_806_346),
    ("efficientnet_b7", {}, 1000, 66_347_960),
    ("distilbert", {}, 2, 66_955_010),  # distilbert-base-uncased with a 2-label head, as the course's
])
def test_parameter_counts_match_the_book(name, kwargs, classes, expected):
    assert models.parameter_count(models.build(name, classes=classes, **kwargs)) == expected


@pytest.mark.parametrize("name", sorted(models.REGISTRY))
@pytest.mark.usefixtures("one_torch_thread")  # a shape check: two threads on a busy 2-core box cost seconds
def test_every_model_runs_its_input_shape(name):
    if name in ("efficientnet_b7", "vit_b_16", "resnet50", "distilbert"):
        pytest.skip("large: covered by the parameter-count test")
    model = models.build(name, classes=10).eval()
    with torch.no_grad():
        out = model(models.random_inputs(name, 2, models.spec(name).input_shape))
    assert out.shape == (2, 10)


def test_weights_come_from_a_local_file_only(tmp_path):
    source = models.build("cnn_fmnist")
    path = tmp_path / "w.pt"
    torch.save(source.state_dict(), path)
    loaded = models.build("cnn_fmnist", weights=path)
    assert all(torch.equal(a, b) for a, b in zip(source.state_dict().values(), loaded.state_dict().values()))
    with pytest.raises(ConfigError, match="does not exist"):
        models.build("cnn_fmnist", weights=tmp_path / "missing.pt")
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ConfigError, match="could not be read"):
        models.build("cnn_fmnist", weights=tmp_path / "junk.pt")
    with pytest.raises(ConfigError, match="unknown model 'lenet'"):
        models.build("lenet")
