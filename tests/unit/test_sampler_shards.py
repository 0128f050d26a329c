"""Distributed entries shuffle as their originals: DistributedSampler shards + set_epoch every epoch.

The loaders are built exactly as the runner builds them for rank 0 and rank 1 of a 2-rank run of the
entry (its resolved config), and driven by the shared loop's batch stream, which calls set_epoch at the
start of every epoch. Samples are identified by their pixels (generated CIFAR-10 images are distinct).
"""

from __future__ import annotations

import pytest

from pipelines.core.data import datasets
from pipelines.core.harness import plan as planning
from pipelines.core.config import experiments
from pipelines.core.train import batches

WORLD = 2


def seen_per_epoch(cfg, rank: int, epochs: int = 2) -> list[list[bytes]]:
    """The samples one rank trains on, epoch by epoch, in order."""
    loaders = datasets.loaders(cfg, (3, 32, 32), rank=rank, world_size=WORLD)
    stream = batches.stream(loaders.train, [], 0)
    seen: list[list[bytes]] = [[] for _ in range(epochs)]
    for epoch, _, _, (x, _) in stream:
        if epoch >= epochs:
            break
        seen[epoch] += [image.numpy().tobytes() for image in x]
    return seen


@pytest.mark.parametrize("entry", ["ch9-cpu-gloo", "ch9-cpu-oneccl", "vit-ddp-4gpu", "vit-fsdp-4gpu",
                                   "vit-fsdp-4gpu-sched"])
def test_two_ranks_see_disjoint_shards_reshuffled_every_epoch(entry, data_root):
    overrides = {"data_root": data_root, "batch_size": 25, "image_size": 32, "num_workers": 0}
    cfg = planning.plan(experiments.get(entry), "book", overrides, {}).configs[0]
    assert cfg.shuffle, f"{entry} must shuffle, as the original does"
    rank0, rank1 = seen_per_epoch(cfg, 0), seen_per_epoch(cfg, 1)
    trained = 450 if cfg.split == "cvpr2023" else 500  # the talk's entries train on the first 90 % (images 0-449)
    held_out = set()
    if cfg.split == "cvpr2023":  # its last 10 % is the validation part: never trained on
        images = datasets.loaders(cfg, (3, 32, 32)).train.dataset
        held_out = {images[i][0].numpy().tobytes() for i in range(450, 500)}
    for epoch in range(2):
        assert len(rank0[epoch]) == len(rank1[epoch]) == trained // 2  # half each
        assert not set(rank0[epoch]) & set(rank1[epoch])  # disjoint shards
        assert len(set(rank0[epoch]) | set(rank1[epoch])) == trained  # together: the training part, once
        assert not (set(rank0[epoch]) | set(rank1[epoch])) & held_out
    for rank in (rank0, rank1):
        assert rank[0] != rank[1]  # set_epoch: a new order every epoch
        assert set(rank[0]) != set(rank[1])  # and a new split between the ranks, as DistributedSampler does


def test_the_loop_reshuffles_only_through_set_epoch(data_root):
    """Without set_epoch a DistributedSampler repeats epoch 0's order: the loop's call is what changes it."""
    cfg = planning.plan(experiments.get("ch9-cpu-gloo"), "book", {"data_root": data_root, "batch_size": 25}, {}
                      ).configs[0]
    sampler = datasets.loaders(cfg, (3, 32, 32), rank=0, world_size=WORLD).train.sampler
    first, again = list(sampler), list(sampler)
    sampler.set_epoch(1)
    assert first == again and list(sampler) != first
