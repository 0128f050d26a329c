"""Explicit model registry: the book's CNNs, the torchvision models and the course's text models.

Weights are random by default; pretrained weights come only from a local file (`--weights PATH`,
a state_dict loaded with weights_only=True) or, for a Hugging Face model, a local folder saved with
`save_pretrained` (loaded with local_files_only; train/pretrained.py reads both). Nothing is downloaded at
run time. The architectures this repository defines itself are in train/architectures.py.

Token models (DistilBERT, the bag-of-words baseline) take one int64 tensor (B, 2, L): token ids and
attention mask stacked (`core/data/text.py` makes it), so every pipeline, step and the loop use them unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
import torchvision
from torch import nn
from torchvision.models import DenseNet
from torchvision.models.vision_transformer import VisionTransformer

from pipelines.core.errors import ConfigError
from pipelines.core.train.architectures import BagOfWords, BookCNN, PatchTransformer, TokenClassifier
from pipelines.core.train.pretrained import distilbert_folder, load_weights


# distilbert-base-uncased's architecture (the course's model): 6 layers, width 768, 12 heads
DISTILBERT_BASE = {"vocab_size": 30522, "dim": 768, "n_layers": 6, "n_heads": 12, "hidden_dim": 3072,
                   "max_position_embeddings": 512}
# The smoke model has no dropout, so arms that must train alike compare exactly: DTensor (FSDP2, tensor
# parallel) draws dropout masks from its own offset-based generator, unlike a plain or DDP module.
DISTILBERT_TINY = {**DISTILBERT_BASE, "dim": 64, "n_layers": 2, "n_heads": 2, "hidden_dim": 256,
                   "dropout": 0.0, "attention_dropout": 0.0, "seq_classif_dropout": 0.0}


def _distilbert(architecture: dict) -> Callable[..., nn.Module]:
    def build(classes: int = 2, **kwargs) -> nn.Module:
        from transformers import DistilBertConfig, DistilBertForSequenceClassification  # heavy: on demand

        return TokenClassifier(DistilBertForSequenceClassification(
            DistilBertConfig(**architecture, num_labels=classes, **kwargs)))
    return build


@dataclass(frozen=True)
class ModelSpec:
    build: Callable[..., nn.Module]
    input_shape: tuple[int, ...]  # per sample, at the size the book ran it: (C, H, W), or (2, L) for tokens
    about: str
    smoke: str | None = None  # the small model of the same structure that smoke scale runs instead
    vocab_size: int | None = None  # token models: ids run 0..vocab_size-1
    from_folder: Callable[[Path, int], nn.Module] | None = None  # pretrained weights from a local folder

    @property
    def takes_tokens(self) -> bool:
        return self.vocab_size is not None


def _torchvision(name: str, **fixed) -> Callable[..., nn.Module]:
    def build(classes: int = 1000, **kwargs) -> nn.Module:
        return getattr(torchvision.models, name)(weights=None, num_classes=classes, **fixed, **kwargs)
    return build


def _vit_tiny(classes: int = 10, **kwargs) -> nn.Module:
    """A ViT with ViT-B/16's structure but 2 layers, 3 heads, width 192: for smoke tests on CPU."""
    return VisionTransformer(image_size=224, patch_size=16, num_layers=2, num_heads=3, hidden_dim=192,
                             mlp_dim=768, num_classes=classes, **kwargs)


def _densenet_tiny(classes: int = 1000, **kwargs) -> nn.Module:
    """DenseNet121's structure (BN-ReLU-conv dense layers, concatenation, transitions) at toy size:
    two blocks of two layers, growth 8. For smoke tests of DenseNet pipelines on CPU."""
    return DenseNet(growth_rate=8, block_config=(2, 2), num_init_features=16, bn_size=2,
                    num_classes=classes, **kwargs)


