"""What the three GUI domains (web, os, android) share: the action-call parser, the normalised state
hash behind each turn's `state_changed` bit, and environment-failure detection (the rule itself is
`schemas.gui_failure`).

GUI actions are written as calls in the domain's own syntax (`click("e7")`, `hotkey('ctrl', 's')`,
`back()`) or as an object that addresses an element by role and name (`{"action": "click", "role":
"link", "name": "About"}`). Calls are parsed with `ast` and only literal arguments are accepted: no
action text is ever evaluated as code.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from collectors.environment import Environment, Task, TaskError
from schemas import Action, ActionKind, ActionSpace, ToolSpec
from schemas.gui_failure import detect_page_failure
from schemas.screen_state import ERROR_LINE, VOLATILE_PATTERNS, screen_hash, stable_screen, state_text

# The GUI collectors' failure check (the rule lives in schemas.gui_failure) and state rule (schemas.screen_state).
__all__ = ["ERROR_LINE", "VOLATILE_PATTERNS", "detect_page_failure", "state_text"]


class EnvFailure(OSError):
    """The environment itself is in an error state (HTTP error page, CAPTCHA, a crashed or missing
    application): the trajectory is recorded as `env_failure` with this message as the reason."""


class ActionSyntaxError(ValueError):
    """An action that cannot be read; the message says what was expected. Becomes an error observation."""


# --------------------------------------------------------------------------------------------------
# Action calls
# --------------------------------------------------------------------------------------------------


@dataclass
class GuiCall:
    """One parsed GUI action: a function name with literal arguments, or an element addressed by
    role/name/text (`target`) for the object form."""

    name: str
    args: list[Any] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)
    target: dict[str, Any] | None = None  # object form: {"role", "name"} / {"text"} / {"resource_id"}

    def text(self) -> str:
        """The call in the domain's syntax (the object form as compact JSON)."""
        if self.target is not None:
            return json.dumps({"action": self.name, **self.target, **self.kwargs}, ensure_ascii=False)
        return format_call(self.name, self.args, self.kwargs)


def format_call(
    name: str, args: list[Any] | tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
) -> str:
    """`name(arg, ..., key=value)` with Python literals, the inverse of `parse_call`."""
    parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in (kwargs or {}).items()]
    return f"{name}({', '.join(parts)})"


_CALL_PREFIXES = ("pyautogui.", "page.", "d.", "device.")


def parse_call(text: str) -> GuiCall:
    """Parse one call such as `fill("e7", "hello")` or `pyautogui.hotkey('ctrl', 's')`.

    Only a single call expression with literal arguments (strings, numbers, booleans, None, lists,
    tuples, dicts) is accepted; anything else (assignments, attribute chains, names, nested calls) is
    an ActionSyntaxError, so model-written text is never executed."""
    source = text.strip()
    if not source:
        raise ActionSyntaxError('empty action: write a call such as click("e7")')
    if len(source) > 20000:
        raise ActionSyntaxError(f"action is too long ({len(source)} characters; the limit is 20000)")
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as exc:
        raise ActionSyntaxError(f"not a call expression ({exc.msg}): {source[:200]!r}") from exc
    node = tree.body
    if not isinstance(node, ast.Call):
        raise ActionSyntaxError(f'expected one call such as click("e7"), got {source[:200]!r}')
    func = node.func
    if isinstance(func, ast.Name):
        name = func.id
    elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        prefix = f"{func.value.id}."
        if prefix not in _CALL_PREFIXES:
            raise ActionSyntaxError(f"unknown call prefix {prefix!r} in {source[:200]!r}")
        name = func.attr
    else:
        raise ActionSyntaxError(f"expected a plain function call, got {source[:200]!r}")
    try:
        args = [ast.literal_eval(a) for a in node.args]
        kwargs = {}
        for kw in node.keywords:
            if kw.arg is None:
                raise ActionSyntaxError(f"**kwargs are not allowed: {source[:200]!r}")
            kwargs[kw.arg] = ast.literal_eval(kw.value)
    except ValueError as exc:
        raise ActionSyntaxError(
            f"arguments must be literals (strings, numbers, lists): {source[:200]!r}"
        ) from exc
    if any(isinstance(a, ast.Starred) for a in node.args):
        raise ActionSyntaxError(f"*args are not allowed: {source[:200]!r}")
    return GuiCall(name=name, args=args, kwargs=kwargs)


TARGET_KEYS = ("role", "name", "text", "resource_id", "description", "exact")


def gui_call_from_action(action: Action) -> GuiCall:
    """The GuiCall an Action holds: a call string (COMMAND / GUI / CODE), the object form as JSON
    (GUI), or a tool call whose name is the function and whose arguments are keyword arguments."""
    text = action.text.strip()
    if action.kind == ActionKind.TOOL_CALL:
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ActionSyntaxError(f"tool call is not JSON ({exc.msg}): {text[:200]!r}") from exc
        name = obj.get("name") or action.tool_name
        arguments = obj.get("arguments") or {}
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments or "{}")
            except json.JSONDecodeError as exc:
                raise ActionSyntaxError(f"tool arguments are not JSON: {arguments[:200]!r}") from exc
        if not isinstance(name, str) or not isinstance(arguments, dict):
            raise ActionSyntaxError(f"a tool call needs a string name and object arguments: {text[:200]!r}")
        return GuiCall(name=name, kwargs=dict(arguments))
    if text.startswith("{"):
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ActionSyntaxError(f"object action is not JSON ({exc.msg}): {text[:200]!r}") from exc
        return gui_call_from_object(obj)
    return parse_call(text)


