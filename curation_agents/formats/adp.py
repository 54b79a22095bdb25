"""Agent Data Protocol (ADP, neulab/agent-data-protocol) standardised records: one `Trajectory` of
`{schema_version, id, content, details}`, its content a flat list of actions (`api_action`,
`code_action`, `message_action`) and observations (`text_observation`, `web_observation`,
`image_observation`) told apart by `class_`.

An action and the observations after it are one turn; the user and system text before the first
action are the task and the system prompt; observations before the first action that are not text
(a web page the agent starts on) stay in metadata as `adp_initial_observation`. A record that
`worldline export adp` wrote carries `details.worldline`, which gives back the fields ADP has no
place for. Any other `class_` quarantines the record (parse_error), as does a record with no action.
"""

from __future__ import annotations

from typing import Any

from curation_agents.formats import Format
from curation_agents.formats.common import as_dict, as_list, as_str, tool_call_json, turn
from curation_agents.model import ParsedRecord, RawTurn, StageFailure
from schemas.reasons import ReasonCode

ACTIONS = frozenset({"api_action", "code_action", "message_action"})
OBSERVATIONS = frozenset({"text_observation", "web_observation", "image_observation"})
EXTENSION = "worldline"
"""The key under `details` where `worldline export adp` keeps what ADP has no field for."""
SHELL_LANGUAGES = frozenset({"bash", "sh", "shell", "console", "commandline"})
_RESTORED = frozenset(
    {
        "action",
        "action_kind",
        "tool_name",
        "observation",
        "observation_format",
        "exit_code",
        "is_error",
        "started_at",
        "duration_s",
    }
)
"""Turn fields `details.worldline.turns` gives back: those ADP's items have no place for, and the
action, tool name and observation where the items do not give them back as they were."""
_TRAJECTORY_TEXTS = ("initial_state", "demonstrations", "simulation_instruction")
"""Trajectory fields `details.worldline` gives back (through metadata, where the cleaner takes them)."""
SWE_TOOLS = frozenset({"str_replace_editor", "str_replace_based_edit_tool", "edit_file"})
"""Tools that edit a repository's files: a trajectory calling them is a SWE one."""


def looks_like(obj: Any) -> bool:
    content = obj.get("content") if isinstance(obj, dict) else None
    return (
        isinstance(obj, dict)
        and isinstance(obj.get("id"), str)
        and isinstance(content, list)
        and bool(content)
        and all(isinstance(item, dict) and "class_" in item for item in content)
    )


