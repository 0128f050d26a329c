"""The sources' own splits: the talk's CIFAR-10 holdout and the course's pooled IMDB split,
image for image and review for review, and the epochs they make at book scale.

The book-scale step counts are the project's own loaders (datasets.loaders on the entry's resolved config)
over stand-in datasets of the real sizes (50,000 / 10,000 images, 25,000 / 25,000 reviews), so no real data
and no training is needed; they must equal the figures the catalog carries (2,812 / 703 / 2,917).
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest
import torch

from pipelines.core.data import datasets, files, splits, text
from pipelines.core.data.formats import TextSplit
from pipelines.core.errors import ConfigError
from pipelines.core.harness import plan as planning
from pipelines.core.config import experiments
from pipelines.core.config.runconfig import RunConfig

TALK = sorted(i for i in experiments.all_experiments() if i.startswith("vit-"))


def figure(entry_id: str, metric: str) -> float:
    (fig,) = [f for f in experiments.get(entry_id).published if f.metric == metric]
    return fig.value


def ranks_of(entry_id: str) -> int:
    return int(experiments.get(entry_id).knobs.get("NPROC", 1))


# ---- the talk: images 0-44,999 train, 45,000-49,999 validate -------------------------------------------------


def test_talk_holdout_is_the_first_45000_and_the_last_5000():
    cut = splits.talk_holdout(50_000)
    assert cut.train == range(45_000) and cut.valid == range(45_000, 50_000)
    assert not set(cut.train) & set(cut.valid) and len(cut.train) + len(cut.valid) == 50_000


def test_a_generated_cifar10_is_split_by_the_same_rule_at_its_size():
    cut = splits.talk_holdout(500)
    assert cut.train == range(450) and cut.valid == range(450, 500)
    with pytest.raises(ConfigError, match="split cvpr2023 .* a set of 9 has none to hold out"):
        splits.talk_holdout(9)


class FakeCifar(torch.utils.data.Dataset):
    """CIFAR-10's sizes without its files: 50,000 train / 10,000 test items, each its own index."""

    def __init__(self, root, train: bool, transform=None):
        self.size, self.transform = (50_000 if train else 10_000), transform

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int):
        return torch.tensor([float(index)]), 0


@pytest.fixture
def cifar_sized(monkeypatch):
    monkeypatch.setitem(datasets.DATASETS, "cifar10", FakeCifar)
    monkeypatch.setattr(files, "source", lambda name, root: "generated")


def talk_config(entry_id: str, tmp_path) -> RunConfig:
    return planning.plan(experiments.get(entry_id), "book", {"data_root": tmp_path, "num_workers": 0}, {}).configs[0]


@pytest.mark.parametrize("entry_id", TALK)
def test_every_talk_step_takes_the_talks_epoch_at_book_scale(entry_id, cifar_sized, tmp_path):
    """2,812 steps an epoch on 1 device (45,000 // 16), 703 per device on 4 (11,250 // 16), and every rank
    validates its share of the 5,000 held-out images."""
    cfg = talk_config(entry_id, tmp_path)
    assert (cfg.split, cfg.batch_size, cfg.drop_last) == ("cvpr2023", 16, True)
    world = ranks_of(entry_id)
    for rank in range(world):
        loaders = datasets.loaders(cfg, (3, 32, 32), rank=rank, world_size=world)
        assert loaders.train_samples == 45_000 and loaders.valid_samples == 5_000
        assert len(loaders.train) == (2_812 if world == 1 else 703)
        assert len(loaders.valid.sampler) == 5_000 // world
    assert len(loaders.test.dataset) == 10_000


def test_the_carried_step_counts_are_the_projects_own(cifar_sized, tmp_path):
    one = datasets.loaders(talk_config("vit-scratch", tmp_path), (3, 32, 32))
    four = datasets.loaders(talk_config("vit-ddp-4gpu", tmp_path), (3, 32, 32), rank=3, world_size=4)
    assert len(one.train) == figure("vit-scratch", "steps_per_epoch") == 2_812
    assert len(four.train) == figure("vit-ddp-4gpu", "steps_per_epoch") == 703


