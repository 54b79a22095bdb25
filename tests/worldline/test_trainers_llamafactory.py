"""The LLaMA-Factory configurations a pool build writes, run through LLaMA-Factory's own argument
parser, template and dataset loader on the build's own export: the trained tokens of every SFT row are
exactly its target, and the CPT labels are exactly its loss spans."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import yaml

from tests.helpers.trainers import allow_missing_torchaudio, shared_build

pytest.importorskip("llamafactory", reason="the trainers extra (make setup) installs LLaMA-Factory")
pytestmark = pytest.mark.slow

IGNORE = -100


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], Path]:
    return shared_build(tmp_path_factory)


@pytest.fixture(autouse=True)
def _lf_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISABLE_VERSION_CHECK", "1")  # datasets 5 is newer than LLaMA-Factory pins
    allow_missing_torchaudio()


def sft_rows(out: Path) -> list[dict[str, Any]]:
    rows = [r for f in sorted((out / "sft").glob("part-*.parquet")) for r in pq.read_table(f).to_pylist()]
    return sorted(rows, key=lambda r: (r["trajectory_id"], r["turn_index"]))


def lf_dataset(out: Path, tok_dir: Path, config: str, **overrides: Any) -> tuple[Any, Any, dict[str, Any]]:
    """LLaMA-Factory's get_train_args -> load_tokenizer -> get_template_and_fix_tokenizer ->
    get_dataset, as its `run_sft` does, on the config file the build wrote (run from OUT)."""
    from llamafactory.data import get_dataset, get_template_and_fix_tokenizer
    from llamafactory.hparams import get_train_args
    from llamafactory.model import load_tokenizer

    args = yaml.safe_load((out / config).read_text())
    # the machine's choices, not the data's: the tokenizer folder stands in for the model, CPU has no bf16
    args |= {"model_name_or_path": str(tok_dir), "bf16": False, "output_dir": str(out / "saves")}
    args |= {"preprocessing_num_workers": None, **overrides}
    cwd = os.getcwd()
    os.chdir(out)
    try:
        model_args, data_args, training_args, _, _ = get_train_args(args)
        tokenizer = load_tokenizer(model_args)["tokenizer"]
        template = get_template_and_fix_tokenizer(tokenizer, data_args)
        module = get_dataset(
            template, model_args, data_args, training_args, stage="sft", **{"tokenizer": tokenizer}
        )
    finally:
        os.chdir(cwd)
    return module["train_dataset"], tokenizer, args


def test_sft_config_trains_exactly_each_rows_target(built: tuple[Path, dict[str, Any], Path]) -> None:
    from worldline.chat_template import IM_START, render_chat

    out, manifest, tok_dir = built
    assert "exports/llamafactory/sft.yaml" in manifest["exports"]["llama_factory_configs"]
    rows = sft_rows(out)
    longest = max(r["tokens"] for r in rows)
    assert longest > 2048, "the fixture must have rows longer than LLaMA-Factory's default cutoff_len"
    dataset, tokenizer, args = lf_dataset(out, tok_dir, "exports/llamafactory/sft.yaml")
    assert args["mask_history"] is True and args["cutoff_len"] >= longest
    by_text = {render_chat(r["messages"]): r for r in rows}
    assert len(dataset) == len(by_text) == len(rows)
    seen = set()
    for example in dataset:
        ids, labels = example["input_ids"], example["labels"]
        rendered = tokenizer.decode(ids)
        # the whole conversation is what the chat template renders, and as long as the pool counted
        assert rendered in by_text
        row = by_text[rendered]
        seen.add(row["sample_id"])
        assert len(ids) == row["tokens"]
        trained = [i for i, lab in zip(ids, labels, strict=True) if lab != IGNORE]
        answer = rendered[rendered.rindex(IM_START + "assistant\n") + len(IM_START + "assistant\n") :]
        assert tokenizer.decode(trained) == answer, row["sample_id"]
        # the trained tokens are one contiguous run at the end: the last assistant message only
        first = next(k for k, lab in enumerate(labels) if lab != IGNORE)
        assert all(lab != IGNORE for lab in labels[first:])
    assert len(seen) == len(rows)


def test_lf_defaults_would_train_history_and_cut_targets(built: tuple[Path, dict[str, Any], Path]) -> None:
    """What the shipped settings prevent, measured with the same loader: LLaMA-Factory's defaults
    (history trained, cutoff_len 2048) train earlier observations and cut the long rows' targets."""
    from worldline.chat_template import IM_START, render_chat

    out, _, tok_dir = built
    dataset, tokenizer, _ = lf_dataset(
        out, tok_dir, "exports/llamafactory/sft.yaml", mask_history=False, cutoff_len=2048
    )
    rows = sft_rows(out)
    target_tokens = 0
    for r in rows:
        rendered = render_chat(r["messages"])
        answer = rendered[rendered.rindex(IM_START + "assistant\n") + len(IM_START + "assistant\n") :]
        target_tokens += len(tokenizer(answer, add_special_tokens=False)["input_ids"])
    trained = sum(lab != IGNORE for example in dataset for lab in example["labels"])
    assert trained > target_tokens  # earlier observations are trained as if they were targets
    assert max(len(e["input_ids"]) for e in dataset) <= 2048 < max(r["tokens"] for r in rows)  # long rows cut


def test_cpt_config_trains_exactly_the_loss_spans(built: tuple[Path, dict[str, Any], Path]) -> None:
    from transformers import AutoTokenizer

    from pipelines.trainer_configs import main as trainer_configs_main

    out, manifest, tok_dir = built
    assert "exports/llamafactory/cpt.yaml" in manifest["exports"]["llama_factory_configs"]
    # without the tokenised dataset the config fails instead of training every token of the text
    with pytest.raises(ValueError, match="File .* not found"):
        lf_dataset(out, tok_dir, "exports/llamafactory/cpt.yaml")
    assert trainer_configs_main(["tokenize-cpt", str(out), "--tokenizer", str(tok_dir)]) == 0
    dataset, _, args = lf_dataset(out, tok_dir, "exports/llamafactory/cpt.yaml")
    assert args["stage"] == "sft"  # `pt` recomputes labels from every input id
    tokenizer = AutoTokenizer.from_pretrained(str(tok_dir))
    records = [
        json.loads(line)
        for f in sorted((out / "exports" / "cpt_text").glob("*.jsonl"))
        for line in f.read_text().splitlines()
    ]
    assert len(dataset) == len(records) == manifest["pools"]["cpt"]["samples"]
    masked_somewhere = False
    for example, record in zip(dataset, records, strict=True):
        enc = tokenizer(record["text"], add_special_tokens=False, return_offsets_mapping=True)
        assert example["input_ids"] == enc["input_ids"]
        for (start, _), label, tid in zip(
            enc["offset_mapping"], example["labels"], enc["input_ids"], strict=True
        ):
            inside = any(s["start"] <= start < s["end"] for s in record["loss_spans"])
            assert label == (tid if inside else IGNORE)
            masked_somewhere |= not inside
    assert masked_somewhere