def _observation_text(item: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
    """(text, observation format, metadata) of one observation."""
    kind = item["class_"]
    if kind == "text_observation":
        return str(item.get("content") or ""), "text", {}
    if kind == "image_observation":
        return f"[image: {item.get('content')}]", "text", {"image": item.get("content")}
    meta = {k: item[k] for k in ("url", "viewport_size") if item.get(k) is not None}
    image = as_dict(item.get("image_observation")).get("content")
    if image:
        meta["screenshot"] = image
    if isinstance(item.get("axtree"), str):
        return item["axtree"], "axtree", meta
    if isinstance(item.get("html"), str):
        return item["html"], "html", meta
    return (f"[screenshot: {image}]" if image else ""), "text", meta


def _action(item: dict[str, Any], web: bool) -> tuple[str, str, str | None]:
    """(text, action kind, tool name) of one action."""
    kind = item["class_"]
    if kind == "message_action":
        return str(item.get("content") or ""), "message", None
    if kind == "code_action":
        language = str(item.get("language"))
        return str(item.get("content") or ""), "command" if language in SHELL_LANGUAGES else "code", None
    function = str(item.get("function"))
    kwargs = as_dict(item.get("kwargs"))
    if web:  # ADP's web datasets write BrowserGym calls with Python-literal argument values
        args = ", ".join(f"{k}={v}" for k, v in kwargs.items())
        return f"{function}({args})", "gui", function
    return tool_call_json(function, kwargs), "tool_call", function


def _domain(content: list[dict[str, Any]], custom_tools: bool) -> str | None:
    classes = {item["class_"] for item in content}
    functions = {item.get("function") for item in content if item["class_"] == "api_action"}
    if "web_observation" in classes:
        return "web"
    if functions & SWE_TOOLS:
        return "swe"
    if "code_action" in classes:
        return "terminal"
    if custom_tools or functions:
        return "mcp"
    return None


def parse(payload: Any) -> ParsedRecord:
    record = as_dict(payload)
    content = as_list(record.get("content"))
    details = as_dict(record.get("details"))
    extension = as_dict(details.get(EXTENSION))
    for index, item in enumerate(content):
        cls = as_dict(item).get("class_")
        if cls not in ACTIONS | OBSERVATIONS:
            raise StageFailure(ReasonCode.PARSE_ERROR, f"content[{index}]: ADP class_ {cls!r} is not mapped")
    web = "web_observation" in {item["class_"] for item in content}
    task: list[str] = []
    system: list[str] = []
    initial: list[str] = []
    turns: list[RawTurn] = []
    for item in content:
        if item["class_"] in ACTIONS:
            text, kind, tool = _action(item, web)
            meta: dict[str, Any] = {
                k: item[k] for k in ("tool_call_id", "reward", "language") if item.get(k) is not None
            }
            if item.get("description"):
                meta["thought"] = item["description"]
            if item.get("reasoning_content"):
                meta["reasoning"] = item["reasoning_content"]
            turns.append(turn(text, kind, "", tool_name=tool, metadata=meta))
            continue
        text, fmt, obs_meta = _observation_text(item)
        if not turns:
            source = item.get("source")
            if item["class_"] == "text_observation" and source in ("user", "system"):
                (task if source == "user" else system).append(text)
            else:
                initial.append(text)
            continue
        last = turns[-1]
        last["observation"] = f"{last['observation']}\n{text}" if last["observation"] else text
        if last["observation_format"] == "text" or not last["observation"].strip():
            last["observation_format"] = fmt
        last["metadata"].update({f"observation_{k}": v for k, v in obs_meta.items()})
        if item.get("reward") is not None:
            last["metadata"]["observation_reward"] = item["reward"]
        if item["class_"] == "text_observation" and item.get("source") == "user":
            last["metadata"]["observation_source"] = "user"
        if isinstance(item.get("name"), str):
            last["metadata"]["observation_name"] = item["name"]
    if not turns:
        raise StageFailure(ReasonCode.NO_TURNS, f"ADP record {record.get('id')!r} has no action")
    for index, saved_turn in enumerate(as_list(extension.get("turns"))[: len(turns)]):
        saved = as_dict(saved_turn)
        turns[index].update({k: v for k, v in saved.items() if k in _RESTORED})  # type: ignore[typeddict-item]
        meta = turns[index]["metadata"]
        for key in as_list(saved.get("metadata_absent")):
            meta.pop(key, None)
        meta.update(as_dict(saved.get("metadata")))
        if isinstance(saved.get("state_changed"), bool):
            meta["state_changed"] = saved["state_changed"]
    others = {k: v for k, v in details.items() if k != EXTENSION}
    meta_out: dict[str, Any] = {
        "adp_id": record.get("id"),
        "adp_schema_version": as_str(record.get("schema_version")),
        **({"adp_dataset": details["source"]} if isinstance(details.get("source"), str) else {}),
        **({"adp_details": others} if others else {}),
        **({"adp_initial_observation": "\n".join(initial)} if initial else {}),
        **(
            {"adp_available_custom_tools": record["available_custom_tools"]}
            if record.get("available_custom_tools") and not isinstance(extension.get("tools"), list)
            else {}
        ),
        **{k: extension[k] for k in _TRAJECTORY_TEXTS if isinstance(extension.get(k), str)},
        **as_dict(extension.get("metadata")),
    }
    if isinstance(details.get("source"), str):
        meta_out.setdefault("benchmark", details["source"])
    return {
        "format": Format.ADP,
        "domain": as_str(extension.get("domain"))
        or _domain(content, bool(record.get("available_custom_tools"))),
        "task": "\n".join(task) or str(extension.get("task") or ""),
        "system_prompt": "\n".join(system) or None,
        "tools": [as_dict(t) for t in as_list(extension["tools"])]
        if isinstance(extension.get("tools"), list)
        else [
            {"name": n, "description": None, "parameters": None}
            for n in as_list(record.get("available_custom_tools"))
            if isinstance(n, str)
        ],
        "agent": as_str(extension.get("agent")),
        "model": as_str(extension.get("model")),
        "collected_at": as_str(extension.get("collected_at")),
        "status": as_str(extension.get("status")) or "complete",
        "status_reason": as_str(extension.get("status_reason")),
        "turns": turns,
        "metadata": meta_out,
    }
