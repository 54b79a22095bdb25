"""Score: apply the turn rules, then rate each episode 0..1 with reasons and accept above a threshold.

Hard rules quarantine outright (fewer than `min_turns` turns, GUI environment failures); soft signals
subtract from 1.0: too short, garbage actions, binary noise in observations, truncation, error loops.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from curation_agents.model import CleanConfig
from curation_agents.turn_rules import is_garbage_action, skip_retry_cycles, strip_empty_actions
from schemas import GUI_DOMAINS, Trajectory, TrajectoryStatus
from schemas.gui_failure import trace_failure_marker
from schemas.reasons import ReasonCode

BINARY_NOISE = re.compile(r"[\x00-\x08\x0e-\x1f\ufffd]")
_BINARY_NOISE_ASCII = bytes([*range(0x00, 0x09), *range(0x0E, 0x20)])  # BINARY_NOISE less U+FFFD


def _binary_noise_count(text: str) -> int:
    """`len(BINARY_NOISE.findall(text))`; ASCII text (no U+FFFD possible) by deleting the noise bytes,
    several times faster than the regex on long observations."""
    if not text.isascii():
        return len(BINARY_NOISE.findall(text))
    return len(text) - len(text.encode("ascii").translate(None, _BINARY_NOISE_ASCII))


# Penalties per signal; the default threshold (0.5) accepts a record with any one soft signal.
PENALTIES = {
    "too_short": 0.3,
    "garbage_actions": 0.4,
    "binary_noise": 0.4,
    "truncated": 0.2,
    "error_loop": 0.4,
    "empty_observations": 0.3,
}


@dataclass
class Verdict:
    """The score stage's answer for one episode."""

    trajectory: Trajectory
    score: float
    signals: list[str] = field(default_factory=list)
    reason: ReasonCode | None = None  # set when the episode is quarantined
    detail: str = ""

    @property
    def accepted(self) -> bool:
        return self.reason is None


def quality_signals(traj: Trajectory) -> list[str]:
    """Soft quality signals, by name (see PENALTIES)."""
    signals = []
    turns = traj.turns
    total_chars = sum(len(t.action.text) + len(t.observation.text) for t in turns)
    if total_chars < 40:
        signals.append("too_short")
    if turns and sum(is_garbage_action(t.action) for t in turns) / len(turns) > 0.3:
        signals.append("garbage_actions")
    obs = "".join(t.observation.text[:4096] for t in turns)
    if obs and _binary_noise_count(obs) / len(obs) > 0.05:
        signals.append("binary_noise")
    if (
        traj.status == TrajectoryStatus.TRUNCATED
        and traj.metadata.get("episode", 0) == traj.metadata.get("episodes", 1) - 1
    ):
        signals.append("truncated")
    if _error_loop(traj):
        signals.append("error_loop")
    if turns and sum(1 for t in turns if not t.observation.text.strip()) / len(turns) > 0.7:
        signals.append("empty_observations")
    return signals


def _error_loop(traj: Trajectory) -> bool:
    """Three or more consecutive failing turns repeating the same action."""
    run = 1
    for prev, cur in zip(traj.turns, traj.turns[1:], strict=False):
        failing = (
            cur.observation.is_error or (cur.exit_code or 0) != 0
        ) and cur.action.text == prev.action.text
        run = run + 1 if failing else 1
        if run >= 3:
            return True
    return False


def score_episode(traj: Trajectory, config: CleanConfig) -> Verdict:
    traj, empty = strip_empty_actions(traj)
    traj, retries = skip_retry_cycles(traj)
    traj.metadata = {**traj.metadata, "empty_actions_stripped": empty, "retry_pairs_skipped": retries}
    if len(traj.turns) < config.min_turns:
        return Verdict(
            traj,
            0.0,
            [],
            ReasonCode.TOO_FEW_TURNS,
            f"{len(traj.turns)} turn(s) after the turn rules; at least {config.min_turns} are needed",
        )
    if traj.domain in GUI_DOMAINS:
        for index, t in enumerate(traj.turns):
            marker = trace_failure_marker(t.observation.text)
            if marker is not None:
                return Verdict(traj, 0.0, [], ReasonCode.ENV_FAILURE, f"turn {index + 1}: {marker!r}")
    signals = quality_signals(traj)
    score = round(max(0.0, 1.0 - sum(PENALTIES[s] for s in signals)), 4)
    traj.metadata["quality_score"] = score
    traj.metadata["quality_signals"] = signals
    if score < config.accept_threshold:
        return Verdict(
            traj,
            score,
            signals,
            ReasonCode.LOW_QUALITY,
            f"score {score} < threshold {config.accept_threshold}: {', '.join(signals)}",
        )
    return Verdict(traj, score, signals)
