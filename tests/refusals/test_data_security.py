"""Data never executes code, and a damaged or hostile dataset is one line naming the file and the fix.

Each planted file has its line in `accel-checksums.sha256` rewritten, as anyone who can write the
data folder could do: the checksum list catches accidents, the readers' checks catch the rest.

`accel data verify` / `generate` run in this process (conftest's `accel_in_process`: `cli.main`, output
captured at the file descriptors); one case goes through a real interpreter to prove the console-script
path, and the concurrent generates are two real processes racing for the lock.
"""

import json
import os
import pickle
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torchvision

from conftest import REPO, accel, assert_refused
from pipelines.core.data import datasets, files, generator, writing


class RunsCode:
    """Unpickling this calls os.system: what a hostile batch file does to `pickle.load`."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def plant(folder, filename, blob: bytes) -> None:
    """Replace a dataset file and rewrite its checksum line to match."""
    (folder / filename).write_bytes(blob)
    manifest = folder / files.MANIFEST
    lines = [line for line in manifest.read_text().splitlines() if not line.endswith(f"  {filename}")]
    lines.append(f"{files.digest(folder / filename)}  {filename}")
    manifest.write_text("".join(f"{line}\n" for line in lines))


def batch(count=10, **changes) -> dict:
    entry = {"batch_label": "b", "data": np.zeros((count, 3072), np.uint8), "labels": [1] * count,
             "filenames": ["x.png"] * count}
    return {**entry, **changes}


def refused_verify(accel_run, root, needle: str) -> str:
    """`accel data verify` (through `accel_run`): exit 2, one `accel: error:` line naming the problem, no
    traceback."""
    run = accel_run("data", "verify", "--root", str(root))
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(lines) == 1 and lines[0].startswith("accel: error:"), run.stderr
    assert needle in lines[0] and "Traceback" not in run.stderr, lines[0]
    return lines[0]


@pytest.fixture
def cifar(tmp_path):
    return generator.generate("cifar10", tmp_path / "data", 50, 20)


@pytest.fixture
def fmnist(tmp_path):
    return generator.generate("fashion_mnist", tmp_path / "data", 30, 10)


def test_code_running_batch_is_refused_by_accel_run_and_never_runs(cifar, tmp_path, accel_in_process):
    marker = tmp_path / "ran"
    plant(cifar, "data_batch_2", pickle.dumps(batch(extra=RunsCode(marker)), protocol=2))
    assert_refused(["run", "ch6-prune", "--scale", "smoke"], 2, "refers to posix.system", tmp_path / "r",
                   cifar.parent, run=accel_in_process)
    assert not marker.exists()


def test_code_running_batch_never_runs_in_the_loader_either(cifar, tmp_path):
    """No verify first (a file swapped after the check): the loader's own reader still refuses it."""
    marker = tmp_path / "ran"
    (cifar / "test_batch").write_bytes(pickle.dumps(RunsCode(marker), protocol=2))
    with pytest.raises(files.DataError, match=r"test_batch is not a readable pickle .*posix\.system"):
        datasets.CheckedCIFAR10(cifar.parent, train=False)
    assert not marker.exists()


def test_checked_datasets_match_torchvision_readers(cifar, fmnist):
    """On honest files the checked readers give exactly what torchvision's own constructors read."""
    root, base = cifar.parent, torchvision.datasets.CIFAR10

    def md5(name):  # torchvision's CIFAR10 checks the real files' MD5s; these files are generated
        return files.digest(cifar / name, "md5")

    generated = type("GeneratedCIFAR10", (base,), {
        "train_list": [[n, md5(n)] for n, _ in base.train_list],
        "test_list": [["test_batch", md5("test_batch")]], "meta": {**base.meta, "md5": md5("batches.meta")}})
    pairs = ((datasets.CheckedCIFAR10(root, False), generated(str(root), train=False)),
             (datasets.CheckedFashionMNIST(root, True), torchvision.datasets.FashionMNIST(str(root))))
    for ours, theirs in pairs:
        assert np.array_equal(np.asarray(ours.data), np.asarray(theirs.data))
        assert [int(t) for t in ours.targets] == [int(t) for t in theirs.targets]
        assert ours.classes == theirs.classes
        assert np.array_equal(np.asarray(ours[3][0]), np.asarray(theirs[3][0])) and ours[3][1] == theirs[3][1]


