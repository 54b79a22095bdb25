"""AndroidWorld episode files: `<task_name>.pkl.gz`, a gzip pickle of the task's episodes, written by
`android_world.checkpointer.IncrementalCheckpointer.save_episodes`.

An episode (suite_utils `_run_task`) is `{"goal", "task_template", "episode_data", "is_successful",
"run_time", "finish_dtime", "episode_length", "aux_data", "screen_config", "exception_info", "seed",
"agent_name", "instance_id"}`; `episode_data` holds one list per key of the agent's step data
(episode_runner `_transpose_lod_to_dol`). T3A / M3A steps carry `before_element_list` /
`after_element_list` (representation_utils `UIElement`s), `action_prompt`, `action_output`
(`Reason: ... Action: {json}`), `summary` and the screenshots as numpy arrays.

Pickles run code when loaded, so the file is read by an unpickler that builds no real object: a
global is only looked up among plain containers and `datetime`, and every class of numpy,
android_world, requests or urllib3 becomes an inert `Stub` that keeps the attributes pickle gives it.
Any other global (os.system, builtins.eval, ...) quarantines the file as `unsupported_format`.
"""

from __future__ import annotations

import datetime
import io
import json
import math
import pickle
import re
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from curation_agents.formats import Format
from curation_agents.formats.common import as_dict, as_list, as_str, read_limited, turn
from curation_agents.model import ParsedRecord, RawTurn, StageFailure
from schemas.reasons import ReasonCode

BENCHMARK = "AndroidWorld"
HEAD_KEYS = (b"task_template", b"episode_data")
_STUB_MODULES = ("numpy", "android_world.", "requests.", "urllib3.", "http.cookiejar", "http.client")
_SAFE = {
    ("datetime", "datetime"): datetime.datetime,
    ("datetime", "date"): datetime.date,
    ("datetime", "timedelta"): datetime.timedelta,
    ("datetime", "timezone"): datetime.timezone,
    ("collections", "OrderedDict"): OrderedDict,
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
    ("builtins", "bytearray"): bytearray,
}
_ACTION = re.compile(r"Action:\s*(\{.*\})", re.DOTALL)
_REASON = re.compile(r"Reason:\s*(.*?)\s*(?:Action:|$)", re.DOTALL)
_ELEMENT_FIELDS = ("text", "content_description", "hint_text", "class_name", "resource_name", "package_name")
_ELEMENT_FLAGS = ("is_clickable", "is_editable", "is_checked", "is_scrollable", "is_selected", "is_focused")


