"""The MCP observation convention (schemas.mcp_observation) as a class: every way a result is written (on
the wire, validated by the SDK, in a whole-result sample, with other spacing) gives the one observation
text, and the AgentWorldBench import reads samples in the evaluator's form and in the older whole-result
form into it while its export gives the samples back byte for byte."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from mcp import types

from schemas import Domain, mcp_observation
from schemas.agentworldbench import AgentWorldBenchSample, sample_to_trajectory, trajectory_to_samples
from worldline.samples import sample_files

text = st.text(st.characters(codec="utf-8"), max_size=20)
b64 = st.text("ABCDEFGH+/=", max_size=16)
block = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, text),
    st.builds(
        lambda d, m: {"type": "image", "data": d, "mimeType": m},
        b64,
        st.sampled_from(["image/png", "image/gif"]),
    ),
    st.builds(lambda d: {"type": "audio", "data": d, "mimeType": "audio/wav"}, b64),
    st.builds(
        lambda u, t: {"type": "resource", "resource": {"uri": u, "mimeType": "text/plain", "text": t}},
        st.sampled_from(["file:///a.txt", "memo://n"]),
        text,
    ),
    st.builds(lambda b: {"type": "resource", "resource": {"uri": "file:///b.bin", "blob": b}}, b64),
    st.builds(lambda n: {"type": "resource_link", "uri": "file:///x", "name": n}, text),
)
result = st.builds(
    lambda blocks, err, structured: {
        "content": blocks,
        **({"isError": err} if err is not None else {}),
        **({"structuredContent": structured} if structured is not None else {}),
    },
    st.lists(block, max_size=4),
    st.none() | st.booleans(),
    st.none() | st.dictionaries(st.sampled_from(["a", "b"]), st.integers()),
)


@given(result)
def test_the_wire_reply_and_the_sdks_validated_result_give_the_same_observation(wire: dict[str, Any]) -> None:
    validated = types.CallToolResult.model_validate(wire).model_dump(
        by_alias=True, mode="json", exclude_none=True
    )
    assert mcp_observation.render_result(validated) == mcp_observation.render_result(wire)


@given(result)
def test_every_form_of_a_result_normalises_to_the_one_observation(wire: dict[str, Any]) -> None:
    observed, is_error, structured = mcp_observation.render_result(wire)
    value = json.loads(observed)
    blocks = value if isinstance(value, list) else [value]
    assert len(blocks) == len(wire["content"]) or (not wire["content"] and value == [])
    assert "base64" not in observed
    # The convention is a fixed point; a whole result and spaced JSON come back to it.
    for written in (
        observed,
        json.dumps(wire),
        json.dumps(wire, indent=2),
        json.dumps(wire["content"][0] if len(wire["content"]) == 1 else wire["content"], ensure_ascii=True),
    ):
        normalised = mcp_observation.normalise(written)
        if written.startswith("[]") or (written == observed and not wire["content"]):
            continue
        assert normalised is not None and normalised[0] == observed, written
    whole = mcp_observation.normalise(json.dumps(wire))
    assert whole is not None and whole[2] == structured
    assert whole[1] == (wire["isError"] if "isError" in wire else None)
    assert is_error is (wire.get("isError") is True)


def _sample(responses: list[str]) -> AgentWorldBenchSample:
    prompts = [
        f'### Turn {i}\n**Action:**\n```json\n{{"name": "read", "arguments": {{"n": {i}}}}}\n```'
        for i in range(1, len(responses) + 1)
    ]
    return AgentWorldBenchSample.from_json(
        {
            "task": "mcp",
            "id": 7,
            "prompt": prompts,
            "response": [f"**Environment Observation:**\n{r}" for r in responses],
            "current_prompt": prompts[-1],
            "system_str": "# Role and Objective\n\nYou are a **Tool World Model**.",
            "turn_idx": len(responses),
            "total_turns": len(responses),
        }
    )


def test_evaluator_and_whole_result_samples_import_into_the_convention_and_export_back_unchanged() -> None:
    responses = [
        # The evaluator's form (Toolathlon's runs of the OpenAI Agents SDK): one block, or a list of them.
        '{"type":"text","text":"PDF total pages: 14","annotations":null}',
        '[{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]',
        # The whole-result form earlier exports wrote.
        '{"content": [{"type": "text", "text": "Error: no such table: loan"}], "isError": true}',
        "plain text from a framework",
    ]
    sample = _sample(responses)
    trajectory = sample_to_trajectory(sample, domain=Domain.MCP)
    observed = [t.observation for t in trajectory.turns]
    assert [o.text for o in observed] == [
        '{"type":"text","text":"PDF total pages: 14","annotations":null}',
        '[{"type":"text","text":"a"},{"type":"text","text":"b"}]',
        '{"type":"text","text":"Error: no such table: loan"}',
        "plain text from a framework",
    ]
    assert observed[2].is_error is True
    (exported,) = trajectory_to_samples(trajectory, [len(responses)])
    assert exported.to_json_line() == sample.to_json_line()


def test_the_bundled_mcp_sample_imports_into_the_convention() -> None:
    path = next(p for p in sample_files() if p.name == "mcp_test.jsonl")
    last = AgentWorldBenchSample.from_json(json.loads(path.read_text("utf-8").splitlines()[-1]))
    trajectory = sample_to_trajectory(last, domain=Domain.MCP)
    for turn in trajectory.turns:
        value = json.loads(turn.observation.text)
        assert isinstance(value, dict) and value["type"] == "text"
    assert [t.observation.is_error for t in trajectory.turns] == [False, False, True]
