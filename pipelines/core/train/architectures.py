"""The model architectures this repository defines itself (the registry, train/models.py, builds them).

- `BookCNN`: the book's 2-conv + 2-FC network for Fashion-MNIST and CIFAR-10;
- `PatchTransformer` (with `PatchEmbedding`, `TransformerBlock` of `Attention` and `MLP`, `ClassifierHead`): a
  small pre-LN vision transformer whose layers tensor and pipeline parallelism can split;
- `TokenClassifier`: a Hugging Face sequence classifier behind the one-tensor (B, 2, L) interface;
- `BagOfWords`: the course's logistic regression on token counts.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

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
