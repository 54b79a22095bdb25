"""MCP-Universe running logs: what its `FileCollector` (mcpuniverse/tracer/collectors/file.py) writes
when a benchmark runs with `trace_collector=FileCollector(log_file=...)`.

The file is a sequence of trace records, each a line of 66 dashes followed by the record as
indented JSON (keys sorted): `{"id", "parent_id", "records": [{"data", "timestamp"}], "running_time",
"span_index", "timestamp", "trace_id"}`. A record is one span (a `Tracer.sprout()` context), written
when the span closes; every task of a run shares the file and has its own `trace_id`, so one trace is
one cleaning record. The spans' data are the agent's (`BaseAgent.execute`: `{"type": "agent",
"class", "name", "config", "llm_config", "messages", "response", "response_type", "error"}`), the
LLM's (`BaseLLM.generate`: `{"type": "llm", "class", "config", "messages", "response", "error"}`)
and each tool call's (`BaseAgent.call_tool`: `{"type": "tool", "class", "server", "tool_name",
"arguments", "response", "error"}`, the response being the MCP `CallToolResult` as JSON).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from curation_agents.formats import Format
from curation_agents.formats.common import as_dict, as_list, as_str, content_text, open_binary, turn
from curation_agents.formats.mcpmark import call_action
from curation_agents.model import ParsedRecord, RawTurn, StageFailure
from schemas import mcp_observation
from schemas.reasons import ReasonCode

BENCHMARK = "MCP-Universe"
SEPARATOR = b"-" * 66
_RECORD_KEYS = frozenset({"id", "trace_id", "parent_id", "records", "span_index"})
_OUT_OF_ITERATIONS = "couldn't find a satisfactory answer within the allowed number of iterations"
"""The ReAct agent's answer when it used all its iterations (mcpuniverse/agent/react.py)."""


def looks_like_head(text: bytes) -> bool:
    """Whether a file's first bytes are a FileCollector log: the separator line, then a record."""
    first, _, rest = text.partition(b"\n")
    return first.rstrip(b"\r") == SEPARATOR and rest.lstrip().startswith(b'{\n  "id":')


def _records(path: str, limit: int) -> Iterator[dict[str, Any]]:
    """The trace records of a log, in file order."""
    total = 0
    block: list[bytes] = []
    with open_binary(path) as fh:
        for line in fh:
            total += len(line)
            if total > limit:
                raise StageFailure(ReasonCode.TOO_LARGE, f"log exceeds {limit} bytes")
            if line.rstrip(b"\r\n") == SEPARATOR:
                if block:
                    yield _record(block)
                block = []
            else:
                block.append(line)
    if b"".join(block).strip():
        yield _record(block)


def _record(lines: list[bytes]) -> dict[str, Any]:
    try:
        record = json.loads(b"".join(lines))
    except (ValueError, RecursionError) as exc:
        raise StageFailure(ReasonCode.PARSE_ERROR, f"a trace record that is not JSON ({exc})"[:300]) from exc
    if not (isinstance(record, dict) and _RECORD_KEYS <= record.keys()):
        raise StageFailure(ReasonCode.PARSE_ERROR, "a block that is not a trace record")
    return record


def iter_traces(path: str, limit: int) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """(locator `trace-<trace_id>`, its records) for every trace in the log, in order of first record."""
    traces: dict[str, list[dict[str, Any]]] = {}
    for record in _records(path, limit):
        traces.setdefault(str(record.get("trace_id")), []).append(record)
    for trace_id, records in traces.items():
        yield f"trace-{trace_id}", records


def _data(records: list[Any]) -> list[dict[str, Any]]:
    """Every data record of a trace, in the order they were added (their timestamps)."""
    found: list[tuple[float, int, dict[str, Any]]] = []
    for record in records:
        for entry in as_list(as_dict(record).get("records")):
            entry = as_dict(entry)
            stamp = entry.get("timestamp")
            if isinstance(as_dict(entry.get("data")).get("type"), str):
                found.append((stamp if isinstance(stamp, int | float) else 0.0, len(found), entry["data"]))
    return [data for _, _, data in sorted(found, key=lambda x: (x[0], x[1]))]


