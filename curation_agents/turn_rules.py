"""The paper's turn-level rules (section 3.1.2), as pure functions over `Trajectory`.

- `strip_empty_actions`: pauses and narration are not environment steps. A stripped turn's output is
  appended to the previous kept turn so the state chain stays complete.
- `skip_retry_cycles`: in "garbage output -> error -> retry" loops the offending pairs had no effect on
  the environment (the harness rejected them), so they are skipped; the next valid turn then follows
  the last valid state directly (the cleaner skips every rejected pair, the pools only those a retry
  follows: the two named modes). Legitimate environment errors (`ls nope`) are kept: they are the
  long-tail behaviour a world model must learn.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Literal

from schemas import Action, ActionKind, Observation, Trajectory, Turn

# What harnesses answer when the agent's output was not a usable action (SWE-agent, mini-swe-agent,
# OpenHands, function-calling servers); matching is on the start of the observation.
HARNESS_REJECTION = re.compile(
    r"(?is)^\W{0,8}(?:error[:!]?\s*)?(?:"
    r"your (?:output|response|last output) (?:was|is) not (?:formatted|properly formatted)"
    r"|(?:output|response|action) (?:format|formatting) (?:error|was invalid)"
    r"|format error|formaterror"
    r"|(?:please )?(?:always )?provide exactly one (?:bash )?(?:code block|action|tool call)"
    r"|(?:found|no) \d* ?(?:bash )?code blocks?"
    r"|(?:could not|couldn't|failed to|unable to) (?:parse|decode) (?:the )?(?:action|tool call|function call|json|arguments|command)"
    r"|invalid (?:json|tool call|function call|action|arguments)"
    r"|malformed (?:json|tool call|function call|action)"
    r"|(?:unknown|unrecognized|no such) (?:tool|function)\b"
    r"|tool [\"'`]?[\w.-]+[\"'`]? (?:not found|does not exist|is not available)"
    r")"
)
_MAX_GARBAGE_CHECK = 4096
# The characters is_garbage_action counts that ASCII text can hold: controls but tab, LF and CR.
_GARBAGE_ASCII = bytes([*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20)])


def is_empty_action(turn: Turn) -> bool:
    """A pause or narration: no keystrokes, command or call reached the environment."""
    if turn.action.kind == ActionKind.EMPTY:
        return True
    text = turn.action.text.strip()
    if not text:
        return True
    if turn.action.kind == ActionKind.KEYSTROKES:
        # The AgentWorldBench form: a JSON list of {"keystrokes", "duration"}; all-empty keystrokes wait.
        try:
            keys = json.loads(text)
        except (ValueError, RecursionError):
            return False
        if (
            isinstance(keys, list)
            and keys
            and all(isinstance(k, dict) and not k.get("keystrokes") for k in keys)
        ):
            return True
    return False


def strip_empty_actions(traj: Trajectory) -> tuple[Trajectory, int]:
    """The trajectory without empty-action turns, and how many were removed."""
    kept: list[Turn] = []
    removed = 0
    for turn in traj.turns:
        if not is_empty_action(turn):
            kept.append(turn)
            continue
        removed += 1
        # Output that appeared during a pause is still state: hand it to the previous step.
        extra = turn.observation.text.strip()
        if extra and kept and turn.action.kind != ActionKind.EMPTY:
            prev = kept[-1]
            kept[-1] = dataclasses.replace(
                prev,
                observation=dataclasses.replace(prev.observation, text=prev.observation.text + "\n" + extra),
            )
    return dataclasses.replace(traj, turns=kept), removed


def is_garbage_action(action: Action) -> bool:
    """An action that cannot have been executed: unparseable tool-call JSON or mostly non-text bytes."""
    text = action.text[:_MAX_GARBAGE_CHECK]
    if not text.strip():
        return False
    if action.kind == ActionKind.TOOL_CALL:
        try:
            call = json.loads(action.text)
        except (ValueError, RecursionError):
            return True
        if not isinstance(call, dict) or not call.get("name"):
            return True
        args = call.get("arguments")
        if isinstance(args, dict) and set(args) == {"raw"}:
            return True  # the arguments string was not JSON: the call could not be dispatched
    if text.isascii():  # no U+FFFD: count the control bytes by deleting them
        bad = len(text) - len(text.encode("ascii").translate(None, _GARBAGE_ASCII))
    else:
        bad = sum(1 for ch in text if (ch < " " and ch not in "\n\t\r") or ch == "\ufffd")
    return bad / len(text) > 0.2


def is_rejected_pair(turn: Turn) -> bool:
    """A (garbage, error) pair: the harness refused the action, so the environment never saw it."""
    obs = turn.observation.text[:_MAX_GARBAGE_CHECK]
    if HARNESS_REJECTION.search(obs):
        return True
    return bool(turn.observation.is_error) and is_garbage_action(turn.action)


RetryCycleMode = Literal["every_rejected", "retried_only"]


def skip_retry_cycles(traj: Trajectory, mode: RetryCycleMode = "every_rejected") -> tuple[Trajectory, int]:
    """The trajectory without the rejected (garbage -> error) pairs of its retry cycles, and how many
    were skipped.

    The paper's rule (section 3.1.2): in a "garbage output -> error -> retry" loop the rejected pairs
    never reached the environment, so the retry follows the last valid state directly. Which runs of
    rejected pairs count as a retry cycle is the mode:

    - "every_rejected" (the cleaner): every rejected pair is skipped, wherever it stands.
    - "retried_only" (the pools): a run of rejected pairs is skipped only when the next turn is a
      valid action of the same kind as every pair of the run (the agent tried again); a run with no
      retry after it (the trajectory ends, or the agent moved on to something else) is real history
      and stays.

    Both use `is_rejected_pair`, and the retry records how many attempts preceded it in
    `metadata["retries_skipped"]`. The input trajectory is not modified.
    """
    turns = traj.turns
    rejected = [is_rejected_pair(t) for t in turns]
    kept: list[Turn] = []
    skipped = 0
    i = 0
    while i < len(turns):
        if not rejected[i]:
            kept.append(turns[i])
            i += 1
            continue
        j = i
        while j < len(turns) and rejected[j]:
            j += 1
        retried = j < len(turns) and all(turns[k].action.kind == turns[j].action.kind for k in range(i, j))
        if mode == "retried_only" and not retried:
            kept.extend(turns[i:j])
            i = j
            continue
        skipped += j - i
        if j < len(turns):
            retry = turns[j]
            kept.append(dataclasses.replace(retry, metadata={**retry.metadata, "retries_skipped": j - i}))
            j += 1
        i = j
    return dataclasses.replace(traj, turns=kept), skipped


def replace_observation(turn: Turn, text: str) -> Turn:
    """A copy of `turn` with a new observation text (format and error flag kept)."""
    return dataclasses.replace(
        turn, observation=Observation(text, turn.observation.format, turn.observation.is_error)
    )
