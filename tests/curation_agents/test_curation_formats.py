"""Agent-log dialects: MCP results that are not text, Anthropic tool_use / tool_result, legacy OpenAI
function_call, reasons that say what happened, and the domain of a bash-only agent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from curation_agents.clean_run import CleanRun
from curation_agents.formats.common import content_text
from curation_agents.model import CleanConfig
from schemas import Trajectory, iter_trajectories


def _clean(path: Path, out: Path) -> tuple[dict[str, Any], list[Trajectory]]:
    summary = CleanRun([str(path)], out, CleanConfig()).run()
    trajs = list(iter_trajectories(out)) if summary["accepted"] else []
    return summary, trajs


def _quarantine_reasons(out: Path) -> list[str]:
    return [
        r for f in (out / "quarantine").rglob("*.parquet") for r in pq.read_table(f)["reason"].to_pylist()
    ]


def test_mcp_image_resource_and_resource_link_results_are_described(tmp_path: Path) -> None:
    results = [
        [{"type": "image", "data": "iVBORw0KGgo" * 40, "mimeType": "image/png"}],
        [
            {
                "type": "resource",
                "resource": {"uri": "file:///logs/app.log", "mimeType": "text/plain", "text": "boot ok"},
            }
        ],
        [
            {
                "type": "resource",
                "resource": {
                    "uri": "file:///bin/tool",
                    "mimeType": "application/octet-stream",
                    "blob": "AAAA" * 10,
                },
            }
        ],
        [
            {
                "type": "resource_link",
                "uri": "file:///project/src/main.rs",
                "name": "main.rs",
                "mimeType": "text/x-rust",
                "size": 2048,
            }
        ],
    ]
    lines: list[dict[str, Any]] = [
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 1, "result": {"tools": [{"name": "fetch"}]}},
    ]
    for i, content in enumerate(results, start=2):
        lines.append(
            {
                "jsonrpc": "2.0",
                "id": i,
                "method": "tools/call",
                "params": {"name": "fetch", "arguments": {"n": i}},
            }
        )
        lines.append({"jsonrpc": "2.0", "id": i, "result": {"content": content}})
    path = tmp_path / "mcp.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines))
    summary, trajs = _clean(path, tmp_path / "out")
    assert summary["accepted"] == 1
    # The MCP observation convention (schemas.mcp_observation): blocks as sent, binary data described.
    obs = [json.loads(t.observation.text) for t in trajs[0].turns]
    assert obs[0]["type"] == "image" and obs[0]["data"].startswith("[image image/png, 330 bytes, sha256 ")
    assert obs[1] == results[1][0]
    assert obs[2]["resource"]["blob"].startswith("[blob application/octet-stream, 30 bytes, sha256 ")
    assert obs[3] == results[3][0]


def test_content_parts_of_every_dialect_have_text() -> None:
    assert content_text(
        [
            {"type": "text", "text": "a"},
            {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,AAAA"}},
        ]
    ) == ("a\n[image: image/jpeg, 3 bytes]")
    anthropic_image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/gif", "data": "AAAAAAAA"},
    }
    assert content_text([anthropic_image]) == "[image: image/gif, 6 bytes]"


def _anthropic_log() -> dict[str, Any]:
    return {
        "model": "claude-sonnet-4",
        "system": "You operate a Linux shell.",
        "tools": [{"name": "bash", "description": "run a command", "input_schema": {"type": "object"}}],
        "messages": [
            {"role": "user", "content": "How much disk is free?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "I'll check."},
                    {"type": "tool_use", "id": "toolu_01", "name": "bash", "input": {"command": "df -h /"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_01",
                        "content": [{"type": "text", "text": "/dev/sda1  50G  20G  30G  40% /"}],
                    }
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "toolu_02",
                        "name": "bash",
                        "input": {"command": "du -sh /nope"},
                    }
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_02",
                        "content": "du: cannot access '/nope': No such file or directory",
                        "is_error": True,
                    }
                ],
            },
            {"role": "assistant", "content": [{"type": "text", "text": "30G are free."}]},
        ],
    }


def test_anthropic_tool_use_logs(tmp_path: Path) -> None:
    path = tmp_path / "claude.json"
    path.write_text(json.dumps(_anthropic_log()))
    summary, trajs = _clean(path, tmp_path / "out")
    assert summary["accepted"] == 1, summary
    (traj,) = trajs
    calls = [json.loads(t.action.text) for t in traj.turns if t.action.kind.value == "tool_call"]
    assert calls == [
        {"name": "bash", "arguments": {"command": "df -h /"}},
        {"name": "bash", "arguments": {"command": "du -sh /nope"}},
    ]
    assert traj.turns[0].observation.text.startswith("/dev/sda1")
    assert traj.turns[1].observation.is_error is True
    assert traj.task == "How much disk is free?"
    assert traj.domain.value == "terminal"  # bash only


def test_legacy_openai_function_call_logs(tmp_path: Path) -> None:
    messages = [
        {"role": "user", "content": "weather in Lyon and Paris"},
        {
            "role": "assistant",
            "content": None,
            "function_call": {"name": "get_weather", "arguments": '{"city": "Lyon"}'},
        },
        {"role": "function", "name": "get_weather", "content": '{"temp": 21}'},
        {
            "role": "assistant",
            "content": None,
            "function_call": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
        },
        {"role": "function", "name": "get_weather", "content": '{"temp": 19}'},
        {"role": "assistant", "content": "Lyon 21, Paris 19."},
    ]
    path = tmp_path / "legacy.jsonl"
    path.write_text(json.dumps({"messages": messages}) + "\n" + json.dumps(messages) + "\n")
    summary, trajs = _clean(path, tmp_path / "out")
    assert summary["accepted"] == 2
    for traj in trajs:
        assert [json.loads(t.action.text)["arguments"]["city"] for t in traj.turns[:2]] == ["Lyon", "Paris"]
        assert [t.observation.text for t in traj.turns[:2]] == ['{"temp": 21}', '{"temp": 19}']


def test_a_chat_without_actions_is_an_unsupported_format_not_too_few_turns(tmp_path: Path) -> None:
    chat = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello!"}] * 3}
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(chat))
    summary, _ = _clean(path, tmp_path / "out")
    assert summary["per_reason"] == {"unsupported_format": 1}
    assert _quarantine_reasons(tmp_path / "out") == ["unsupported_format"]


def test_bash_only_agent_log_is_terminal_and_editor_tools_make_it_swe(tmp_path: Path) -> None:
    def log(tool: str) -> dict[str, Any]:
        messages: list[dict[str, Any]] = [{"role": "user", "content": "inspect the repo"}]
        for i, command in enumerate(["ls -la", "cat README.md", "git status"]):
            name = "bash" if i != 1 else tool
            messages.append(
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {
                            "id": f"c{i}",
                            "type": "function",
                            "function": {"name": name, "arguments": json.dumps({"command": command})},
                        }
                    ],
                }
            )
            messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"output of {command}"})
        return {"messages": messages}

    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "bash.json").write_text(json.dumps(log("bash")))
    (tmp_path / "in" / "edit.json").write_text(json.dumps(log("str_replace_editor")))
    summary, trajs = _clean(tmp_path / "in", tmp_path / "out")
    domains = {t.source.uri.split("/")[-1].split("#")[0]: t.domain.value for t in trajs}
    assert domains == {"bash.json": "terminal", "edit.json": "swe"}


def test_recording_events_with_a_non_string_code_are_skipped_not_fatal(tmp_path: Path) -> None:
    lines = [
        {"version": 2, "width": 80, "height": 24},
        [0.1, "o", "$ "],
        [0.2, [1], "x"],  # a list or object where the event code belongs: that line is noise
        [0.3, {"o": 1}, "x"],
        [0.4, "i", "ls\r"],
        [0.5, "o", "ls\r\nfile\r\n$ "],
    ]
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "s.cast").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    summary = CleanRun([str(tmp_path / "in")], tmp_path / "out", CleanConfig(min_turns=1)).run()
    assert summary["accepted"] == 1, summary
    (traj,) = list(iter_trajectories(tmp_path / "out"))
    assert [t.action.text for t in traj.turns] == ["ls"]