def test_the_talk_trains_on_images_0_to_44999_and_validates_on_the_rest(cifar_sized, tmp_path):
    cfg = talk_config("vit-finetune", tmp_path)
    loaders = datasets.loaders(cfg, (3, 32, 32))
    trained = sorted(loaders.train.sampler)
    assert trained == list(range(45_000))  # each image once an epoch, shuffled (SubsetRandomSampler)
    assert list(loaders.train.sampler) != trained
    assert sorted(loaders.valid.sampler) == list(range(45_000, 50_000))
    shards = [set(datasets.loaders(talk_config("vit-fsdp-4gpu", tmp_path), (3, 32, 32), rank=r,
                                   world_size=4).valid.sampler) for r in range(4)]
    assert set().union(*shards) == set(range(45_000, 50_000)) and sum(map(len, shards)) == 5_000


def test_the_generated_set_the_tests_use_is_split_450_50(data_root):
    cfg = RunConfig(experiment="vit-finetune", pipeline="fabric_ladder", variant="v", model="vit_tiny",
                    dataset="cifar10", data_root=data_root, batch_size=16, drop_last=True, shuffle=True,
                    split="cvpr2023")
    loaders = datasets.loaders(cfg, (3, 32, 32))
    assert (loaders.train_samples, loaders.valid_samples, len(loaders.train)) == (450, 50, 450 // 16)
    train_images = {loaders.train.dataset[i][0].numpy().tobytes() for i in loaders.train.sampler}
    valid_images = {loaders.valid.dataset[i][0].numpy().tobytes() for i in loaders.valid.sampler}
    assert len(train_images) == 450 and len(valid_images) == 50 and not train_images & valid_images


def test_a_split_on_a_dataset_it_does_not_describe_is_refused():
    with pytest.raises(ConfigError, match="split cvpr2023 .* is a split of cifar10, not of imdb"):
        RunConfig(experiment="x", pipeline="p", variant="v", model="m", dataset="imdb", split="cvpr2023")
    with pytest.raises(ConfigError, match="split dlf-imdb .* not of fashion_mnist"):
        RunConfig(experiment="x", pipeline="p", variant="v", model="m", dataset="fashion_mnist", split="dlf-imdb")
    with pytest.raises(ConfigError, match="unknown split 'all'"):
        RunConfig(experiment="x", pipeline="p", variant="v", model="m", dataset="cifar10", split="all")


# ---- the course: the pooled 50,000 cut 35,000 / 5,000 / 10,000 -------------------------------------------------


def test_course_split_sizes_are_35000_5000_10000_and_disjoint():
    cut = splits.course_pool_split(50_000)
    assert (len(cut.train), len(cut.valid), len(cut.test)) == (35_000, 5_000, 10_000)
    together = np.concatenate([cut.train, cut.valid, cut.test])
    assert sorted(together.tolist()) == list(range(50_000))  # disjoint, and every review once


def test_course_split_is_pandas_sample_with_random_state_1_after_a_no_op_reindex():
    """What the course's code does to its frame (its rows all at index 0 after pd.concat), at the real size."""
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"position": np.arange(50_000)}, index=np.zeros(50_000, dtype=np.int64))
    np.random.seed(0)
    frame = frame.reindex(np.random.permutation(frame.index))
    shuffled = frame.sample(frac=1, random_state=1).reset_index()
    cut = splits.course_pool_split(50_000)
    assert shuffled["position"].iloc[:35_000].tolist() == cut.train.tolist()
    assert shuffled["position"].iloc[35_000:40_000].tolist() == cut.valid.tolist()
    assert shuffled["position"].iloc[40_000:].tolist() == cut.test.tolist()