def _thought(response: Any) -> tuple[str, str | None]:
    """(thought, answer) of an LLM response: the ReAct agent's `{"thought", "action" | "answer"}` JSON."""
    text = response if isinstance(response, str) else ""
    cleaned = text.strip().strip("`").strip()
    if cleaned.startswith("json"):
        cleaned = cleaned[4:].strip()
    try:
        value = json.loads(cleaned)
    except (ValueError, RecursionError):
        return "", None
    if not isinstance(value, dict):
        return "", None
    answer = value.get("answer")
    return as_str(value.get("thought")) or "", answer if isinstance(answer, str) else None


def _tool_turn(data: dict[str, Any], thought: str) -> RawTurn:
    name = as_str(data.get("tool_name"))
    if not name:
        raise StageFailure(ReasonCode.PARSE_ERROR, "a tool record without tool_name")
    meta: dict[str, Any] = {"server": data["server"]} if isinstance(data.get("server"), str) else {}
    if thought:
        meta["thought"] = thought
    t = turn(
        call_action(name, data.get("arguments")),
        "tool_call",
        "",
        tool_name=name,
        observation_format="json",
        metadata=meta,
    )
    response = data.get("response")
    error = as_str(data.get("error"))
    if isinstance(response, dict):
        text, is_error, structured = mcp_observation.render_result(response)
        t["observation"], t["is_error"] = text, is_error
        if structured is not None:
            meta[mcp_observation.STRUCTURED_CONTENT] = structured
    elif error:
        meta["tool_error"] = error  # the client raised: no answer reached the agent
        t["is_error"] = True
    return t


def parse(records: list[Any]) -> ParsedRecord:
    """One task's trace as a trajectory of the MCP domain."""
    turns: list[RawTurn] = []
    thought = ""
    agent: dict[str, Any] = {}
    llm: dict[str, Any] = {}
    for data in _data(records):
        kind = data.get("type")
        if kind == "llm":
            llm = llm or data
            thought, _ = _thought(data.get("response"))
        elif kind == "tool":
            turns.append(_tool_turn(data, thought))
            thought = ""
        elif kind == "agent" and not agent:
            agent = data
    if not agent:
        raise StageFailure(
            ReasonCode.PARSE_ERROR, "a trace without the agent's record (the run did not finish)"
        )
    answer = as_str(agent.get("response")) or ""
    if answer:
        turns.append(turn(answer, "message", "", metadata={"thought": thought} if thought else {}))
    if not turns:
        raise StageFailure(ReasonCode.NO_TURNS, "no tool call and no answer")
    error = as_str(agent.get("error"))
    status, reason = "complete", None
    if error:
        status, reason = "policy_error", error[:500]
    elif _OUT_OF_ITERATIONS in answer:
        status, reason = "truncated", answer
    llm_config = as_dict(agent.get("llm_config")) or {"config": as_dict(llm.get("config"))}
    model = as_str(as_dict(llm_config.get("config")).get("model_name"))
    task = agent.get("messages")
    return {
        "format": Format.MCP_UNIVERSE,
        "domain": "mcp",
        "task": task if isinstance(task, str) else content_text(task),
        "system_prompt": None,  # the ReAct prompt is rendered into each LLM call's messages
        "tools": [],
        "agent": as_str(agent.get("class")),
        "model": model,
        "status": status,
        "status_reason": reason,
        "turns": turns,
        "metadata": {
            "benchmark": BENCHMARK,
            "trace_id": as_str(as_dict(records[0]).get("trace_id")) if records else None,
            "agent_name": as_str(agent.get("name")),
            "agent_instruction": as_str(as_dict(agent.get("config")).get("instruction")),
            "llm_class": as_str(llm_config.get("class")) or as_str(llm.get("class")),
        },
    }
