"""The talk's ViT ladder and the course's precision entries: plain loop, Fabric, weights, refusals.

The catalog entries ask for CUDA (book scale); these runs use the same code with --device cpu and the
small models smoke scale selects (the tiny ViT; the tiny DistilBERT for the course's entries).
"""

import pytest
import torch

from conftest import accel, assert_refused, records
from pipelines.core.train import models, pretrained, steps

CPU = torch.device("cpu")


def _run(*args, data_root, results):
    return accel("run", *args, "--scale", "smoke", "--device", "cpu", "--data-root", str(data_root),
                 "--results-dir", str(results))


def test_fabric_drives_the_step_inside_the_shared_loop():
    """Fabric's backward with bf16-mixed: autocast applied by Fabric's plugin, fp32 master weights updated."""
    from lightning.fabric import Fabric

    torch.manual_seed(0)
    model = models.build("vit_tiny", classes=10)
    fabric = Fabric(accelerator="cpu", devices=1, precision="bf16-mixed")
    fabric_model, optimizer = fabric.setup(model, torch.optim.Adam(model.parameters(), lr=1e-3))
    step = steps.fabric_step(fabric, fabric_model, optimizer)
    before = model.heads.head.weight.detach().clone()
    loss = step(torch.rand(2, 3, 224, 224), torch.tensor([1, 2]))
    assert torch.isfinite(loss) and not torch.equal(before, model.heads.head.weight)
    assert model.heads.head.weight.dtype == torch.float32
    seen = []
    model.heads.head.register_forward_hook(lambda module, args, out: seen.append(out.dtype))
    with torch.no_grad():
        fabric_model(torch.rand(1, 3, 224, 224))
    assert seen == [torch.bfloat16]  # inside Fabric's autocast the matmuls ran in bf16


