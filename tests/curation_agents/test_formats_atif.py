"""ATIF traces: the domain comes from what the tools do (the registry's signals), and the model's
reasoning is kept. Real files: Harbor's golden trajectories (tests/fixtures/atif/SOURCES.md)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from curation_agents.align import infer_domain
from curation_agents.clean_run import CleanRun
from curation_agents.formats import atif
from curation_agents.model import CleanConfig
from schemas import ActionKind, Domain, iter_trajectories, registered_domains

ATIF = Path(__file__).resolve().parents[1] / "fixtures" / "atif"
OPENHANDS = json.loads((ATIF / "openhands_hello-world.trajectory.json").read_text())
TERMINUS = json.loads((ATIF / "terminus-2_hello-world-invalid-json.trajectory.json").read_text())

# The tools of Playwright's MCP server as a browser agent calls them (Claude Code namespaces MCP
# tools as mcp__<server>__<tool>), with their real argument names.
PLAYWRIGHT_CALLS = [
    ("mcp__playwright__browser_navigate", {"url": "https://books.toscrape.com/"}),
    ("mcp__playwright__browser_snapshot", {}),
    ("mcp__playwright__browser_click", {"element": "Next page link", "ref": "e42"}),
    ("mcp__playwright__browser_type", {"element": "Search field", "ref": "e7", "text": "poetry"}),
]


def _with_calls(base: dict[str, Any], calls: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """BASE (a real ATIF file) with its agent steps replaced by one step per call, each answered."""
    record = copy.deepcopy(base)
    head = [s for s in record["steps"] if s["source"] != "agent"]
    steps = []
    for i, (name, arguments) in enumerate(calls):
        call_id = f"call_{i}"
        steps.append(
            {
                "step_id": len(head) + i + 1,
                "source": "agent",
                "message": f"step {i}",
                "reasoning_content": f"why step {i}",
                "tool_calls": [{"tool_call_id": call_id, "function_name": name, "arguments": arguments}],
                "observation": {"results": [{"source_call_id": call_id, "content": f"result {i}"}]},
            }
        )
    record["steps"] = head + steps
    record["agent"].pop("tool_definitions", None)
    return record


def test_a_browser_agent_trace_is_web_not_mcp(tmp_path: Path) -> None:
    record = _with_calls(OPENHANDS, PLAYWRIGHT_CALLS)
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "browser.trajectory.json").write_text(json.dumps(record))
    summary = CleanRun([str(tmp_path / "in")], tmp_path / "out", CleanConfig()).run()
    assert summary["accepted"] == 1, summary
    (traj,) = iter_trajectories(tmp_path / "out")
    assert traj.domain == Domain.WEB and "align_unsure" not in traj.metadata
    assert [t.action.tool_name for t in traj.turns] == [name for name, _ in PLAYWRIGHT_CALLS]
    assert [t.metadata["reasoning"] for t in traj.turns] == [f"why step {i}" for i in range(4)]


def test_real_atif_files_keep_tools_reasoning_and_their_domain(tmp_path: Path) -> None:
    summary = CleanRun([str(ATIF)], tmp_path / "out", CleanConfig()).run()
    assert summary["accepted"] == 3, summary
    by_name = {t.source.uri.split("#")[0].rsplit("/", 1)[-1]: t for t in iter_trajectories(tmp_path / "out")}

    openhands = by_name["openhands_hello-world.trajectory.json"]
    declared = [d["function"]["name"] for d in OPENHANDS["agent"]["tool_definitions"]]
    assert openhands.domain == Domain.SWE and [t.name for t in openhands.action_space.tools] == declared
    assert openhands.task.startswith("Create a file called hello.txt")  # later system steps are not turns
    assert [t.action.tool_name for t in openhands.turns] == ["str_replace_editor", "finish"]

    terminus = by_name["terminus-2_hello-world-invalid-json.trajectory.json"]
    assert terminus.domain == Domain.TERMINAL and "align_unsure" not in terminus.metadata
    steps = [s for s in TERMINUS["steps"] if s["source"] == "agent" and s.get("tool_calls")]
    assert [t.metadata.get("reasoning") for t in terminus.turns] == [s["reasoning_content"] for s in steps]
    keys = terminus.turns[0]
    assert keys.action.kind == ActionKind.KEYSTROKES
    assert json.loads(keys.action.text) == [c["arguments"] for c in steps[0]["tool_calls"]]
    assert keys.observation.text == steps[0]["observation"]["results"][0]["content"]


def _claimed_names(spec_signals: Any) -> list[str]:
    names = sorted(spec_signals.any_tool)
    names += [f"{prefix}action" for prefix in spec_signals.tool_prefixes]
    return names


CLAIMING = [spec for spec in registered_domains() if spec.signals.any_tool or spec.signals.tool_prefixes]


@settings(max_examples=60, deadline=None)
@given(
    index=st.integers(min_value=0, max_value=len(CLAIMING) - 1),
    data=st.data(),
)
def test_the_domain_is_what_most_calls_do(index: int, data: st.DataObject) -> None:
    """Whatever the agent: calls to a domain's tools (by their own names or MCP-namespaced), plus
    control tools (finish, think) and fewer calls another domain claims, give that domain."""
    spec = CLAIMING[index]
    own = data.draw(st.lists(st.sampled_from(_claimed_names(spec.signals)), min_size=3, max_size=6))
    own = [data.draw(st.sampled_from([n, f"mcp__server__{n}"])) for n in own]
    others = [
        n for s in CLAIMING if s is not spec for n in _claimed_names(s.signals) if not spec.signals.claims(n)
    ]
    stray = data.draw(st.lists(st.sampled_from(others), max_size=len(own) - 1)) if others else []
    control = data.draw(st.lists(st.sampled_from(["finish", "think"]), max_size=2))
    order = data.draw(st.permutations(own + stray + control))
    parsed = atif.parse(_with_calls(OPENHANDS, [(name, {}) for name in order]))
    domain, unsure = infer_domain(parsed, parsed["turns"])
    assert (domain, unsure) == (spec.domain, False)