class Stub:
    """An inert stand-in for a class the pickle names: it records arguments and state, runs nothing."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Stub:
        obj = super().__new__(cls)
        obj.__dict__["_args"] = args
        return obj

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __call__(self, *args: Any, **kwargs: Any) -> Stub:
        return Stub(*args)

    def __setstate__(self, state: Any) -> None:
        if isinstance(state, tuple) and len(state) == 2 and isinstance(state[1], dict):
            state = {**(state[0] or {}), **state[1]}  # (dict, slots)
        if isinstance(state, dict):
            self.__dict__.update({str(k): v for k, v in state.items()})
        else:
            self.__dict__["_state"] = state

    def get(self, name: str) -> Any:
        return self.__dict__.get(name)


def _stub_class(module: str, name: str) -> type:
    return type(name, (Stub,), {"__module__": f"stub.{module}"})


def _reconstructor(cls: Any, base: Any, state: Any) -> Any:
    """copyreg._reconstructor for stub classes only."""
    if not (isinstance(cls, type) and issubclass(cls, Stub)):
        raise pickle.UnpicklingError("copyreg._reconstructor of a class that is not stubbed")
    return cls()


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _SAFE:
            return _SAFE[(module, name)]
        if (module, name) == ("copyreg", "_reconstructor"):
            return _reconstructor
        if module.startswith(_STUB_MODULES) or module == "numpy":
            return _stub_class(module, name)
        raise pickle.UnpicklingError(f"global {module}.{name} is not allowed in an AndroidWorld episode file")


def looks_like(head: bytes) -> bool:
    """Whether decompressed leading bytes are a pickle of AndroidWorld episodes."""
    return head[:1] == b"\x80" and all(key in head for key in HEAD_KEYS)


def load_episodes(path: str, max_bytes: int) -> list[dict[str, Any]]:
    """The episodes of one file, read with the restricted unpickler."""
    data = read_limited(path, max_bytes)
    try:
        value = _Unpickler(io.BytesIO(data)).load()
    except (pickle.UnpicklingError, EOFError, AttributeError, ValueError, TypeError, IndexError) as exc:
        raise StageFailure(ReasonCode.UNSUPPORTED_FORMAT, f"{Path(path).name}: {exc}"[:500]) from exc
    episodes = [e for e in as_list(value) if isinstance(e, dict)]
    if not episodes or len(episodes) != len(as_list(value)):
        raise StageFailure(ReasonCode.PARSE_ERROR, f"{Path(path).name}: not a list of episode dicts")
    return episodes


def episode_count(path: str, max_bytes: int) -> int:
    return len(load_episodes(path, max_bytes))


def _element_line(index: int, element: Any) -> str:
    get = element.get if isinstance(element, Stub) else as_dict(element).get
    parts = [f"{k}={get(k)!r}" for k in _ELEMENT_FIELDS if isinstance(get(k), str) and get(k)]
    parts += [k for k in _ELEMENT_FLAGS if get(k) is True]
    return f"UI element {index}: " + ", ".join(parts)


def _elements_text(elements: Any) -> str:
    return "\n".join(_element_line(i, e) for i, e in enumerate(as_list(elements)))


def _at(values: Any, index: int) -> Any:
    items = as_list(values)
    return items[index] if index < len(items) else None


def _step_turn(data: dict[str, Any], index: int) -> RawTurn:
    output = as_str(_at(data.get("action_output"), index)) or ""
    match = _ACTION.search(output)
    action: Any = None
    if match:
        try:
            action = json.loads(match.group(1))
        except json.JSONDecodeError:
            action = None
    reason = _REASON.search(output)
    summary = as_str(_at(data.get("summary"), index)) or ""
    thought = (reason.group(1).strip() if reason else "") + (f"\n\nSummary: {summary}" if summary else "")
    if isinstance(action, dict):
        text = json.dumps(action, ensure_ascii=False, sort_keys=True)
        tool = as_str(action.get("action_type"))
    else:
        text, tool = output, None
    return turn(
        text,
        "gui",
        _elements_text(_at(data.get("after_element_list"), index)),
        tool_name=tool,
        is_error=None if isinstance(action, dict) else True,
        metadata={"step_number": _at(data.get("step_number"), index), "thought": thought.strip()},
    )


def _number(value: Any) -> float | None:
    if isinstance(value, bool | int | float) and not (isinstance(value, float) and math.isnan(value)):
        return float(value)
    return None


def parse_episode(episode: dict[str, Any]) -> ParsedRecord:
    """One episode as a trajectory of the android domain."""
    template = as_str(episode.get("task_template")) or ""
    error = as_str(episode.get("exception_info"))
    if error:
        last = error.strip().splitlines()[-1] if error.strip() else error
        raise StageFailure(
            ReasonCode.ENV_FAILURE, f"{template}: the run raised before it finished: {last}"[:500]
        )
    data = as_dict(episode.get("episode_data"))
    steps = max((len(as_list(v)) for v in data.values()), default=0)
    if not steps:
        raise StageFailure(ReasonCode.NO_TURNS, f"{template}: no steps in episode_data")
    turns = [_step_turn(data, i) for i in range(steps)]
    last_action = turns[-1]["tool_name"]
    finish = episode.get("finish_dtime")
    success = _number(episode.get("is_successful"))
    return {
        "format": Format.ANDROIDWORLD,
        "domain": "android",
        "task": as_str(episode.get("goal")) or "",
        "system_prompt": None,
        "tools": [],
        "agent": as_str(episode.get("agent_name")),
        "model": None,
        "collected_at": finish.isoformat() if isinstance(finish, datetime.datetime) else None,
        "status": "complete" if last_action == "status" else "truncated",
        "status_reason": None if last_action == "status" else "the episode ended without a status action",
        "turns": turns,
        "metadata": {
            "benchmark": BENCHMARK,
            "task_id": template,
            "instance_id": str(episode.get("instance_id"))
            if episode.get("instance_id") is not None
            else None,
            "is_successful": success,
            "run_time_s": _number(episode.get("run_time")),
            "initial_state": _elements_text(_at(data.get("before_element_list"), 0)),
        },
    }


def parse(payload: dict[str, Any]) -> ParsedRecord:
    """The record `{"androidworld_path", "episode"}` the reader made for one episode of a file."""
    episodes = load_episodes(str(payload["androidworld_path"]), int(payload["max_bytes"]))
    index = int(payload["episode"])
    if index >= len(episodes):
        raise StageFailure(ReasonCode.PARSE_ERROR, f"episode {index} of {len(episodes)}")
    return parse_episode(episodes[index])


def iter_payloads(path: str, max_bytes: int) -> Iterator[tuple[str, dict[str, Any]]]:
    """(locator, payload) for every episode of a file."""
    for index in range(episode_count(path, max_bytes)):
        yield f"episode-{index}", {"androidworld_path": path, "episode": index, "max_bytes": max_bytes}