@pytest.mark.slow
def test_finetune_without_weights_says_it_ran_from_random_init(data_root, tmp_path):
    run = _run("vit-finetune", data_root=data_root, results=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    (rec,) = records(tmp_path)
    assert rec["status"] == "ok" and rec["config"]["model"] == "vit_tiny" and rec["config"]["weights"] is None
    assert any(note.startswith("random init: no --weights given") for note in rec["notes"])


@pytest.mark.slow
def test_a_talk_epoch_trains_the_first_90_percent_and_validates_the_rest_inside_the_clock(data_root, tmp_path):
    """Book scale on the generated CIFAR-10 (500 train images): 450 train, 50 validate after every epoch inside
    the timed region; the talk's per-batch train accuracy and loss line (batch 0) are in the record."""
    run = accel("run", "vit-finetune", "--scale", "book", "--epochs", "2", "--batch-size", "50", "--model",
                "vit_tiny", "--device", "cpu", "--num-workers", "0", "--data-root", str(data_root),
                "--results-dir", str(tmp_path))
    assert run.returncode == 0, run.stderr[-3000:]
    (rec,) = records(tmp_path)
    config, metrics = rec["config"], rec["metrics"]
    assert (config["split"], config["train_samples"], config["validation_samples_available"]) == ("cvpr2023", 450, 50)
    assert metrics["steps_per_epoch"] == 9 and metrics["epochs_completed"] == 2
    assert metrics["validation_passes"] == 2 and metrics["validation_batches_per_pass"] == 1
    assert len(metrics["val_accuracy_pct_per_epoch"]) == len(metrics["train_accuracy_pct_per_epoch"]) == 2
    assert [row[:2] for row in metrics["logged_losses"]] == [[1, 0], [2, 0]] and metrics["loss_every"] == 300
    inside = sum(metrics["epoch_times_s"]) + metrics["validation_s"]
    assert metrics["train_s"] == pytest.approx(inside, rel=0.05, abs=0.05)  # the passes are in the minutes


@pytest.mark.slow
def test_finetune_loads_a_local_weights_file_and_replaces_the_head(data_root, tmp_path):
    """A 1000-class state_dict (as torchvision's ImageNet file): the body loads, the head is re-initialised
    (the bf16-mixed entry here, so the same run also covers Fabric's precision plugin end to end)."""
    torch.manual_seed(1)
    imagenet_like = models.build("vit_tiny", classes=1000)
    path = tmp_path / "vit_tiny_imagenet.pt"
    torch.save(imagenet_like.state_dict(), path)
    run = _run("vit-bf16-mixed", "--weights", str(path), data_root=data_root, results=tmp_path / "r")
    assert run.returncode == 0, run.stderr[-3000:]
    (rec,) = records(tmp_path / "r")
    assert rec["config"]["weights"] == str(path) and rec["config"]["options"]["precision"] == "bf16-mixed"
    assert any("head re-initialised for 10 classes" in note for note in rec["notes"])
    assert not any("random init" in note for note in rec["notes"])


def test_weights_are_loaded_into_the_body(tmp_path):
    torch.manual_seed(1)
    source = models.build("vit_tiny", classes=1000)
    target = models.build("vit_tiny", classes=10)
    torch.save(source.state_dict(), tmp_path / "w.pt")
    pretrained.load_weights(target, tmp_path / "w.pt")
    assert torch.equal(target.conv_proj.weight, source.conv_proj.weight)
    assert target.heads.head.weight.shape == (10, 192)


@pytest.mark.slow
def test_course_amp_on_cpu_runs_bf16_and_skips_16_mixed(data_root, tmp_path):
    run = _run("dlf-u9-amp", data_root=data_root, results=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    recs = {r["variant"]: r for r in records(tmp_path)}
    assert recs["32-true"]["status"] == "ok" and recs["bf16-mixed"]["status"] == "ok"
    assert recs["16-mixed"]["status"] == "skipped"
    assert "silently run bf16-mixed" in recs["16-mixed"]["notes"][0]
    assert recs["32-true"]["config"]["model"] == "distilbert_tiny" and recs["32-true"]["config"]["dataset"] == "imdb"


def _refused(args, code, needle, tmp_path, data_root, run):
    """Refused before any work: through `cli.main` in this process (no interpreter start-up)."""
    assert_refused(args, code, needle, tmp_path / "r", data_root, run=run)


@pytest.mark.parametrize("args,code,needle", [
    (["run", "vit-finetune", "--scale", "smoke", "--device", "cpu", "--weights", "/nonexistent/vit.pt"], 2,
     "weights file /nonexistent/vit.pt does not exist"),
    (["run", "vit-finetune", "--scale", "smoke", "--device", "cpu", "-o", "precision=bf16-mixed"], 2,
     "needs fabric=true"),
    (["run", "vit-bf16-mixed", "--scale", "smoke", "--device", "cpu", "-o", "precision=fp4"], 2,
     "precision='fp4' is unknown"),
    (["run", "vit-fabric-baseline", "--scale", "smoke", "--device", "cpu", "-o", "matmul_precision=low"], 2,
     "matmul_precision='low'"),
    (["run", "dlf-u9-amp", "--scale", "smoke", "--device", "cpu", "--variant", "16-mixed"], 3,
     "nothing can run here"),
    (["run", "vit-finetune", "--scale", "smoke", "--device", "cpu", "--dataset", "fashion_mnist"], 2,
     "split cvpr2023 (the entry's) is a split of cifar10, not of fashion_mnist; run the entry on --dataset cifar10"),
    (["run", "vit-finetune", "--scale", "smoke", "--device", "cpu", "-o", "loss_every=-1"], 2,
     "option loss_every must be at least 0"),
], ids=["missing-weights", "precision-without-fabric", "unknown-precision", "bad-matmul", "16-mixed-on-cpu",
        "talk-split-on-another-dataset", "negative-loss-every"])
def test_bad_vit_input(args, code, needle, tmp_path, data_root, accel_in_process):
    _refused(args, code, needle, tmp_path, data_root, accel_in_process)


@pytest.mark.parametrize("entry", ["vit-scratch", "vit-fabric-baseline", "vit-bf16-mixed"])
def test_gpu_entries_refuse_to_run_silently_on_cpu(entry, tmp_path, data_root, accel_in_process):
    """`make vit-...` on a machine without CUDA: a clear exit 3, never a silent CPU run."""
    if torch.cuda.is_available():
        pytest.skip("a GPU is present, so the no-GPU refusal cannot be shown")
    _refused(["run", entry, "--scale", "smoke"], 3, "no CUDA GPU is visible", tmp_path, data_root,
             accel_in_process)


def test_compile_under_fabric_sets_up_in_a_fresh_interpreter():
    """Lightning must be imported before torch.compile to re-wrap a compiled model; a fresh process shows
    the order in fabric_ladder.setup is right (compilation itself is lazy, so this stays cheap)."""
    import subprocess
    import sys

    from conftest import REPO

    script = (
        "import torch\n"
        "from pipelines.core.config import experiments\nfrom pipelines.core.harness import plan as planning\n"
        "from pipelines.core.train.loop import RunContext\n"
        "from pipelines import fabric_ladder\n"
        "(cfg,) = planning.plan(experiments.get('dlf-u9-compile'), 'smoke', {'device': 'cpu'},\n"
        "    {'fabric': 'true', 'precision': 'bf16-mixed'}, ('compiled',)).configs\n"
        "t = fabric_ladder.PIPELINE.setup(cfg, RunContext(device=torch.device('cpu')))\n"
        "print(type(t.predict).__name__, cfg.options.compile)\n")
    run = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["_FabricModule", "True"]
