"""What a collected dataset covers, per domain: the action kinds and the tools, commands or elements
used; the distinct states reached; the share of error observations and of no-op turns; observation and
action lengths; the share of trajectories with a near-duplicate (the pools' MinHash); and what is thin.

A state is an observation's normalised text (pipelines.minhash.normalise: words, lower case, digit runs
folded, so timestamps and pids do not make states distinct); a no-op turn is a GUI turn whose state did
not change, a wait or noop action, or a turn whose observation repeats the previous one."""

from __future__ import annotations

import json
import re
import shlex
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pipelines.minhash import NearDuplicateIndex, exact_key, normalise, signatures
from schemas import GUI_DOMAINS, ActionKind, Trajectory, iter_trajectories

NEAR_DUPLICATE_THRESHOLD = 0.8
NUM_PERM = 128
SHINGLE_WIDTH = 5
# What "thin" means; each rule names the domain and the figure.
THIN_MIN_TRAJECTORIES = 20
THIN_ERROR_SHARE = (0.02, 0.6)
THIN_NOOP_SHARE = 0.4
THIN_NEAR_DUPLICATE_SHARE = 0.3
THIN_STATE_RATIO = 0.3
_CALL = re.compile(r"^\s*(?:pyautogui\.)?([A-Za-z_]\w*)\s*\(")
_SHELL_SPLIT = re.compile(r"\|\||&&|[|;&]")
_NOOP_CALLS = {"noop", "wait"}
# The terminal's tools as the action space names them, for actions recorded in their plain form.
_KIND_TOOLS = {ActionKind.COMMAND.value: "run_command", ActionKind.KEYSTROKES.value: "send_keystrokes"}


def action_label(domain: str, kind: str, text: str, tool: str | None) -> str:
    """What a turn used: the tool's name, a command line's program(s), a GUI call's verb, the key."""
    if kind == ActionKind.TOOL_CALL.value and tool:
        if tool in ("Bash", "run_command"):
            try:
                command = json.loads(text).get("arguments", {}).get("command", "")
            except (json.JSONDecodeError, AttributeError):
                command = ""
            return f"{tool}:{program_of(command)}" if isinstance(command, str) else tool
        return tool
    if kind == ActionKind.KEYSTROKES.value:
        try:
            first = json.loads(text)[0].get("keystrokes", "")
        except (json.JSONDecodeError, IndexError, AttributeError, TypeError):
            return "keys"
        word = program_of(first) if first.endswith("\n") else first[:12]
        return f"keys:{word or 'wait'}"
    match = _CALL.match(text)
    if kind == ActionKind.GUI.value and not match:  # an element addressed by role and name
        try:
            obj = json.loads(text)
            return f"{obj.get('action')}:{obj.get('role')}"
        except (json.JSONDecodeError, AttributeError):
            return "gui"
    if domain in GUI_DOMAINS and match:
        return match.group(1)
    return program_of(text)


def program_of(command: str) -> str:
    """The programs of a command line's pipeline, joined with |: `grep -c x f | wc -l` -> grep|wc."""
    programs = []
    for part in _SHELL_SPLIT.split(command)[:4]:
        try:
            words = shlex.split(part, comments=False)
        except ValueError:
            words = part.split()
        words = [w for w in words if "=" not in w.split("/")[0] or w.startswith("-")]
        if words:
            programs.append(words[0].rsplit("/", 1)[-1][:24])
    return "|".join(programs) or "(empty)"


def _distribution(values: list[int]) -> dict[str, float]:
    if not values:
        return {"n": 0}
    ordered = sorted(values)

    def at(q: float) -> int:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return {
        "n": len(ordered),
        "p10": at(0.1),
        "p50": at(0.5),
        "p90": at(0.9),
        "max": ordered[-1],
        "mean": round(sum(ordered) / len(ordered), 1),
    }


def _is_noop(turn: Any, previous_state: str | None, state: str, label: str) -> bool:
    if turn.state_changed is False:
        return True
    if label.split(":")[0] in _NOOP_CALLS or label == "keys:wait":
        return True
    return previous_state is not None and state == previous_state and turn.state_changed is None


def coverage_report(datasets: Iterable[Path]) -> dict[str, Any]:
    """The coverage of every trajectory in `datasets`, per domain (see the module docstring)."""
    per: dict[str, dict[str, Any]] = defaultdict(
        lambda: {
            "trajectories": 0,
            "turns": 0,
            "status": Counter(),
            "action_kinds": Counter(),
            "used": Counter(),
            "called": set(),
            "offered": set(),
            "states": set(),
            "errors": 0,
            "noops": 0,
            "obs_chars": [],
            "action_chars": [],
            "texts": [],
            "behaviours": Counter(),
        }
    )
    for folder in datasets:
        for trajectory in iter_trajectories(folder):
            _add(per[trajectory.domain.value], trajectory)
    report: dict[str, Any] = {"domains": {}, "thin": []}
    for domain in sorted(per):
        d = per[domain]
        near = near_duplicate_share(d["texts"])
        unused = sorted(d["offered"] - d["called"])
        entry = {
            "trajectories": d["trajectories"],
            "turns": d["turns"],
            "status": dict(sorted(d["status"].items())),
            "action_kinds": dict(d["action_kinds"].most_common()),
            "used": dict(d["used"].most_common(40)),
            "distinct_used": len(d["used"]),
            "unused_tools": unused,
            "distinct_states": len(d["states"]),
            "state_ratio": round(len(d["states"]) / d["turns"], 3) if d["turns"] else 0.0,
            "error_share": round(d["errors"] / d["turns"], 3) if d["turns"] else 0.0,
            "noop_share": round(d["noops"] / d["turns"], 3) if d["turns"] else 0.0,
            "observation_chars": _distribution(d["obs_chars"]),
            "action_chars": _distribution(d["action_chars"]),
            "near_duplicate_share": near,
            "behaviours": dict(d["behaviours"].most_common(20)),
        }
        report["domains"][domain] = entry
        report["thin"] += thin_notes(domain, entry)
    return report


