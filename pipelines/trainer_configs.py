"""Trainer configurations written from a pool build: LLaMA-Factory (SFT and weighted CPT) and verl (RL).

The settings our rows need come from the pools themselves, not from the trainers' defaults:

- LLaMA-Factory trains every assistant message of a conversation unless `mask_history: true`, and
  our SFT rows carry the earlier turns' real observations as assistant messages: only the last
  message is the target. `cutoff_len` (default 2048) is the pool's longest row, counted with the
  chat template LLaMA-Factory's `qwen3` template reproduces token for token (tested), so no
  target is cut. LLaMA-Factory's `pt` stage trains every token of a text; CPT rows carry loss spans,
  so the CPT configuration trains a pre-tokenised dataset whose `labels` are -100 outside the spans
  (`tokenize_cpt`, stage `sft`, whose collator keeps the labels).
- verl: `data.train_files` lists the export files the build wrote, `data.max_prompt_length` (default
  512, truncation `error`) and `max_response_length` come from the RL rows, and the reward is
  `worldline.rewards.verl.compute_score_async` under verl's `naive` reward manager (verl awaits async
  reward functions, so rollouts are judged concurrently).

Paths inside the files are relative to the pool folder: run the trainers from there.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson
import yaml

from pipelines import fs

LLAMA_FACTORY_TEMPLATE = "qwen3"
"""LLaMA-Factory's text template of the Qwen3 family (3.5 and 3.6 render text the same way): ChatML
turns and, with `enable_thinking`, the final answer opened by an (empty) think block, the conversation
`worldline.chat_template` renders and counts. `qwen3_5` is the same text plus a vision plugin that
needs the model's image processor; our rows are text."""
DEFAULT_BASE_MODEL = "Qwen/Qwen3.6-35B-A3B"
"""Written as `model_name_or_path`; override it on the command line (`model_name_or_path=...`)."""
SFT_DATASET = "worldline_sft"
CPT_DATASET = "worldline_cpt"
CPT_TOKENIZED = "exports/llamafactory/cpt_tokenized"
"""Where `tokenize_cpt` saves the CPT dataset (input_ids, attention_mask, labels) for `tokenized_path`."""
LENGTH_ROUNDING = 128
RESPONSE_HEADROOM = 2048
"""verl's `max_response_length`: the longest real observation's prediction block plus this much for
the model's reasoning before it."""


