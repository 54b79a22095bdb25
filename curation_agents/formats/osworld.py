"""OSWorld result folders: `traj.jsonl`, one line per executed action, written by OSWorld's
`lib_run_single.run_single_example` (and its agent variants).

A line is `{"step_num", "action_timestamp", "action", "response", "reward", "done", "info",
"screenshot_file"}`; the runner appends `{"Error": "..."}` when the example raised. The file records
no task text and no observation besides the screenshot it names: provenance comes from the folder
layout OSWorld writes, `results/<action_space>/<observation_type>/<model>/<domain>/<example_id>/`,
and the score from `result.txt` beside the file when it is there.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

from curation_agents.formats import Format
from curation_agents.formats.common import as_dict, as_str, decode_json, read_limited, turn
from curation_agents.model import ParsedRecord, RawTurn, StageFailure
from schemas.reasons import ReasonCode

STEP_KEYS = frozenset({"step_num", "action_timestamp", "action"})
BENCHMARK = "OSWorld"
_SHOT_NAME = re.compile(r"step_\d+_\d{8}@\d{6,12}\.png")
SPECIAL_ACTIONS = frozenset({"WAIT", "DONE", "FAIL"})
"""OSWorld's control actions (desktop_env `Action` space): wait, declare success, declare infeasible."""


def looks_like_step(obj: Any) -> bool:
    """Whether a decoded line is one step of an OSWorld `traj.jsonl`."""
    return isinstance(obj, dict) and STEP_KEYS <= obj.keys()


def _action_text(action: Any) -> tuple[str, str, str | None]:
    """(text, action kind, tool name) of a step's action: pyautogui code, a control word, or a dict."""
    if isinstance(action, str):
        if action.strip() in SPECIAL_ACTIONS:
            return action.strip(), "gui", action.strip()
        return action, "code", None
    if isinstance(action, dict):
        name = as_str(action.get("action_type"))
        return json.dumps(action, ensure_ascii=False, sort_keys=True), "gui", name
    raise StageFailure(
        ReasonCode.PARSE_ERROR, f"action of type {type(action).__name__} is not an OSWorld action"
    )


def _started_at(stamp: Any) -> str | None:
    """OSWorld's `%Y%m%d@%H%M%S` (local time, microseconds in some runners) as ISO 8601."""
    if not isinstance(stamp, str):
        return None
    for form in ("%Y%m%d@%H%M%S", "%Y%m%d@%H%M%S%f"):
        try:
            return datetime.strptime(stamp, form).isoformat()
        except ValueError:
            continue
    return None


def _step_turn(step: dict[str, Any]) -> RawTurn:
    text, kind, tool = _action_text(step.get("action"))
    response = step.get("response")
    thought = (
        response if isinstance(response, str) else json.dumps(response, ensure_ascii=False, sort_keys=True)
    )
    shot = as_str(step.get("screenshot_file"))
    info = as_dict(step.get("info"))
    meta: dict[str, Any] = {
        "step_num": step.get("step_num"),
        "thought": thought if response is not None else "",
        "reward": step.get("reward"),
        "done": bool(step.get("done")),
    }
    # OSWorld's own file name (step_N_TIMESTAMP.png) stays in metadata as written; redaction would
    # take `20250828@220903.png` for an e-mail address. Any other name is text and is redacted.
    named = bool(shot and _SHOT_NAME.fullmatch(shot))
    meta["screenshot_file"] = shot if named else ""
    observation = (
        f"[screenshot of step {step.get('step_num')}]" if named else (f"[screenshot: {shot}]" if shot else "")
    )
    if info:  # what the environment returned besides the screenshot
        observation += f"\ninfo: {json.dumps(info, ensure_ascii=False, sort_keys=True)}"
    return turn(
        text,
        kind,
        observation,
        tool_name=tool,
        started_at=_started_at(step.get("action_timestamp")),
        metadata=meta,
    )


def _provenance(path: Path) -> dict[str, str]:
    """Action space, observation type, model, OSWorld domain and example id from the folder layout."""
    parts = path.parent.parts
    found: dict[str, str] = {}
    if len(parts) >= 2:
        found["task_id"] = parts[-1]
        found["osworld_domain"] = parts[-2]
    if "results" in parts:
        start = len(parts) - 1 - parts[::-1].index("results")
        rest = parts[start + 1 : -2]
        if len(rest) >= 3:
            found["action_space"], found["observation_type"] = rest[0], rest[1]
            found["model"] = "/".join(rest[2:])
    return found


def _score(path: Path) -> float | None:
    result = path.parent / "result.txt"
    try:
        return float(result.read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return None


def parse_file(path: str, max_bytes: int) -> ParsedRecord:
    """One `traj.jsonl` as a trajectory of the os domain."""
    file = Path(path)
    lines = read_limited(path, max_bytes).split(b"\n")
    turns: list[RawTurn] = []
    error: str | None = None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        obj = decode_json(line, f"line-{number}")
        if looks_like_step(obj):
            turns.append(_step_turn(obj))
        elif isinstance(obj, dict) and set(obj) == {"Error"}:
            error = str(obj["Error"])
        else:
            raise StageFailure(
                ReasonCode.PARSE_ERROR, f"line-{number}: neither an OSWorld step nor an Error line"
            )
    if not turns:
        raise StageFailure(ReasonCode.NO_TURNS, f"{file.name}: no executed steps")
    prov = _provenance(file)
    last = turns[-1]
    reason: str | None
    status, reason = "truncated", "the run stopped at its step limit without DONE or FAIL"
    if error is not None:
        status, reason = "env_failure", f"the runner raised: {error}"[:500]
    elif last["metadata"]["done"] or last["action"] in ("DONE", "FAIL"):
        status, reason = "complete", None
    score = _score(file)
    return {
        "format": Format.OSWORLD,
        "domain": "os",
        "task": "",
        "system_prompt": None,
        "tools": [],
        "agent": None,
        "model": prov.get("model"),
        "collected_at": last.get("started_at"),
        "status": status,
        "status_reason": reason,
        "turns": turns,
        "metadata": {
            "benchmark": BENCHMARK,
            **{k: v for k, v in prov.items() if k != "model"},
            **({"score": score} if score is not None else {}),
            **({"runner_error": error} if error is not None else {}),
            "final_action": last["action"] if last["action"] in SPECIAL_ACTIONS else "",
        },
    }
