"""Re-grounding public traces: replay a cleaned public terminal or SWE trajectory's actions from the
initial state a task file gives, and measure per turn how far the public observation agrees with
the real one.

    OUT/grounding.parquet      per (trajectory id, turn): agreement, the verdict of its trajectory
    OUT/grounded/              the real observations (a trajectory dataset, one per replayed trace)
    OUT/manifest.json          kind worldline.grounding: verdicts and per-domain figures

A turn's agreement is the share of characters equal between the public and the real observation
(`schemas.span_labels.changed_characters`, lines then tokens, both ways, the lower kept); a terminal
screen's prompts and Terminus's headers do not lower it. A trajectory is `grounded` when every
compared turn agrees fully, `disagrees` (first disagreeing turn and cause) otherwise, and
`not_groundable` when no task matches or an action cannot reach the environment.
"""

from __future__ import annotations

import re
import shutil
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from collectors.environment import Task, load_tasks
from collectors.replay import replay_once
from schemas import Action, ActionKind
from schemas.atomic import atomic_write_json
from schemas.domains import domain_spec, is_registered
from schemas.grounding import GROUNDING_NAME, write_grounding
from schemas.shards import iter_trajectories, write_trajectories
from schemas.span_labels import changed_characters
from schemas.trajectory import Trajectory

MANIFEST_KIND = "worldline.grounding"
TERMINAL_TOOLS = frozenset({"run_command", "send_keystrokes"})
TASK_KEYS = ("task_id", "instance_id", "suite_task_id", "task_name")


@dataclass
class GroundResult:
    trajectory: Trajectory
    verdict: str  # grounded | disagrees | not_groundable
    agreements: list[float] = field(default_factory=list)
    turns: list[int] = field(default_factory=list)  # the compared turns, aligned with agreements
    first_disagreeing_turn: int | None = None
    cause: str | None = None
    real: Trajectory | None = None


def sendable(action: Action) -> bool | None:
    """True when the terminal takes ACTION (a command, keystrokes, or its own tools); False for a
    harness's own tool (Terminus's mark_task_complete), whose turn is not compared; None otherwise."""
    if action.kind in (ActionKind.COMMAND, ActionKind.KEYSTROKES):
        return True
    if action.kind == ActionKind.TOOL_CALL:
        return action.tool_name in TERMINAL_TOOLS
    return None


_PROMPT = re.compile(r"^[\w.-]+@[\w.-]+:[^#$\n]*[#$] ?")
_HARNESS_LINES = frozenset({"New Terminal Output:", "Current terminal state:"})


def screen_text(text: str) -> str:
    """An observation without what differs by harness and not by environment: shell prompts (user,
    host and folder are the recorder's), Terminus's headers, blank lines and trailing spaces."""
    lines = (_PROMPT.sub("", line).rstrip() for line in text.splitlines())
    return "\n".join(line for line in lines if line and line not in _HARNESS_LINES)


def _reproduced(text: str, other: str) -> float:
    return 1.0 - sum(changed_characters(text, other)) / len(text) if text else 1.0


def agreement(public: str, real: str) -> float:
    """Share of characters equal between PUBLIC and REAL (as `screen_text`): the lower of the share
    of the real observation the public one holds and the share of the public one reality printed,
    so a missing output and an invented one both lower it."""
    public, real = screen_text(public), screen_text(real)
    return min(_reproduced(real, public), _reproduced(public, real))


def matching_task(trajectory: Trajectory, tasks: dict[str, Task], task_id: str | None) -> Task | None:
    if task_id is not None:
        return tasks.get(task_id)
    for key in TASK_KEYS:
        value = trajectory.metadata.get(key)
        if isinstance(value, str):
            for candidate in (value, f"tbench-{value}", f"harbor-{value}"):
                if candidate in tasks:
                    return tasks[candidate]
    return None


