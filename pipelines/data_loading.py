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

from torchvision import transforms as T

from pipelines.core.train import models
from pipelines.core.harness.pipeline import Trainable, TrainingPipeline
from pipelines.core.train.steps import book_optimizer, plain_step

IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def heavy_transform(size: int = 224) -> T.Compose:
    return T.Compose([
        T.Resize(round(size * 255 / 224)),
        T.CenterCrop(size),
        T.RandomHorizontalFlip(),
        T.RandomRotation(20),
        T.GaussianBlur(3),
        T.ToTensor(),
        T.Normalize(IMAGENET_MEAN, IMAGENET_STD),
    ])


class DataLoaderSettings(TrainingPipeline):
    smoke_settings = {"model": "densenet_tiny", "batch_size": 4}  # the input pipeline stays the 224 one

    def transforms(self, cfg):
        """The same heavy, random transform for train and test (as the book)."""
        transform = heavy_transform(cfg.image_size or 224)
        return transform, transform

    def setup(self, cfg, ctx) -> Trainable:
        model = models.build(cfg.model, classes=cfg.head_classes, weights=cfg.weights).to(ctx.device)
        notes = []
        if cfg.num_workers == 0 and (cfg.persistent_workers or cfg.prefetch_factor):
            notes.append("persistent_workers/prefetch_factor apply to worker processes; num_workers=0 has "
                         "none")
        return Trainable(model, plain_step(model, book_optimizer(model, cfg)), notes=notes)


PIPELINE = DataLoaderSettings()
