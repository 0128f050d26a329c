import errno
import gzip
import struct
import subprocess

import pytest
import torch
import torchvision

from pipelines.core.data import datasets, files, generator, writing
from pipelines.core.config.runconfig import RunConfig


def test_fashion_mnist_round_trip_through_torchvision(data_root):
    folder = data_root / "FashionMNIST" / "raw"
    raw = (folder / "train-images-idx3-ubyte").read_bytes()
    assert struct.unpack(">BBBB", raw[:4]) == (0, 0, 8, 3)  # IDX magic: ubyte, rank 3
    assert struct.unpack(">3I", raw[4:16]) == (600, 28, 28)
    assert gzip.decompress((folder / "train-images-idx3-ubyte.gz").read_bytes()) == raw
    train = torchvision.datasets.FashionMNIST(str(data_root), train=True)  # the unmodified reader
    assert len(train) == 600 and train.data.shape == (600, 28, 28) and int(train.targets.max()) <= 9


def test_cifar10_round_trip_through_torchvision(data_root):
    cfg = RunConfig(experiment="x", pipeline="p", variant="v", model="cnn_cifar10", dataset="cifar10",
                    data_root=data_root, batch_size=50)
    loaders = datasets.loaders(cfg, (3, 32, 32))
    x, y = next(iter(loaders.train))
    assert x.shape == (50, 3, 32, 32) and x.dtype == torch.float32 and 0 <= x.min() and x.max() <= 1
    assert loaders.source == "generated" and loaders.train_samples == 500 and loaders.test_samples == 200
    assert isinstance(loaders.train.dataset, torchvision.datasets.CIFAR10)


def test_book_fashion_mnist_split_keeps_90_percent(data_root):
    cfg = RunConfig(experiment="x", pipeline="p", variant="v", model="cnn_fmnist", dataset="fashion_mnist",
                    data_root=data_root, batch_size=64)
    loaders = datasets.loaders(cfg, (1, 28, 28))
    assert loaders.train_samples == 540  # 90 % of 600, as the book's 54,000 of 60,000
    assert len(loaders.train) == 9  # ceil(540 / 64)


def test_generated_signal_is_learnable(data_root):
    """Class means differ far more than the spread within a class: a model can beat chance."""
    train = torchvision.datasets.FashionMNIST(str(data_root), train=True)
    images, labels = train.data.float(), train.targets
    means = torch.stack([images[labels == c].mean(0) for c in range(10)])
    between = torch.cdist(means.flatten(1), means.flatten(1)).mean()
    within = torch.stack([(images[labels == c] - means[c]).flatten(1).norm(dim=1).mean() for c in range(10)]).mean()
    nearest_mean = torch.cdist(images.flatten(1), means.flatten(1)).argmin(1)
    assert (nearest_mean == labels).float().mean() > 0.5
    assert between > 0.5 * within


def test_generation_is_deterministic(tmp_path):
    a = generator.generate("cifar10", tmp_path / "a", 20, 10, seed=3)
    b = generator.generate("cifar10", tmp_path / "b", 20, 10, seed=3)
    assert (a / files.MANIFEST).read_text() == (b / files.MANIFEST).read_text()


@pytest.mark.parametrize("damage", ["flip", "truncate", "delete"])
def test_corrupted_file_is_named_with_the_fix(tmp_path, damage):
    folder = generator.generate("fashion_mnist", tmp_path, 30, 10)
    victim = folder / "t10k-images-idx3-ubyte"
    if damage == "flip":
        blob = bytearray(victim.read_bytes())
        blob[100] ^= 0xFF
        victim.write_bytes(bytes(blob))
    elif damage == "truncate":
        victim.write_bytes(victim.read_bytes()[:-7])
    else:
        victim.unlink()
    with pytest.raises(files.DataError, match=rf"{victim}.*(corrupted|missing).*accel data (fetch|generate)"):
        files.verify("fashion_mnist", tmp_path)


def test_missing_dataset_names_the_commands(tmp_path):
    with pytest.raises(files.DataError, match=r"accel data fetch cifar10 .*accel data generate cifar10"):
        files.source("cifar10", tmp_path)