CIFAR_CASES = {
    "code in the meta file": ("batches.meta", lambda m: pickle.dumps({"label_names": RunsCode(m)}),
                              "refers to posix.system"),
    "a list, not a dict": ("data_batch_1", lambda m: pickle.dumps([1, 2, 3], protocol=2), "holds a list"),
    "labels out of range": ("data_batch_3", lambda m: pickle.dumps(batch(labels=[1] * 9 + [10]), protocol=2),
                            "has label 10 at index 9; labels are 0-9"),
    "labels not one per image": ("test_batch", lambda m: pickle.dumps(batch(labels=[1]), protocol=2),
                                 "no 'labels' list of 10 integers"),
    "images not N x 3072": ("data_batch_4", lambda m: pickle.dumps(batch(data=np.zeros((10, 1024, 3), "u1"))),
                            "no 'data' array of uint8 N x 3072"),
    "truncated pickle": ("data_batch_5", lambda m: pickle.dumps(batch(), protocol=2)[:-500],
                         "not a readable pickle"),
    "not a pickle": ("test_batch", lambda m: b"hello, world", "not a readable pickle"),
    "meta without 10 names": ("batches.meta", lambda m: pickle.dumps({"label_names": ["a"]}, protocol=2),
                              "is not CIFAR-10's meta file"),
}


@pytest.mark.parametrize("case", CIFAR_CASES)
def test_bad_cifar_file_is_one_line(cifar, tmp_path, case, accel_in_process):
    filename, make, needle = CIFAR_CASES[case]
    plant(cifar, filename, make(tmp_path / "ran"))
    line = refused_verify(accel_in_process, cifar.parent, needle)
    assert str(cifar / filename) in line and "accel data generate cifar10" in line
    assert not (tmp_path / "ran").exists()


def test_a_hostile_file_is_refused_the_same_through_the_console_script(cifar, tmp_path):
    """The table above runs in this process; one case through a fresh interpreter (`python -m pipelines`),
    as a user runs it: the same exit code, the same single line, no traceback, and the code never runs."""
    filename, make, needle = CIFAR_CASES["code in the meta file"]
    plant(cifar, filename, make(tmp_path / "ran"))
    line = refused_verify(accel, cifar.parent, needle)
    assert str(cifar / filename) in line and "accel data generate cifar10" in line
    assert not (tmp_path / "ran").exists()


def idx(magic: bytes, dims, payload: bytes) -> bytes:
    return magic + struct.pack(f">{len(dims)}I", *dims) + payload


FMNIST_CASES = {
    "wrong magic": ("t10k-images-idx3-ubyte", idx(b"\x00\x00\x08\x01", (10, 28, 28), bytes(7840)),
                    "has IDX magic 0x00000801, expected 0x00000803"),
    "truncated": ("train-images-idx3-ubyte", idx(b"\x00\x00\x08\x03", (30, 28, 28), bytes(30 * 784 - 9)),
                  "is truncated (23527 bytes, its header says 23536)"),
    "shorter than its header": ("train-labels-idx1-ubyte", b"\x00\x00", "is truncated (2 bytes, shorter"),
    "too long": ("t10k-labels-idx1-ubyte", idx(b"\x00\x00\x08\x01", (10,), bytes(11)), "is too long"),
    "wrong image size": ("t10k-images-idx3-ubyte", idx(b"\x00\x00\x08\x03", (10, 32, 32), bytes(10240)),
                         "has dimensions (10, 32, 32), expected ('N', 28, 28)"),
    "labels not one per image": ("train-labels-idx1-ubyte", idx(b"\x00\x00\x08\x01", (29,), bytes(29)),
                                 "has dimensions (29,), expected (30,)"),
    "labels out of range": ("t10k-labels-idx1-ubyte", idx(b"\x00\x00\x08\x01", (10,), bytes(9) + b"\x0c"),
                            "has label 12 at index 9; labels are 0-9"),
}