def round_up(n: int, step: int = LENGTH_ROUNDING) -> int:
    return max(step, -(-int(n) // step) * step)


def llama_factory_dataset_info() -> dict[str, Any]:
    """OUT/exports/dataset_info.json: the SFT export (sharegpt layout with OpenAI roles, the system
    prompt as the first message) and the tokenised CPT dataset's name. `worldline_cpt` points at the
    folder `tokenize_cpt` writes, so a configuration that reaches it without the tokenised dataset
    fails on a missing file instead of training every token of the raw text."""
    return {
        SFT_DATASET: {
            "file_name": "sft_messages",
            "formatting": "sharegpt",
            "columns": {"messages": "messages"},
            "tags": {
                "role_tag": "role",
                "content_tag": "content",
                "user_tag": "user",
                "assistant_tag": "assistant",
                "system_tag": "system",
            },
        },
        CPT_DATASET: {"file_name": CPT_TOKENIZED.removeprefix("exports/")},
    }


def _common_train_args(output_dir: str) -> dict[str, Any]:
    return {
        "model_name_or_path": DEFAULT_BASE_MODEL,
        "trust_remote_code": True,
        "do_train": True,
        "finetuning_type": "full",
        "dataset_dir": "exports",
        "template": LLAMA_FACTORY_TEMPLATE,
        "enable_thinking": True,
        "overwrite_cache": True,
        "preprocessing_num_workers": 8,
        "output_dir": output_dir,
        "logging_steps": 10,
        "save_steps": 500,
        "per_device_train_batch_size": 1,
        "gradient_accumulation_steps": 8,
        "learning_rate": 1.0e-5,
        "num_train_epochs": 1.0,
        "lr_scheduler_type": "cosine",
        "warmup_ratio": 0.03,
        "bf16": True,
        "report_to": "none",
    }


def llama_factory_sft_args(sft_tokens: dict[str, Any]) -> dict[str, Any]:
    """LLaMA-Factory arguments for the SFT pool: the last assistant message of a row is its target."""
    longest = int(sft_tokens.get("max", 0))
    return {
        "stage": "sft",
        **_common_train_args("saves/worldline-sft"),
        "dataset": SFT_DATASET,
        "mask_history": True,  # earlier turns' observations are context, not targets
        "train_on_prompt": False,
        "packing": False,
        # the longest row (tokens counted with the chat template this template reproduces), so no
        # history or target is cut; rows are capped by `sft.max_tokens` when the pools are built
        "cutoff_len": round_up(longest),
    }


def llama_factory_cpt_args(cpt_tokens: dict[str, Any]) -> dict[str, Any]:
    """LLaMA-Factory arguments for the CPT pool: a pre-tokenised dataset whose labels keep the loss
    spans (stage `sft`: its collator keeps `labels`; `pt` would recompute them from every token)."""
    return {
        "stage": "sft",
        **_common_train_args("saves/worldline-cpt"),
        "dataset": CPT_DATASET,
        "tokenized_path": CPT_TOKENIZED,
        "train_on_prompt": False,
        "packing": False,
        "cutoff_len": round_up(int(cpt_tokens.get("max", 0))),
    }


def _header(text: str) -> str:
    return "".join(f"# {line}\n" if line else "#\n" for line in text.splitlines())


SFT_HEADER = """LLaMA-Factory SFT on the worldline SFT pool, written by `worldline pools build`.
Run from the pool folder:  llamafactory-cli train exports/llamafactory/sft.yaml model_name_or_path=MODEL
mask_history: only each row's last assistant message (the prediction) is trained.
cutoff_len: the pool's longest row in tokens of the Qwen chat template, so nothing is cut."""

CPT_HEADER = """LLaMA-Factory CPT on the worldline CPT pool with its loss spans, written by `worldline pools build`.
First tokenise the CPT export with the model's tokenizer (labels are -100 outside the loss spans):
  python -m pipelines.trainer_configs tokenize-cpt . --tokenizer MODEL
then run from the pool folder:  llamafactory-cli train exports/llamafactory/cpt.yaml model_name_or_path=MODEL"""

VERL_HEADER = """verl PPO/GRPO on the worldline RL pool, written by `worldline pools build`. Run from the pool folder:
  python -m verl.trainer.main_ppo --config-path $PWD/exports/verl --config-name worldline \\
      actor_rollout_ref.model.path=MODEL ...
The judge endpoint comes from WORLDLINE_LLM_* in the reward workers' environment (docs/judging.md).
val_files repeats the training files (the RL pool has no split of its own; trainer.test_freq is -1)."""


def verl_config(
    train_files: list[str], rl_tokens: dict[str, Any], max_target_tokens: int, reward_path: str
) -> dict[str, Any]:
    """A Hydra config for `verl.trainer.main_ppo` over verl's own `ppo_trainer` defaults."""
    return {
        "hydra": {"searchpath": ["pkg://verl.trainer.config"]},
        "defaults": ["ppo_trainer", "_self_"],
        "data": {
            "train_files": list(train_files),
            "val_files": list(train_files),
            "prompt_key": "prompt",
            "reward_fn_key": "data_source",
            # the longest RL prompt, rendered with the generation prompt as verl's dataset renders it
            "max_prompt_length": round_up(int(rl_tokens.get("max", 0))),
            "max_response_length": round_up(max_target_tokens + RESPONSE_HEADROOM),
            "truncation": "error",
            "filter_overlong_prompts": True,
            "return_raw_chat": True,
        },
        "reward": {
            "custom_reward_function": {"path": reward_path, "name": "compute_score_async"},
            "reward_manager": {"source": "register", "name": "naive"},
        },
        "trainer": {"test_freq": -1, "val_before_train": False},
    }


def _rl_target_tokens(rl_parts: list[str], counter: Any) -> int:
    """Tokens of the longest answer block a rollout must produce to state a row's real observation."""
    import pyarrow.parquet as pq

    from schemas.worldmodel import prediction_block

    longest = 0
    for f in rl_parts:
        with fs.open_read(f) as fh:
            column = pq.read_table(fh, columns=["ground_truth"]).column("ground_truth").to_pylist()
        for gt in column:
            longest = max(longest, counter.count(prediction_block(gt)))
    return longest


def write_trainer_configs(
    out: str,
    pools: dict[str, dict[str, Any]],
    exports: dict[str, list[str]],
    rl_parts: list[str],
    tokenizer: str | None,
) -> dict[str, list[str]]:
    """Write dataset_info.json, the LLaMA-Factory SFT / CPT configs and the verl config under
    OUT/exports (pool statistics from `pools`, the RL pool's part files `rl_parts`); return the
    written paths (relative to OUT) by export name."""
    from worldline.tokenizer import get_token_counter

    def write_yaml(rel: str, header: str, body: dict[str, Any]) -> str:
        text = _header(header) + yaml.safe_dump(body, sort_keys=False, allow_unicode=True)
        fs.mkdirs(fs.join(out, rel.rsplit("/", 1)[0]))
        fs.write_bytes(fs.join(out, rel), text.encode())
        return rel

    info = "exports/dataset_info.json"
    fs.write_json(fs.join(out, info), llama_factory_dataset_info())
    lf = [
        info,
        write_yaml(
            "exports/llamafactory/sft.yaml", SFT_HEADER, llama_factory_sft_args(pools["sft"]["tokens"])
        ),
        write_yaml(
            "exports/llamafactory/cpt.yaml", CPT_HEADER, llama_factory_cpt_args(pools["cpt"]["tokens"])
        ),
    ]
    # The reward's file, found without importing it (its judge and LLM client cost a second to import).
    reward_spec = importlib.util.find_spec("worldline.rewards.verl")
    assert reward_spec is not None and reward_spec.origin is not None
    target = _rl_target_tokens(rl_parts, get_token_counter(tokenizer))
    verl = write_yaml(
        "exports/verl/worldline.yaml",
        VERL_HEADER,
        verl_config(exports.get("verl", []), pools["rl"]["tokens"], target, reward_spec.origin),
    )
    return {"llama_factory": lf, "verl_config": [verl]}


def _cpt_records(out: Path) -> Iterator[dict[str, Any]]:
    for f in sorted((out / "exports" / "cpt_text").glob("*.jsonl")):
        with open(f, "rb") as fh:
            for line in fh:
                if line.strip():
                    yield orjson.loads(line)


def cpt_features(records: Iterable[dict[str, Any]], tokenizer: Any) -> Iterator[dict[str, list[int]]]:
    """input_ids / attention_mask / labels per CPT export record: labels are -100 outside its spans."""
    from worldline.pools import token_weights

    for r in records:
        w = token_weights(r["text"], r["loss_spans"], tokenizer)
        yield {
            "input_ids": w["input_ids"],
            "attention_mask": [1] * len(w["input_ids"]),
            "labels": w["labels"],
        }


def tokenize_cpt(out: str | Path, tokenizer: Any, target: str | Path | None = None) -> Path:
    """Save the CPT export as a `datasets` dataset LLaMA-Factory loads with `tokenized_path`.

    `tokenizer`: the model's tokenizer (a transformers tokenizer, a `tokenizers.Tokenizer`, a
    tokenizer.json path or a Qwen name; see `worldline.pools.token_weights`), so ids match the model."""
    import datasets

    out = Path(out)
    dest = Path(target) if target is not None else out / CPT_TOKENIZED
    if not any((out / "exports" / "cpt_text").glob("*.jsonl")):
        raise FileNotFoundError(f"{out}/exports/cpt_text/ holds no CPT export: build the pools first")
    features = datasets.Features(
        {
            "input_ids": datasets.Sequence(datasets.Value("int32")),
            "attention_mask": datasets.Sequence(datasets.Value("int8")),
            "labels": datasets.Sequence(datasets.Value("int32")),
        }
    )
    rows = list(cpt_features(_cpt_records(out), tokenizer))
    ds = datasets.Dataset.from_list(rows, features=features)
    datasets.DatasetDict({"train": ds}).save_to_disk(str(dest))
    return dest


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m pipelines.trainer_configs")
    sub = parser.add_subparsers(dest="command", required=True)
    tok = sub.add_parser("tokenize-cpt", help="the CPT export as a tokenised dataset for LLaMA-Factory")
    tok.add_argument("pools", help="the pools output folder")
    tok.add_argument("--tokenizer", required=True, help="the model (folder or hub id) whose tokenizer to use")
    tok.add_argument("--out", default=None, help=f"target folder (default POOLS/{CPT_TOKENIZED})")
    args = parser.parse_args(argv)
    try:
        from transformers import AutoTokenizer

        hf = AutoTokenizer.from_pretrained(args.tokenizer, trust_remote_code=True)
        dest = tokenize_cpt(args.pools, hf, args.out)
    except (OSError, ValueError) as e:
        print(f"error: {e}")
        return 2
    print(f"wrote {dest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
