"""Human-readable views of a trajectory (not training samples: pipelines/render.py renders those):
self-contained HTML for Jupyter and plain text.

Both show the same things in the same order: who/what/where (id, domain, source, status), the five
system-prompt parts, then each turn as an action block and an observation block. Everything from the
data is escaped; long texts are folded (HTML `<details>`) or clipped (text) so a 200-turn trajectory
stays readable.
"""

from __future__ import annotations

import html
import json
from typing import Any

from schemas.trajectory import HTML_VIEW, Trajectory, Turn

FOLD_CHARS = 1_500
"""Observations longer than this (or with more lines than FOLD_LINES) start folded in HTML."""
FOLD_LINES = 25
TEXT_CLIP_CHARS = 2_000
"""The plain-text rendering shows at most this many characters of one text, then says how many more."""

_STYLE = """
<style>
.wl-traj{font-family:system-ui,-apple-system,Segoe UI,sans-serif;font-size:13px;line-height:1.4;
  border:1px solid #d0d7de;border-radius:6px;padding:10px 12px;max-width:100%;color:#1f2328;background:#fff}
.wl-traj h3{margin:0 0 4px 0;font-size:15px}
.wl-traj .wl-meta{color:#57606a;margin-bottom:8px}
.wl-traj .wl-badge{display:inline-block;padding:0 6px;margin-right:4px;border-radius:10px;
  background:#eaeef2;color:#24292f;font-size:11px}
.wl-traj .wl-badge.wl-bad{background:#ffebe9;color:#cf222e}
.wl-traj .wl-part{margin:4px 0}
.wl-traj .wl-turn{border-top:1px solid #d8dee4;padding:6px 0}
.wl-traj .wl-act{border-left:3px solid #0969da;padding-left:8px;margin:4px 0}
.wl-traj .wl-obs{border-left:3px solid #1a7f37;padding-left:8px;margin:4px 0}
.wl-traj .wl-obs.wl-err{border-left-color:#cf222e}
.wl-traj pre{white-space:pre-wrap;word-break:break-word;margin:2px 0;padding:4px 6px;
  background:#f6f8fa;border-radius:4px;font-size:12px;max-height:40em;overflow:auto}
.wl-traj summary{cursor:pointer;color:#57606a}
</style>
"""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _badge(text: str, bad: bool = False) -> str:
    return f'<span class="wl-badge{" wl-bad" if bad else ""}">{_e(text)}</span>'


def _is_long(text: str) -> bool:
    return len(text) > FOLD_CHARS or text.count("\n") >= FOLD_LINES


def _pre(text: str, summary: str, fold: bool | None = None) -> str:
    """A <pre> block, inside a closed <details> when the text is long."""
    body = f"<pre>{_e(text)}</pre>"
    if fold is None:
        fold = _is_long(text)
    if not fold:
        return body
    lines = text.count("\n") + 1
    return f"<details><summary>{_e(summary)} ({len(text):,} chars, {lines:,} lines)</summary>{body}</details>"


def _system_parts(traj: Trajectory) -> list[tuple[str, str]]:
    parts: list[tuple[str, str]] = [("task", traj.task)]
    space = traj.action_space
    if space.description:
        parts.append(("action space", space.description))
    if space.tools:
        tools = json.dumps([t.to_json() for t in space.tools], indent=2, ensure_ascii=False)
        parts.append((f"tools ({len(space.tools)}: {', '.join(t.name for t in space.tools)})", tools))
    for label, value in (
        ("initial state", traj.initial_state),
        ("demonstrations", traj.demonstrations),
        ("simulation instruction", traj.simulation_instruction),
    ):
        if value is not None:
            parts.append((label, value))
    return parts


def _turn_facts(turn: Turn) -> list[str]:
    facts = [f"action: {turn.action.kind.value}"]
    if turn.action.tool_name:
        facts.append(f"tool: {turn.action.tool_name}")
    facts.append(f"observation: {turn.observation.format.value}")
    if turn.exit_code is not None:
        facts.append(f"exit {turn.exit_code}")
    if turn.observation.is_error:
        facts.append("error")
    if turn.duration_s is not None:
        facts.append(f"{turn.duration_s:.2f}s")
    if turn.state_changed is False:
        facts.append("no state change")
    return facts


