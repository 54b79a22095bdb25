"""Chat-style agent logs: OpenAI messages (tool calls or mini-swe-agent's fenced bash blocks),
mini-swe-agent trajectory files, and ShareGPT tool-call conversations."""

from __future__ import annotations

import json
import re
from typing import Any

from curation_agents.formats import Format
from curation_agents.formats.common import (
    as_dict,
    as_list,
    as_str,
    bash_block,
    content_text,
    tool_call_json,
    turn,
)
from curation_agents.model import ParsedRecord, RawTurn

_RETURNCODE = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")
_OUTPUT = re.compile(r"<output>\n?(.*?)\n?</output>", re.DOTALL)


def is_message_list(obj: Any) -> bool:
    return isinstance(obj, list) and bool(obj) and all(isinstance(m, dict) and "role" in m for m in obj[:5])


def looks_like_openai(obj: Any) -> bool:
    return isinstance(obj, dict) and is_message_list(obj.get("messages"))


def looks_like_mini_swe_agent(obj: Any) -> bool:
    """A mini-swe-agent trajectory file, or its bare message list (test data, older saves): the
    `trajectory_format` tag, or the system prompt's `mswea_bash_command` action convention."""
    if looks_like_openai(obj):
        return str(obj.get("trajectory_format", "")).startswith("mini-swe-agent")
    return (
        is_message_list(obj)
        and obj[0].get("role") == "system"
        and "mswea_bash_command" in content_text(obj[0].get("content"))
    )


def looks_like_sharegpt(obj: Any) -> bool:
    conv = obj.get("conversations") if isinstance(obj, dict) else None
    return (
        isinstance(conv, list) and bool(conv) and all(isinstance(m, dict) and "from" in m for m in conv[:5])
    )


def _observation_text(text: str) -> tuple[str, int | None]:
    """mini-swe-agent wraps command results as <returncode>..</returncode><output>..</output> (1.x and
    its text-based 2.x configs) or as a JSON object {"returncode": .., "output": ..} (2.x tool calls)."""
    code = _RETURNCODE.search(text)
    out = _OUTPUT.search(text)
    if code or out:
        return (out.group(1) if out else text), (int(code.group(1)) if code else None)
    if text.startswith("{") and '"returncode"' in text:
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            value = None
        if isinstance(value, dict) and isinstance(value.get("output"), str):
            rc = value.get("returncode")
            return value["output"], rc if isinstance(rc, int) and not isinstance(rc, bool) else None
    return text, None


def _reasoning(msg: dict[str, Any]) -> str:
    """An assistant message's hidden reasoning: `reasoning_content` (OpenAI-compatible servers,
    LiteLLM) or Anthropic `thinking` parts; empty when it has none."""
    texts = [msg.get("reasoning_content")]
    texts += [
        p.get("thinking")
        for p in as_list(msg.get("content"))
        if isinstance(p, dict) and p.get("type") == "thinking"
    ]
    return "\n\n".join(t for t in texts if isinstance(t, str) and t.strip())


def _calls(msg: dict[str, Any]) -> list[tuple[str | None, str, Any]]:
    """(call id, tool name, arguments) of every tool call in an assistant message, in any of the
    dialects: OpenAI `tool_calls`, legacy OpenAI `function_call`, Anthropic `tool_use` content parts."""
    calls: list[tuple[str | None, str, Any]] = []
    for call in as_list(msg.get("tool_calls")):
        fn = call.get("function") if isinstance(call, dict) else None
        if isinstance(fn, dict):
            call_id = call.get("id")
            calls.append(
                (
                    call_id if isinstance(call_id, str) else None,
                    str(fn.get("name") or ""),
                    fn.get("arguments"),
                )
            )
    legacy = msg.get("function_call")
    if isinstance(legacy, dict) and legacy.get("name"):
        calls.append((None, str(legacy["name"]), legacy.get("arguments")))
    for part in as_list(msg.get("content")):
        if isinstance(part, dict) and part.get("type") in ("tool_use", "server_tool_use"):
            call_id = part.get("id")
            calls.append(
                (
                    call_id if isinstance(call_id, str) else None,
                    str(part.get("name") or ""),
                    part.get("input"),
                )
            )
    return calls


def _tool_results(msg: dict[str, Any]) -> list[dict[str, Any]]:
    """Anthropic `tool_result` parts of a user message."""
    return [p for p in as_list(msg.get("content")) if isinstance(p, dict) and p.get("type") == "tool_result"]