def test_synthetic_is_in_memory_and_labelled():
    cfg = RunConfig(experiment="x", pipeline="p", variant="v", model="cnn_fmnist", dataset="synthetic",
                    batch_size=8, steps=2)
    loaders = datasets.loaders(cfg, (1, 28, 28))
    x, y = next(iter(loaders.train))
    assert loaders.source == "synthetic" and x.shape == (8, 1, 28, 28) and y.max() < 10


def test_synthetic_labels_fit_the_model_head():
    """A 2-class head (DistilBERT on IMDB) gets labels 0 and 1 only: a label of 4 would stop the loss."""
    cfg = RunConfig(experiment="x", pipeline="p", variant="v", model="cnn_fmnist", dataset="synthetic",
                    batch_size=256, steps=2, head_classes=2)
    labels = torch.cat([y for _, y in datasets.loaders(cfg, (1, 28, 28)).train])
    assert set(labels.tolist()) == {0, 1}


@pytest.mark.slow  # a real subprocess (accel, a CI script) or a full report: end to end
def test_fetch_offline_fails_clearly(tmp_path):
    """The real download path runs; here there is no internet, so it must fail with the offline fix."""
    from conftest import accel

    run = accel("data", "fetch", "fashion_mnist", "--root", str(tmp_path), timeout=600)
    assert run.returncode == 2
    assert "could not fetch fashion_mnist" in run.stderr and "accel data generate" in run.stderr
    assert not (tmp_path / "FashionMNIST" / "raw" / files.ORIGIN).exists()


def test_fetch_lock_serialises_downloads(tmp_path):
    """Two holders of the dataset lock never overlap (the lock ranks share on one host): the second asks for
    it while the first holds it, and gets it only after the first let go."""
    import threading
    import time

    spans, holding, asking = {}, threading.Event(), threading.Event()

    def first():
        with writing.exclusive(tmp_path, "cifar10"):
            start = time.monotonic()
            holding.set()
            assert asking.wait(30), "the second holder never started"
            time.sleep(0.1)  # kept: the window in which the second is asking, not a wait for something
            spans["first"] = (start, time.monotonic())

    def second():
        assert holding.wait(30), "the first holder never got the lock"
        asking.set()
        with writing.exclusive(tmp_path, "cifar10"):
            spans["second"] = (time.monotonic(), time.monotonic())

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    [t.start() for t in threads]
    [t.join(timeout=60) for t in threads]
    assert set(spans) == {"first", "second"}, "a holder did not finish"
    assert spans["second"][0] >= spans["first"][1]


# ---- a refused `accel data generate` leaves nothing behind ----

def test_generate_refused_mid_write_leaves_no_lock_and_no_new_folder(tmp_path, monkeypatch):
    def full(*_args, **_kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(generator, "write_fashion_mnist", full)
    root = tmp_path / "new" / "data"
    with pytest.raises(files.DataError, match="No space left on device"):
        generator.generate("fashion_mnist", root, train=10, test=10)
    assert list(tmp_path.iterdir()) == []
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / ".fashion_mnist.lock").touch()  # another writer's lock: not this call's to remove
    with pytest.raises(files.DataError):
        generator.generate("fashion_mnist", kept, train=10, test=10)
    assert [p.name for p in kept.iterdir()] == [".fashion_mnist.lock"]


@pytest.fixture
def full_disk(tmp_path):
    """A 64 KiB tmpfs: too small for the default generated Fashion-MNIST (2048 + 512 samples of 785 bytes)."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"a small tmpfs needs root and mount: {done.stderr.strip() or done.returncode}")
    yield mount
    subprocess.run(["umount", str(mount)], check=True)


def test_data_generate_on_a_full_disk_is_one_line_and_leaves_nothing(full_disk, accel_in_process):
    run = accel_in_process("data", "generate", "fashion_mnist", "--root", str(full_disk / "data"))
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(lines) == 1 and lines[0].startswith("accel: error:"), run.stderr
    assert "No space left on device" in lines[0]
    assert "Traceback" not in run.stderr
    assert list(full_disk.iterdir()) == []  # no data/, no .fashion_mnist.lock
