"""Chapter 6: L1 filter pruning + compression gives a really smaller CNN with the same interface."""

import pytest
import torch
from torch import nn

from conftest import accel, records
from pipelines import pruning
from pipelines.core.train import models


def _pruned(sparsity: float, model: nn.Module | None = None):
    torch.manual_seed(0)
    model = model or models.build("cnn_cifar10")
    with torch.no_grad():
        keep = pruning.l1_filter_masks(model, sparsity)
        return pruning.compress(model, keep), keep


def test_half_sparsity_matches_the_book_count():
    model, _ = _pruned(0.5)
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d)]
    assert [(c.in_channels, c.out_channels) for c in convs] == [(3, 16), (16, 32)]
    assert model.classifier[0].in_features == 2048
    assert models.parameter_count(model) == 1_059_306  # from 2,122,186


@pytest.mark.parametrize("sparsity", [0.1, 0.3, 0.8])
def test_compressed_model_is_smaller_with_the_same_output_shape(sparsity):
    x = torch.rand(4, 3, 32, 32)
    dense = models.build("cnn_cifar10")
    pruned, _ = _pruned(sparsity)
    assert models.parameter_count(pruned) < models.parameter_count(dense)
    assert pruned(x).shape == dense(x).shape == (4, 10)
    loss = nn.functional.cross_entropy(pruned(x), torch.tensor([0, 1, 2, 3]))
    loss.backward()  # still trainable end to end
    assert all(p.grad is not None for p in pruned.parameters())


def test_surviving_filters_are_the_largest_l1_ones_with_their_weights():
    torch.manual_seed(1)
    dense = models.build("cnn_cifar10")
    original = dense.features[0].weight.detach().clone()
    pruned, keep = _pruned(0.25, dense)
    norms = original.abs().sum(dim=(1, 2, 3))
    expected = torch.zeros(32, dtype=torch.bool)
    expected[norms.topk(24).indices] = True
    assert torch.equal(keep[0], expected)
    assert torch.equal(pruned.features[0].weight, original[expected])


def test_fc_keeps_the_features_of_surviving_channels():
    """Removed channels' features leave fc1; the rest keep their weights, in order."""
    torch.manual_seed(2)
    dense = models.build("cnn_cifar10")
    fc = dense.classifier[0].weight.detach().clone()
    pruned, keep = _pruned(0.5, dense)
    expected = fc.view(512, 64, 64)[:, keep[1]].reshape(512, -1)
    assert torch.equal(pruned.classifier[0].weight, expected)


@pytest.mark.parametrize("value", ["0", "1.5"])
def test_sparsity_outside_0_1_is_a_usage_error(value, tmp_path, data_root, accel_in_process):
    run = accel_in_process("run", "ch6-prune", "--scale", "smoke", "--variant", "s50", "-o", f"sparsity={value}",
                           "--data-root", str(data_root), "--results-dir", str(tmp_path), env={"OMP_RUNTIME": "gnu"})
    assert run.returncode == 2, run.stderr[-2000:]
    assert "must be between 0 and 1" in run.stderr.strip().splitlines()[-1]
    assert not list(tmp_path.iterdir())


@pytest.mark.slow
def test_pruned_run_reports_a_smaller_trained_model(tmp_path, data_root):
    run = accel("launch", "ch6-prune", "--scale", "smoke", "--variant", "unpruned", "--variant", "s50",
                "--data-root", str(data_root), "--results-dir", str(tmp_path))
    assert run.returncode == 0, run.stderr[-3000:]
    recs = {r["variant"]: r["metrics"] for r in records(tmp_path)}
    assert recs["unpruned"]["parameters"] == 2_122_186 and "prune_warmup_s" not in recs["unpruned"]
    assert recs["s50"]["parameters"] == 1_059_306 and recs["s50"]["conv_filters"] == [16, 32]
    assert recs["s50"]["prune_warmup_s"] > 0 and recs["s50"]["param_ratio"] == pytest.approx(0.4992, abs=1e-3)
    assert recs["s50"]["flops_per_step"] < recs["unpruned"]["flops_per_step"]


def test_the_pruned_arms_of_a_process_share_one_dense_warmup(monkeypatch):
    """The second arm with the same first weights and config (another sparsity) loads the weights the first
    arm's warm-up reached instead of training again; other first weights (another seed) train again."""
    from types import SimpleNamespace

    from pipelines.core.config.runconfig import RunConfig

    monkeypatch.setattr(pruning, "_last_warmup", None)
    trained = []

    def train(trainable):  # a stand-in for the loop's warm-up: moves every weight, as training would
        trained.append(trainable)
        with torch.no_grad():
            for p in trainable.model.parameters():
                p.add_(1.0)
        return {"train_s": 2.5}

    def arm(seed: int, sparsity: float):
        torch.manual_seed(seed)
        cfg = RunConfig(experiment="ch6-prune", pipeline="pruning", variant=f"s{int(sparsity * 100)}",
                        model="cnn_cifar10", dataset="synthetic", options=pruning.Options(sparsity=sparsity))
        return SimpleNamespace(model=models.build("cnn_cifar10")), cfg

    prep = SimpleNamespace(train=train)
    first, cfg = arm(0, 0.5)
    assert pruning.dense_warmup(first, prep, cfg) == 2.5 and len(trained) == 1
    second, cfg = arm(0, 0.8)
    assert pruning.dense_warmup(second, prep, cfg) == 2.5 and len(trained) == 1
    assert all(torch.equal(a, b) for a, b in zip(first.model.state_dict().values(), second.model.state_dict().values()))
    third, cfg = arm(1, 0.8)
    pruning.dense_warmup(third, prep, cfg)
    assert len(trained) == 2
