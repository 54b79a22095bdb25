"""One MCP observation whatever the source: a session collected against a real bundled server while a real
logging proxy writes its JSON-RPC traffic, then that log cleaned, gives the same turns and the same
observations; calls outside the action space, timeouts and a dying server are facts of the turn, never
text of ours in an observation."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from collectors.collection import CollectConfig, collect
from collectors.environment import EnvironmentOptions, Task, tool_call_action
from collectors.mcp import MCPEnvironment
from collectors.mcp_servers import BUNDLED
from curation_agents.clean_run import CleanRun
from curation_agents.model import CleanConfig
from schemas import ObservationFormat, Trajectory, TrajectoryStatus, iter_trajectories, mcp_observation
from schemas.turn_facts import ENDED, OUT_OF_ACTION_SPACE, TIMED_OUT, facts

ROOT = Path(__file__).resolve().parents[2]
PROXY = str(ROOT / "tests" / "fixtures" / "mcp" / "jsonrpc_log_proxy.py")
TEST_SERVER = str(ROOT / "tests" / "fixtures" / "mcp_test_server.py")

# Real bundled servers and calls that give text, structured content, an image, resource links, an
# embedded resource, tool errors and schema violations (sent anyway, the server's answer recorded).
SESSIONS: dict[str, list[dict[str, Any]]] = {
    "everything": [
        {"name": "echo", "arguments": {"message": "héllo wörld"}},
        {"name": "get-sum", "arguments": {"a": 2, "b": 40}},
        {"name": "get-structured-content", "arguments": {"location": "Chicago"}},
        {"name": "get-tiny-image", "arguments": {}},
        {"name": "get-resource-links", "arguments": {"count": 2}},
        {"name": "get-resource-reference", "arguments": {"resourceType": "Text", "resourceId": 2}},
        {"name": "get-annotated-message", "arguments": {"messageType": "error", "includeImage": False}},
        {"name": "get-sum", "arguments": {"a": "two", "b": 1}},
    ],
    "time": [
        {"name": "get_current_time", "arguments": {"timezone": "Europe/Paris"}},
        {
            "name": "convert_time",
            "arguments": {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"},
        },
        {"name": "get_current_time", "arguments": {"timezone": "Mars/Olympus"}},
    ],
}


def _proxied(server: str, log: Path, workspace: Path) -> dict[str, Any]:
    """The bundled server's own command, started through the logging proxy (on this machine)."""
    launch = BUNDLED[server].launch(workspace, {}, None)
    return {
        "command": sys.executable,
        "args": [PROXY, str(log), "--", launch.command, *launch.args],
        "env": launch.env,
        "cwd": launch.cwd or str(workspace),
        "sandbox": False,
        "timeout_s": 20,
    }


def _collect(tmp_path: Path, rows: list[dict[str, Any]]) -> dict[str, Trajectory]:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(r) + "\n" for r in rows))
    collect(CollectConfig(env="mcp", tasks_path=tasks, policy="scripted", out=tmp_path / "collected"))
    return {t.metadata["task_id"]: t for t in iter_trajectories(tmp_path / "collected")}


def _clean(log: Path, out: Path) -> Trajectory:
    summary = CleanRun([str(log)], out, CleanConfig()).run()
    assert summary["accepted"] == 1, summary
    (trajectory,) = list(iter_trajectories(out))
    return trajectory


@pytest.mark.parametrize("server", sorted(SESSIONS))
def test_collected_and_logged_then_cleaned_give_the_same_turns_and_observations(
    server: str, tmp_path: Path
) -> None:
    log = tmp_path / f"{server}.jsonrpc.jsonl"
    workspace = tmp_path / "ws"
    workspace.mkdir()
    rows = [
        {
            "id": server,
            "instruction": "x",
            "mcp": _proxied(server, log, workspace),
            "actions": SESSIONS[server],
        }
    ]
    collected = _collect(tmp_path, rows)[server]
    assert collected.status == TrajectoryStatus.COMPLETE, collected.status_reason
    cleaned = _clean(log, tmp_path / "cleaned")

    assert len(cleaned.turns) == len(collected.turns) == len(SESSIONS[server])
    assert cleaned.action_space.tool_names() == collected.action_space.tool_names()
    for a, b in zip(collected.turns, cleaned.turns, strict=True):
        assert a.action.text == b.action.text
        assert a.action.tool_name == b.action.tool_name
        assert a.observation.text == b.observation.text
        assert a.observation.is_error == b.observation.is_error
        assert a.observation.format == b.observation.format == ObservationFormat.JSON
        assert a.metadata.get(mcp_observation.STRUCTURED_CONTENT) == b.metadata.get(
            mcp_observation.STRUCTURED_CONTENT
        )
        # The convention: the content blocks as sent (one as an object, several as an array).
        value = json.loads(a.observation.text)
        blocks = value if isinstance(value, list) else [value]
        assert all(isinstance(block, dict) and "type" in block for block in blocks), a.observation.text
    if server == "everything":
        (image,) = [b for b in json.loads(collected.turns[3].observation.text) if b["type"] == "image"]
        assert image["data"].startswith("[image image/png, ")
        assert "sha256" in image["data"]  # described, never inlined
        assert isinstance(json.loads(collected.turns[4].observation.text), list)  # several blocks
        assert collected.turns[2].metadata[mcp_observation.STRUCTURED_CONTENT]
        assert (
            collected.turns[7].observation.is_error is True
            and "schema_violation" in collected.turns[7].metadata
        )
    else:
        assert collected.turns[2].observation.is_error is True