def gui_call_from_object(obj: Any) -> GuiCall:
    """The object form {"action": "click", "role": "link", "name": "About", ...}: the element keys
    become the target, every other key a keyword argument (e.g. "value" for fill)."""
    if not isinstance(obj, dict) or not isinstance(obj.get("action"), str):
        raise ActionSyntaxError(f"an object action needs a string 'action' field: {str(obj)[:200]!r}")
    target = {k: obj[k] for k in TARGET_KEYS if k in obj}
    kwargs = {k: v for k, v in obj.items() if k != "action" and k not in TARGET_KEYS}
    return GuiCall(name=obj["action"], kwargs=kwargs, target=target or None)


def tools_from_signatures(
    signatures: dict[str, tuple[str, dict[str, dict[str, Any]], list[str]]],
) -> list[ToolSpec]:
    """Tool schemas (for tool-calling policies) from {name: (description, properties, required)}."""
    return [
        ToolSpec(
            name=name,
            description=description,
            parameters={"type": "object", "properties": properties, "required": required},
        )
        for name, (description, properties, required) in signatures.items()
    ]


def bind_arguments(call: GuiCall, params: list[str], where: str) -> dict[str, Any]:
    """Positional and keyword arguments of `call` bound to the parameter names `params`."""
    if len(call.args) > len(params):
        raise ActionSyntaxError(
            f"{where}: {call.name}() takes at most {len(params)} argument(s) ({', '.join(params) or 'none'}), "
            f"got {len(call.args)}"
        )
    bound = dict(zip(params, call.args, strict=False))
    for key, value in call.kwargs.items():
        if key not in params:
            raise ActionSyntaxError(
                f"{where}: {call.name}() has no argument {key!r}; its arguments: {', '.join(params) or 'none'}"
            )
        if key in bound:
            raise ActionSyntaxError(f"{where}: {call.name}() got {key!r} twice")
        bound[key] = value
    return bound


class GuiEnvironment(Environment):
    """What web, os and android share: no container engine, the action space known before reset, and
    the domain's configuration object checked field by field."""

    default_image: str | None = None
    action_space: ActionSpace
    config_fields: frozenset[str] = frozenset()

    @classmethod
    def needs_engine(cls, task: Task | None = None) -> bool:
        return False

    @classmethod
    def declared_action_space(cls, task: Task) -> ActionSpace:
        return cls.action_space

    @classmethod
    def checked_config(cls, task: Task, where: str) -> dict[str, Any]:
        """The task's configuration object of this domain after the base checks; unknown fields are
        an error naming them and the known ones."""
        super().validate_task(task, where)
        name = cls.domain.value
        sandbox_only = [f for f in ("image", "setup", "repo") if getattr(task, f)]
        if sandbox_only:
            raise TaskError(
                f"{where} (id {task.id}): field(s) {', '.join(sandbox_only)} configure a container sandbox, "
                f"which the {name} domain does not use; drop them"
            )
        config = task.domain_config(name)
        unknown = sorted(set(config) - cls.config_fields)
        if unknown:
            raise TaskError(
                f"{where} (id {task.id}): unknown {name} field(s) {', '.join(unknown)}; "
                f"known: {', '.join(sorted(cls.config_fields))}"
            )
        return config

    last_error: str = ""

    @contextmanager
    def agent_mistakes(self, info: dict[str, Any]) -> Iterator[None]:
        """Around parsing and applying one action: a call that does not parse, or a literal of the
        wrong type (`click(x="left")`), is the agent's mistake, not the environment's. It becomes
        `last_error` (shown in the next observation) and `info["action_error"]`; the step goes on."""
        try:
            yield
        except ActionSyntaxError as exc:
            self.last_error = str(exc)
            info["action_error"] = "syntax"
        except (TypeError, ValueError) as exc:
            self.last_error = f"bad arguments: {exc}"
            info["action_error"] = "arguments"


def normalise_state(text: str, extra: tuple[re.Pattern[str], ...] = ()) -> str:
    """`text` with volatile content replaced by a placeholder and whitespace runs collapsed (the rule
    is `schemas.screen_state`, shared with the pools' no-change filter)."""
    return stable_screen(text, extra)


def state_hash(text: str, extra: tuple[re.Pattern[str], ...] = ()) -> str:
    """A short hash of the normalised state: equal hashes mean no effective change."""
    return screen_hash(text, extra)


class StateTracker:
    """Remembers the last state hash and answers, per turn, whether the state changed."""

    def __init__(self, extra: tuple[re.Pattern[str], ...] = ()) -> None:
        self.extra = extra
        self.last: str | None = None

    def reset(self, text: str) -> str:
        self.last = state_hash(text, self.extra)
        return self.last

    def changed(self, text: str) -> bool:
        new = state_hash(text, self.extra)
        changed = new != self.last
        self.last = new
        return changed