def _add(d: dict[str, Any], trajectory: Trajectory) -> None:
    domain = trajectory.domain.value
    d["trajectories"] += 1
    d["status"][trajectory.status.value] += 1
    d["offered"] |= set(trajectory.action_space.tool_names())
    previous: str | None = exact_key(normalise(str(trajectory.metadata.get("initial_observation", ""))))
    parts = []
    for turn in trajectory.turns:
        d["turns"] += 1
        kind = turn.action.kind.value
        d["action_kinds"][kind] += 1
        label = action_label(domain, kind, turn.action.text, turn.action.tool_name)
        d["used"][label] += 1
        plain = _KIND_TOOLS.get(kind) if domain == "terminal" else None
        d["called"].add(turn.action.tool_name or plain or label.split(":")[0])
        state = exact_key(normalise(turn.observation.text))
        d["states"].add(state)
        if turn.observation.is_error or (turn.exit_code not in (None, 0)):
            d["errors"] += 1
        if _is_noop(turn, previous, state, label):
            d["noops"] += 1
        previous = state
        d["obs_chars"].append(len(turn.observation.text))
        d["action_chars"].append(len(turn.action.text))
        behaviour = (turn.metadata.get("policy") or {}).get("behaviour")
        if isinstance(behaviour, str):
            d["behaviours"][behaviour.split(":")[0].split("+")[0]] += 1
        parts.append(turn.action.text)
        parts.append(turn.observation.text[:4000])
    d["texts"].append(normalise("\n".join(parts)))


def near_duplicate_share(texts: list[str]) -> float:
    """The share of trajectories with at least one other whose MinHash Jaccard is >= the threshold."""
    if len(texts) < 2:
        return 0.0
    sigs = signatures(texts, num_perm=NUM_PERM, seed=1, width=SHINGLE_WIDTH)
    index = NearDuplicateIndex(NEAR_DUPLICATE_THRESHOLD, NUM_PERM)
    for i, sig in enumerate(sigs):
        index.add(str(i), sig)
    dup = sum(1 for i, sig in enumerate(sigs) if len(index.query(sig)) > 1)
    return round(dup / len(texts), 3)


def thin_notes(domain: str, e: dict[str, Any]) -> list[str]:
    """One line per thin spot of a domain's coverage, naming the figure."""
    notes = []
    if e["trajectories"] < THIN_MIN_TRAJECTORIES:
        notes.append(f"{domain}: only {e['trajectories']} trajectories (fewer than {THIN_MIN_TRAJECTORIES})")
    if e["unused_tools"]:
        notes.append(f"{domain}: tools offered but never called: {', '.join(e['unused_tools'][:12])}")
    lo, hi = THIN_ERROR_SHARE
    if e["turns"] and e["error_share"] < lo:
        notes.append(
            f"{domain}: error observations are {e['error_share']:.1%} of turns (few failures to learn from)"
        )
    if e["error_share"] > hi:
        notes.append(f"{domain}: error observations are {e['error_share']:.1%} of turns (mostly failures)")
    if e["noop_share"] > THIN_NOOP_SHARE:
        notes.append(f"{domain}: {e['noop_share']:.1%} of turns change nothing")
    if e["near_duplicate_share"] > THIN_NEAR_DUPLICATE_SHARE:
        notes.append(f"{domain}: {e['near_duplicate_share']:.1%} of trajectories have a near-duplicate")
    if e["turns"] and e["state_ratio"] < THIN_STATE_RATIO:
        notes.append(
            f"{domain}: {e['distinct_states']} distinct states in {e['turns']} turns (ratio {e['state_ratio']})"
        )
    return notes


def render_report(report: dict[str, Any]) -> str:
    lines = []
    for domain, e in report["domains"].items():
        obs, act = e["observation_chars"], e["action_chars"]
        lines.append(
            f"== {domain}: {e['trajectories']} trajectories, {e['turns']} turns ({', '.join(f'{k}={v}' for k, v in e['status'].items())})"
        )
        lines.append(f"   action kinds: {', '.join(f'{k}={v}' for k, v in e['action_kinds'].items())}")
        lines.append(
            f"   used ({e['distinct_used']} distinct): {', '.join(f'{k}={v}' for k, v in list(e['used'].items())[:15])}"
        )
        lines.append(
            f"   distinct states {e['distinct_states']} (ratio {e['state_ratio']}), errors {e['error_share']:.1%}, "
            f"no-op {e['noop_share']:.1%}, near-duplicates {e['near_duplicate_share']:.1%}"
        )
        if obs.get("n"):
            lines.append(
                f"   observation chars p10/p50/p90/max {obs['p10']}/{obs['p50']}/{obs['p90']}/{obs['max']}; action chars {act['p10']}/{act['p50']}/{act['p90']}/{act['max']}"
            )
        if e["behaviours"]:
            lines.append(f"   behaviours: {', '.join(f'{k}={v}' for k, v in e['behaviours'].items())}")
    lines.append("thin:" if report["thin"] else "thin: nothing below the thresholds")
    lines += [f"  - {note}" for note in report["thin"]]
    return "\n".join(lines)
