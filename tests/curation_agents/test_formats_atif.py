"""ATIF traces: the domain comes from what the tools do (the registry's signals), the model's
reasoning is kept, and ATIF-v1.7's identities, `extra` objects and embedded sub-agents are mapped.
Real files: Harbor's golden trajectories and a fast-agent v1.7 export (tests/fixtures/atif/SOURCES.md),
checked against ATIF-v1.7's rules (tests/helpers/atif_rules.py; harbor's own model too with
ATIF_MODEL_ROOT), which must also reject documents that break them."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from curation_agents.align import infer_domain
from curation_agents.clean_run import CleanRun
from curation_agents.formats import Format, atif
from curation_agents.model import CleanConfig, Limits
from curation_agents.reader import iter_records
from schemas import ActionKind, Domain, iter_trajectories, registered_domains
from tests.helpers.atif_rules import HARBOR_MODEL, assert_valid_atif, atif_problems

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
ATIF = FIXTURES / "atif"
OPENHANDS = json.loads((ATIF / "openhands_hello-world.trajectory.json").read_text())
TERMINUS = json.loads((ATIF / "terminus-2_hello-world-invalid-json.trajectory.json").read_text())
MULTIAGENT_FILE = ATIF / "fast-agent_harbor_multiagent_v1_7.json"
MULTIAGENT = json.loads(MULTIAGENT_FILE.read_text())
LINEAR = ATIF / "terminus-2_hello-world-context-summarization-linear-history.trajectory.json"
LINEAR_CONT = ATIF / "terminus-2_hello-world-context-summarization-linear-history.trajectory.cont-1.json"
FILES = sorted(ATIF.glob("*.json"))
HARBOR_TRAJECTORIES = sorted((FIXTURES / "harbor" / "jobs").glob("**/agent/trajectory.json"))

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


def test_the_fixtures_are_valid_atif() -> None:
    versions = {assert_valid_atif(json.loads(p.read_text()))["schema_version"] for p in FILES}
    assert versions == {"ATIF-v1.5", "ATIF-v1.6", "ATIF-v1.7"}
    assert len(HARBOR_TRAJECTORIES) == 2
    jobs = {assert_valid_atif(json.loads(p.read_text()))["schema_version"] for p in HARBOR_TRAJECTORIES}
    assert jobs == {"ATIF-v1.2", "ATIF-v1.6"}


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """A change that sets the field at PATH (keys and indexes, dot-separated) to VALUE."""

    def change(doc: dict[str, Any]) -> None:
        *head, last = [int(k) if k.isdigit() else k for k in path.split(".")]
        for key in head:
            doc = doc[key]
        doc[last] = value

    return change


def _drop(path: str) -> Callable[[dict[str, Any]], None]:
    """A change that removes the field at PATH."""

    def change(doc: dict[str, Any]) -> None:
        *head, last = [int(k) if k.isdigit() else k for k in path.split(".")]
        for key in head:
            doc = doc[key]
        del doc[last]

    return change


def _image(doc: dict[str, Any]) -> None:
    doc["steps"][0]["message"] = [{"type": "image", "source": {"media_type": "image/bmp", "path": "a.bmp"}}]


def _text_part_without_text(doc: dict[str, Any]) -> None:
    doc["steps"][0]["message"] = [
        {"type": "text"},
        {"type": "image", "source": {"media_type": "image/png", "path": "a.png"}},
    ]


def _second_subagent(doc: dict[str, Any]) -> None:
    doc["subagent_trajectories"].append(copy.deepcopy(doc["subagent_trajectories"][0]))


# Each change to the v1.7 file (valid as it is) and the one JSON path ATIF's rules must name; the
# last flag is True where harbor's model accepts the change too (its pydantic coercion, or its
# default schema_version), so only these rules reject it.
BROKEN: list[tuple[str, Callable[[dict[str, Any]], None], str, bool]] = [
    ("no agent name", _drop("agent.name"), "$.agent.name", False),
    ("no message", _drop("steps.0.message"), "$.steps[0].message", False),
    ("null message", _set("steps.0.message", None), "$.steps[0].message", False),
    ("no steps", _set("steps", []), "$.steps", False),
    (
        "no call id",
        _drop("steps.1.tool_calls.0.tool_call_id"),
        "$.steps[1].tool_calls[0].tool_call_id",
        False,
    ),
    ("unknown source", _set("steps.1.source", "assistant"), "$.steps[1].source", False),
    ("unknown version", _set("schema_version", "ATIF-v2.0"), "$.schema_version", False),
    ("no version", _drop("schema_version"), "$.schema_version", True),
    ("image type", _image, "$.steps[0].message[0].source.media_type", False),
    ("text part", _text_part_without_text, "$.steps[0].message[0].text", False),
    (
        "broken call link",
        _set("steps.1.observation.results.0.source_call_id", "call_missing"),
        "$.steps[1].observation.results[0].source_call_id",
        False,
    ),
    (
        "arguments array",
        _set("steps.1.tool_calls.0.arguments", ["inspect"]),
        "$.steps[1].tool_calls[0].arguments",
        False,
    ),
    ("token float", _set("steps.1.metrics.prompt_tokens", 1.5), "$.steps[1].metrics.prompt_tokens", False),
    (
        "token ids",
        _set("steps.1.metrics.completion_token_ids", [1, "a"]),
        "$.steps[1].metrics.completion_token_ids",
        False,
    ),
    ("step id word", _set("steps.1.step_id", "two"), "$.steps[1].step_id", False),
    ("step id string", _set("steps.1.step_id", "2"), "$.steps[1].step_id", True),
    ("step id order", _set("steps.2.step_id", 4), "$.steps[2].step_id", False),
    ("copied flag", _set("steps.1.is_copied_context", "yes"), "$.steps[1].is_copied_context", True),
    ("unknown field", _set("steps.0.role", "user"), "$.steps[0].role", False),
    ("unknown metric", _set("steps.1.metrics.reward", 1.0), "$.steps[1].metrics.reward", False),
    ("extra not object", _set("steps.1.tool_calls.0.extra", "x"), "$.steps[1].tool_calls[0].extra", False),
    ("user reasoning", _set("steps.0.reasoning_content", "why"), "$.steps[0].reasoning_content", False),
    ("user metrics", _set("steps.0.metrics", {}), "$.steps[0].metrics", False),
    ("no-LLM metrics", _set("steps.2.llm_call_count", 0), "$.steps[2].metrics", False),
    ("negative calls", _set("steps.1.llm_call_count", -1), "$.steps[1].llm_call_count", False),
    ("bad timestamp", _set("steps.0.timestamp", "yesterday"), "$.steps[0].timestamp", False),
    ("negative total", _set("final_metrics.total_steps", -3), "$.final_metrics.total_steps", False),
    (
        "unresolvable ref",
        _drop("steps.1.observation.results.1.subagent_trajectory_ref.0.trajectory_id"),
        "$.steps[1].observation.results[1].subagent_trajectory_ref[0]",
        False,
    ),
    (
        "subagent id",
        _drop("subagent_trajectories.0.trajectory_id"),
        "$.subagent_trajectories[0].trajectory_id",
        False,
    ),
    ("duplicate subagent", _second_subagent, "$.subagent_trajectories[1].trajectory_id", False),
    (
        "subagent step",
        _drop("subagent_trajectories.0.steps.1.source"),
        "$.subagent_trajectories[0].steps[1].source",
        False,
    ),
]


@pytest.mark.parametrize(
    ("change", "path", "harbor_accepts"), [b[1:] for b in BROKEN], ids=[b[0] for b in BROKEN]
)
def test_atif_rules_reject_a_broken_document(
    change: Callable[[dict[str, Any]], None], path: str, harbor_accepts: bool
) -> None:
    assert atif_problems(MULTIAGENT) == []
    doc = copy.deepcopy(MULTIAGENT)
    change(doc)
    problems = atif_problems(doc)
    assert [p.split(": ", 1)[0] for p in problems] == [path], problems
    if HARBOR_MODEL is not None and not harbor_accepts:
        with pytest.raises(ValueError):
            HARBOR_MODEL.model_validate_json(json.dumps(doc))


@pytest.mark.skipif(HARBOR_MODEL is None, reason="ATIF_MODEL_ROOT names no folder with harbor's ATIF model")
def test_harbors_own_model_takes_the_fixtures() -> None:
    for path in [*FILES, *HARBOR_TRAJECTORIES]:
        HARBOR_MODEL.model_validate_json(path.read_text())


def test_summary_reconciles_and_a_subagent_is_a_record_of_its_own(tmp_path: Path) -> None:
    summary = CleanRun([str(ATIF)], tmp_path / "out", CleanConfig()).run()
    # Each file, the sub-agent embedded in the v1.7 file, and SOURCES.md (not a trace).
    assert summary["records_in"] == len(FILES) + 2 == summary["accepted"] + summary["quarantined"]
    assert summary["accepted"] == len(FILES)
    rows = pl.read_parquet(sorted((tmp_path / "out" / "quarantine" / "parts").glob("*.parquet"))).to_dicts()
    # The worker only answered: a message and no action, so it has no turn to learn from.
    assert {(r["record_key"], r["reason"]) for r in rows} == {
        ("atif/SOURCES.md#file", "unsupported_format"),
        (f"atif/{MULTIAGENT_FILE.name}#file/subagent-0", "unsupported_format"),
    }


def test_v1_7_identities_extras_and_subagent_links() -> None:
    records = list(iter_records(MULTIAGENT_FILE, Limits()))
    assert [(r.locator, r.format) for r in records] == [
        ("file", Format.ATIF),
        ("file/subagent-0", Format.ATIF),
    ]
    root, child = (atif.parse(r.payload) for r in records)
    (sub,) = MULTIAGENT["subagent_trajectories"]
    assert root["metadata"]["trajectory_id"] == MULTIAGENT["trajectory_id"]
    assert root["metadata"]["session_id"] == MULTIAGENT["session_id"]
    assert root["metadata"]["subagent_trajectory_ids"] == [sub["trajectory_id"]]
    assert root["metadata"]["atif_agent_extra"] == MULTIAGENT["agent"]["extra"]
    assert root["metadata"]["final_metrics"] == MULTIAGENT["final_metrics"]
    assert child["metadata"]["trajectory_id"] == sub["trajectory_id"]
    assert child["metadata"]["parent_trajectory_id"] == MULTIAGENT["trajectory_id"]
    assert (child["agent"], child["task"]) == (sub["agent"]["name"], sub["steps"][0]["message"])

    step = MULTIAGENT["steps"][1]
    results = {r["source_call_id"]: r for r in step["observation"]["results"]}
    worker, shell = root["turns"][:2]
    assert [worker["tool_name"], shell["tool_name"]] == [c["function_name"] for c in step["tool_calls"]]
    # Results pair with their calls by id, whatever their order.
    assert worker["observation"] == results["call_worker"]["content"]
    assert shell["observation"] == results["call_shell"]["content"]
    assert worker["metadata"]["subagent_trajectory_ref"] == results["call_worker"]["subagent_trajectory_ref"]
    assert worker["metadata"]["atif_result_extra"] == results["call_worker"]["extra"]
    assert worker["metadata"]["reasoning"] == step["reasoning_content"]
    assert worker["metadata"]["thought"] == step["message"]
    assert (worker["metadata"]["reasoning_effort"], worker["metadata"]["llm_call_count"]) == (
        step["reasoning_effort"],
        step["llm_call_count"],
    )
    assert root["turns"][2]["action"] == MULTIAGENT["steps"][2]["message"]


def test_a_continued_trajectory_and_its_handoff_to_subagents() -> None:
    """Terminus-2's context summarization: a system step hands the context to three sub-agents (their
    files named by `trajectory_path`), the run goes on in `trajectory.cont-1.json`, which starts with
    steps copied from the first file (`is_copied_context`); replies are Terminus JSON messages."""
    first_doc = json.loads(LINEAR.read_text())
    cont_doc = json.loads(LINEAR_CONT.read_text())
    first, cont = atif.parse(first_doc), atif.parse(cont_doc)
    assert first["metadata"]["continued_trajectory_ref"] == first_doc["continued_trajectory_ref"]
    (handoff,) = [s for s in first_doc["steps"] if s["source"] == "system"]
    assert first["system_prompt"] is None  # a system step after the turns is a harness note
    assert json.loads(first["metadata"]["later_system_messages"]) == [handoff["message"]]
    refs = handoff["observation"]["results"][0]["subagent_trajectory_ref"]
    assert first["metadata"]["subagent_trajectory_ref"] == refs and len(refs) == 3
    copied = [s for s in cont_doc["steps"] if s.get("is_copied_context")]
    acting = [s for s in cont_doc["steps"] if s["source"] == "agent" and not s.get("is_copied_context")]
    assert cont["metadata"]["copied_context_steps"] == len([s for s in copied if s["source"] == "agent"])
    assert len(cont["turns"]) == len(acting)
    for raw, step in zip(cont["turns"], acting, strict=True):
        reply = json.loads(step["message"])
        if reply["commands"]:
            assert raw["action_kind"] == "keystrokes" and json.loads(raw["action"]) == reply["commands"]
            assert raw["metadata"]["thought"] == f"Analysis: {reply['analysis']}\nPlan: {reply['plan']}"
        else:  # the closing replies send nothing
            assert raw["action_kind"] == "empty"
        assert raw["observation"] == step["observation"]["results"][0]["content"]
    assert cont["task"] == first["task"]  # the copied first user step


@pytest.mark.parametrize("key", ["trajectory_id", "session_id"])
def test_either_identity_makes_a_document_atif(key: str) -> None:
    """v1.7 made `session_id` optional: a document with only a `trajectory_id` is ATIF too."""
    record = {
        k: v for k, v in MULTIAGENT.items() if k not in ("trajectory_id", "session_id", "schema_version")
    }
    assert not atif.looks_like(record)
    assert atif.looks_like({**record, key: MULTIAGENT[key]})


def test_real_atif_files_keep_tools_reasoning_and_their_domain(tmp_path: Path) -> None:
    summary = CleanRun([str(ATIF)], tmp_path / "out", CleanConfig()).run()
    assert summary["accepted"] == len(FILES), summary
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