REGISTRY: dict[str, ModelSpec] = {
    "cnn_fmnist": ModelSpec(lambda classes=10, **kw: BookCNN(1, 28, classes, **kw), (1, 28, 28),
                            "book CNN for Fashion-MNIST (1,630,090 params)"),
    "cnn_cifar10": ModelSpec(lambda classes=10, **kw: BookCNN(3, 32, classes, **kw), (3, 32, 32),
                             "book CNN for CIFAR-10 (2,122,186 params)"),
    "densenet121": ModelSpec(_torchvision("densenet121"), (3, 32, 32), "torchvision DenseNet121"),
    "densenet_tiny": ModelSpec(_densenet_tiny, (3, 32, 32), "DenseNet structure, 2 blocks x 2 layers: smoke scale"),
    "efficientnet_b0": ModelSpec(_torchvision("efficientnet_b0"), (3, 32, 32), "torchvision EfficientNet-B0"),
    "efficientnet_b7": ModelSpec(_torchvision("efficientnet_b7"), (3, 32, 32), "torchvision EfficientNet-B7"),
    "resnet18": ModelSpec(_torchvision("resnet18"), (3, 32, 32), "torchvision ResNet-18"),
    "resnet50": ModelSpec(_torchvision("resnet50"), (3, 32, 32), "torchvision ResNet-50"),
    "vit_b_16": ModelSpec(_torchvision("vit_b_16"), (3, 224, 224), "torchvision ViT-B/16", smoke="vit_tiny"),
    "vit_tiny": ModelSpec(_vit_tiny, (3, 224, 224), "ViT-B/16 structure, 2 layers x 192: smoke scale"),
    "transformer_small": ModelSpec(lambda classes=10, **kw: PatchTransformer(classes, **kw), (3, 32, 32),
                                   "splittable transformer on 4x4 patches: 4 blocks, width 128, 4 heads"),
    "transformer_tiny": ModelSpec(lambda classes=10, **kw: PatchTransformer(classes, patch=8, width=32, **kw),
                                  (3, 32, 32), "splittable transformer, 4 blocks x width 32, 4 heads: smoke scale"),


    "distilbert": ModelSpec(_distilbert(DISTILBERT_BASE), (2, 512),
                            "DistilBertForSequenceClassification, distilbert-base-uncased's config",
                            smoke="distilbert_tiny", vocab_size=30522, from_folder=distilbert_folder),
    "distilbert_tiny": ModelSpec(_distilbert(DISTILBERT_TINY), (2, 64),
                                 "DistilBERT structure, 2 layers x 64, 64 tokens: smoke scale",
                                 vocab_size=30522, from_folder=distilbert_folder),
    "bag_of_words": ModelSpec(lambda classes=2, **kw: BagOfWords(30522, classes, **kw), (2, 512),
                              "logistic regression on token counts (the course's baseline)", vocab_size=30522),
}


def spec(name: str) -> ModelSpec:
    if name not in REGISTRY:
        raise ConfigError(f"unknown model {name!r}; choose one of: {', '.join(REGISTRY)}")
    return REGISTRY[name]


def build(name: str, classes: int = 10, weights: Path | None = None, **kwargs) -> nn.Module:
    """Build a registered model with `classes` outputs; load a local state_dict if one is given.

    The book keeps torchvision's 1000-class ImageNet heads (labels 0-9 index into 1000 logits); the
    catalog passes classes=1000 where the book did, so the parameter counts match the book.
    """
    the = spec(name)
    if weights is not None and Path(weights).is_dir():
        if the.from_folder is None:
            raise ConfigError(f"weights {weights} is a folder; model {name} loads a state_dict file "
                              "(a folder is for Hugging Face models such as distilbert)")
        return the.from_folder(Path(weights), classes)
    model = the.build(classes=classes, **kwargs)
    if weights is not None:
        load_weights(model, Path(weights))
    return model


def random_inputs(name: str, count: int, shape: tuple[int, ...], generator: torch.Generator | None = None,
                  device: torch.device | str = "cpu") -> torch.Tensor:
    """Inputs of the model's kind with no learning signal: pixels in [0, 1), or token ids with a full mask."""
    the = spec(name)
    if not the.takes_tokens:
        return torch.rand((count, *shape), generator=generator, device=device)
    ids = torch.randint(0, the.vocab_size, (count, shape[-1]), generator=generator, device=device)
    return torch.stack((ids, torch.ones_like(ids)), dim=1)


BLOCK_STACKS = ("layers", "layer", "blocks")  # torchvision ViT: encoder.layers; DistilBERT: transformer.layer


def transformer_blocks(model: nn.Module) -> list[nn.Module]:
    """The repeated blocks of a transformer (the units FSDP shards one by one): the first ModuleList or
    Sequential named like a layer stack (BLOCK_STACKS); a model without one has none."""
    for name, module in model.named_modules():
        if isinstance(module, (nn.ModuleList, nn.Sequential)) and name.rsplit(".", 1)[-1] in BLOCK_STACKS:
            return list(module)
    return []


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def splittable(name: str, classes: int) -> PatchTransformer:
    """The model's structure (on the meta device: no memory), refused unless its blocks can be split."""
    with torch.device("meta"):
        model = build(name, classes=classes)
    if not isinstance(model, PatchTransformer):
        transformers = ", ".join(n for n in REGISTRY if n.startswith("transformer_"))
        raise ConfigError(f"model {name} has no splittable transformer blocks (separate q/k/v/out and MLP "
                          f"layers); use --model with one of: {transformers}")
    return model
