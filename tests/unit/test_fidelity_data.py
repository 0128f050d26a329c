"""The same data as the source: the book's Fashion-MNIST training split, image for image."""

import math

import numpy as np

from pipelines.core.data import datasets, generator


def books_build_data_loader_train_indices(num_train: int, valid_size: float = 0.1) -> list[int]:
    """The book's chapter 1-3 build_data_loader, written as it runs (a global numpy seed, list shuffle)."""
    np.random.seed(42)
    indices = list(range(num_train))
    np.random.shuffle(indices)
    split = int(np.floor(valid_size * num_train))
    return indices[split:]


def test_fashion_mnist_trains_on_the_books_54000_images_not_its_validation_split():
    ours = datasets.book_fmnist_train_indices(60_000)
    book = books_build_data_loader_train_indices(60_000)
    assert ours == book and len(ours) == 54_000
    assert len(set(ours)) == 54_000
    # the book's validation images (the permutation's first 6,000) are never trained on
    np.random.seed(42)
    everything = list(range(60_000))
    np.random.shuffle(everything)
    assert not set(everything[:6_000]) & set(ours)


def test_a_generated_copy_uses_the_same_rule_at_its_size():
    assert len(datasets.book_fmnist_train_indices(6_000)) == 6_000 - math.floor(0.1 * 6_000)


def test_the_loader_samples_exactly_those_images(tmp_path):
    from pipelines.core.config.runconfig import RunConfig

    generator.generate("fashion_mnist", tmp_path, train=600, test=100, seed=0)
    cfg = RunConfig(experiment="ch2-baseline", pipeline="plain_training", variant="baseline", model="cnn_fmnist",
                    dataset="fashion_mnist", data_root=tmp_path, batch_size=64, seed=0)
    loaders = datasets.loaders(cfg, (1, 28, 28))
    assert loaders.train_samples == 540
    assert sorted(loaders.train.sampler) == sorted(books_build_data_loader_train_indices(600))
