"""The sources' own data splits, as index rules over a dataset of any size (RunConfig.split).

- `dataset` (the default): the dataset's train and test files as shipped; for Fashion-MNIST the book's rule
  (book_fmnist_train_indices: 54,000 of the 60,000 train images, chosen by a numpy permutation, seed 42).
- `cvpr2023`: the CVPR 2023 talk (rasbt/cvpr2023 at 854a2b6, local_utilities.get_dataloaders_cifar10 with
  validation_fraction=0.1): of CIFAR-10's 50,000 train images the FIRST 45,000 (indices 0-44,999) train and
  the LAST 5,000 (45,000-49,999) validate, contiguous and unshuffled; the test file stays the test set. The
  source writes `num = int(0.1 * 50000)`; here the same rule runs on the set's own size, so a generated set
  of N images holds out its last int(0.1 * N) (450 / 50 of 500). A set with nothing to hold out (fewer than
  10 images) is refused.
- `dlf-imdb`: Deep Learning Fundamentals unit 9 (local_dataset_utilities.py): the 50,000 reviews of both
  aclImdb folders pooled in the order the course read them (test/pos, test/neg, train/pos, train/neg, each
  folder's files sorted by name), then `df.sample(frac=1, random_state=1)` (numpy's
  RandomState(1).permutation of the positions) and cut at 35,000 and 40,000: 35,000 train, 5,000
  validation, 10,000 test. The course's `np.random.seed(0)` + `df.reindex(permutation(df.index))` before it
  changes nothing: `pd.concat(..., ignore_index=False)` of one-row frames leaves every row at index 0, a
  permutation of zeros is the same index, and pandas returns the frame as it is (checked in
  tests/unit/test_splits.py with pandas). A pooled set of N reviews is cut at the same fractions,
  N * 35,000 // 50,000 and N * 40,000 // 50,000 (224 / 32 / 64 of 320); a part that would be empty is
  refused.

Refusals are ConfigErrors naming the sizes and the fix; nothing falls back to another split.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipelines.core.errors import ConfigError

# what the plan's data line says of a split other than the dataset's own
PLAN_TEXT = {"cvpr2023": "the talk's split: the first 90 % of the train images train, the last 10 % validate "
                         "after every epoch, inside the timed region",
             "dlf-imdb": "the course's pooled split: 35,000 / 5,000 / 10,000 of the 50,000 reviews (70 / 10 / 20 "
                         "%), validation after every epoch, inside the timed region"}
TALK_VALIDATION_FRACTION = 0.1  # local_utilities.get_dataloaders_cifar10(validation_fraction=0.1)
COURSE_SOURCE_REVIEWS = 50_000
COURSE_CUTS = (35_000, 40_000)  # df_shuffled.iloc[:35_000], [35_000:40_000], [40_000:]
COURSE_SEED = 1  # df.sample(frac=1, random_state=1)
COURSE_READ_ORDER = (("test", "pos"), ("test", "neg"), ("train", "pos"), ("train", "neg"))


@dataclass(frozen=True)
class Holdout:
    """Positions into one training set: which train, which validate."""

    train: range
    valid: range


@dataclass(frozen=True)
class Pooled:
    """Positions into a pooled set (the course's 50,000): train, validation and test, in the source's order."""

    train: np.ndarray
    valid: np.ndarray
    test: np.ndarray


def talk_holdout(images: int) -> Holdout:
    """The talk's contiguous split of `images` train images: the first 90 % train, the last 10 % validate."""
    held = int(TALK_VALIDATION_FRACTION * images)
    if held < 1:
        raise ConfigError(f"split cvpr2023 holds out the last 10 % of the train images for validation; a set of "
                          f"{images} has none to hold out: generate at least 10 (accel data generate cifar10 "
                          "--train 500)")
    return Holdout(range(0, images - held), range(images - held, images))


def course_cuts(reviews: int) -> tuple[int, int]:
    """Where the course cuts its shuffled pool, scaled to a pool of `reviews`: (35,000, 40,000) at 50,000."""
    return tuple(reviews * cut // COURSE_SOURCE_REVIEWS for cut in COURSE_CUTS)  # type: ignore[return-value]


def course_pool_split(reviews: int) -> Pooled:
    """The course's partition_dataset over a pool of `reviews` in its read order: RandomState(1)'s
    permutation of the positions (what `df.sample(frac=1, random_state=1)` draws), cut at 70 % and 80 %."""
    first, second = course_cuts(reviews)
    if not 0 < first < second < reviews:
        raise ConfigError(f"split dlf-imdb cuts the pooled reviews 70 % / 10 % / 20 % (35,000 / 5,000 / 10,000 "
                          f"of 50,000); a pool of {reviews} leaves a part empty: generate at least 4 reviews "
                          "(accel data generate imdb --train 240 --test 80)")
    order = np.random.RandomState(COURSE_SEED).permutation(reviews)
    return Pooled(order[:first], order[first:second], order[second:])


BOOK_FMNIST_SPLIT_SEED = 42  # the book's numpy permutation that keeps 90 % of the train images
BOOK_FMNIST_VALID_FRACTION = 0.1  # its build_data_loader's valid_size: the permutation's FIRST 10 % (never used)


def book_fmnist_train_indices(train_images: int) -> list[int]:
    """The training images of the book's build_data_loader: np.random.seed(42), shuffle the indices, keep
    `indices[split:]` with split = floor(0.1 * n), the LAST 90 % (54,000 of 60,000); the first 10 % is the
    validation split it never evaluates. Taking the first 90 % instead would train on 6,000 of the book's
    validation images and leave out 6,000 of its training ones."""
    order = np.random.RandomState(BOOK_FMNIST_SPLIT_SEED).permutation(train_images)
    return order[int(np.floor(BOOK_FMNIST_VALID_FRACTION * train_images)):].tolist()


def course_pool(train, test) -> tuple[list[str], np.ndarray]:
    """Both folders' reviews (TextSplits from the checked reader) in the order the course read them:
    test/pos, test/neg, train/pos, train/neg, each folder's files by name (the reader keeps that order
    within a label)."""
    parts, label_of = {"train": train, "test": test}, {"neg": 0, "pos": 1}
    texts, labels = [], []
    for part_name, label_name in COURSE_READ_ORDER:
        part, label = parts[part_name], label_of[label_name]
        picked = np.flatnonzero(part.labels == label)
        texts += [part.texts[i] for i in picked]
        labels += [label] * len(picked)
    return texts, np.array(labels, dtype=np.int64)
