"""Explicit model registry: the book's CNNs, the torchvision models and the course's text models.

Weights are random by default; pretrained weights come only from a local file (`--weights PATH`,
a state_dict loaded with weights_only=True) or, for a Hugging Face model, a local folder saved with
`save_pretrained` (loaded with local_files_only). Nothing is downloaded at run time.

Token models (DistilBERT, the bag-of-words baseline) take one int64 tensor (B, 2, L): token ids and
attention mask stacked (`core/data/text.py` makes it), so every pipeline, step and the loop use them unchanged.

Over 300 lines on purpose: the registry is one table with its builders; split by family, it would no
longer show in one place what --model accepts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F
import torchvision
from torch import nn
from torchvision.models import DenseNet
from torchvision.models.vision_transformer import VisionTransformer

from pipelines.core.errors import ConfigError


class BookCNN(nn.Module):
    """The book's 2-conv + 2-FC network (no activation between the FC layers, as in the book).

    `extra_fc` inserts Linear(512 -> 256) before the output layer (chapter 1's variant).
    """

    def __init__(self, in_channels: int, image_size: int, classes: int = 10, bias: bool = True,
                 extra_fc: bool = False):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 32, 3, padding=1, bias=bias), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1, bias=bias), nn.ReLU(), nn.MaxPool2d(2),
        )
        flat = 64 * (image_size // 4) ** 2
        head = [nn.Linear(flat, 512, bias=bias)]
        head += [nn.Linear(512, 256, bias=bias), nn.Linear(256, classes, bias=bias)] if extra_fc \
            else [nn.Linear(512, classes, bias=bias)]
        self.classifier = nn.Sequential(*head)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.features(x), 1))


class PatchTransformer(nn.Module):
    """A small pre-LN vision transformer whose layers can be split: the model of tensor and pipeline parallelism.

    Unlike torchvision's ViT (nn.MultiheadAttention packs q, k and v into one fused weight), attention has
    separate `q`, `k`, `v` and `out` nn.Linear projections and the MLP is `up` -> GELU -> `down`, so
    tensor parallelism can split `q/k/v/up` by output features and `out/down` by input features. Heads are
    derived from the local width (width // head_dim), so the same forward runs on a shard holding
    heads / degree heads. The top level is `embed` -> `blocks` (nn.Sequential) -> `head`, so a pipeline
    stage is a contiguous run of those parts under the same state_dict names.
    """

    def __init__(self, classes: int = 10, image_size: int = 32, patch: int = 4, width: int = 128,
                 heads: int = 4, depth: int = 4, mlp_ratio: int = 4, in_channels: int = 3):
        super().__init__()
        self.width, self.heads, self.depth = width, heads, depth
        self.embed = PatchEmbedding(in_channels, image_size, patch, width)
        self.blocks = nn.Sequential(*(TransformerBlock(width, heads, width * mlp_ratio) for _ in range(depth)))
        self.head = ClassifierHead(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(self.embed(x)))


class PatchEmbedding(nn.Module):
    """Non-overlapping patches -> tokens (a strided convolution) plus a learned position embedding."""

    def __init__(self, in_channels: int, image_size: int, patch: int, width: int):
        super().__init__()
        self.project = nn.Conv2d(in_channels, width, patch, stride=patch)
        self.position = nn.Parameter(torch.randn(1, (image_size // patch) ** 2, width) * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.project(x).flatten(2).transpose(1, 2) + self.position


class Attention(nn.Module):
    def __init__(self, width: int, heads: int):
        super().__init__()
        if width % heads:
            raise ConfigError(f"transformer width {width} is not divisible by its {heads} heads")
        self.head_dim = width // heads
        self.q, self.k, self.v = (nn.Linear(width, width) for _ in range(3))
        self.out = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, tokens, _ = x.shape
        q, k, v = (proj(x).view(batch, tokens, -1, self.head_dim).transpose(1, 2)
                   for proj in (self.q, self.k, self.v))  # -1: the heads this rank holds
        mixed = F.scaled_dot_product_attention(q, k, v)
        return self.out(mixed.transpose(1, 2).reshape(batch, tokens, -1))


class MLP(nn.Module):
    def __init__(self, width: int, hidden: int):
        super().__init__()
        self.up, self.down = nn.Linear(width, hidden), nn.Linear(hidden, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.gelu(self.up(x)))


class TransformerBlock(nn.Module):
    """Pre-LN: x + attention(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, width: int, heads: int, hidden: int):
        super().__init__()
        self.norm1, self.attention = nn.LayerNorm(width), Attention(width, heads)
        self.norm2, self.mlp = nn.LayerNorm(width), MLP(width, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class ClassifierHead(nn.Module):
    """Final norm, mean over tokens, linear classifier."""

    def __init__(self, width: int, classes: int):
        super().__init__()
        self.norm, self.linear = nn.LayerNorm(width), nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(self.norm(x).mean(dim=1))


class TokenClassifier(nn.Module):
    """A Hugging Face sequence classifier behind the registry's one-tensor interface: x is (B, 2, L)."""

    def __init__(self, hf_model: nn.Module):
        super().__init__()
        self.hf = hf_model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.hf(input_ids=x[:, 0], attention_mask=x[:, 1]).logits


class BagOfWords(nn.Module):
    """The course's baseline: logistic regression on bag-of-words counts (a linear layer on token counts).

    Counts come from the same token ids DistilBERT sees (padding excluded by the mask); softmax
    cross-entropy on the linear layer's output is multinomial logistic regression.
    """

    def __init__(self, vocab_size: int, classes: int = 2, bias: bool = True):
        super().__init__()
        self.vocab_size = vocab_size
        self.linear = nn.Linear(vocab_size, classes, bias=bias)

    def counts(self, x: torch.Tensor) -> torch.Tensor:
        ids, mask = x[:, 0], x[:, 1]
        bag = torch.zeros(len(x), self.vocab_size, device=x.device, dtype=self.linear.weight.dtype)
        return bag.scatter_add_(1, ids, mask.to(bag.dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(self.counts(x))


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


def _distilbert_folder(folder: Path, classes: int) -> nn.Module:
    """Pretrained weights from a local save_pretrained folder; a head of another size is re-initialised."""
    from transformers import DistilBertForSequenceClassification

    try:
        hf = DistilBertForSequenceClassification.from_pretrained(
            str(folder), num_labels=classes, local_files_only=True, ignore_mismatched_sizes=True)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"weights folder {folder} holds no DistilBERT checkpoint ({exc.__class__.__name__}); "
                          "save one there with save_pretrained (config.json + model.safetensors)") from None
    return TokenClassifier(hf)


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
                            smoke="distilbert_tiny", vocab_size=30522, from_folder=_distilbert_folder),
    "distilbert_tiny": ModelSpec(_distilbert(DISTILBERT_TINY), (2, 64),
                                 "DistilBERT structure, 2 layers x 64, 64 tokens: smoke scale",
                                 vocab_size=30522, from_folder=_distilbert_folder),
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


def read_state_dict(path: Path) -> dict[str, torch.Tensor]:
    """A local weights file as a name -> tensor dict (a checkpoint's `state_dict` entry is accepted);
    ConfigError naming the file for anything else. The runner calls it before work, setup again."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"weights file {path} does not exist; pass --weights with a local file")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises several types for a bad file; the message says which
        raise ConfigError(f"weights file {path} could not be read as a state_dict ({exc.__class__.__name__})") \
            from None
    state = state.get("state_dict", state) if isinstance(state, dict) else state
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ConfigError(f"weights file {path} holds a {type(state).__name__}, not a state_dict (parameter name "
                          "-> tensor); save one with torch.save(model.state_dict(), PATH)")
    return state


def load_weights(model: nn.Module, path: Path) -> None:
    state = read_state_dict(path)
    missing, unexpected = model.load_state_dict(_matching(model, state), strict=False)
    if missing and len(missing) == len(model.state_dict()):
        raise ConfigError(f"weights file {path} matches none of the model's parameters")


def _matching(model: nn.Module, state: dict) -> dict:
    """Drop tensors whose shape differs (a 1000-class head loaded into a 10-class model is re-initialised)."""
    own = model.state_dict()
    return {k: v for k, v in state.items() if k in own and own[k].shape == v.shape}


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