def parse_messages(messages: list[Any], fmt: Format, meta: dict[str, Any]) -> ParsedRecord:
    system = None
    task = ""
    turns: list[RawTurn] = []
    pending: list[RawTurn] = []  # actions waiting for their observation
    tool_by_id: dict[str, RawTurn] = {}

    def observe(target: RawTurn, text: str, is_error: Any = None) -> None:
        if target in pending:
            pending.remove(target)
        obs, code = _observation_text(text)
        target["observation"] = obs
        if code is not None:
            target["exit_code"] = code
            target["is_error"] = code != 0
        if isinstance(is_error, bool):
            target["is_error"] = is_error

    for msg in messages:
        if not isinstance(msg, dict):
            continue
        role = msg.get("role")
        text = content_text(msg.get("content"))
        results = _tool_results(msg) if role == "user" else []
        if role == "system" and system is None:
            system = text
        elif results:
            for part in results:
                call_id = part.get("tool_use_id")
                target = tool_by_id.pop(call_id, None) if isinstance(call_id, str) else None
                if target is None and pending:
                    target = pending[0]
                if target is not None:
                    observe(target, content_text(part.get("content")), part.get("is_error"))
        elif role == "user" and not task and not turns:
            task = text
        elif role == "assistant":
            calls = _calls(msg)
            reasoning = _reasoning(msg)
            if calls:
                for index, (call_id, name, arguments) in enumerate(calls):
                    notes: dict[str, Any] = {"thought": text} if text else {}
                    if reasoning and index == 0:
                        notes["reasoning"] = reasoning
                    t = turn(tool_call_json(name, arguments), "tool_call", "", tool_name=name, metadata=notes)
                    turns.append(t)
                    pending.append(t)
                    if call_id is not None:
                        tool_by_id[call_id] = t
                continue
            command = bash_block(text)
            extra = as_dict(msg.get("extra"))
            actions = extra.get("actions") if isinstance(extra.get("actions"), list) else None
            if command is None and actions and isinstance(actions[0], dict):
                command = as_str(actions[0].get("command"))
            t = turn(
                command or text,
                "command" if command else "empty",
                "",
                tool_name="bash" if command else None,
                metadata={"thought": text} if command else {},
            )
            if reasoning:
                t["metadata"]["reasoning"] = reasoning
            turns.append(t)
            pending.append(t)
        elif role in ("tool", "function", "user", "ipython"):
            call_id = msg.get("tool_call_id")
            target = tool_by_id.pop(call_id, None) if isinstance(call_id, str) else None
            if target is None and role == "function" and isinstance(msg.get("name"), str):
                target = next((t for t in pending if t.get("tool_name") == msg["name"]), None)
            if target is None and pending:
                target = pending[0]
            if target is None:
                continue
            observe(target, text)
            extra = as_dict(msg.get("extra"))
            if isinstance(extra.get("raw_output"), str):
                target["observation"] = extra["raw_output"]  # mini-swe-agent 2: the output before templating
            if isinstance(extra.get("returncode"), int) and not isinstance(extra["returncode"], bool):
                target["exit_code"] = extra["returncode"]
                target["is_error"] = extra["returncode"] != 0
    return {
        "format": fmt,
        "domain": None,
        "task": task,
        "system_prompt": system,
        "tools": [],
        "agent": meta.get("agent"),
        "model": meta.get("model"),
        "status": "complete",
        "turns": turns,
        "metadata": {
            k: v for k, v in meta.items() if k not in ("agent", "model") and isinstance(v, str | int | bool)
        },
    }


def parse_openai(obj: Any) -> ParsedRecord:
    """A record with `messages`, or a bare message list (older mini-swe-agent files)."""
    if isinstance(obj, list):
        return parse_messages(obj, Format.OPENAI_MESSAGES, {})
    meta: dict[str, Any] = {"model": as_str(obj.get("model"))}
    for key in ("instance_id", "id", "verified"):
        if key in obj:
            meta[key] = obj[key]
    tools = as_list(obj.get("tools"))
    parsed = parse_messages(obj["messages"], Format.OPENAI_MESSAGES, meta)
    parsed["tools"] = tool_specs(tools)
    if parsed.get("system_prompt") is None and obj.get("system"):
        parsed["system_prompt"] = content_text(obj["system"])  # Anthropic: the system prompt is top-level
    return parsed


