"""Replay span labels in a pools build: the setting, the CPT runtime weight, the deterministic share
in `pools verify` and the cards."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.config import ConfigError, PoolsConfig
from pipelines.finalize import write_card
from pipelines.lossmask import runtime_weighted_spans
from pipelines.render import Lineage, cpt_row, rl_row
from pipelines.span_shares import deterministic_shares
from pipelines.span_table import span_label_sources
from pipelines.verify import deterministic_share_lines
from schemas.span_labels import SpanLabel, TurnLabels, label_observation, write_span_labels
from schemas.templates import load_template_set
from schemas.trajectory import Action, ActionKind, Domain, Observation, Source, SourceKind, Trajectory, Turn
from worldline.tokenizer import get_token_counter

# `echo $$; cat notes.txt`: 5 runtime characters (the PID), 21 deterministic ones.
ORIGINAL = "48213\nalpha beta\ngamma 42\n"
REPLAY = "51877\nalpha beta\ngamma 42\n"
LINEAGE = Lineage("g", "inhouse", "c")


def turn(tid: str, turn: int, original: str = ORIGINAL, replay: str = REPLAY) -> TurnLabels:
    return TurnLabels(tid, turn, tuple(label_observation(original, [replay])), 1, False, None)


def test_the_settings_have_defaults_and_are_validated(tmp_path: Path) -> None:
    cfg = PoolsConfig()
    assert cfg.loss_mask.runtime_span_weight == 0.25 and cfg.span_labels is None
    path = tmp_path / "pools.yaml"
    path.write_text("span_labels: /data/labels.parquet\nloss_mask:\n  runtime_span_weight: 0\n")
    loaded = PoolsConfig.load(path)
    assert loaded.span_labels == "/data/labels.parquet" and loaded.loss_mask.runtime_span_weight == 0
    for bad in ("1.5", "-0.1", "heavy", "true"):
        path.write_text(f"loss_mask:\n  runtime_span_weight: {bad}\n")
        with pytest.raises(ConfigError, match="runtime_span_weight"):
            PoolsConfig.load(path)
    path.write_text("span_labels: 3\n")
    with pytest.raises(ConfigError, match="span_labels"):
        PoolsConfig.load(path)


def test_runtime_spans_get_the_runtime_weight_in_the_cpt_mask() -> None:
    labels = turn("t", 0)
    assert [(s.start, s.end, s.label) for s in labels.spans][0] == (0, 5, SpanLabel.RUNTIME)
    span = {"start": 90, "end": 200, "weight": 1.0, "turn_index": 1, "category": "retrieval", "share": 1.0}
    pieces = runtime_weighted_spans(span, 100, labels, 0.25)  # the observation starts at character 100
    assert [(p["start"], p["end"], p["weight"]) for p in pieces] == [
        (90, 100, 1.0),
        (100, 105, 0.25),
        (105, 200, 1.0),
    ]
    assert all(p["category"] == "retrieval" and p["turn_index"] == 1 for p in pieces)
    assert runtime_weighted_spans(span, 100, None, 0.25) == [span]  # no labels: unchanged
    assert runtime_weighted_spans(span, 100, labels, 1.0) == [span]
    tail = {**span, "start": 103, "end": 200}  # a kept tail that starts inside the PID
    assert [(p["start"], p["end"], p["weight"]) for p in runtime_weighted_spans(tail, 100, labels, 0.0)] == [
        (103, 105, 0.0),
        (105, 200, 1.0),
    ]


def test_deterministic_share_per_pool_and_domain() -> None:
    labels = {
        ("a", 0): turn("a", 0),  # 21 of 26 characters deterministic
        ("a", 1): turn("a", 1, "same\n", "same\n"),  # 5 of 5
        ("b", 0): turn("b", 0, "x 1\n", "y 1\n"),  # 3 of 4 ("x" differs, matches no runtime pattern)
    }
    members = [
        ("cpt", "terminal", "a"),
        ("sft", "terminal", "a"),
        ("sft", "terminal", "a"),
        ("sft", "swe", "b"),
    ]
    shares = deterministic_shares(members + [("rl", "mcp", "unlabelled")], labels)
    assert shares is not None
    assert shares["cpt"]["terminal"].share == pytest.approx(26 / 31)
    assert shares["sft"]["terminal"].trajectories == 1 and shares["sft"]["terminal"].labelled_turns == 2
    assert shares["sft"]["swe"].share == pytest.approx(3 / 4)
    assert shares["rl"]["mcp"].share is None and shares["rl"]["mcp"].labelled_turns == 0
    assert deterministic_shares(members, None) is None


def _summary() -> dict[str, Any]:
    return {
        "samples": 2,
        "trajectories": 1,
        "samples_per_domain": {"terminal": 2},
        "samples_per_licence": {"mit": 2},
        "samples_per_source_kind": {"collected": 2},
        "tokens": {"count": 0},
    }


def test_the_card_shows_the_share_or_no_labels(tmp_path: Path) -> None:
    cfg = PoolsConfig()
    shares = deterministic_shares([("sft", "terminal", "a")], {("a", 0): turn("a", 0)})
    assert shares is not None
    write_card(str(tmp_path), "sft", _summary(), {}, cfg, [], shares["sft"])
    readme = (tmp_path / "sft" / "README.md").read_text()
    assert "## Deterministic content (replay span labels)" in readme
    assert "| terminal | 1 | 1 | 80.8% |" in readme
    card = json.loads((tmp_path / "sft" / "card.json").read_text())
    assert card["deterministic_share"]["terminal"]["deterministic_share"] == pytest.approx(21 / 26, abs=1e-6)
    write_card(str(tmp_path), "cpt", _summary(), {}, cfg, [])
    assert "no labels" in (tmp_path / "cpt" / "README.md").read_text()
    assert json.loads((tmp_path / "cpt" / "card.json").read_text())["deterministic_share"] == "no labels"


def _built(tmp_path: Path, cfg: PoolsConfig) -> Path:
    """A built OUT reduced to what the share report reads: the manifest and the pools' ids."""
    out, inputs = tmp_path / "out", tmp_path / "shards"
    inputs.mkdir()
    for pool, rows in {"cpt": [("terminal", "a")], "sft": [("swe", "b"), ("swe", "b")]}.items():
        (out / pool).mkdir(parents=True)
        table = pa.table({"domain": [d for d, _ in rows], "trajectory_id": [t for _, t in rows]})
        pq.write_table(table, out / pool / "part-00000.parquet")
    manifest = {"config": cfg.to_json(), "inputs": [{"path": str(inputs)}]}
    (out / "manifest.json").write_text(json.dumps(manifest))
    return out