@pytest.mark.parametrize("case", FMNIST_CASES)
def test_bad_idx_file_is_one_line(fmnist, tmp_path, case, accel_in_process):
    filename, blob, needle = FMNIST_CASES[case]
    plant(fmnist, filename, blob)
    assert str(fmnist / filename) in refused_verify(accel_in_process, tmp_path / "data", needle)


def write_origin(folder, text):
    (folder / files.ORIGIN).write_text(text)


LIST_CASES = {
    "origin without source": (lambda f: write_origin(f, '{"dataset": "cifar10"}'), 'does not say "source"'),
    "origin not JSON": (lambda f: write_origin(f, "\x00garbage{"), 'does not say "source"'),
    "origin a JSON list": (lambda f: write_origin(f, '["real"]'), 'does not say "source"'),
    "origin an unknown source": (lambda f: write_origin(f, '{"source": "trusted"}'), 'does not say "source"'),
    "checksum line malformed": (lambda f: (f / files.MANIFEST).write_text("deadbeef data_batch_1\n"),
                                "line 1 is not '<sha256>  <cifar10 file>'"),
    "checksum line names another file": (
        lambda f: (f / files.MANIFEST).write_text(f"{'0' * 64}  ../../etc/passwd\n"), "line 1 is not"),
    "checksum list empty": (lambda f: (f / files.MANIFEST).write_text(""), "is empty"),
    "checksum list misses a file": (
        lambda f: (f / files.MANIFEST).write_text((f / files.MANIFEST).read_text().split("\n", 1)[1]),
        "has no line for batches.meta"),
}


@pytest.mark.parametrize("case", LIST_CASES)
def test_bad_origin_or_checksum_list_is_one_line(cifar, case, accel_in_process):
    damage, needle = LIST_CASES[case]
    damage(cifar)
    assert "accel data fetch cifar10" in refused_verify(accel_in_process, cifar.parent, needle)


def test_real_data_is_checked_against_torchvision_digests_not_the_folder_list(cifar, tmp_path,
                                                                               accel_in_process):
    """A generated folder relabelled real (its list intact) fails: real files must match torchvision's."""
    marker = tmp_path / "ran"
    plant(cifar, "data_batch_1", pickle.dumps(batch(extra=RunsCode(marker)), protocol=2))
    write_origin(cifar, json.dumps({"source": "real", "dataset": "cifar10"}))
    refused_verify(accel_in_process, cifar.parent,
                   "data_batch_1 does not match torchvision's MD5 of the real file")
    assert not marker.exists()