def test_a_tool_the_server_lacks_is_sent_and_the_servers_answer_recorded() -> None:
    env = MCPEnvironment(EnvironmentOptions())
    try:
        env.reset(Task(id="oas", instruction="x", config={"mcp": {"server": "everything"}}))
        step = env.step(tool_call_action("delete-everything", {}))
        assert facts(step.info)[OUT_OF_ACTION_SPACE] == {"tool": "delete-everything", "sent": True}
        assert "worldline" not in step.observation.text and "not available here" not in step.observation.text
        assert step.observation.is_error is True
        answer = json.loads(step.observation.text)  # the server's own answer, as it sent it
        assert "delete-everything" in json.dumps(answer)
    finally:
        env.close()


def test_a_tool_the_server_has_but_the_task_does_not_offer_is_refused_as_a_harness_fact() -> None:
    env = MCPEnvironment(EnvironmentOptions())
    task = Task(id="offer", instruction="x", config={"mcp": {"server": "everything", "tools": ["echo"]}})
    try:
        reset = env.reset(task)
        assert reset.action_space.tool_names() == {"echo"}
        step = env.step(tool_call_action("toggle-simulated-logging", {}))
        assert facts(step.info)[OUT_OF_ACTION_SPACE] == {"tool": "toggle-simulated-logging", "sent": False}
        assert step.observation.text == ""  # the server showed nothing: nothing of ours either
        echoed = json.loads(env.step(tool_call_action("echo", {"message": "hi"})).observation.text)
        assert echoed == {"type": "text", "text": "Echo: hi"}
    finally:
        env.close()


def test_offered_tools_the_server_lacks_fail_the_episode_naming_them(tmp_path: Path) -> None:
    rows = [
        {
            "id": "bad",
            "instruction": "x",
            "mcp": {"server": "time", "tools": ["get_current_time", "nope"]},
            "actions": [{"name": "get_current_time", "arguments": {"timezone": "UTC"}}],
        }
    ]
    bad = _collect(tmp_path, rows)["bad"]
    assert bad.status == TrajectoryStatus.ENV_FAILURE
    assert "'mcp.tools'" in (bad.status_reason or "") and "nope" in (bad.status_reason or "")


def test_a_timeout_is_a_harness_fact_and_the_observation_holds_nothing_of_ours() -> None:
    env = MCPEnvironment(EnvironmentOptions())
    cfg = {"command": sys.executable, "args": [TEST_SERVER], "timeout_s": 2, "sandbox": False}
    try:
        env.reset(Task(id="slow", instruction="x", config={"mcp": cfg}))
        slow = env.step(tool_call_action("slow", {"seconds": 30}))
        assert facts(slow.info)[TIMED_OUT] == {"after_s": 2.0}
        assert slow.observation.text == ""
    finally:
        env.close()


def test_a_server_that_dies_on_the_last_action_ends_the_trajectory_as_env_failure(tmp_path: Path) -> None:
    rows = [
        {
            "id": "dies-last",
            "instruction": "x",
            "mcp": {"command": sys.executable, "args": [TEST_SERVER], "sandbox": False, "timeout_s": 20},
            "actions": [{"name": "echo", "arguments": {"text": "1"}}, {"name": "crash", "arguments": {}}],
        }
    ]
    died = _collect(tmp_path, rows)["dies-last"]
    assert died.status == TrajectoryStatus.ENV_FAILURE
    assert "exited during the episode" in (died.status_reason or "")
    assert "crashing on purpose" in (died.status_reason or "")
    assert len(died.turns) == 2
    last = died.turns[1]
    assert ENDED in facts(last.metadata) and last.observation.text == ""
