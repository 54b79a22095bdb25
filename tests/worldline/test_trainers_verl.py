"""The verl configuration a pool build writes, composed by Hydra over verl's own `ppo_trainer`
defaults, validated by verl's config code and reward registry, and read by verl's RL dataset
(`verl.utils.dataset.rl_dataset.RLHFDataset`) on the build's own parquet: every RL row is kept, no
prompt is cut, and the reward function verl loads is worldline's."""

from __future__ import annotations

import inspect
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import yaml

from tests.helpers.trainers import shared_build

pytest.importorskip("verl", reason="the trainers extra (make setup) installs verl")
pytestmark = pytest.mark.slow

CONFIG = "exports/verl/worldline.yaml"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], Path]:
    return shared_build(tmp_path_factory)


@pytest.fixture
def in_out(built: tuple[Path, dict[str, Any], Path]) -> Iterator[None]:
    cwd = os.getcwd()
    os.chdir(built[0])  # the config's paths are relative to the pool folder
    try:
        yield
    finally:
        os.chdir(cwd)


def compose(out: Path, *overrides: str) -> Any:
    """The config `python -m verl.trainer.main_ppo --config-path OUT/exports/verl --config-name
    worldline` runs with."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(out / "exports" / "verl"), version_base=None):
        return hydra_compose(config_name="worldline", overrides=list(overrides))


def rl_rows(out: Path) -> list[dict[str, Any]]:
    return [r for f in sorted((out / "rl").glob("part-*.parquet")) for r in pq.read_table(f).to_pylist()]


def test_config_names_the_files_the_build_wrote(built: tuple[Path, dict[str, Any], Path]) -> None:
    out, manifest, _ = built
    assert CONFIG in manifest["exports"]["verl_config"]
    data = yaml.safe_load((out / CONFIG).read_text())["data"]
    assert data["train_files"] == manifest["exports"]["verl"] and data["train_files"]
    assert all((out / f).is_file() for f in data["train_files"])


def test_verl_composes_and_validates_the_config(
    built: tuple[Path, dict[str, Any], Path], in_out: None
) -> None:
    from omegaconf import OmegaConf
    from verl.experimental.reward_loop import migrate_legacy_reward_impl
    from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager
    from verl.trainer.ppo.reward import get_custom_reward_fn, resolve_reward_manager_cls

    out, _, _ = built
    cfg = compose(out)
    rows = rl_rows(out)
    longest = max(r["prompt_tokens"] for r in rows)
    assert longest > 512, "the fixture must have prompts over verl's default max_prompt_length"
    assert cfg.data.max_prompt_length >= longest and cfg.data.truncation == "error"
    # the rollout's prompt budget follows the data's (verl's own interpolation)
    assert OmegaConf.select(cfg, "actor_rollout_ref.rollout.prompt_length") == cfg.data.max_prompt_length
    cfg = migrate_legacy_reward_impl(cfg)
    assert resolve_reward_manager_cls(cfg) is NaiveRewardManager
    fn = get_custom_reward_fn(cfg)
    assert fn is not None
    raw = fn.args[0]
    assert raw.__name__ == "compute_score_async" and inspect.iscoroutinefunction(raw)
    assert Path(raw.__code__.co_filename).resolve() == (Path("worldline/rewards/verl.py")).resolve() or (
        Path(raw.__code__.co_filename).name == "verl.py" and "rewards" in raw.__code__.co_filename
    )


def test_the_documented_batch_manager_is_unknown_to_verl(built: tuple[Path, dict[str, Any], Path]) -> None:
    """What the old instructions set (`reward_model.reward_manager=batch`) fails in current verl."""
    from verl.experimental.reward_loop import migrate_legacy_reward_impl
    from verl.trainer.ppo.reward import resolve_reward_manager_cls

    cfg = migrate_legacy_reward_impl(compose(built[0], "reward_model.reward_manager=batch"))
    with pytest.raises(ValueError, match="Unknown reward manager: batch"):
        resolve_reward_manager_cls(cfg)


def test_rl_dataset_keeps_every_row_uncut(built: tuple[Path, dict[str, Any], Path], in_out: None) -> None:
    from transformers import AutoTokenizer
    from verl.utils.dataset.rl_dataset import RLHFDataset

    out, _, tok_dir = built
    cfg = compose(out, "data.filter_overlong_prompts_workers=1")
    tokenizer = AutoTokenizer.from_pretrained(str(tok_dir))
    rows = {r["sample_id"]: r for r in rl_rows(out)}
    ds = RLHFDataset(data_files=list(cfg.data.train_files), tokenizer=tokenizer, config=cfg.data)
    assert len(ds) == len(rows)
    for k in range(len(ds)):
        item = ds[k]
        row = rows[item["extra_info"]["sample_id"]]
        ids = tokenizer.apply_chat_template(
            list(item["raw_prompt"]), add_generation_prompt=True, tokenize=True
        )
        ids = ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids
        # the prompt verl renders is the one the pool counted, and it fits
        assert len(ids) == row["prompt_tokens"] <= cfg.data.max_prompt_length
    # verl's own default (512) drops the long prompts with the same dataset code
    default = compose(out, "data.max_prompt_length=512", "data.filter_overlong_prompts_workers=1")
    assert len(
        RLHFDataset(data_files=list(default.data.train_files), tokenizer=tokenizer, config=default.data)
    ) < len(rows)


def test_response_budget_holds_every_real_observation(built: tuple[Path, dict[str, Any], Path]) -> None:
    from schemas.worldmodel import prediction_block
    from worldline.tokenizer import get_token_counter

    out, _, _ = built
    cfg = compose(out)
    counter = get_token_counter(None)
    longest = max(counter.count(prediction_block(r["ground_truth"])) for r in rl_rows(out))
    assert cfg.data.max_response_length >= longest
