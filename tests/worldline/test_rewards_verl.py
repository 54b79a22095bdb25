"""The verl reward on rows of our RL export, called the way verl calls it (by file path and name)."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.config import PoolsConfig
from pipelines.exports import VERL_SCHEMA, verl_row
from pipelines.render import Lineage, rl_row
from schemas.templates import load_template_set
from schemas.trajectory import (
    Action,
    ActionKind,
    ActionSpace,
    Domain,
    Observation,
    ObservationFormat,
    Source,
    SourceKind,
    ToolSpec,
    Trajectory,
    Turn,
)
from tests.helpers.fakellm import FakeLLMServer, FakeReply
from tests.helpers.judge_data import comparing_judge, verdict
from tests.helpers.pools_data import prose, web
from worldline.judge import JudgeConfig
from worldline.tokenizer import get_token_counter

REWARD_FILE = Path(__file__).resolve().parents[2] / "worldline" / "rewards" / "verl.py"


def terminal_cat(tid: str) -> Trajectory:
    turns = [
        Turn(
            Action(ActionKind.COMMAND, f"cat notes{i}.txt"), Observation(prose(i), ObservationFormat.TERMINAL)
        )
        for i in range(3)
    ]
    return Trajectory(
        id=tid,
        domain=Domain.TERMINAL,
        source=Source(kind=SourceKind.INHOUSE, name="g"),
        task="read notes",
        turns=turns,
    )


def mcp_json(tid: str) -> Trajectory:
    tools = [ToolSpec("read_file", "read a file", {"type": "object"})]
    turns = [
        Turn(
            Action(
                ActionKind.TOOL_CALL,
                json.dumps({"name": "read_file", "arguments": {"path": f"/f{i}"}}),
                "read_file",
            ),
            Observation(json.dumps({"content": [{"type": "text", "text": prose(i, 5)}], "isError": False})),
        )
        for i in range(3)
    ]
    return Trajectory(
        id=tid,
        domain=Domain.MCP,
        source=Source(kind=SourceKind.INHOUSE, name="g"),
        task="read files",
        action_space=ActionSpace(tools=tools),
        turns=turns,
    )


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """RL rows rendered and exported exactly as a pool build does, read back from the verl parquet."""
    cfg = PoolsConfig.load(None)
    templates, counter = load_template_set(cfg.templates_dir), get_token_counter(cfg.tokenizer)
    trajectories = [terminal_cat("term-1"), mcp_json("mcp-1"), web("web-1", "g", SourceKind.INHOUSE, 3)]
    lineage = Lineage(source_id="g", source_kind="inhouse", dedup_cluster="c")
    rows = []
    for index, traj in enumerate(trajectories):
        row, _ = rl_row(traj, lineage, cfg, templates, counter)
        assert row is not None
        rows.append(verl_row(row, index))
    path = tmp_path_factory.mktemp("verl") / "rl-part-00000.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=VERL_SCHEMA), path)
    return pq.read_table(path).to_pylist()


@pytest.fixture
def reward(fake_llm: FakeLLMServer) -> Iterator[ModuleType]:
    """The reward module loaded by file path, as verl's custom_reward_function.path does."""
    spec = importlib.util.spec_from_file_location("custom_module", REWARD_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.configure(fake_llm.config(), JudgeConfig())
    fake_llm.set_default(comparing_judge)
    yield module
    module.configure(None, None)


def rollout(observation: str) -> str:
    return f"<think>The file was read before, so...</think>\n<predicted_observation>\n{observation}\n</predicted_observation>"


def call(module: ModuleType, row: dict[str, Any], solution: str) -> dict[str, Any]:
    fn = module.compute_score
    result = fn(
        data_source=row["data_source"],
        solution_str=solution,
        ground_truth=row["reward_model"]["ground_truth"],
        extra_info=row["extra_info"],
    )
    assert isinstance(result, dict)
    return result


def test_export_rows_carry_the_rule_checks(exported: list[dict[str, Any]]) -> None:
    term, mcp, webrow = exported
    assert term["data_source"] == "worldline/terminal" and term["reward_model"]["style"] == "rule"
    spec = json.loads(term["extra_info"]["reward_spec"])
    assert [c["kind"] for c in spec["rule"]["checks"]] == ["exact_match"]
    assert spec["rule"]["checks"][0]["expected"] == term["reward_model"]["ground_truth"]
    assert [c["kind"] for c in json.loads(mcp["extra_info"]["reward_spec"])["rule"]["checks"]] == [
        "json_schema",
        "exact_match",
    ]
    assert json.loads(webrow["extra_info"]["reward_spec"])["rule"] is None


def test_correct_prediction_gets_the_full_reward(reward: ModuleType, exported: list[dict[str, Any]]) -> None:
    for row in exported:
        result = call(reward, row, rollout(row["reward_model"]["ground_truth"]))
        assert result["rubric"] == 25.0 and result["judge_failed"] == 0.0 and result["no_prediction"] == 0.0
        assert result["score"] == pytest.approx(25.0)
    term, _, webrow = exported
    assert call(reward, term, rollout(term["reward_model"]["ground_truth"]))["rule_weight"] == pytest.approx(
        0.1
    )
    assert call(reward, webrow, rollout("x"))["has_rule"] == 0.0


def test_wrong_prediction_mixes_rubric_and_rule_nine_to_one(
    reward: ModuleType, exported: list[dict[str, Any]]
) -> None:
    term, _, webrow = exported
    wrong = call(reward, term, rollout("something else entirely"))
    assert wrong["rubric"] == 10.0 and wrong["rule"] == 0.0
    assert wrong["score"] == pytest.approx(0.9 * 10.0)
    near = call(reward, term, rollout(term["reward_model"]["ground_truth"] + "\nextra line"))
    assert near["rubric"] == 20.0 and near["rule"] == 0.0 and near["score"] == pytest.approx(18.0)
    no_rule = call(reward, webrow, rollout("other page"))
    assert no_rule["score"] == pytest.approx(10.0) and no_rule["rubric_weight"] == 1.0


def test_no_prediction_block_scores_zero_without_a_judge_call(
    reward: ModuleType, exported: list[dict[str, Any]], fake_llm: FakeLLMServer
) -> None:
    term = exported[0]
    for solution in [
        "plain text",
        "<think>" + term["reward_model"]["ground_truth"],
        "<predicted_observation>cut",
    ]:
        result = call(reward, term, solution)
        assert result["score"] == 0.0 and result["no_prediction"] == 1.0
    assert fake_llm.requests == []


def test_unparsable_judge_scores_zero(
    reward: ModuleType, exported: list[dict[str, Any]], fake_llm: FakeLLMServer
) -> None:
    fake_llm.set_default(lambda _request: FakeReply(text=verdict(6)))
    term = exported[0]
    result = call(reward, term, rollout(term["reward_model"]["ground_truth"]))
    assert result["score"] == 0.0 and result["judge_failed"] == 1.0 and result["rule"] == 1.0
    assert len(fake_llm.requests) == 3  # three judge attempts, then a failure


def test_batch_function_matches_the_row_function(reward: ModuleType, exported: list[dict[str, Any]]) -> None:
    solutions = [rollout(r["reward_model"]["ground_truth"]) for r in exported] + [
        "no block",
        rollout("wrong"),
    ]
    rows = [*exported, exported[0], exported[0]]
    batch = reward.compute_score_batch(
        data_sources=[r["data_source"] for r in rows],
        solution_strs=solutions,
        ground_truths=[r["reward_model"]["ground_truth"] for r in rows],
        extra_infos=[r["extra_info"] for r in rows],
    )
    singles = [call(reward, r, s) for r, s in zip(rows, solutions, strict=True)]
    assert batch == singles
    assert [b["score"] for b in batch] == pytest.approx([25.0, 25.0, 25.0, 0.0, 9.0])
    assert set(batch[0]) == set(batch[3])  # the same keys on every row, as verl's logger needs


def test_async_function_for_the_reward_loop(reward: ModuleType, exported: list[dict[str, Any]]) -> None:
    import asyncio

    async def main() -> list[dict[str, Any]]:
        calls = [
            reward.compute_score_async(
                data_source=row["data_source"],
                solution_str=rollout(row["reward_model"]["ground_truth"]),
                ground_truth=row["reward_model"]["ground_truth"],
                extra_info=row["extra_info"],
            )
            for row in exported
        ]
        return list(await asyncio.gather(*calls))

    assert [r["score"] for r in asyncio.run(main())] == pytest.approx([25.0, 25.0, 25.0])


def test_history_reaches_the_judge_from_the_exported_extra_info(
    reward: ModuleType, exported: list[dict[str, Any]], fake_llm: FakeLLMServer
) -> None:
    term = max(exported, key=lambda r: r["extra_info"]["turn_index"])
    turn = term["extra_info"]["turn_index"]
    assert turn > 1, "the export fixture needs a row with history"
    bare = {k: v for k, v in term["extra_info"].items() if k != "messages"}
    as_prompt = {**bare, "prompt": tuple(term["prompt"])}  # loaders differ in sequence types
    call(reward, term, rollout("x"))
    call(reward, {**term, "extra_info": as_prompt}, rollout("y"))
    call(reward, {**term, "extra_info": bare}, rollout("z"))
    exported_row, with_prompt, without = (r.messages[1]["content"] for r in fake_llm.requests)
    for judged in (exported_row, with_prompt):
        assert f"# Current Turn:\n\n### Turn {turn}" in judged
        assert "# Context (Historical Interactions):" in judged
    # The export carries exactly the conversation verl trains on (the rollouts differ).
    assert exported_row.split("**World Model Output")[0] == with_prompt.split("**World Model Output")[0]
    assert "# Context" not in without


def test_missing_endpoint_names_the_setting(
    monkeypatch: pytest.MonkeyPatch, exported: list[dict[str, Any]]
) -> None:
    from worldline.llm import LLMNotConfigured
    from worldline.rewards import verl

    monkeypatch.delenv("WORLDLINE_LLM_BASE_URL", raising=False)
    verl.configure(None, None)
    with pytest.raises(LLMNotConfigured, match="WORLDLINE_LLM_BASE_URL"):
        call(verl, exported[0], rollout("x"))
