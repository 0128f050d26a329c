"""Pretrained weights from local files, never downloaded: a state_dict file or a Hugging Face folder.

`read_state_dict` reads a weights file (loaded with weights_only=True) and refuses anything that is not a
name -> tensor dict; `load_weights` loads it into a model, the tensors of another shape left out (a
1000-class head in a 10-class model is re-initialised). `distilbert_folder` builds DistilBERT from a local
`save_pretrained` folder (local_files_only). The registry's `build` (train/models.py) calls them.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from pipelines.core.errors import ConfigError
from pipelines.core.train.architectures import TokenClassifier


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


def distilbert_folder(folder: Path, classes: int) -> nn.Module:
    """Pretrained weights from a local save_pretrained folder; a head of another size is re-initialised."""
    from transformers import DistilBertForSequenceClassification

    try:
        hf = DistilBertForSequenceClassification.from_pretrained(
            str(folder), num_labels=classes, local_files_only=True, ignore_mismatched_sizes=True)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"weights folder {folder} holds no DistilBERT checkpoint ({exc.__class__.__name__}); "
                          "save one there with save_pretrained (config.json + model.safetensors)") from None
    return TokenClassifier(hf)