def _turn_html(index: int, turn: Turn) -> str:
    facts = _turn_facts(turn)
    badges = "".join(_badge(f, bad=f == "error" or (f.startswith("exit ") and f != "exit 0")) for f in facts)
    state = turn.metadata.get("current_state")
    state_html = (
        f'<div class="wl-part">{_pre(state, "state before the action", fold=True)}</div>'
        if isinstance(state, str)
        else ""
    )
    err = " wl-err" if turn.observation.is_error else ""
    return (
        f'<div class="wl-turn"><b>Turn {index}</b> {badges}{state_html}'
        f'<div class="wl-act"><b>Action</b>{_pre(turn.action.text, "action")}</div>'
        f'<div class="wl-obs{err}"><b>Observation</b>{_pre(turn.observation.text, "observation")}</div>'
        "</div>"
    )


def trajectory_html(traj: Trajectory) -> str:
    """A self-contained HTML card for one trajectory (what Jupyter shows for `Trajectory`)."""
    src = traj.source
    provenance = [f"{src.kind.value}: {src.name}"]
    if src.uri:
        provenance.append(src.uri)
    if src.licence:
        provenance.append(f"licence {src.licence}")
    who = " / ".join(x for x in (src.agent, src.model) if x)
    if who:
        provenance.append(f"acted by {who}")
    if src.collected_at is not None:
        provenance.append(f"collected {src.collected_at.isoformat()}")
    status = traj.status.value + (f" ({traj.status_reason})" if traj.status_reason else "")
    header = (
        f"<h3>{_e(traj.id)}</h3>"
        f'<div class="wl-meta">{_badge(traj.domain.value)}{_badge(status, bad=traj.status.value != "complete")}'
        f"{_badge(f'{traj.num_turns} turns')} {_e(' · '.join(provenance))}</div>"
    )
    parts = "".join(
        f'<div class="wl-part"><b>{_e(label)}</b>{_pre(text, label, fold=len(text) > 400 or label != "task")}</div>'
        for label, text in _system_parts(traj)
    )
    system = (
        f"<details open><summary>System prompt ({len(_system_parts(traj))} parts)</summary>{parts}</details>"
    )
    turns = "".join(_turn_html(i, t) for i, t in enumerate(traj.turns, start=1))
    if not traj.turns:
        turns = "<div class='wl-turn'><i>no turns</i></div>"
    meta = ""
    if traj.metadata:
        meta = _pre(
            json.dumps(traj.metadata, indent=2, ensure_ascii=False, default=str), "metadata", fold=True
        )
    return f'{_STYLE}<div class="wl-traj">{header}{system}{turns}{meta}</div>'


def _clip(text: str, limit: int) -> str:
    if limit <= 0 or len(text) <= limit:
        return text
    return f"{text[:limit]}\n… [{len(text) - limit:,} more characters]"


def trajectory_text(traj: Trajectory, *, clip: int = TEXT_CLIP_CHARS) -> str:
    """A plain-text rendering (terminals, logs); texts longer than `clip` characters are cut."""
    src = traj.source
    lines = [
        f"{traj.id}  [{traj.domain.value}]  {traj.status.value}"
        + (f" ({traj.status_reason})" if traj.status_reason else "")
        + f"  {traj.num_turns} turns",
        f"source: {src.kind.value} {src.name}" + (f" {src.uri}" if src.uri else ""),
        "",
    ]
    for label, text in _system_parts(traj):
        lines += [f"== {label} ==", _clip(text, clip), ""]
    for i, turn in enumerate(traj.turns, start=1):
        lines.append(f"--- turn {i} ({', '.join(_turn_facts(turn))}) ---")
        state: Any = turn.metadata.get("current_state")
        if isinstance(state, str):
            lines += ["[state before]", _clip(state, clip)]
        lines += [
            "[action]",
            _clip(turn.action.text, clip),
            "[observation]",
            _clip(turn.observation.text, clip),
            "",
        ]
    return "\n".join(lines)


HTML_VIEW[:] = [trajectory_html]