def test_real_fashion_mnist_extracted_files_must_equal_their_verified_archives(fmnist, tmp_path, monkeypatch):
    """torchvision's MD5s are for the .gz archives; what the reader opens must be their content."""
    write_origin(fmnist, json.dumps({"source": "real", "dataset": "fashion_mnist"}))
    with pytest.raises(files.DataError, match="images-idx3-ubyte.gz does not match torchvision's MD5"):
        files.verify("fashion_mnist", tmp_path / "data")
    ours = [(f"{name}.gz", files.digest(fmnist / f"{name}.gz", "md5")) for name in files.spec(
        "fashion_mnist").files]  # pretend our archives are the real ones
    monkeypatch.setattr(torchvision.datasets.FashionMNIST, "resources", ours)
    assert len(files.verify("fashion_mnist", tmp_path / "data")) == 4
    victim = fmnist / "t10k-labels-idx1-ubyte"
    victim.write_bytes(victim.read_bytes()[:-1] + b"\x03")  # still valid IDX, labels changed
    with pytest.raises(files.DataError, match=rf"{victim} is missing or is not the content of"):
        files.verify("fashion_mnist", tmp_path / "data")
    (fmnist / "train-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(files.DataError, match=r"\.gz is missing \(real data is checked against"):
        files.verify("fashion_mnist", tmp_path / "data")


@pytest.mark.parametrize("root", ["file", "file/sub", "/proc", "/proc/accel-data"])
def test_generate_root_that_cannot_hold_data_is_one_line(tmp_path, root, accel_in_process):
    (tmp_path / "file").write_text("")
    root = root if root.startswith("/") else str(tmp_path / root)
    run = accel_in_process("data", "generate", "cifar10", "--root", root, "--train", "10", "--test", "5")
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(lines) == 1 and "Traceback" not in run.stderr, run.stderr
    assert re.match(rf"accel: error: (data root {root} is a file|cannot write datasets under {root} )",
                    lines[0])


def _generate(root, train):
    argv = [sys.executable, "-m", "pipelines", "data", "generate", "cifar10", "--root", str(root),
            "--train", str(train), "--test", "50"]
    return subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_concurrent_generates_leave_one_complete_dataset(tmp_path, accel_in_process):
    """Two sizes at once into one root (two real processes: the lock is between processes): one lock, one
    staged folder each, swapped in whole."""
    root = tmp_path / "data"
    procs = [_generate(root, 500), _generate(root, 700)]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    run = accel_in_process("data", "verify", "--root", str(root))
    assert run.returncode == 0 and "cifar10: 7 files OK (generated data)" in run.stdout, run.stderr
    folder = root / files.spec("cifar10").folder
    origin = json.loads((folder / files.ORIGIN).read_text())
    train = files.load_split("cifar10", root, True)
    assert origin["train"] in (500, 700) and len(train.labels) == len(train.images) == origin["train"]
    assert sorted(p.name for p in root.iterdir()) == [".cifar10.lock", "cifar-10-batches-py"]  # no temp left


def test_stale_staging_folder_is_removed_by_the_next_generate(tmp_path):
    stale = tmp_path / ".accel-cifar10.killed.tmp" / "cifar-10-batches-py"
    stale.mkdir(parents=True)
    (stale / "data_batch_1").write_bytes(b"half")
    folder = generator.generate("cifar10", tmp_path, 20, 10)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".cifar10.lock", "cifar-10-batches-py"]
    assert files.verify("cifar10", tmp_path) and folder == tmp_path / "cifar-10-batches-py"


def test_fetch_downloads_into_a_stage_and_swaps_in_only_verified_real_data(tmp_path, monkeypatch):
    """torchvision's download is replaced by a copy of generated files posing as the real archives."""
    archives = generator.generate("fashion_mnist", tmp_path / "archives", 30, 10)
    root = tmp_path / "data"
    generator.generate("fashion_mnist", root, 20, 10)  # what a fetch replaces

    class FashionMNIST:  # torchvision's class, minus the network
        resources = [(f"{n}.gz", files.digest(archives / f"{n}.gz", "md5"))
                     for n in files.spec("fashion_mnist").files]
        fail = False

        def __init__(self, stage, train, download):
            assert str(root) != stage and download
            if self.fail:
                raise RuntimeError("network is unreachable")
            shutil.copytree(archives, Path(stage) / "FashionMNIST" / "raw", dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("accel-*"))

    monkeypatch.setattr(torchvision.datasets, "FashionMNIST", FashionMNIST)
    FashionMNIST.fail = True
    with pytest.raises(RuntimeError, match="unreachable"):
        writing.fetch("fashion_mnist", root)
    assert files.source("fashion_mnist", root) == "generated" and files.verify("fashion_mnist", root)
    assert sorted(p.name for p in root.iterdir()) == [".fashion_mnist.lock", "FashionMNIST"]  # stage removed
    FashionMNIST.fail = False
    folder = writing.fetch("fashion_mnist", root)
    assert files.source("fashion_mnist", root) == "real" and folder == root / "FashionMNIST" / "raw"
    assert len(files.verify("fashion_mnist", root)) == 4  # the archives, against their (patched) MD5s
    assert len(files.load_split("fashion_mnist", root, True).labels) == 30
    assert sorted(p.name for p in root.iterdir()) == [".fashion_mnist.lock", "FashionMNIST"]