def test_pools_verify_reports_the_share_from_labels_beside_the_inputs(tmp_path: Path) -> None:
    cfg = PoolsConfig()
    out = _built(tmp_path, cfg)
    assert deterministic_share_lines(out) == ["deterministic share: no labels"]
    write_span_labels(
        tmp_path / "shards" / "span_labels.parquet", [turn("a", 0), turn("b", 0, "x 1\n", "y 1\n")]
    )
    assert span_label_sources(cfg, [str(tmp_path / "shards")]) == [
        str(tmp_path / "shards" / "span_labels.parquet")
    ]
    assert deterministic_share_lines(out) == [
        "deterministic share cpt/terminal: 80.8% of 26 chars (1 turns)",
        "deterministic share sft/swe: 75.0% of 4 chars (1 turns)",
    ]


def test_the_span_labels_setting_wins_over_discovery(tmp_path: Path) -> None:
    labels = tmp_path / "elsewhere" / "labels.parquet"
    write_span_labels(labels, [turn("a", 0, "same\n", "same\n")])
    cfg = PoolsConfig.from_dict({"span_labels": str(labels)})
    out = _built(tmp_path, cfg)
    write_span_labels(tmp_path / "shards" / "span_labels.parquet", [turn("a", 0)])
    assert (
        deterministic_share_lines(out)[0] == "deterministic share cpt/terminal: 100.0% of 5 chars (1 turns)"
    )
    missing = PoolsConfig.from_dict({"span_labels": str(tmp_path / "nope.parquet")})
    assert "missing" in deterministic_share_lines(out, missing)[0]


