"""Turns carrying harness facts (schemas.turn_facts: timed out, truncated, out of action space, ...)
under `filters.harness_facts`: masked turns stay in the history and the CPT text but are never in the
loss (no CPT span, no SFT target, never the RL turn); drop_turn removes the turn, drop the trajectory;
every action is counted in the build's stats."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from pipelines.build import resolve_inputs, run_build
from pipelines.config import ConfigError, PoolsConfig
from pipelines.filters import apply_filters
from pipelines.lossmask import MASKED
from pipelines.render import Lineage, cpt_row, rl_row, sft_rows
from schemas.reasons import ReasonCode
from schemas.shards import write_trajectories
from schemas.templates import load_template_set
from schemas.trajectory import SourceKind, Trajectory
from schemas.turn_facts import OUT_OF_ACTION_SPACE, TIMED_OUT, TRUNCATED, record
from tests.helpers.pools_data import terminal
from worldline.tokenizer import get_token_counter

LINEAGE = Lineage("g", "inhouse", "c")


def with_facts(tid: str, seed: int, facts: dict[int, str], turns: int = 5) -> Trajectory:
    """A terminal trajectory whose turn i (1-based) carries the harness fact facts[i]."""
    traj = terminal(tid, f"g-{tid}", SourceKind.INHOUSE, seed, turns=turns)
    details: dict[str, dict[str, Any]] = {
        TIMED_OUT: {"after_s": 30.0},
        TRUNCATED: {"bytes_total": 1 << 20, "bytes_kept": 65536},
        OUT_OF_ACTION_SPACE: {"tool": "delete_repo"},
    }
    for i, fact in facts.items():
        record(traj.turns[i - 1].metadata, fact, details[fact])
    return traj


def config(yaml_text: str, tmp_path: Path) -> PoolsConfig:
    path = tmp_path / "pools.yaml"
    path.write_text(yaml_text)
    return PoolsConfig.load(path)


def test_default_masks_harness_cut_turns_out_of_every_loss() -> None:
    cfg = PoolsConfig()
    traj = with_facts("t", 1, {2: TIMED_OUT, 4: TRUNCATED})
    outcome = apply_filters(traj, cfg.filters)
    assert outcome.trajectory is not None and len(outcome.trajectory.turns) == 5  # nothing removed
    assert outcome.masked_turns == {TIMED_OUT: 1, TRUNCATED: 1}
    templates, counter = load_template_set(None), get_token_counter(None)
    cpt = cpt_row(outcome.trajectory, LINEAGE, cfg, templates, counter)
    assert cpt["turn_categories"][1] == MASKED and cpt["turn_categories"][3] == MASKED
    assert {s["turn_index"] for s in cpt["loss_spans"]} == {1, 3, 5}  # masked turns: context only
    assert traj.turns[1].observation.text in cpt["text"]
    rows, skipped = sft_rows(outcome.trajectory, LINEAGE, cfg, templates, counter)
    assert [r["turn_index"] for r in rows] == [1, 3, 5] and skipped == [2, 4]
    later = json.dumps(rows[-1]["messages"])
    assert json.dumps(traj.turns[1].observation.text)[1:-1] in later  # still in the history
    for i in range(40):  # never the RL turn, whatever the id hashes to
        rl, _ = rl_row(
            with_facts(f"rl-{i}", i, {1: TIMED_OUT, 3: TIMED_OUT}, 3), LINEAGE, cfg, templates, counter
        )
        assert rl is not None and rl["turn_index"] == 2


def test_configured_actions_keep_drop_turn_and_drop(tmp_path: Path) -> None:
    cfg = config(
        "filters:\n  harness_facts: {timed_out: drop_turn, truncated: keep, out_of_action_space: drop}\n",
        tmp_path,
    )
    kept = apply_filters(with_facts("a", 1, {2: TIMED_OUT, 3: TRUNCATED}), cfg.filters)
    assert kept.trajectory is not None and len(kept.trajectory.turns) == 4
    assert kept.removed_turns == {ReasonCode.HARNESS_FACT_TURNS: 1} and not kept.masked_turns
    dropped = apply_filters(with_facts("b", 2, {3: OUT_OF_ACTION_SPACE}), cfg.filters)
    assert dropped.drop_reason == ReasonCode.HARNESS_FACT
    assert "turn 3 out_of_action_space" in dropped.detail
    # Facts the file does not name keep their default (mask).
    assert cfg.filters.harness_action("no_prompt") == "mask"
    everything = apply_filters(
        with_facts("c", 3, {1: TRUNCATED, 2: TRUNCATED}, turns=2), PoolsConfig().filters
    )
    assert everything.drop_reason == ReasonCode.HARNESS_FACT and "every turn is masked" in everything.detail


@pytest.mark.parametrize(
    ("yaml_text", "message"),
    [
        (
            "filters:\n  harness_facts: {timd_out: mask}\n",
            "filters.harness_facts.timd_out: unknown harness fact",
        ),
        (
            "filters:\n  harness_facts: {timed_out: hide}\n",
            "filters.harness_facts.timed_out: 'hide' is not one of",
        ),
    ],
)
def test_bad_harness_settings_name_the_key(yaml_text: str, message: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=message):
        config(yaml_text, tmp_path)


def test_a_build_counts_masked_dropped_and_removed_turns(tmp_path: Path) -> None:
    trajectories = [
        with_facts("masked", 1, {2: TIMED_OUT}),
        with_facts("cut", 2, {3: TRUNCATED}),
        with_facts("outside", 3, {1: OUT_OF_ACTION_SPACE}),
        with_facts("plain", 4, {}),
    ]
    write_trajectories(tmp_path / "in", trajectories)
    cfg = config(
        "filters:\n  harness_facts: {truncated: drop_turn, out_of_action_space: drop}\n"
        "assignment:\n  by_kind: {inhouse: sft}\n",
        tmp_path,
    )
    out = tmp_path / "out"
    run_build(resolve_inputs([str(tmp_path / "in")], [], [], cfg), str(out), cfg, [])
    stats = json.loads((out / "_build" / "stats.json").read_text())
    assert stats["turns_masked.timed_out"] == 1
    assert stats["turns_removed.harness_fact_turns"] == 1
    assert stats["dropped.harness_fact"] == 1
    assert stats["sft.harness_masked_targets_skipped"] == 1
    removed = pq.read_table(out / "removed").to_pylist()
    assert [(r["record_id"], r["reason"]) for r in removed] == [("outside", "harness_fact")]
    sft = [r for f in sorted((out / "sft").glob("part-*.parquet")) for r in pq.read_table(f).to_pylist()]
    targets = {(r["trajectory_id"], r["turn_index"]) for r in sft}
    assert ("masked", 2) not in targets and ("masked", 3) in targets
    assert (
        len([t for t in targets if t[0] == "cut"]) == 4 and len([t for t in targets if t[0] == "plain"]) == 5
    )