def course_frames(folder):
    """The course's load_dataset_into_to_dataframe + partition_dataset, written as it runs, over an aclImdb
    folder; its fixed cuts (35,000 / 40,000 of 50,000) scaled to the folder's size."""
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame()
    for part in ("test", "train"):
        for label_name, label in (("pos", 1), ("neg", 0)):
            path = os.path.join(folder, part, label_name)
            for name in sorted(os.listdir(path)):
                with open(os.path.join(path, name), encoding="utf-8") as handle:
                    row = pd.DataFrame([[handle.read(), label]], columns=["review", "sentiment"])
                frame = pd.concat([frame, row], ignore_index=False)
    frame.columns = ["text", "label"]
    np.random.seed(0)
    frame = frame.reindex(np.random.permutation(frame.index))
    shuffled = frame.sample(frac=1, random_state=1).reset_index()
    first, second = (len(shuffled) * cut // 50_000 for cut in (35_000, 40_000))
    return shuffled.iloc[:first], shuffled.iloc[first:second], shuffled.iloc[second:]


def test_course_split_takes_the_courses_reviews_in_the_courses_order(data_root):
    """On the generated aclImdb folder (240 train + 80 test reviews): the same reviews in each part, in the
    same order, as the course's pandas code."""
    train, test = (files.load_split("imdb", data_root, part) for part in (True, False))
    texts, labels = splits.course_pool(train, test)
    cut = splits.course_pool_split(len(texts))
    assert (len(cut.train), len(cut.valid), len(cut.test)) == (224, 32, 64)
    for ours, theirs in zip((cut.train, cut.valid, cut.test), course_frames(data_root / "aclImdb")):
        assert [texts[i] for i in ours] == theirs["text"].tolist()
        assert labels[ours].tolist() == theirs["label"].tolist()


def test_a_pool_too_small_to_cut_is_refused():
    assert [len(part) for part in vars(splits.course_pool_split(4)).values()] == [2, 1, 1]
    with pytest.raises(ConfigError, match="a pool of 3 leaves a part empty: generate at least 4"):
        splits.course_pool_split(3)


@pytest.fixture
def imdb_sized(monkeypatch):
    """IMDB's sizes without its files: 12,500 reviews per folder, and a tokenizer that writes zeros."""

    def load_split(name, root, train):
        part = "train" if train else "test"
        texts = [f"{part} {label} {i}" for label in ("neg", "pos") for i in range(12_500)]
        labels = np.repeat(np.array([0, 1], dtype=np.int64), 12_500)
        return TextSplit(texts, labels, np.ones_like(labels), ["neg", "pos"])

    def tokenize_parts(parts, seq_len, vocab, folder):
        return [text.Tokenized(torch.zeros(len(texts), 2, 8, dtype=torch.int64), {}) for texts in parts]

    monkeypatch.setattr(files, "load_split", load_split)
    monkeypatch.setattr(files, "source", lambda name, root: "generated")
    monkeypatch.setattr(text, "tokenize_parts", tokenize_parts)


def test_the_course_entries_take_2917_steps_an_epoch_at_book_scale(imdb_sized, tmp_path):
    cfg = planning.plan(experiments.get("dlf-u9-amp"), "book", {"data_root": tmp_path, "num_workers": 0}, {}
                      ).configs[0]
    assert (cfg.split, cfg.batch_size, cfg.drop_last) == ("dlf-imdb", 12, False)
    loaders = datasets.loaders(cfg, datasets.input_shape(cfg))
    assert (loaders.train_samples, loaders.valid_samples, loaders.test_samples) == (35_000, 5_000, 10_000)
    assert len(loaders.train) == figure("dlf-u9-amp", "steps_per_epoch") == 2_917
    assert len(loaders.valid) == 417  # ceil(5,000 / 12): the whole validation part, no batch dropped


def test_the_plan_names_a_source_split_whether_or_not_the_data_is_there(tmp_path, data_root):
    from pipelines.core.harness import plan as planning, preview

    cfg = planning.plan(experiments.get("vit-scratch"), "bench",
                        {"device": "cpu", "dataset": "synthetic"}, {}).configs[0]
    assert preview.data_text(cfg) == "synthetic tensors (throughput only)"
    talk = "the talk's split: the first 90 % of the train images train, the last 10 % validate"
    cfg = planning.plan(experiments.get("vit-scratch"), "bench", {"device": "cpu", "data_root": tmp_path},
                        {}).configs[0]
    assert "NOT THERE" in preview.data_text(cfg) and talk in preview.data_text(cfg)
    cfg = dataclasses.replace(cfg, data_root=data_root)
    assert preview.data_text(cfg) == f"cifar10 under {data_root}; {talk} after every epoch, inside the timed region"
