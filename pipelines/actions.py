"""One canonical action form per domain, whatever the source wrote (AgentWorldBench conventions).

A domain's form is its `DomainSpec.action_form` (schemas/domains.py):

- keystroke_array (terminal): a JSON array of `{"keystrokes": "...", "duration": seconds}` objects. A command line
  becomes one object whose keystrokes end in a newline (a submitted line); its duration is the
  turn's measured duration when the collector recorded one (rounded to 0.1 s), else 1 s. The
  collectors' `run_command` / `send_keystrokes` tool calls are unwrapped the same way.
- tool_call (swe): a JSON tool call `{"name": ..., "arguments": {...}}`. Function-calling forms (`tool`,
  `function.name`, string-encoded `arguments`) are normalised; public SWE-agent commands
  (`open path 12`, `edit 3:5` + replacement + `end_of_edit`, `find_file name dir`, ...) become calls
  of the command's tool with named arguments; anything else is a `bash` call with the command line.
- as_recorded (the other domains): the text as collected (their forms are already the benchmark's).

Pools, exports and the evaluation pool all read trajectories after this step, so a model never sees
two spellings of the same action.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from schemas.domains import ActionForm, domain_spec
from schemas.trajectory import ActionKind, Trajectory, Turn

DEFAULT_KEY_DURATION_S = 1.0

# Public SWE-agent commands and the names of their positional arguments.
SWE_AGENT_COMMANDS: dict[str, tuple[str, ...]] = {
    "open": ("path", "line_number"),
    "goto": ("line_number",),
    "scroll_up": (),
    "scroll_down": (),
    "create": ("filename",),
    "find_file": ("file_name", "dir"),
    "search_dir": ("search_term", "dir"),
    "search_file": ("search_term", "file"),
    "submit": (),
}
_BLOCK_COMMANDS = {"edit": "end_of_edit", "insert": "end_of_insert", "append": "end_of_append"}


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def keystroke_array(turn: Turn) -> str | None:
    """A terminal action as AgentWorldBench keystrokes; None when the text has no terminal reading."""
    text = turn.action.text
    parsed: Any = None
    if text.lstrip()[:1] in ("[", "{"):
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError:
            parsed = None
    if isinstance(parsed, dict) and isinstance(parsed.get("arguments"), dict | str):
        args = parsed["arguments"]
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except json.JSONDecodeError:
                args = {}
        if isinstance(args, dict) and isinstance(args.get("keystrokes"), list | dict | str):
            parsed = args["keystrokes"]
        elif isinstance(args, dict) and isinstance(args.get("command"), str):
            text, parsed = args["command"], None
    if isinstance(parsed, dict) and "keystrokes" in parsed:
        parsed = [parsed]
    if isinstance(parsed, list) and parsed and all(isinstance(k, dict | str) for k in parsed):
        out = []
        for k in parsed:
            item = {"keystrokes": k} if isinstance(k, str) else k
            keys = item.get("keystrokes", "")
            if not isinstance(keys, str):
                return None
            duration = item.get("duration", DEFAULT_KEY_DURATION_S)
            duration = float(duration) if isinstance(duration, int | float) else DEFAULT_KEY_DURATION_S
            out.append({"keystrokes": keys, "duration": duration})
        return _dumps(out)
    if turn.action.kind in (ActionKind.KEYSTROKES, ActionKind.EMPTY) and not text.strip():
        return _dumps([{"keystrokes": "", "duration": DEFAULT_KEY_DURATION_S}])
    duration = DEFAULT_KEY_DURATION_S
    if turn.duration_s is not None and turn.duration_s > 0:
        duration = max(0.1, round(turn.duration_s, 1))
    return _dumps([{"keystrokes": text if text.endswith("\n") else text + "\n", "duration": duration}])


def _tool_call_of(text: str) -> dict[str, Any] | None:
    try:
        obj = json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return None
    if not isinstance(obj, dict):
        return None
    function = obj.get("function")
    fn: dict[str, Any] = function if isinstance(function, dict) else {}
    name = obj.get("name") or obj.get("tool") or fn.get("name")
    if not isinstance(name, str) or not name:
        return None
    args = obj.get("arguments", obj.get("args", obj.get("input", fn.get("arguments", {}))))
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            args = {"input": args}
    if not isinstance(args, dict):
        args = {"input": args}
    return {"name": name, "arguments": args}


def swe_agent_call(text: str, tool_name: str | None = None) -> dict[str, Any]:
    """A public SWE-agent command line as a JSON tool call."""
    stripped = text.strip()
    head, _, rest = stripped.partition(" ")
    first_line, _, body = stripped.partition("\n")
    command = first_line.split(" ", 1)[0]
    if command in _BLOCK_COMMANDS:
        terminator = _BLOCK_COMMANDS[command]
        lines = body.split("\n")
        if lines and lines[-1].strip() == terminator:
            lines = lines[:-1]
        args: dict[str, Any] = {}
        where = first_line[len(command) :].strip()
        if command == "edit" and ":" in where:
            start, _, end = where.partition(":")
            if start.strip().isdigit() and end.strip().isdigit():
                args = {"start_line": int(start), "end_line": int(end)}
        elif command == "insert" and where.isdigit():
            args = {"line_number": int(where)}
        if not lines and where and not args:  # `insert 'text'`: the text on the command line itself
            try:
                lines = [" ".join(shlex.split(where))]
            except ValueError:
                lines = [where]
        args["text"] = "\n".join(lines)
        return {"name": command, "arguments": args}
    if head in SWE_AGENT_COMMANDS and "\n" not in stripped:
        try:
            values = shlex.split(rest)
        except ValueError:
            values = rest.split()
        names = SWE_AGENT_COMMANDS[head]
        args = {}
        for i, value in enumerate(values):
            key = names[i] if i < len(names) else f"arg{i}"
            args[key] = int(value) if value.isdigit() and key.endswith(("number", "line")) else value
        return {"name": head, "arguments": args}
    name = tool_name if tool_name and tool_name not in SWE_AGENT_COMMANDS else "bash"
    return {"name": name, "arguments": {"command": text}}


def canonical_action(traj: Trajectory, turn: Turn) -> tuple[ActionKind, str, str | None]:
    """(kind, text, tool name) of a turn's action in its domain's canonical form."""
    action = turn.action
    form = domain_spec(traj.domain).action_form
    if action.kind is ActionKind.EMPTY and form is not ActionForm.KEYSTROKE_ARRAY:
        return action.kind, action.text, action.tool_name
    if form is ActionForm.KEYSTROKE_ARRAY:
        keys = keystroke_array(turn)
        if keys is not None:
            return ActionKind.KEYSTROKES, keys, None
    elif form is ActionForm.TOOL_CALL:
        call = _tool_call_of(action.text) or swe_agent_call(action.text, action.tool_name)
        return ActionKind.TOOL_CALL, _dumps(call), call["name"]
    return action.kind, action.text, action.tool_name


def canonicalise_actions(traj: Trajectory) -> int:
    """Rewrite every action of `traj` in place into its canonical form; return how many changed."""
    changed = 0
    for turn in traj.turns:
        kind, text, tool = canonical_action(traj, turn)
        if (kind, text, tool) != (turn.action.kind, turn.action.text, turn.action.tool_name):
            turn.action.kind, turn.action.text, turn.action.tool_name = kind, text, tool
            changed += 1
    return changed
