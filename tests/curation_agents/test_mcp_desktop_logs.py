"""Claude Desktop MCP logs (`mcp.log`, `mcp-server-NAME.log`): timestamped, prefixed JSON-RPC lines among
the app's own lines. Real excerpts (tests/fixtures/mcp/SOURCES.md) through the whole cleaning run, turns
counted by an independent reading of the lines, and generated sessions written as Claude Desktop writes
them read as the same turns as the same messages logged as JSON lines."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from curation_agents.clean_run import CleanRun
from curation_agents.formats import Format, mcp_log
from curation_agents.model import CleanConfig
from curation_agents.reader import sniff
from schemas import Domain, iter_trajectories, mcp_observation
from schemas.turn_facts import TRUNCATED, facts

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "mcp"
REAL_LOGS = sorted(FIXTURES.glob("claude-desktop_*.log"))


def _calls_in_source(path: Path) -> int:
    """tools/call requests in a Claude Desktop log, read with a plain regular expression (not the parser)."""
    pattern = re.compile(r'Message from client: \{"method":"tools/call"')
    return sum(1 for line in path.read_text("utf-8").splitlines() if pattern.search(line))


def test_real_claude_desktop_logs_give_one_turn_per_call_in_the_source(tmp_path: Path) -> None:
    assert len(REAL_LOGS) == 3
    for path in REAL_LOGS:
        assert sniff(path) == (Format.MCP_JSONRPC, "whole"), path.name
    parsed_turns = {
        p.name: len(mcp_log.parse(mcp_log.read_messages(str(p), 1 << 30))["turns"]) for p in REAL_LOGS
    }
    assert {p.name: (_calls_in_source(p), parsed_turns[p.name]) for p in REAL_LOGS} == {
        "claude-desktop_mcp-log_gocreate-issue-5.log": (0, 0),
        "claude-desktop_mcp-server-github.log": (2, 2),
        "claude-desktop_mcp-server-terminal.log": (1, 1),
    }
    summary = CleanRun([str(p) for p in REAL_LOGS], tmp_path / "out", CleanConfig()).run()
    assert summary["records_in"] == 3 and summary["accepted"] == 1
    # The others are quarantined with their reason, never dropped silently: no call at all, and a
    # single call (below the minimum length of a trajectory).
    reasons = sorted(
        r
        for f in (tmp_path / "out" / "quarantine").rglob("*.parquet")
        for r in pq.read_table(f)["reason"].to_pylist()
    )
    assert reasons == ["no_turns", "too_few_turns"]
    parsed = {t.source.uri.rsplit("/", 1)[-1].split("#")[0]: t for t in iter_trajectories(tmp_path / "out")}  # type: ignore[union-attr]

    github = parsed["claude-desktop_mcp-server-github.log"]
    assert github.domain == Domain.MCP
    get_file, pull_request = github.turns
    assert json.loads(get_file.action.text) == {
        "name": "getFile",
        "arguments": {"owner": "MarkGent1", "repo": "mav-user-admin-poc", "path": "ReadMe.md"},
    }
    # Claude Desktop cut the first reply: no observation of ours, the cut is a fact of the turn.
    assert get_file.observation.text == ""
    assert facts(get_file.metadata)[TRUNCATED]["by"] == "log"
    assert (
        facts(get_file.metadata)[TRUNCATED]["bytes_total"] > facts(get_file.metadata)[TRUNCATED]["bytes_kept"]
    )
    assert pull_request.observation.text == (
        '{"type":"text","text":"https://github.com/MarkGent1/mav-user-admin-poc/pull/9"}'
    )
    assert pull_request.metadata[mcp_observation.STRUCTURED_CONTENT] == {
        "url": "https://github.com/MarkGent1/mav-user-admin-poc/pull/9"
    }
    assert pull_request.duration_s == 1.192  # from the log's own timestamps

    (run,) = mcp_log.parse(
        mcp_log.read_messages(str(FIXTURES / "claude-desktop_mcp-server-terminal.log"), 1 << 30)
    )["turns"]
    # A result whose `content` is an empty list is `[]`, as the OpenAI Agents SDK hands it on.
    assert run["observation"] == "[]" and run["duration_s"] == 0.163


# -- generated sessions: the Claude Desktop layouts read as the JSON-lines log of the same messages ----

text = st.text(st.characters(codec="utf-8"), max_size=30)  # UTF-8: no lone surrogates
block = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, text),
    st.builds(lambda d: {"type": "image", "data": d, "mimeType": "image/png"}, st.text("AB+/=", max_size=12)),
)
result = st.builds(
    lambda blocks, err, structured: {
        "content": blocks,
        **({"isError": err} if err is not None else {}),
        **({"structuredContent": structured} if structured is not None else {}),
    },
    st.lists(block, max_size=3),
    st.none() | st.booleans(),
    st.none() | st.dictionaries(st.sampled_from(["a", "b"]), st.integers()),
)
reply = st.one_of(
    st.builds(lambda r: {"result": r}, result),
    st.builds(lambda m: {"error": {"code": -32602, "message": m}}, text),
)
call = st.tuples(
    st.sampled_from(["read", "write", "list"]), st.dictionaries(st.sampled_from(["p", "q"]), text), reply
)


def _session(calls: list[tuple[str, dict[str, Any], dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    """(direction, message) of a session: initialize, tools/list, then each call and its reply."""
    out: list[tuple[str, dict[str, Any]]] = [
        ("client", {"method": "initialize", "params": {}, "jsonrpc": "2.0", "id": 0}),
        ("server", {"jsonrpc": "2.0", "id": 0, "result": {"serverInfo": {"name": "gen", "version": "1"}}}),
        ("client", {"method": "tools/list", "params": {}, "jsonrpc": "2.0", "id": 1}),
        (
            "server",
            {
                "jsonrpc": "2.0",
                "id": 1,
                "result": {"tools": [{"name": n} for n in ("read", "write", "list")]},
            },
        ),
    ]
    for i, (name, arguments, answer) in enumerate(calls, start=2):
        out.append(
            (
                "client",
                {
                    "method": "tools/call",
                    "params": {"name": name, "arguments": arguments},
                    "jsonrpc": "2.0",
                    "id": i,
                },
            )
        )
        out.append(("server", {"jsonrpc": "2.0", "id": i, **answer}))
    return out


def _desktop_lines(messages: list[tuple[str, dict[str, Any]]], layout: int, noise: list[str]) -> str:
    lines = []
    for i, (who, message) in enumerate(messages):
        stamp = f"2026-03-01T09:{i // 60 % 60:02d}:{i % 60:02d}.{i % 1000:03d}Z"
        body = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
        prefix = "[info] [gen]" if layout == 0 else "[gen] [info]"
        suffix = "" if layout == 0 else " { metadata: undefined }"
        lines.append(f"{stamp} {prefix} Message from {who}: {body}{suffix}")
        if noise:
            lines.append(noise[i % len(noise)])
    return "\n".join(lines) + "\n"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    calls=st.lists(call, max_size=6),
    layout=st.sampled_from([0, 1]),
    noise=st.lists(
        st.sampled_from(
            [
                "Secure MCP Filesystem Server running on stdio",
                "2026-03-01T09:39:03.079Z [gen] [info] Server started and connected successfully { metadata: undefined }",
                "  metadata: {",
                "} %o",
                "2025-06-27T07:58:08.067Z [error] [gen] Unexpected token 'i', \"time=2025-0\"... is not valid JSON",
            ]
        ),
        max_size=3,
    ),
)
def test_claude_desktop_lines_read_as_the_same_messages_logged_as_json_lines(
    tmp_path: Path, calls: list[Any], layout: int, noise: list[str]
) -> None:
    messages = _session(calls)
    desktop = tmp_path / "mcp-server-gen.log"
    desktop.write_text(_desktop_lines(messages, layout, noise), "utf-8")
    jsonl = tmp_path / "gen.jsonl"
    jsonl.write_text("".join(json.dumps({"direction": d, "message": m}) + "\n" for d, m in messages), "utf-8")
    assert sniff(desktop) == (Format.MCP_JSONRPC, "whole")
    a = mcp_log.parse(mcp_log.read_messages(str(desktop), 1 << 30))
    b = mcp_log.parse(mcp_log.read_messages(str(jsonl), 1 << 30))
    timing = ("started_at", "duration_s")  # only the Claude Desktop lines carry timestamps
    untimed = [[{k: v for k, v in t.items() if k not in timing} for t in r["turns"]] for r in (a, b)]
    assert untimed[0] == untimed[1] and len(untimed[0]) == len(calls)
    assert a["tools"] == b["tools"]
    for t, (_, _, answer) in zip(b["turns"], calls, strict=True):
        if "error" in answer:
            assert t["observation"] == mcp_observation.render_error(answer["error"]) and t["is_error"] is True
        else:
            assert t["observation"] == mcp_observation.render_content(answer["result"]["content"])
            assert t["is_error"] is (answer["result"].get("isError") is True)


@settings(max_examples=80, deadline=None)
@given(body=st.binary(max_size=2000))
def test_random_bytes_after_a_claude_desktop_line_never_crash(body: bytes) -> None:
    head = b'2026-03-01T09:44:53.641Z [filesystem] [info] Message from client: {"method":"tools/call","params":{"name":"x","arguments":{}},"jsonrpc":"2.0","id":2}\n'
    lines = (head + body).split(b"\n")
    messages = [m for line in lines if (m := mcp_log._desktop_message(line)) is not None]
    mcp_log.parse(messages)