def test_pools_verify_flags_a_configured_span_labels_file_that_is_missing(tmp_path: Path) -> None:
    from pipelines.verify import verify_pools

    out = tmp_path / "out"
    out.mkdir()
    manifest = {"config": PoolsConfig().to_json(), "inputs": [], "pools": {}, "stats": {}}
    (out / "manifest.json").write_text(json.dumps(manifest))
    missing = PoolsConfig.from_dict({"span_labels": str(tmp_path / "nope.parquet")})
    checks = {v.check for v in verify_pools(out, missing, recount_tokens=False, check_inputs=False)}
    assert "span_labels" in checks
    assert "span_labels" not in {
        v.check for v in verify_pools(out, PoolsConfig(), recount_tokens=False, check_inputs=False)
    }


def test_an_unreadable_labels_file_reports_no_labels(tmp_path: Path) -> None:
    bad = tmp_path / "bad.parquet"
    bad.write_text("not parquet")
    cfg = PoolsConfig.from_dict({"span_labels": str(bad)})
    out = _built(tmp_path, cfg)
    (line,) = deterministic_share_lines(out)
    assert line.startswith("deterministic share: no labels (") and "bad.parquet" in line


def _labelled_trajectory() -> Trajectory:
    action = Action(ActionKind.COMMAND, "echo $$; cat notes.txt")
    first = Turn(Action(ActionKind.COMMAND, "cat notes.txt"), Observation("alpha beta\ngamma 42\n"))
    return Trajectory(
        id="lab",
        domain=Domain.TERMINAL,
        source=Source(kind=SourceKind.INHOUSE, name="s"),
        task="x",
        turns=[first, Turn(action, Observation(ORIGINAL))],
    )


def test_the_renderer_uses_the_labels_for_cpt_weights_and_rl_checks() -> None:
    traj = _labelled_trajectory()
    cfg, templates, counter = PoolsConfig(), load_template_set(None), get_token_counter(None)
    cfg.loss_mask.keep = "head"  # the whole observation is in the kept span
    table = {("lab", 1): turn("lab", 1)}
    plain = cpt_row(traj, LINEAGE, cfg, templates, counter)
    row = cpt_row(traj, LINEAGE, cfg, templates, counter, table)
    assert row["text"] == plain["text"]
    pid_at = row["text"].rindex(ORIGINAL)
    weighted = [(s["start"], s["end"]) for s in row["loss_spans"] if s["weight"] == 0.25]
    assert weighted == [(pid_at, pid_at + 5)]  # exactly the PID of the labelled turn
    assert all(s["weight"] == 1.0 for s in plain["loss_spans"])
    covered = sorted((s["start"], s["end"]) for s in row["loss_spans"])
    assert covered[0][0] == min(s["start"] for s in plain["loss_spans"])
    assert sum(e - s for s, e in covered) == sum(s["end"] - s["start"] for s in plain["loss_spans"])
    stale = {("lab", 1): turn("lab", 1, "another text\n", "another text\n")}  # labels of another text
    assert cpt_row(traj, LINEAGE, cfg, templates, counter, stale)["loss_spans"] == plain["loss_spans"]

    one_turn = Trajectory(id="lab", domain=traj.domain, source=traj.source, task="x", turns=[traj.turns[1]])
    rl, _ = rl_row(one_turn, LINEAGE, cfg, templates, counter, {("lab", 0): turn("lab", 0)})
    plain_rl, _ = rl_row(one_turn, LINEAGE, cfg, templates, counter)
    assert rl is not None and plain_rl is not None
    checks = json.loads(rl["reward_spec"])["rule"]["checks"]
    assert [c["kind"] for c in checks] == ["span_match"]
    assert json.loads(plain_rl["reward_spec"])["rule"]["checks"] != checks
