"""MCPMark task folders: `messages.json` with `meta.json` beside it, written by MCPMark's evaluator
(`src/evaluator.py`, `src/results_reporter.py`) into
`results/<exp>/<model>__<mcp>/run-N/<category>__<task>/` (an `execution.log` of console lines
beside them).

`messages.json` is the agent's conversation in one of two forms:

- OpenAI Agents SDK input items (what `BaseMCPAgent._convert_to_sdk_format` writes, and the SDK's
  `to_input_list()` before it): `{"content", "role": "user"}`, assistant `{"type": "message",
  "content": [{"type": "output_text", "text"}]}`, `{"type": "function_call", "name", "arguments",
  "call_id"}`, `{"type": "function_call_output", "call_id", "output"}` and `{"type": "reasoning",
  "summary": [{"text"}]}`;
- LiteLLM chat messages (earlier runs): `system`, `user`, assistant with `tool_calls`, and `tool`
  messages whose content is the MCP `CallToolResult` as JSON.

`meta.json` holds the provenance: `task_name` (`<category>__<task>`), `model_name`,
`litellm_run_model_name`, `mcp` (the service), `time`, `execution_result` and `token_usage`.
A tool output is observed by the MCP convention (schemas.mcp_observation).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from curation_agents.formats import Format
from curation_agents.formats.common import (
    as_dict,
    as_list,
    as_str,
    content_text,
    decode_json,
    read_limited,
    tool_call_json,
    turn,
)
from curation_agents.model import ParsedRecord, RawTurn, StageFailure
from schemas import mcp_observation
from schemas.reasons import ReasonCode

BENCHMARK = "MCPMark"
MESSAGES = "messages.json"
META = "meta.json"
COMPANIONS = frozenset({META, "execution.log"})
"""Files the evaluator writes beside `messages.json`: read with it, never records of their own."""
_META_KEYS = frozenset({"task_name", "mcp", "execution_result"})
_META_LIMIT = 1 << 20
_RUN = re.compile(r"run-\d+")
_SDK_WRAPPER_KEYS = frozenset({"type", "text", "annotations", "meta"})


def read_meta(folder: Path) -> dict[str, Any] | None:
    """The `meta.json` of a task folder, or None when there is none or it is not MCPMark's."""
    path = folder / META
    try:
        if not path.is_file() or path.stat().st_size > _META_LIMIT:
            return None
        meta = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return None
    return meta if isinstance(meta, dict) and _META_KEYS <= meta.keys() else None


def is_messages_file(path: Path) -> bool:
    """Whether PATH is an MCPMark `messages.json` (its `meta.json` beside it)."""
    return path.name == MESSAGES and read_meta(path.parent) is not None


def is_companion(path: Path) -> bool:
    """Whether PATH is a `meta.json` or `execution.log` beside an MCPMark `messages.json`."""
    return (
        path.name in COMPANIONS and (path.parent / MESSAGES).is_file() and read_meta(path.parent) is not None
    )


def tool_observation(text: str) -> tuple[str, bool | None, Any]:
    """(observation, is_error, structuredContent) of a tool output: MCP content blocks or a whole
    `CallToolResult` in the MCP convention; any other text (the harness's `Error: ...`) as it is."""
    found = _wrapped_result(text) or mcp_observation.normalise(text)
    return found if found is not None else (text, None, None)


def _wrapped_result(text: str) -> tuple[str, bool | None, Any] | None:
    """The result inside `{"type": "text", "text": <CallToolResult JSON>, "annotations": null, "meta":
    null}`: the block `_convert_to_sdk_format` wraps a LiteLLM tool message's content in."""
    if not text.startswith('{"type": "text"'):
        return None
    try:
        block = json.loads(text)
        inner = (
            json.loads(block["text"])
            if isinstance(block, dict) and isinstance(block.get("text"), str)
            else None
        )
    except (ValueError, RecursionError):
        return None
    wrapper = block.keys() == _SDK_WRAPPER_KEYS and block["annotations"] is None and block["meta"] is None
    if not (
        wrapper and isinstance(inner, dict) and isinstance(inner.get("content"), list) and "type" not in inner
    ):
        return None
    return mcp_observation.normalise(block["text"])