def parse_mini_swe_agent(obj: dict[str, Any] | list[Any]) -> ParsedRecord:
    if isinstance(obj, list):
        obj = {"messages": obj}
    info = as_dict(obj.get("info"))
    config = as_dict(info.get("config"))
    model_cfg = as_dict(config.get("model"))
    meta = {
        "agent": "mini-swe-agent",
        "model": as_str(model_cfg.get("model_name")),
        "exit_status": as_str(info.get("exit_status")) or _exit_status(obj["messages"]),
    }
    parsed = parse_messages(obj["messages"], Format.MINI_SWE_AGENT, meta)
    parsed["domain"] = "swe"
    for t in parsed["turns"]:
        # mini-swe-agent 2's one tool is `bash {"command": ...}`: the same step as a fenced command.
        command = _bash_call_command(t)
        if command is not None:
            t["action"], t["action_kind"] = command, "command"
    status = meta["exit_status"]
    if status and status not in ("Submitted", "submitted"):
        parsed["status"] = "truncated" if "Limit" in status or "Timeout" in status else "policy_error"
        parsed["status_reason"] = status
    return parsed


def _bash_call_command(t: RawTurn) -> str | None:
    """The command of a `bash` tool call whose only argument is `command`, else None."""
    if t.get("action_kind") != "tool_call" or t.get("tool_name") != "bash":
        return None
    try:
        call = json.loads(t.get("action", ""))
    except (ValueError, RecursionError):
        return None
    arguments = call.get("arguments") if isinstance(call, dict) else None
    if (
        isinstance(arguments, dict)
        and list(arguments) == ["command"]
        and isinstance(arguments["command"], str)
    ):
        return arguments["command"]
    return None


def _exit_status(messages: list[Any]) -> str:
    """The exit status mini-swe-agent 2 puts in its closing `exit` message (bare message lists)."""
    last = messages[-1] if messages else None
    if isinstance(last, dict) and last.get("role") == "exit":
        return as_str(as_dict(last.get("extra")).get("exit_status")) or ""
    return ""


def tool_specs(tools: list[Any]) -> list[dict[str, Any]]:
    """Tool definitions in OpenAI (`function`) or Anthropic (`input_schema`) form, as ToolSpec dicts."""
    specs = []
    for tool in tools:
        fn = (
            tool.get("function")
            if isinstance(tool, dict) and isinstance(tool.get("function"), dict)
            else tool
        )
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            params = fn.get("parameters", fn.get("input_schema"))  # OpenAI / Anthropic
            specs.append(
                {
                    "name": fn["name"],
                    "description": as_str(fn.get("description")),
                    "parameters": params if isinstance(params, dict) else None,
                }
            )
    return specs


def parse_sharegpt(obj: dict[str, Any]) -> ParsedRecord:
    """ShareGPT: human / function_call / observation / gpt turns (LLaMA-Factory's tool format)."""
    system = as_str(obj.get("system")) or None
    task = ""
    turns: list[RawTurn] = []
    for msg in obj["conversations"]:
        if not isinstance(msg, dict):
            continue
        speaker = msg.get("from")
        value = content_text(msg.get("value"))
        if speaker in ("human", "user") and not task and not turns:
            task = value
        elif speaker == "function_call":
            call = None
            if value.lstrip(" \t\n\r").startswith("{"):  # only an object can be a call; most are prose
                try:
                    call = json.loads(value)
                except (ValueError, RecursionError):
                    call = None
            if isinstance(call, dict) and isinstance(call.get("name"), str):
                turns.append(
                    turn(
                        tool_call_json(call["name"], call.get("arguments")),
                        "tool_call",
                        "",
                        tool_name=call["name"],
                    )
                )
            else:
                command = bash_block(value)
                turns.append(
                    turn(
                        command or value,
                        "command" if command else "empty",
                        "",
                        tool_name="bash" if command else None,
                        metadata={"thought": value} if command else {},
                    )
                )
        elif speaker in ("observation", "tool") and turns:
            obs, code = _observation_text(value)
            turns[-1]["observation"] = obs
            if code is not None:
                turns[-1]["exit_code"] = code
        elif speaker in ("gpt", "assistant"):
            turns.append(turn(value, "empty", "", metadata={"narration": True}))
    tools = obj.get("tools")
    if isinstance(tools, str):
        try:
            tools = json.loads(tools)
        except (ValueError, RecursionError):
            tools = []
    return {
        "format": Format.SHAREGPT,
        "domain": None,
        "task": task,
        "system_prompt": system,
        "tools": tool_specs(as_list(tools)),
        "agent": None,
        "model": None,
        "status": "complete",
        "turns": turns,
        "metadata": {"id": obj["id"]} if isinstance(obj.get("id"), str | int) else {},
    }
