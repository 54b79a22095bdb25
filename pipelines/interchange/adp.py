"""`worldline export adp`: trajectories as Agent Data Protocol (ADP) standardised records, one JSON
object a line.

The task is a user `text_observation`, each turn an action (`code_action` for commands and code,
`message_action` for messages, `api_action` otherwise) linked by `tool_call_id` to the observation
after it (`web_observation` with an axtree or HTML for those formats, else `text_observation`).
What ADP has no field for (domain, status, model, action kinds, observation formats, exit codes,
times, metadata) travels in `details.worldline`, which `worldline clean` reads back; per turn it
holds only what the ADP items do not give back when the ADP reader reads them.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from curation_agents.formats import adp as reader
from curation_agents.model import StageFailure
from schemas.agentworldbench import AtomicTextFile
from schemas.trajectory import ActionKind, ObservationFormat, Trajectory, Turn

SCHEMA_VERSION = "1.5.0"
"""The ADP standardised schema version the records declare (schema/version.py upstream)."""
EXTENSION = reader.EXTENSION
CODE_LANGUAGES = frozenset(
    {
        "bash", "sh", "shell", "console", "commandline", "powershell", "cmd", "batch", "python",
        "python3", "py", "javascript", "js", "typescript", "ts", "node", "java", "kotlin", "scala",
        "c", "cpp", "csharp", "go", "rust", "swift", "ruby", "php", "perl", "r", "julia", "lua",
        "haskell", "sql", "sqlite", "mysql", "postgresql", "html", "css", "json", "yaml", "xml",
        "toml", "markdown", "latex", "makefile", "dockerfile", "diff", "text", "code",
    }
)  # fmt: skip
"""`code_action` languages the exporter writes as they are: each is a value of ADP's `CodeAction.language`
(a closed list); any other language becomes `shell` (commands) or `code` (code)."""
WEB_FORMATS = (ObservationFormat.AXTREE, ObservationFormat.HTML)


@dataclass
class AdpExport:
    out: Path
    trajectories: int = 0
    items: int = 0


def _number(value: Any) -> float | int | None:
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _browser_call(text: str) -> tuple[str, dict[str, Any]] | None:
    """`name(key=value, ...)` (a BrowserGym call) as ADP's web converters write it: the function and
    each argument's Python source text."""
    try:
        call = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError):
        return None
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name) or call.args:
        return None
    kwargs: dict[str, Any] = {}
    for keyword in call.keywords:
        value = ast.get_source_segment(text.strip(), keyword.value)
        if keyword.arg is None or value is None:
            return None
        kwargs[keyword.arg] = value
    return call.func.id, kwargs


def _action(turn: Turn, call_id: str | None, web: bool) -> dict[str, Any]:
    action = turn.action
    base: dict[str, Any] = {}
    if call_id is not None:
        base["tool_call_id"] = call_id
    reasoning, reward = turn.metadata.get("reasoning"), _number(turn.metadata.get("reward"))
    if isinstance(reasoning, str):
        base["reasoning_content"] = reasoning
    if reward is not None:
        base["reward"] = reward
    thought = turn.metadata.get("thought")
    description = thought if isinstance(thought, str) else None
    if action.kind == ActionKind.MESSAGE:
        base.pop("tool_call_id", None)
        return {**base, "class_": "message_action", "content": action.text, "description": description}
    if action.kind in (ActionKind.COMMAND, ActionKind.CODE):
        language = turn.metadata.get("language")
        if not isinstance(language, str):
            language = "bash" if action.kind == ActionKind.COMMAND else "python"
        elif language not in CODE_LANGUAGES:
            language = "shell" if action.kind == ActionKind.COMMAND else "code"
        return {
            **base,
            "class_": "code_action",
            "language": language,
            "content": action.text,
            "description": description,
        }
    try:
        call = json.loads(action.text)
    except json.JSONDecodeError:
        call = None
    browser = _browser_call(action.text) if web and action.kind == ActionKind.GUI else None
    if isinstance(call, dict) and isinstance(call.get("arguments"), dict):
        function, kwargs = str(call.get("name") or action.tool_name or "call"), call["arguments"]
    elif browser is not None:
        function, kwargs = browser
    else:
        function, kwargs = action.tool_name or action.kind.value, {"action": action.text}
    return {
        **base,
        "class_": "api_action",
        "function": function,
        "kwargs": kwargs,
        "description": description,
    }


def _observation(turn: Turn, call_id: str | None) -> dict[str, Any]:
    obs, meta = turn.observation, turn.metadata
    base: dict[str, Any] = {} if call_id is None else {"tool_call_id": call_id}
    reward = _number(meta.get("observation_reward"))
    if reward is not None:
        base["reward"] = reward
    if obs.format in WEB_FORMATS:
        is_tree = obs.format == ObservationFormat.AXTREE
        url = meta.get("observation_url", meta.get("url"))
        size = meta.get("observation_viewport_size")
        screenshot = meta.get("observation_screenshot")
        return {
            **base,
            "class_": "web_observation",
            "html": None if is_tree else obs.text,
            "axtree": obs.text if is_tree else None,
            "url": url if isinstance(url, str) else None,
            "image_observation": (
                {
                    "class_": "image_observation",
                    "content": screenshot,
                    "annotations": None,
                    "source": "environment",
                }
                if isinstance(screenshot, str)
                else None
            ),
            "viewport_size": (
                size
                if isinstance(size, list) and len(size) == 2 and all(type(v) is int for v in size)
                else None
            ),
        }
    name = meta.get("observation_name")
    return {
        **base,
        "class_": "text_observation",
        "content": obs.text,
        "name": name if isinstance(name, str) else None,
        "source": "user" if meta.get("observation_source") == "user" else "environment",
    }