def call_action(name: str, arguments: Any) -> str:
    """A call's action text: `{"name", "arguments"}` with the arguments' keys in the order the model
    wrote them (the text the MCP collector records), or the schema's form when they are no object."""
    parsed = arguments
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments) if arguments.strip() else {}
        except (ValueError, RecursionError):
            parsed = None
    if isinstance(parsed, dict):
        return json.dumps({"name": name, "arguments": parsed}, ensure_ascii=False)
    return tool_call_json(name, arguments)


def call_turn(name: str, arguments: Any, call_id: str, thought: str, reasoning: str) -> RawTurn:
    """A tool call awaiting its output; the assistant text before it is its thought."""
    meta: dict[str, Any] = {"tool_call_id": call_id}
    if thought:
        meta["thought"] = thought
    if reasoning:
        meta["reasoning"] = reasoning
    return turn(
        call_action(name, arguments),
        "tool_call",
        "",
        tool_name=name,
        observation_format="json",
        metadata=meta,
    )


def observe(target: RawTurn, output: Any) -> None:
    """Give a call turn the observation of its output."""
    text = output if isinstance(output, str) else content_text(output)
    observation, is_error, structured = tool_observation(text)
    target["observation"] = observation
    if is_error is None and text.startswith("Error: "):
        is_error = True  # the harness's own `Error: {exception}` when a call raised or timed out
    target["is_error"] = is_error
    if structured is not None:
        target.setdefault("metadata", {})[mcp_observation.STRUCTURED_CONTENT] = structured


class ChatTurns:
    """Turns of an OpenAI chat conversation (assistant `tool_calls`, `tool` results by id)."""

    def __init__(self) -> None:
        self.turns: list[RawTurn] = []
        self.pending: dict[str, RawTurn] = {}
        self.task = ""
        self.system_prompt: str | None = None
        self.later_users: list[str] = []
        self.ended = False  # the last assistant message made no call

    def feed(self, msg: dict[str, Any]) -> None:
        role = msg.get("role")
        if role == "system" and self.system_prompt is None:
            self.system_prompt = content_text(msg.get("content"))
        elif role == "user":
            text = content_text(msg.get("content"))
            if not self.task and not self.turns:
                self.task = text
            else:
                self.later_users.append(text)
        elif role == "assistant":
            self._assistant(msg)
        elif role == "tool":
            call_id = as_str(msg.get("tool_call_id")) or ""
            target = self.pending.pop(call_id, None)
            if target is None:
                raise StageFailure(ReasonCode.PARSE_ERROR, f"a tool result for no call ({call_id!r})")
            observe(target, msg.get("content"))

    def _assistant(self, msg: dict[str, Any]) -> None:
        text = content_text(msg.get("content")).strip()
        reasoning = "\n\n".join(
            r for r in (as_str(msg.get("reasoning_content")), as_str(msg.get("thinking"))) if r and r.strip()
        )
        calls = [c for c in as_list(msg.get("tool_calls")) if isinstance(c, dict)]
        for index, call in enumerate(calls):
            function = as_dict(call.get("function"))
            name = as_str(function.get("name"))
            if not name:
                raise StageFailure(ReasonCode.PARSE_ERROR, "a tool call without a function name")
            call_id = as_str(call.get("id")) or f"position-{len(self.turns)}"
            t = call_turn(
                name,
                function.get("arguments"),
                call_id,
                text if index == 0 else "",
                reasoning if index == 0 else "",
            )
            self.turns.append(t)
            self.pending[call_id] = t
        self.ended = not calls
        if not calls and text:
            self.turns.append(
                turn(text, "message", "", metadata={"reasoning": reasoning} if reasoning else {})
            )


