"""The cleaner reads an AgentWorldBench sample as `worldline import agentworldbench` does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from curation_agents.agentworldbench_import import import_agentworldbench
from curation_agents.formats import agentworldbench as cleaner_awb
from curation_agents.model import StageFailure
from schemas import Domain, Trajectory, iter_trajectories, mcp_observation
from schemas.agentworldbench import domain_of, parse_system_str, read_samples
from schemas.domains import domain_spec
from schemas.reasons import ReasonCode
from schemas.worldmodel import parse_action_prompt, parse_observation
from worldline.samples import sample_files


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Trajectory]:
    """The bundled samples through the importer, by domain."""
    out = tmp_path_factory.mktemp("awb") / "ds"
    # Without personal-data redaction: the samples' fictional addresses stay, so both readers agree.
    import_agentworldbench(sample_files(), out, pii=frozenset())
    return {t.domain.value: t for t in iter_trajectories(out)}


@pytest.mark.parametrize("path", sample_files(), ids=lambda p: p.name)
def test_cleaner_and_importer_read_the_last_turn_line_alike(
    path: Path, imported: dict[str, Trajectory]
) -> None:
    last = _lines(path)[-1]
    parsed = cleaner_awb.parse(last)
    traj = imported[parsed["domain"] or ""]
    assert [(t["action"], t["action_kind"], t["tool_name"], t["observation"]) for t in parsed["turns"]] == [
        (t.action.text, t.action.kind.value, t.action.tool_name, t.observation.text) for t in traj.turns
    ]
    assert parsed["task"] == traj.task
    assert parsed["tools"] == [tool.to_json() for tool in traj.action_space.tools]
    assert (parsed["metadata"]["initial_state"] or None) == traj.initial_state
    assert parsed["system_prompt"] == last["system_str"]

    # And both agree with the format's own parts, read independently of either.
    sample = next(s for s in read_samples(path) if s.turn_idx == s.total_turns)
    domain = domain_of(sample)
    parts = parse_system_str(domain, sample.system_str)
    assert parts is not None and parts.task == parsed["task"]
    assert parsed["tools"] == [tool.to_json() for tool in parts.action_space.tools]
    for raw, prompt, response in zip(parsed["turns"], sample.prompt, sample.response, strict=True):
        action = parse_action_prompt(prompt)
        assert action is not None and raw["action"] == action.action
        assert raw["action_kind"] == domain_spec(domain).action_kind.value
        observed = parse_observation(response)
        if domain is Domain.MCP and observed is not None:  # MCP results take the one MCP convention
            observed = (mcp_observation.normalise(observed) or (observed,))[0]
        assert raw["observation"] == observed


@pytest.mark.parametrize("path", sample_files(), ids=lambda p: p.name)
def test_earlier_turn_lines_are_superseded_prefixes(path: Path) -> None:
    for line in _lines(path)[:-1]:
        with pytest.raises(StageFailure) as info:
            cleaner_awb.parse(line)
        assert info.value.reason is ReasonCode.SUPERSEDED_PREFIX


def test_a_malformed_sample_is_a_parse_error_naming_the_field() -> None:
    last = _lines(sample_files()[0])[-1]
    with pytest.raises(StageFailure) as info:
        cleaner_awb.parse({**last, "response": last["response"][:-1]})
    assert info.value.reason is ReasonCode.PARSE_ERROR and "'response'" in info.value.detail
    with pytest.raises(StageFailure) as info:
        cleaner_awb.parse({**last, "task": "spreadsheet"})
    assert info.value.reason is ReasonCode.PARSE_ERROR and "'task'" in info.value.detail
