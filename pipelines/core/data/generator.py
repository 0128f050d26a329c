"""Generated datasets: small files in each dataset's true on-disk format (IDX for Fashion-MNIST, pickled
batches for CIFAR-10, aclImdb's folders of reviews), with a learnable class signal, marked
`generated` in the folder's origin file so no report mistakes them for the published data.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pipelines.core.data.files import spec, verify
from pipelines.core.data.formats import (IMDB_LABELS, IMDB_RATINGS, DatasetFiles, write_cifar10, write_fashion_mnist,
                                         write_imdb)
from pipelines.core.data.writing import exclusive, out_of_space, staged, write_manifest
from pipelines.core.errors import ConfigError

MAX_GENERATED = 60_000  # samples per split `generate` writes: the size of the real training sets


def _images(rng: np.random.Generator, labels: np.ndarray, d: DatasetFiles) -> np.ndarray:
    """Each class is a fixed smooth pattern; samples are that pattern plus noise and a brightness jitter.

    The signal is strong enough that a small CNN beats chance within a few hundred steps, and weak
    enough (noise, overlap) that accuracy does not saturate instantly.
    """
    proto_rng = np.random.default_rng(1234)  # prototypes are the same for every seed and split
    coarse = proto_rng.uniform(0, 1, size=(d.classes, d.channels, 4, 4))
    prototypes = coarse.repeat(d.size // 4, axis=2).repeat(d.size // 4, axis=3)
    noise = rng.normal(0.0, 0.35, size=(len(labels), d.channels, d.size, d.size))
    jitter = rng.uniform(-0.15, 0.15, size=(len(labels), 1, 1, 1))
    pixels = np.clip(prototypes[labels] * 0.8 + noise + jitter + 0.1, 0.0, 1.0)
    return (pixels * 255).astype(np.uint8)


# Words of the generated reviews: most are neutral; each class leans on its own sentiment words, and the
# other class's words appear too (less often), so the signal is learnable but not trivial.
SENTIMENT_WORDS = (
    ("awful", "boring", "dull", "terrible", "waste", "worst", "poorly", "mess", "annoying", "bland",
     "stupid", "predictable", "disappointing", "lame", "pointless"),
    ("great", "wonderful", "superb", "moving", "brilliant", "best", "beautifully", "gem", "charming",
     "gripping", "touching", "masterpiece", "delightful", "fine", "memorable"),
)


SYLLABLES = ("ka", "lo", "mi", "ra", "te", "su", "no", "vi", "de", "po", "an", "el", "or", "un", "is")


def _reviews(rng: np.random.Generator, count: int, words: list[str]) -> list[tuple[str, int, int]]:
    """(text, label, rating) per review: 20-120 words, sentences, the archive's `<br /><br />` breaks."""
    reviews = []
    for _ in range(count):
        label = int(rng.integers(0, 2))
        rating = int(rng.choice(IMDB_RATINGS[IMDB_LABELS[label]]))
        length = int(rng.integers(20, 121))
        kind = rng.choice(3, size=length, p=[0.84, 0.11, 0.05])  # neutral, own class, other class
        tokens = [words[rng.integers(len(words))] if k == 0 else
                  rng.choice(SENTIMENT_WORDS[label if k == 1 else 1 - label]) for k in kind]
        sentences = [" ".join(tokens[i:i + 12]).capitalize() + "." for i in range(0, length, 12)]
        breaks = rng.integers(0, len(sentences))
        text = " ".join(sentences[:breaks]) + (" <br /><br />" if breaks else "") + " ".join(sentences[breaks:])
        reviews.append((text.strip(), label, rating))
    return reviews


def _vocabulary() -> list[str]:
    """The neutral words: every two-syllable pseudo-word, the same for every seed."""
    return sorted({a + b for a in SYLLABLES for b in SYLLABLES})


def generate(name: str, root: Path, train: int, test: int, seed: int = 0) -> Path:
    """Build the dataset in a staged folder, verify it, swap it into place (under the dataset's lock)."""
    d = spec(name)
    if train < 1 or test < 1:
        raise ConfigError(f"--train and --test must be at least 1, got {train} and {test}")
    if max(train, test) > MAX_GENERATED:
        raise ConfigError(f"--train and --test must be at most {MAX_GENERATED:,} (the size of the real sets), "
                          f"got {train:,} and {test:,}")
    if not 0 <= seed < 2**63:
        raise ConfigError(f"--seed must be 0 or more, got {seed}")
    rng = np.random.default_rng(seed)
    splits = {}
    if name == "imdb":
        words = _vocabulary()
        splits = {split: _reviews(rng, count, words) for split, count in (("train", train), ("test", test))}
        signal = "sentiment words per class (11 % own class, 5 % other class) among neutral pseudo-words"
    else:
        for split, count in (("train", train), ("test", test)):
            labels = rng.integers(0, d.classes, size=count).astype(np.uint8)
            splits[split] = (_images(rng, labels, d), labels)
        signal = "per-class smooth prototype + gaussian noise"
    root = Path(root)
    with exclusive(root, name), out_of_space(root, name), staged(root, name) as stage:
        folder = stage / d.folder
        folder.mkdir(parents=True)
        if name == "imdb":
            write_imdb(folder, splits, [*words, *(w for group in SENTIMENT_WORDS for w in group)])
        else:
            (write_fashion_mnist if name == "fashion_mnist" else write_cifar10)(folder, splits)
        write_manifest(folder, {"source": "generated", "dataset": name, "train": train, "test": test,
                                 "seed": seed, "signal": signal})
        verify(name, stage)
    return root / d.folder