def _custom_tools(traj: Trajectory, content: list[dict[str, Any]]) -> list[str] | None:
    """The declared tool names, when they name every `api_action` function (ADP's rule for
    `available_custom_tools`)."""
    names = list(dict.fromkeys(tool.name for tool in traj.action_space.tools))
    functions = {item["function"] for item in content if item["class_"] == "api_action"}
    return names if names and functions <= set(names) else None


def _turn_extension(turn: Turn, read: dict[str, Any] | None) -> dict[str, Any]:
    """What `details.worldline` keeps of one turn: the fields ADP has no place for, and whatever of the
    action and metadata the ADP reader, reading the items alone, does not give back as it was."""
    saved: dict[str, Any] = {
        "action_kind": turn.action.kind.value,
        "observation_format": turn.observation.format.value,
        "exit_code": turn.exit_code,
        "is_error": turn.observation.is_error,
        "started_at": None if turn.started_at is None else turn.started_at.isoformat(),
        "duration_s": turn.duration_s,
    }
    if turn.state_changed is not None:
        saved["state_changed"] = turn.state_changed
    read = read or {"action": None, "tool_name": None, "observation": None, "metadata": {}}
    for key, value in (
        ("action", turn.action.text),
        ("tool_name", turn.action.tool_name),
        ("observation", turn.observation.text),
    ):
        if read.get(key) != value:
            saved[key] = value
    read_meta = read.get("metadata") or {}
    changed = {k: v for k, v in turn.metadata.items() if k not in read_meta or read_meta[k] != v}
    if changed:
        saved["metadata"] = changed
    absent = [k for k in read_meta if k not in turn.metadata]
    if absent:
        saved["metadata_absent"] = absent
    return saved


def trajectory_to_adp(traj: Trajectory) -> dict[str, Any]:
    """One trajectory as an ADP standardised record."""
    content: list[dict[str, Any]] = [
        {"class_": "text_observation", "content": traj.task, "name": None, "source": "user"}
    ]
    initial = traj.metadata.get("adp_initial_observation")
    if isinstance(initial, str):
        content.append(
            {"class_": "text_observation", "content": initial, "name": None, "source": "environment"}
        )
    calls = [
        None if t.action.kind == ActionKind.MESSAGE else f"call_{i:06d}" for i, t in enumerate(traj.turns, 1)
    ]
    shown = [c is not None or bool(t.observation.text) for c, t in zip(calls, traj.turns, strict=True)]
    web = any(s and t.observation.format in WEB_FORMATS for s, t in zip(shown, traj.turns, strict=True))
    for turn, call_id, show in zip(traj.turns, calls, shown, strict=True):
        content.append(_action(turn, call_id, web))
        if show:
            content.append(_observation(turn, call_id))
    record: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "id": traj.id, "content": content}
    tools = _custom_tools(traj, content)
    if tools is not None:
        record["available_custom_tools"] = tools
    languages = sorted({i["language"] for i in content if i["class_"] == "code_action"})
    if languages:
        record["available_code_languages"] = languages
    details = traj.metadata.get("adp_details")
    record["details"] = (
        {k: v for k, v in details.items() if k != EXTENSION} if isinstance(details, dict) else {}
    )
    dataset = traj.metadata.get("adp_dataset")
    if isinstance(dataset, str):
        record["details"]["source"] = dataset
    try:
        read = reader.parse(json.loads(json.dumps(record, ensure_ascii=False, default=str)))
    except StageFailure:  # no action: the record holds no turn to read back
        read = None
    read_turns: list[Any] = list(read["turns"]) if read is not None else []
    record["details"][EXTENSION] = {
        "domain": traj.domain.value,
        "status": traj.status.value,
        "status_reason": traj.status_reason,
        "model": traj.source.model,
        "agent": traj.source.agent,
        "collected_at": None if traj.source.collected_at is None else traj.source.collected_at.isoformat(),
        "task": traj.task,
        "tools": [tool.to_json() for tool in traj.action_space.tools],
        "initial_state": traj.initial_state,
        "demonstrations": traj.demonstrations,
        "simulation_instruction": traj.simulation_instruction,
        "turns": [
            _turn_extension(turn, read_turns[i] if i < len(read_turns) else None)
            for i, turn in enumerate(traj.turns)
        ],
        "metadata": traj.metadata,
    }
    return record


def write_adp(
    trajectories: Iterable[Trajectory], out: Path, on_written: Callable[[], None] | None = None
) -> AdpExport:
    """Write every trajectory to OUT as ADP JSONL; the file appears whole or not at all."""
    report = AdpExport(out=out)
    lines = AtomicTextFile(out)
    try:
        for traj in trajectories:
            record = trajectory_to_adp(traj)
            lines.write_line(json.dumps(record, ensure_ascii=False, default=str))
            report.trajectories += 1
            report.items += len(record["content"])
            if on_written is not None:
                on_written()
    except BaseException:
        lines.abort()
        raise
    lines.commit()
    return report
