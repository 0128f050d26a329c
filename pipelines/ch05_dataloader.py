"""Chapter 5: a heavy input pipeline, and the DataLoader settings that move it off the training thread.

Every image goes through the book's seven steps, all PIL work on the CPU: Resize(255) -> CenterCrop(224)
-> RandomHorizontalFlip -> RandomRotation(20) -> GaussianBlur(3) -> ToTensor -> Normalize(ImageNet).
The book applies the same random transform to the test set; so do we. The model and step are plain.

The technique is the loader, set per variant in the catalog: `num_workers` (worker processes decode
and transform the next batches while the model trains), `pin_memory` (page-locked host buffers, so a
copy to a GPU can be asynchronous), `persistent_workers` and `prefetch_factor`. The loop records how
long each step waited for data (data_wait_s) apart from compute (compute_s).
"""

from __future__ import annotations

from pipelines.core import loop, models
from pipelines.core.steps import book_optimizer, plain_step

OPTIONS: dict = {}
SMOKE_ARGS = {"model": "densenet_tiny", "batch_size": 4}  # the input pipeline stays the book's 224 one
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def heavy_transform(size: int = 224):
    from torchvision import transforms

    return transforms.Compose([
        transforms.Resize(round(size * 255 / 224)),
        transforms.CenterCrop(size),
        transforms.RandomHorizontalFlip(),
        transforms.RandomRotation(20),
        transforms.GaussianBlur(3),
        transforms.ToTensor(),
        transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD),
    ])


def transforms(cfg):
    """The same heavy, random transform for train and test (as the book)."""
    transform = heavy_transform(cfg.image_size or 224)
    return transform, transform


def setup(cfg, ctx) -> loop.Trainable:
    model = models.build(cfg.model, classes=cfg.head_classes, weights=cfg.weights).to(ctx.device)
    notes = []
    if cfg.pin_memory and ctx.device.type != "cuda":
        notes.append("pin_memory=True has no effect here: there is no GPU to copy to, so page-locked "
                     "buffers cannot speed up a host-to-device transfer")
    if cfg.num_workers == 0 and (cfg.persistent_workers or cfg.prefetch_factor):
        notes.append("persistent_workers/prefetch_factor apply to worker processes; num_workers=0 has none")
    return loop.Trainable(model, plain_step(model, book_optimizer(model, cfg)), notes=notes)
