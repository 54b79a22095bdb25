"""What users load: pool folders as Hugging Face datasets, licences per row, trainer exports,
open_dataset / stats on pool folders."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from pipelines.build import resolve_inputs, run_build
from pipelines.config import PoolsConfig
from pipelines.finalize import finalize
from tests.helpers.pools_data import SPLIT_CONFIG, build_fixture

# The shared split, with small shards so the pools have several parts.
CONFIG = {**SPLIT_CONFIG, "trajectories_per_shard": 4}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    root = tmp_path_factory.mktemp("userload")
    fx = build_fixture(root)
    cfg = PoolsConfig.from_dict(CONFIG)
    ins = [str(p) for p in fx["inputs"]]  # type: ignore[attr-defined]
    know, ev = [str(fx["knowledge"])], [str(fx["eval"])]
    run_build(resolve_inputs(ins, know, ev, cfg), str(root / "out"), cfg, [])
    return root / "out", finalize(root / "out", cfg, ins, know, ev)


def test_every_pool_folder_loads_with_datasets(built: tuple[Path, dict[str, Any]]) -> None:
    import datasets
    from huggingface_hub import DatasetCard

    out, m = built
    for pool in ("cpt", "sft", "rl", "eval"):
        ds = datasets.load_dataset(str(out / pool), split="train")
        assert len(ds) == m["pools"][pool]["samples"] > 0, pool
        card = DatasetCard.load(out / pool / "README.md")
        assert card.data.configs[0]["data_files"][0]["path"] == "part-*.parquet"
        assert card.data.license and card.data.task_categories
        if pool != "eval":
            assert {"licence", "source_kind"} <= set(ds.column_names)
        assert "| licence | samples |" in card.text and "| source kind | samples |" in card.text
    cpt = datasets.load_dataset(str(out / "cpt"), split="train")
    assert "MIT" in set(cpt["licence"]) and {"infra", "public", "knowledge"} <= set(cpt["source_kind"])


def test_verl_index_is_unique_across_parts_and_ids_have_one_type(built: tuple[Path, dict[str, Any]]) -> None:
    out, m = built
    assert len(m["exports"]["verl"]) > 1
    index = [
        r["extra_info"]["index"] for f in m["exports"]["verl"] for r in pq.read_table(out / f).to_pylist()
    ]
    assert len(index) == len(set(index)) == m["pools"]["rl"]["samples"]
    for f in m["exports"]["agentworldbench"]:
        kinds = {type(json.loads(line)["id"]) for line in (out / f).read_text().splitlines()}
        assert len(kinds) == 1


def test_llama_factory_dataset_info(built: tuple[Path, dict[str, Any]]) -> None:
    import datasets

    out, m = built
    info = json.loads((out / m["exports"]["llama_factory_dataset_info"][0]).read_text())
    sft = info["worldline_sft"]
    folder = out / "exports" / sft["file_name"]
    files = sorted(folder.iterdir())
    assert files and all(f.suffix == ".jsonl" for f in files)  # LLaMA-Factory wants one file type per folder
    ds = datasets.load_dataset("json", data_files=[str(f) for f in files], split="train")
    tags = sft["tags"]
    for row in ds:
        msgs = row[sft["columns"]["messages"]]
        assert msgs[0][tags["role_tag"]] == tags["system_tag"]
        assert [x[tags["role_tag"]] for x in msgs[1:]] == [tags["user_tag"], tags["assistant_tag"]] * (
            (len(msgs) - 1) // 2
        )
    # the CPT entry names the tokenised dataset with the loss spans' labels (pipelines.trainer_configs),
    # never the raw text, which LLaMA-Factory would train on every token
    assert (out / "exports" / "cpt_text").is_dir()
    assert info["worldline_cpt"]["file_name"] == "llamafactory/cpt_tokenized"


def test_open_dataset_and_stats_accept_pool_folders(built: tuple[Path, dict[str, Any]]) -> None:
    import polars as pl

    import worldline
    from worldline.cli import app

    out, m = built
    sft = (
        worldline.open_dataset(out / "sft")
        .filter(pl.col("turn_index") == 1)
        .select("trajectory_id")
        .collect()
    )
    assert sft.height == m["pools"]["sft"]["trajectories"]
    assert worldline.open_dataset(out / "eval").collect().height == m["pools"]["eval"]["samples"]
    with pytest.raises(ValueError, match="several pools"):
        worldline.open_dataset(out)
    result = CliRunner().invoke(app, ["stats", str(out / "rl"), "--json"])
    assert result.exit_code == 0, result.output
    stats = json.loads(result.output)
    assert stats["pool"] == "rl" and stats["total"]["samples"] == m["pools"]["rl"]["samples"]
    assert stats["total"]["tokens"] == m["pools"]["rl"]["tokens"]["sum"]
