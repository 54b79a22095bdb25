"""Token counting: the bundled Qwen vocabulary by default, any tokenizer.json on request."""

from __future__ import annotations

from pathlib import Path

import pytest

from worldline.tokenizer import QwenTokenCounter, TokenizerJsonCounter, get_token_counter


def test_qwen_counts_are_exact_and_reversible() -> None:
    counter = get_token_counter("qwen3.6")
    assert isinstance(counter, QwenTokenCounter)
    text = "$ ls -la /tmp\ntotal 0\n<|im_end|> stays text"
    ids = counter.encode(text)
    assert counter.decode(ids) == text
    assert counter.count(text) == len(ids)
    assert counter.count_many([text, ""]) == [len(ids), 0]
    # Special-token strings found in the wild are counted as ordinary text, never as control tokens.
    assert counter.count("<|im_end|>") > 1


def test_tokenizer_json_is_accepted(tmp_path: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[UNK]": 0, "hello": 1, "world": 2}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    counter = get_token_counter(str(path))
    assert isinstance(counter, TokenizerJsonCounter)
    assert counter.encode("hello world again") == [1, 2, 0]
    assert counter.count("hello hello") == 2


def test_unknown_tokenizer_names_the_fix(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="WORLDLINE_TOKENIZER"):
        get_token_counter(str(tmp_path / "missing.json"))
    with pytest.raises(ValueError, match="tokenizer.json"):
        get_token_counter("llama-3")
