"""Text for token models: the tokenizer (a local folder, or one trained here) and the encoded tensors.

- `--tokenizer DIR` loads a saved Hugging Face tokenizer (e.g. distilbert-base-uncased's folder) with
  `AutoTokenizer.from_pretrained(DIR, local_files_only=True)`: nothing is downloaded at run time.
- Without it, a WordPiece tokenizer in BERT's style (lower case, BERT pre-tokenizer, `[CLS] ... [SEP]`)
  is trained here on the training texts with the `tokenizers` library. Its vocabulary is sized to the
  data: one entry per distinct training word at most, capped by the model's embedding table.
Records say which (`tokenizer_source: local-folder | trained-here`).

Each text becomes one int64 tensor of shape (2, seq_len): the token ids and the attention mask stacked,
so a batch is one tensor (B, 2, L) and the shared loop, steps, FLOP counter and evaluation handle text
as they handle images (the registry's token models unpack it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch

from pipelines.core.errors import ConfigError

SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")  # BERT's, in its order: [PAD] is id 0
MIN_VOCAB = 128


@dataclass
class Tokenized:
    """Encoded texts and where the tokenizer came from (for the record)."""

    inputs: torch.Tensor  # int64 (N, 2, seq_len): ids, attention mask
    details: dict


def load_tokenizer(folder: Path):
    """A saved tokenizer from a local folder; a missing or unreadable one is one line naming the fix."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ConfigError(f"tokenizer folder {folder} does not exist; pass --tokenizer with a local folder "
                          "holding a saved tokenizer (tokenizer.json or vocab.txt), or leave it out to train one "
                          "on the training texts")
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"tokenizer folder {folder} holds no readable tokenizer ({exc.__class__.__name__}); "
                          "save one there with tokenizer.save_pretrained, or leave --tokenizer out") from None


def vocab_size_for(texts: Sequence[str], limit: int) -> int:
    """One entry per distinct (lower-cased) training word at most, capped by the model's embedding."""
    words = {word for text in texts for word in re.findall(r"\w+", text.lower())}
    return max(MIN_VOCAB, min(limit, len(words) + len(SPECIALS)))


def train_tokenizer(texts: Sequence[str], vocab_size: int):
    """A BERT-style WordPiece tokenizer trained on `texts`, wrapped as a transformers fast tokenizer."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=list(SPECIALS))
    tokenizer.train_from_iterator(texts, trainer=trainer)
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]", special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="[UNK]", pad_token="[PAD]",
                                   cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")


def encode(tokenizer, texts: Sequence[str], seq_len: int) -> torch.Tensor:
    """(N, 2, seq_len) int64: ids padded / truncated to seq_len, and the attention mask."""
    out = tokenizer(list(texts), truncation=True, max_length=seq_len, padding="max_length", return_tensors="pt")
    return torch.stack((out["input_ids"], out["attention_mask"]), dim=1).to(torch.int64)


def tokenize_parts(parts: Sequence[Sequence[str]], seq_len: int, model_vocab: int,
                   folder: Path | None) -> list[Tokenized]:
    """Every part of a split (the training texts first: train, then validation and test) encoded with one
    tokenizer: the local folder's, or one trained on the training texts."""
    train_texts = parts[0]
    if folder is not None:
        tokenizer = load_tokenizer(folder)
        details = {"tokenizer_source": "local-folder", "tokenizer_path": str(folder)}
    else:
        tokenizer = train_tokenizer(train_texts, vocab_size_for(train_texts, model_vocab))
        details = {"tokenizer_source": "trained-here", "tokenizer_path": None}
    size = len(tokenizer)
    if size > model_vocab:
        raise ConfigError(f"tokenizer {folder} has {size} tokens, more than the model's embedding table "
                          f"({model_vocab}); use the model's own tokenizer folder, or leave --tokenizer out")
    details.update(tokenizer_vocab_size=size, seq_len=seq_len)
    encoded = [encode(tokenizer, texts, seq_len) for texts in parts]
    details["train_texts_at_seq_len_pct"] = round(100.0 * float((encoded[0][:, 1, -1] == 1).float().mean()), 2)
    return [Tokenized(inputs, details) for inputs in encoded]

