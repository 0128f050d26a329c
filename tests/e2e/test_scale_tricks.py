"""Course unit 9 and the scale notes: gradient accumulation, checkpointing, batch-size finder, loaders."""

import copy
import re

import pytest
import torch
import torch.nn.functional as F

from conftest import accel, assert_refused, records
from pipelines import grad_accum, activation_ckpt
from pipelines.core.train import memory, models

CPU = torch.device("cpu")


def test_accumulated_gradients_match_a_true_batch_of_256():
    """64 x 4 with the loss divided by 4 == one batch of 256 (SGD lr 1: the update is the gradient)."""
    torch.manual_seed(0)
    accumulated = models.build("cnn_cifar10")
    full = copy.deepcopy(accumulated)
    start = [p.detach().clone() for p in full.parameters()]
    x, y = torch.rand(256, 3, 32, 32), torch.randint(0, 10, (256,))

    step = grad_accum.make_step(accumulated, torch.optim.SGD(accumulated.parameters(), lr=1.0), CPU, 4)
    for index, (xs, ys) in enumerate(zip(x.split(64), y.split(64))):
        step(xs, ys)
        if index < 3:  # no optimizer step before the 4th micro-batch
            assert all(torch.equal(s, p) for s, p in zip(start, accumulated.parameters()))
    optimizer = torch.optim.SGD(full.parameters(), lr=1.0)
    F.cross_entropy(full(x), y).backward()
    optimizer.step()

    for s, a, f in zip(start, accumulated.parameters(), full.parameters()):
        assert not torch.equal(s, a)
        torch.testing.assert_close(a - s, f - s, rtol=1e-4, atol=1e-6)


def test_accumulation_of_one_is_the_plain_step():
    torch.manual_seed(0)
    model = models.build("cnn_cifar10")
    before = [p.detach().clone() for p in model.parameters()]
    grad_accum.make_step(model, torch.optim.SGD(model.parameters(), lr=0.1), CPU, 1)(
        torch.rand(4, 3, 32, 32), torch.randint(0, 10, (4,)))
    assert all(not torch.equal(b, p) for b, p in zip(before, model.parameters()))


def test_checkpointed_blocks_give_the_same_outputs_and_gradients():
    torch.manual_seed(0)
    plain = models.build("vit_tiny", classes=10)
    checkpointed = activation_ckpt.checkpoint_blocks(copy.deepcopy(plain))
    assert all(isinstance(b, activation_ckpt.Checkpointed) for b in checkpointed.encoder.layers)
    x, y = torch.rand(2, 3, 224, 224), torch.tensor([3, 7])
    out_plain, out_ckpt = plain(x), checkpointed(x)
    torch.testing.assert_close(out_ckpt, out_plain)
    F.cross_entropy(out_plain, y).backward()
    F.cross_entropy(out_ckpt, y).backward()
    grads_plain = [p.grad for p in plain.parameters()]
    grads_ckpt = [p.grad for p in checkpointed.parameters()]
    assert len(grads_plain) == len(grads_ckpt) and all(g is not None for g in grads_ckpt)
    for gp, gc in zip(grads_plain, grads_ckpt):
        torch.testing.assert_close(gc, gp, rtol=1e-4, atol=1e-6)


def test_checkpointing_keeps_less_for_backward():
    torch.manual_seed(0)
    plain = models.build("vit_tiny", classes=10)
    checkpointed = activation_ckpt.checkpoint_blocks(copy.deepcopy(plain))
    x, y = torch.rand(2, 3, 224, 224), torch.tensor([3, 7])
    kept_plain = memory.saved_for_backward_mib(plain, x, y)
    kept_ckpt = memory.saved_for_backward_mib(checkpointed, x, y)
    assert 0 < kept_ckpt < kept_plain / 2


@pytest.mark.slow
def test_checkpointing_entry_records_memory_and_time(data_root, tmp_path):
    run = accel("run", "s004-ckpt", "--scale", "smoke", "--data-root", str(data_root),
                "--results-dir", str(tmp_path))
    assert run.returncode == 0, run.stderr[-3000:]
    recs = {r["variant"]: r["metrics"] for r in records(tmp_path)}
    assert recs["checkpointed"]["saved_for_backward_mib"] < recs["plain"]["saved_for_backward_mib"]
    assert recs["checkpointed"]["step_time_ms_median"] > 0 and recs["plain"]["step_time_ms_median"] > 0
    assert recs["checkpointed"]["variant_peak_mib"] > 0 and recs["plain"]["variant_peak_mib"] > 0