def ground_trajectory(
    trajectory: Trajectory, tasks: dict[str, Task], tasks_path: Path, task_id: str | None, staging: Path
) -> GroundResult:
    if not (is_registered(trajectory.domain.value) and domain_spec(trajectory.domain.value).shell):
        return GroundResult(trajectory, "not_groundable", cause=f"the {trajectory.domain.value} domain")
    task = matching_task(trajectory, tasks, task_id)
    if task is None:
        return GroundResult(trajectory, "not_groundable", cause="no matching task")
    sent: list[int] = []  # indices of the turns whose actions reach the environment
    for index, turn in enumerate(trajectory.turns):
        takes = sendable(turn.action)
        if takes is None:
            return GroundResult(
                trajectory,
                "not_groundable",
                cause=f"unsupported action form {turn.action.kind.value} (turn {index})",
            )
        if takes:
            sent.append(index)
    if not sent:
        return GroundResult(trajectory, "not_groundable", cause="no action reaches the environment")
    real = replay_once(
        replace(trajectory, turns=[trajectory.turns[i] for i in sent]), task, tasks_path, staging, 1, 600.0
    )
    result = GroundResult(trajectory, "grounded", real=real)
    for position, index in enumerate(sent):
        public = trajectory.turns[index].observation
        if position >= len(real.turns):
            value, cause = 0.0, f"turn missing in the replay ({real.status.value})"
        else:
            observed = real.turns[position].observation
            value = agreement(public.text, observed.text)
            cause = None
            if bool(observed.is_error) != bool(public.is_error):
                cause = "an error appeared" if observed.is_error else "an error vanished"
            elif value < 1.0:
                cause = "observation differs"
        result.agreements.append(value)
        result.turns.append(index)
        if cause is not None and result.first_disagreeing_turn is None:
            result.verdict, result.first_disagreeing_turn, result.cause = "disagrees", index, cause
    return result


def ground(source: Path, out: Path, tasks_path: Path, task_id: str | None = None) -> list[GroundResult]:
    """Re-ground every trajectory of SOURCE against TASKS_PATH; write the table, dataset, manifest."""
    tasks = {t.id: t for t in load_tasks(tasks_path)}
    out.mkdir(parents=True, exist_ok=True)
    staging = out / ".grounding-episodes"
    try:
        results = [
            ground_trajectory(t, tasks, tasks_path, task_id, staging) for t in iter_trajectories(source)
        ]
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    rows: list[dict[str, Any]] = []
    for r in results:
        pairs: list[tuple[int, float | None]] = list(zip(r.turns, r.agreements, strict=True)) or [(-1, None)]
        for index, value in pairs:  # a trace with no compared turn: one row, turn -1
            rows.append(
                {
                    "trajectory_id": r.trajectory.id,
                    "turn": index,
                    "agreement": value,
                    "verdict": r.verdict,
                    "cause": r.cause,
                    "first_disagreeing_turn": r.first_disagreeing_turn,
                }
            )
    write_grounding(out / GROUNDING_NAME, rows)
    real = [r.real for r in results if r.real is not None]
    if (out / "grounded").exists():
        shutil.rmtree(out / "grounded")
    if real:
        write_trajectories(out / "grounded", real)
    atomic_write_json(
        out / "manifest.json",
        {
            "kind": MANIFEST_KIND,
            "source": str(source),
            "tasks": str(tasks_path),
            "verdicts": {
                r.trajectory.id: {
                    "verdict": r.verdict,
                    "first_disagreeing_turn": r.first_disagreeing_turn,
                    "cause": r.cause,
                }
                for r in results
            },
            "by_domain": figures(results),
        },
    )
    return results


def figures(results: list[GroundResult]) -> dict[str, dict[str, Any]]:
    by: dict[str, dict[str, Any]] = {}
    for r in results:
        f = by.setdefault(r.trajectory.domain.value, {"verdicts": Counter(), "agreements": []})
        f["verdicts"][r.verdict] += 1
        f["agreements"].extend(r.agreements)
    return {
        d: {
            "grounded": f["verdicts"]["grounded"],
            "disagrees": f["verdicts"]["disagrees"],
            "not_groundable": f["verdicts"]["not_groundable"],
            "mean_turn_agreement": round(sum(f["agreements"]) / len(f["agreements"]), 6)
            if f["agreements"]
            else None,
        }
        for d, f in sorted(by.items())
    }


def ground_report(results: list[GroundResult]) -> list[str]:
    return [
        f"{d}: {f['grounded']} grounded, {f['disagrees']} disagreeing, {f['not_groundable']} not groundable, "
        f"mean turn agreement {f['mean_turn_agreement']}"
        for d, f in figures(results).items()
    ]
