"""Grounding verdicts in a pools build: with `grounding:` set, the trajectories a real replay
disagrees with leave every pool (`ungrounded`, with the first disagreeing turn and the cause), the
others go on; the cards count the verdicts; a table that cannot be read stops the build before it
starts; and the table `worldline replay --ground` writes has the explicit schema the build reads."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pipelines.config import ConfigError, PoolsConfig
from pipelines.job import BuildInputsError, plan_build, verify_built_pools
from schemas.grounding import GROUNDING_NAME, GROUNDING_SCHEMA, GroundingError, read_verdicts, write_grounding
from schemas.shards import write_trajectories
from schemas.trajectory import SourceKind
from tests.helpers.pools_data import build_pools_from, pooled_ids, terminal

TRAJS = [terminal(f"p{i}", f"g-p{i}", SourceKind.PUBLIC, 100 + i) for i in range(6)]


def rows(tid: str, verdict: str, turns: list[tuple[int, float]], cause: str | None = None) -> list[dict]:
    first = next((t for t, a in turns if a < 1.0), None) if verdict == "disagrees" else None
    return [
        {
            "trajectory_id": tid,
            "turn": t,
            "agreement": a,
            "verdict": verdict,
            "cause": cause,
            "first_disagreeing_turn": first,
        }
        for t, a in turns or [(-1, None)]  # type: ignore[list-item]
    ]


def grounding_table(path: Path) -> Path:
    write_grounding(
        path / GROUNDING_NAME,
        rows("p0", "grounded", [(0, 1.0), (1, 1.0)])
        + rows("p1", "disagrees", [(0, 1.0), (1, 0.42)], "observation differs")
        + rows("p2", "not_groundable", [], "no matching task")
        + rows("p3", "disagrees", [(0, 0.0)], "an error appeared"),
    )
    return path


def build(tmp_path: Path, yaml_text: str) -> Path:
    return build_pools_from(tmp_path, TRAJS, "assignment:\n  by_kind: {public: sft}\n" + yaml_text)


def test_disagreeing_traces_leave_the_pools_and_the_cards_count_the_verdicts(tmp_path: Path) -> None:
    table = grounding_table(tmp_path / "grounding")
    out = build(tmp_path, f"grounding: {table}\n")
    assert pooled_ids(out, "sft") == {"p0", "p2", "p4", "p5"}
    removed = {r["record_id"]: r for r in pq.read_table(out / "removed").to_pylist()}
    assert {k for k, r in removed.items() if r["reason"] == "ungrounded"} == {"p1", "p3"}
    assert removed["p1"]["stage"] == "grounding"
    assert "at turn 1 (observation differs)" in removed["p1"]["detail"]
    assert "at turn 0 (an error appeared)" in removed["p3"]["detail"]
    card = json.loads((out / "sft" / "card.json").read_text())
    assert card["grounding"] == {"grounded": 1, "disagrees": 2, "not_groundable": 1, "unlisted": 2}
    assert card["filters_removed"]["dropped.ungrounded"] == 2
    readme = (out / "sft" / "README.md").read_text()
    assert "| disagrees | 2 |" in readme and "| unlisted | 2 |" in readme
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["counts"]["reconciles"]
    assert not list(verify_built_pools(str(out), recount_tokens=False))


def test_without_a_table_nothing_changes(tmp_path: Path) -> None:
    out = build(tmp_path, "")
    assert pooled_ids(out, "sft") == {t.id for t in TRAJS}
    card = json.loads((out / "sft" / "card.json").read_text())
    assert card["grounding"] is None and not any(
        k.startswith("dropped.ungrounded") for k in card["filters_removed"]
    )
    assert "No grounding table was given" in (out / "sft" / "README.md").read_text()


def test_a_missing_or_foreign_table_stops_the_build_before_it_starts(tmp_path: Path) -> None:
    write_trajectories(tmp_path / "in", TRAJS)
    missing = PoolsConfig.from_dict({"grounding": str(tmp_path / "nowhere.parquet")})
    with pytest.raises(BuildInputsError, match="no grounding table"):
        plan_build(missing, [str(tmp_path / "in")], str(tmp_path / "out"))
    foreign = tmp_path / "foreign.parquet"
    write_trajectories(tmp_path / "other", TRAJS[:1])
    foreign.write_bytes(next((tmp_path / "other").rglob("*.parquet")).read_bytes())
    with pytest.raises(BuildInputsError, match="not a grounding table"):
        plan_build(
            PoolsConfig.from_dict({"grounding": str(foreign)}), [str(tmp_path / "in")], str(tmp_path / "o")
        )
    with pytest.raises(ConfigError, match="grounding"):
        PoolsConfig.from_dict({"grounding": 3}).validate()
    bad = tmp_path / "bad"
    write_grounding(bad / GROUNDING_NAME, [{**rows("x", "grounded", [(0, 1.0)])[0], "verdict": "maybe"}])
    with pytest.raises(GroundingError, match="verdict 'maybe'"):
        read_verdicts(bad)


def test_the_table_has_the_explicit_schema_and_old_tables_still_read(tmp_path: Path) -> None:
    table = grounding_table(tmp_path)
    file = pq.ParquetFile(table / GROUNDING_NAME)
    assert file.schema_arrow.equals(GROUNDING_SCHEMA, check_metadata=False)
    assert file.metadata.row_group(0).column(0).compression == "ZSTD"
    # A table written before first_disagreeing_turn existed: the first turn below full agreement.
    old = pq.read_table(table / GROUNDING_NAME).drop_columns(["first_disagreeing_turn"])
    pq.write_table(old, tmp_path / "old.parquet")
    verdicts = read_verdicts(tmp_path / "old.parquet")
    assert verdicts["p1"].first_disagreeing_turn == 1 and verdicts["p3"].first_disagreeing_turn == 0
    assert verdicts["p0"].verdict == "grounded" and verdicts["p2"].cause == "no matching task"