@pytest.mark.slow
def test_batch_size_finder_doubles_until_the_memory_cap(data_root, tmp_path):
    """Uncapped (smoke: 3 trials) every size fits; with a cap between the peaks of sizes 128 and 256 the
    search stops early (measured or predicted over the cap), chooses the last size that fitted and names
    the first one that did not. CPU peaks are per trial (the RSS high-water mark is reset before each).

    The sizes start at 64, not 2: on CPU the peak is the process's resident set, which moves by tens of
    MiB from run to run (allocator caching, which kernels the CPU's ISA picks), more than the activations
    of batches 4 and 8 differ (a CI run measured size 8 under a cap set between them). From 64 the sizes'
    activations differ by about 80 and 160 MiB, well above that noise."""
    start = ("-o", "start=64")
    probe = accel("run", "dlf-u9-bsfinder", "--scale", "smoke", "--data-root", str(data_root),
                  "--results-dir", str(tmp_path / "a"), *start)
    assert probe.returncode == 0, probe.stderr[-3000:]
    (rec,) = records(tmp_path / "a")
    curve = rec["artifacts"]["curve"]
    assert [p["batch_size"] for p in curve] == [64, 128, 256] and all(p["fits"] for p in curve)
    assert rec["metrics"]["chosen_batch_size"] == 256 and rec["metrics"]["first_failed_batch_size"] is None
    assert all(p["throughput_samples_per_s"] > 0 and p["peak_mib"] > 0 for p in curve)
    assert curve[0]["peak_mib"] < curve[2]["peak_mib"]
    report = accel("report", "--results-dir", str(tmp_path / "a"))
    row = r"^dlf-u9-bsfinder\s+default \(smoke\)\s"  # the terminal's table: cells padded, no pipes
    assert report.returncode == 0 and re.search(row, report.stdout, re.MULTILINE), report.stdout + report.stderr

    cap = (curve[1]["peak_mib"] + curve[2]["peak_mib"]) / 2
    capped = accel("run", "dlf-u9-bsfinder", "--scale", "smoke", "--data-root", str(data_root),
                   "--results-dir", str(tmp_path / "b"), *start, "-o", f"memory_cap_mib={int(cap)}")
    assert capped.returncode == 0, capped.stderr[-3000:]
    (rec,) = records(tmp_path / "b")
    chosen, failed = rec["metrics"]["chosen_batch_size"], rec["metrics"]["first_failed_batch_size"]
    assert chosen in (64, 128) and failed == 2 * chosen and rec["metrics"]["memory_cap_mib"] == int(cap)
    assert "over the cap" in rec["artifacts"]["curve"][-1]["why"]


def _refused(args, code, needle, tmp_path, data_root, run):
    """Refused before any work: through `cli.main` in this process (no interpreter start-up)."""
    assert_refused(args, code, needle, tmp_path / "r", data_root, run=run)


@pytest.mark.parametrize("args,code,needle", [
    (["run", "s004-gradaccum", "--scale", "smoke", "-o", "accum_steps=0"], 2,
     "accum_steps must be at least 1"),
    (["run", "s004-gradaccum", "--scale", "smoke", "-o", "accum_steps=-2"], 2, "got -2"),
    (["run", "dlf-u9-bsfinder", "--scale", "smoke", "-o", "start=0"], 2, "start must be at least 1"),
    (["run", "dlf-u9-bsfinder", "--scale", "smoke", "-o", "memory_cap_mib=1"], 2, "raise -o memory_cap_mib"),
], ids=["accum-zero", "accum-negative", "finder-start-zero", "finder-cap-too-small"])
def test_bad_scale_input(args, code, needle, tmp_path, data_root, accel_in_process):
    _refused(args, code, needle, tmp_path, data_root, accel_in_process)


def _config(entry_id, variant, **changes):
    import dataclasses

    from pipelines.core.harness import plan as planning
    from pipelines.core.config import experiments

    (cfg,) = planning.plan(experiments.get(entry_id), "smoke", {}, {}, (variant,)).configs
    return dataclasses.replace(cfg, **changes)


def test_checkpointing_a_model_without_a_block_list_is_refused():
    from pipelines.core.errors import ConfigError

    with pytest.raises(ConfigError, match="resnet18 has no block list"):
        cfg = _config("s004-ckpt", "checkpointed", model="resnet18")
        activation_ckpt.PIPELINE.check(cfg, None)


def test_channels_last_and_the_pin_memory_note():
    from pipelines import channels_last
    from pipelines.core.train.loop import RunContext

    ctx = RunContext(device=CPU)
    cfg = _config("scale-channels-last", "channels_last")
    trainable = channels_last.PIPELINE.setup(cfg, ctx)
    conv = trainable.model.conv1.weight
    assert conv.is_contiguous(memory_format=torch.channels_last) and not conv.is_contiguous()
    assert torch.isfinite(trainable.step(torch.rand(4, 3, 32, 32), torch.randint(0, 10, (4,))))
    assert trainable.notes == []
