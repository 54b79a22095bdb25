"""Redaction of whole records: trajectories, chat messages and asciicast recordings.

Besides the detectors of `detect`, one rule here needs no pattern at all: text a terminal did not
echo is a secret, whatever the prompt asked for and in whatever language (`[sudo] Passwort für ...`,
a PEM pass phrase, `Enter password:` of mysql or psql). A keystroke whose characters never show up in
the output that follows it was read with echo off; it is replaced by `[REDACTED:unechoed_input]`.
Keys typed on the alternate screen (vim, less, top) are commands to a full-screen program, not text,
and stay; so do runs shorter than `MIN_UNECHOED` characters (a `q` or `y` a pager swallows).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from schemas import ActionKind, Observation, ObservationFormat, Trajectory, Turn
from schemas.atomic import atomic_open
from worldline.redaction.detect import (
    DEFAULT_PII,
    MARKER_PREFIX,
    marker,
    redact,
    redact_json,
    redact_text_or_json,
)

UNECHOED = "unechoed_input"
# Shorter runs of unechoed keys are left: single keys a program reads without echo (a pager's `q`,
# a `y` to a prompt that reads one character) are far more common than three-character passwords.
MIN_UNECHOED = 4
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[()*+].|[^\[\]])")
_ALT_SCREEN = re.compile(r"\x1b\[\?(?:1049|1047|47)([hl])")
_SPACE = re.compile(r"\s+")


def _visible(text: str) -> str:
    """TEXT without escape sequences, control characters and white space (line wrapping, redraws)."""
    return _SPACE.sub("", "".join(ch for ch in _ANSI.sub("", text) if ch >= " " or ch == "\n"))


def _in_order(needle: str, haystack: str) -> bool:
    """Whether NEEDLE's characters appear in HAYSTACK in order (an echo with edits and redraws
    between the characters still holds them in order)."""
    it = iter(haystack)
    return all(ch in it for ch in needle)


def _typed_text(data: str) -> str:
    """The printable characters of keystrokes, with backspace and Ctrl-U applied."""
    out: list[str] = []
    for ch in _ANSI.sub("", data):
        if ch in "\x7f\b":
            if out:
                out.pop()
        elif ch == "\x15":
            out.clear()
        elif ch >= " ":
            out.append(ch)
    return "".join(out)


# -- asciicast recordings -------------------------------------------------------------------------------


def unechoed_input_events(events: Sequence[Sequence[Any]]) -> set[int]:
    """Indices of the input events (`[t, "i", data]`) of EVENTS whose keys were not echoed.

    Keys are grouped into lines (up to Enter). A line is echoed when its text appears in the output
    around it: in order in the output while it was typed (an echo with edits and redraws between the
    keys), or as a whole in that output and a little after its Enter (a pasted line, echoed after its
    Enter). The window after Enter is short enough that a command's output cannot pass for an echo.
    """
    unechoed: set[int] = set()
    alternate = False
    line_events: list[int] = []  # input events of the line being typed
    echo: list[str] = []  # output while the line was typed
    post: list[str] = []  # output just after its Enter
    after_enter: int | None = None  # characters of output still to read after the line's Enter
    typed = ""
    sent_with: list[str] = []  # lines sent in the same event after the line's Enter (a pasted block)

    def settle() -> None:
        nonlocal line_events, echo, post, after_enter, typed, sent_with
        text = _SPACE.sub("", typed)
        during = _visible("".join(echo))
        seen = during + _visible("".join(post))
        if len(text) >= MIN_UNECHOED:
            if not _in_order(text, during) and text not in seen:
                unechoed.update(line_events)
        for line in sent_with:  # each whole in the output after the Enter (after a `> ` prompt, say)
            line = _SPACE.sub("", line)
            if len(line) >= MIN_UNECHOED and line not in seen:
                unechoed.update(line_events)
        line_events, echo, post, after_enter, typed, sent_with = [], [], [], None, "", []

    for index, event in enumerate(events):
        if len(event) < 3 or not isinstance(event[2], str):
            continue
        code, data = event[1], event[2]
        if code == "o":
            if "\x1b[?" in data:
                for m in _ALT_SCREEN.finditer(data):
                    alternate = m.group(1) == "h"
            if line_events:
                if after_enter is None:
                    echo.append(data)
                else:
                    post.append(data[:after_enter])
                    after_enter -= len(data)
                    if after_enter <= 0:
                        settle()
        elif code == "i":
            if len(data) == 1 and " " <= data <= "~" and not alternate and after_enter is None:
                line_events.append(index)  # one printable key: most input events
                typed += data
                continue
            if alternate or data.startswith(MARKER_PREFIX):  # a full-screen program's keys; redacted keys
                line_events, echo, after_enter, typed = [], [], None, ""
                continue
            if after_enter is not None:
                settle()
            cut = min((data.find(c) for c in "\r\n" if c in data), default=-1)
            head = data if cut < 0 else data[:cut]
            typed_now = _typed_text(head)
            if typed_now or line_events:
                line_events.append(index)
                typed = _typed_text(typed + head) if "\x7f" in head or "\b" in head else typed + typed_now
            if cut >= 0 and line_events:
                rest = data[cut + 1 :].lstrip("\r\n")
                # Lines sent after the Enter in the same event (a heredoc, a `for` block, a pasted
                # script): each is judged on its own, in the output after the Enter.
                sent_with = [_typed_text(part) for part in re.split(r"[\r\n]+", rest) if part]
                after_enter = 2 * (len(typed) + sum(len(line) for line in sent_with)) + 256
    if line_events and after_enter is not None:
        settle()
    return unechoed


def unechoed_texts(events: Sequence[Sequence[Any]], unechoed: set[int] | None = None) -> list[str]:
    """The text of each unechoed line of EVENTS (what was typed at a no-echo read), in order."""
    marked = unechoed_input_events(events) if unechoed is None else unechoed
    texts: list[str] = []
    current = ""
    for index in sorted(marked):
        data = str(events[index][2])
        cut = min((data.find(c) for c in "\r\n" if c in data), default=-1)
        current += data if cut < 0 else data[:cut]
        if cut >= 0:
            texts.append(_typed_text(current))
            current = ""
    if current:
        texts.append(_typed_text(current))
    return [t for t in texts if len(t) >= MIN_UNECHOED]


def redact_cast_events(
    events: list[list[Any]],
    counts: Counter[str] | None = None,
    pii: frozenset[str] = DEFAULT_PII,
    unechoed: set[int] | None = None,
) -> list[list[Any]]:
    """EVENTS with secrets redacted: unechoed input, and secrets in the output stream even where the
    program printed them in several writes (output events are joined where a secret spans them).

    Output is redacted as a stream: the output events between two input events are joined, redacted
    as one text and, when anything changed, written back as one event at the time of the first.
    """
    if unechoed is None:
        unechoed = unechoed_input_events(events)
    out: list[list[Any]] = []
    run: list[list[Any]] = []

    def flush() -> None:
        if not run:
            return
        joined = "".join(str(e[2]) for e in run)
        cleaned = redact(joined, counts, pii)
        if cleaned == joined:
            out.extend(run)
        else:
            out.append([run[0][0], "o", cleaned])
        run.clear()

    line_marked = False
    for index, event in enumerate(events):
        if len(event) >= 3 and event[1] == "o" and isinstance(event[2], str):
            run.append(list(event))
            continue
        flush()
        if len(event) >= 3 and event[1] == "i" and isinstance(event[2], str):
            data = event[2]
            if index in unechoed:
                ends = "".join(c for c in data if c in "\r\n")
                if not line_marked:
                    if counts is not None:
                        counts[UNECHOED] += 1
                    data, line_marked = marker(UNECHOED) + ends, True
                else:
                    data = ends
                if ends:
                    line_marked = False
                if not data:
                    continue
            else:
                line_marked = False
                data = redact(data, counts, pii)
            out.append([event[0], "i", data])
        elif len(event) >= 3 and isinstance(event[2], str):
            out.append([event[0], event[1], redact(event[2], counts, pii)])  # markers, resizes
        else:
            out.append(list(event))
    flush()
    return out


def redact_cast_file(
    path: Path, counts: Counter[str] | None = None, pii: frozenset[str] = DEFAULT_PII
) -> list[str]:
    """Rewrite the asciicast v2 file PATH with its secrets redacted (atomically, when anything was).

    Returns the texts typed without echo, so the caller can take them out of the trajectory the
    recording belongs to; they are held in memory only."""
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines:
        return []
    header = json.loads(lines[0])
    events = [json.loads(line) for line in lines[1:] if line.strip()]
    local: Counter[str] = Counter()
    unechoed = unechoed_input_events(events)
    typed = unechoed_texts(events, unechoed)
    cleaned = redact_cast_events(events, local, pii, unechoed)
    header_text = json.dumps(redact_json(header, local, pii), ensure_ascii=False)
    if not local:
        return typed
    if counts is not None:
        counts.update(local)
    with atomic_open(path, "w") as fh:
        fh.write(header_text + "\n")
        for event in cleaned:
            fh.write(json.dumps(event, ensure_ascii=False) + "\n")
    return typed


# -- trajectories ---------------------------------------------------------------------------------------


def _unechoed(typed: str, observation: str) -> bool:
    text = _SPACE.sub("", typed)
    return len(text) >= MIN_UNECHOED and not _in_order(text, _visible(observation))


def redact_unechoed_action(
    turn: Turn, counts: Counter[str] | None, is_key_name: Callable[[str], bool] = lambda _: False
) -> Turn:
    """TURN of a terminal trajectory with the text it typed but the terminal did not echo redacted.

    A command line's echo is part of a terminal observation; keystrokes' text is echoed unless a
    program turned echo off. IS_KEY_NAME tells key names (`Enter`, `C-c`) from literal text.
    """
    if turn.observation.format != ObservationFormat.TERMINAL:
        return turn
    obs = turn.observation.text
    action = turn.action
    if action.kind == ActionKind.COMMAND:
        first = action.text.split("\n", 1)[0]
        if not _unechoed(first, obs):
            return turn
        if counts is not None:
            counts[UNECHOED] += 1
        return dataclasses.replace(turn, action=dataclasses.replace(action, text=marker(UNECHOED)))
    if action.kind != ActionKind.KEYSTROKES:
        return turn
    try:
        keys = json.loads(action.text)
    except ValueError:
        return turn
    if not isinstance(keys, list):
        return turn
    changed = False
    for item in keys:
        text = item.get("keystrokes") if isinstance(item, dict) else None
        if not isinstance(text, str) or is_key_name(text):
            continue
        body = text.rstrip("\r\n")
        if _unechoed(_typed_text(body), obs):
            item["keystrokes"] = marker(UNECHOED) + text[len(body) :]
            changed = True
            if counts is not None:
                counts[UNECHOED] += 1
    if not changed:
        return turn
    return dataclasses.replace(
        turn, action=dataclasses.replace(action, text=json.dumps(keys, ensure_ascii=False))
    )


def redact_trajectory(
    trajectory: Trajectory,
    counts: Counter[str] | None = None,
    pii: frozenset[str] = DEFAULT_PII,
    is_key_name: Callable[[str], bool] | None = None,
    typed_secrets: Sequence[str] = (),
) -> Trajectory:
    """TRAJECTORY with every text field redacted: task, states, instructions, actions (tool-call
    arguments as JSON), observations, metadata, status reason. Ids, enums and numbers stay.
    TYPED_SECRETS (what its recording shows was typed without echo) are replaced wherever they appear;
    with IS_KEY_NAME and no recording, terminal input its observation does not show is redacted too
    (an imported or cleaned trajectory has no echo to judge by, and passes neither)."""
    replacements = sorted({t for t in typed_secrets if len(t) >= MIN_UNECHOED}, key=len, reverse=True)
    forms = [
        (form, marker(UNECHOED))
        for t in replacements
        for form in {t, json.dumps(t, ensure_ascii=False)[1:-1]}
    ]

    def scrub(value: str) -> str:
        for form, mark in forms:
            value = value.replace(form, mark)
        return value

    def text(value: str | None) -> str | None:
        return None if value is None else redact_text_or_json(scrub(value), counts, pii)

    turns = []
    for turn in trajectory.turns:
        if is_key_name is not None and not typed_secrets:
            turn = redact_unechoed_action(turn, counts, is_key_name)
        action = dataclasses.replace(turn.action, text=text(turn.action.text) or "")
        observation: Observation = dataclasses.replace(
            turn.observation, text=text(turn.observation.text) or ""
        )
        turns.append(
            dataclasses.replace(
                turn, action=action, observation=observation, metadata=redact_json(turn.metadata, counts, pii)
            )
        )
    return dataclasses.replace(
        trajectory,
        task=text(trajectory.task) or "",
        initial_state=text(trajectory.initial_state),
        demonstrations=text(trajectory.demonstrations),
        simulation_instruction=text(trajectory.simulation_instruction),
        status_reason=text(trajectory.status_reason),
        turns=turns,
        metadata=redact_json(trajectory.metadata, counts, pii),
    )


# -- chat messages --------------------------------------------------------------------------------------


def redact_message(
    message: Mapping[str, Any], counts: Counter[str] | None = None, pii: frozenset[str] = DEFAULT_PII
) -> dict[str, Any]:
    """A chat message (OpenAI form) with its content, content parts and tool-call arguments redacted."""
    out = dict(message)
    content = out.get("content")
    if isinstance(content, str):
        out["content"] = redact_text_or_json(content, counts, pii)
    elif isinstance(content, list):
        out["content"] = [
            {**part, "text": redact_text_or_json(part["text"], counts, pii)}
            if isinstance(part, Mapping) and isinstance(part.get("text"), str)
            else part
            for part in content
        ]
    calls = out.get("tool_calls")
    if isinstance(calls, list):
        out["tool_calls"] = redact_json(calls, counts, pii)
    return out


__all__ = [
    "MIN_UNECHOED",
    "UNECHOED",
    "redact_cast_events",
    "redact_cast_file",
    "redact_message",
    "redact_trajectory",
    "redact_unechoed_action",
    "unechoed_input_events",
    "unechoed_texts",
]


def mask_unechoed_input(events: list[list[Any]], counts: Counter[str] | None = None) -> list[list[Any]]:
    """EVENTS (in place) with the keys of each unechoed line replaced by one marker, the line's Enter
    kept: what a reader of the recording may see of input the terminal did not show."""
    if not any(len(e) > 1 and e[1] == "i" for e in events):
        return events  # an output-only recording: nothing was typed
    unechoed = unechoed_input_events(events)
    if not unechoed:
        return events
    line_marked = False
    for index in sorted(unechoed):
        data = str(events[index][2])
        ends = "".join(c for c in data if c in "\r\n")
        if not line_marked:
            if counts is not None:
                counts[UNECHOED] += 1
            events[index][2], line_marked = marker(UNECHOED) + ends, True
        else:
            events[index][2] = ends
        if ends:
            line_marked = False
    return events