def _sdk_turns(items: list[Any]) -> ChatTurns:
    """Turns of OpenAI Agents SDK input items (calls and outputs paired by `call_id`)."""
    out = ChatTurns()
    thought: list[str] = []
    reasoning: list[str] = []
    for item in items:
        if not isinstance(item, dict):
            raise StageFailure(ReasonCode.PARSE_ERROR, f"an item of type {type(item).__name__}")
        kind = item.get("type")
        if kind == "function_call":
            name = as_str(item.get("name"))
            if not name:
                raise StageFailure(ReasonCode.PARSE_ERROR, "a function_call without a name")
            call_id = as_str(item.get("call_id")) or f"position-{len(out.turns)}"
            t = call_turn(name, item.get("arguments"), call_id, "\n".join(thought), "\n\n".join(reasoning))
            out.turns.append(t)
            out.pending[call_id] = t
            thought, reasoning, out.ended = [], [], False
        elif kind == "function_call_output":
            call_id = as_str(item.get("call_id")) or ""
            target = out.pending.pop(call_id, None)
            if target is None:
                raise StageFailure(
                    ReasonCode.PARSE_ERROR, f"a function_call_output for no call ({call_id!r})"
                )
            observe(target, item.get("output"))
        elif kind == "reasoning":
            summary = [as_str(as_dict(s).get("text")) for s in as_list(item.get("summary"))]
            reasoning += [s for s in summary if s]
        elif item.get("role") == "assistant":
            text = content_text(item.get("content")).strip()
            if text:
                thought.append(text)
            out.ended = True
        elif item.get("role") in ("user", "system"):
            out.feed({"role": item["role"], "content": item.get("content")})
        else:
            raise StageFailure(ReasonCode.PARSE_ERROR, f"an item MCPMark does not write ({kind!r})")
    if thought and out.ended:
        final: dict[str, Any] = {"reasoning": "\n\n".join(reasoning)} if reasoning else {}
        out.turns.append(turn("\n".join(thought), "message", "", metadata=final))
    return out


def _is_chat_form(items: list[Any]) -> bool:
    return any(isinstance(m, dict) and m.get("role") == "tool" for m in items) or any(
        isinstance(m, dict) and "tool_calls" in m for m in items
    )


def _status(meta: dict[str, Any], ended: bool) -> tuple[str, str | None]:
    """How the run ended: the agent's final answer, the turn limit, or the harness's error."""
    error = as_str(as_dict(meta.get("execution_result")).get("error_message"))
    if error and "Max turns" in error:
        return "truncated", error[:500]
    if ended:
        return "complete", None
    if error:
        return "env_failure", error[:500]
    return "truncated", "the conversation ends without a final answer"


def parse_file(path: str, limit: int) -> ParsedRecord:
    """One task run (a `messages.json` and its `meta.json`) as a trajectory of the MCP domain."""
    where = Path(path)
    meta = read_meta(where.parent)
    if meta is None:
        raise StageFailure(ReasonCode.PARSE_ERROR, f"no MCPMark {META} beside {where.name}")
    items = decode_json(read_limited(path, limit), MESSAGES)
    if not isinstance(items, list):
        raise StageFailure(ReasonCode.PARSE_ERROR, f"{MESSAGES} holds a {type(items).__name__}, not a list")
    if _is_chat_form(items):
        chat = ChatTurns()
        for msg in items:
            if not isinstance(msg, dict):
                raise StageFailure(ReasonCode.PARSE_ERROR, f"a message of type {type(msg).__name__}")
            chat.feed(msg)
    else:
        chat = _sdk_turns(items)
    if not chat.turns:
        reason = as_str(as_dict(meta.get("execution_result")).get("error_message"))
        raise StageFailure(
            ReasonCode.NO_TURNS, f"no tool call and no answer ({reason or 'empty conversation'})"
        )
    for t in chat.pending.values():
        t.setdefault("metadata", {})["no_output"] = True  # the run stopped before the call returned
    status, reason = _status(meta, chat.ended)
    result = as_dict(meta.get("execution_result"))
    times = as_dict(meta.get("time"))
    run = where.parent.parent.name
    return {
        "format": Format.MCPMARK,
        "domain": "mcp",
        "task": chat.task,
        "system_prompt": chat.system_prompt,
        "tools": [],
        "agent": None,
        "model": as_str(meta.get("model_name")),
        "collected_at": as_str(times.get("end")),
        "status": status,
        "status_reason": reason,
        "turns": chat.turns,
        "metadata": {
            "benchmark": BENCHMARK,
            "task_id": as_str(meta.get("task_name")),
            "mcp_service": as_str(meta.get("mcp")),
            "run": run if _RUN.fullmatch(run) else None,
            "model_version": as_str(meta.get("litellm_run_model_name")),
            "reasoning_effort": as_str(meta.get("reasoning_effort")),
            "success": result.get("success") if isinstance(result.get("success"), bool) else None,
            "verification_error": as_str(result.get("verification_error")),
            "runner_error": as_str(result.get("error_message")),
            "started_at": as_str(times.get("start")),
            "agent_execution_time_s": meta.get("agent_execution_time"),
            "turn_count": meta.get("turn_count"),
            "later_user_messages": json.dumps(chat.later_users, ensure_ascii=False)
            if chat.later_users
            else None,
        },
    }
