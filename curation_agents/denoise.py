"""Denoise: render terminal recordings into what a person saw, normalise tool output, redact secrets.

A terminal recording becomes a transcript: one item per input event carrying the rendered line under
the cursor at that moment and the lines finished since the previous item. Segment reads only this
transcript, never raw escape codes.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from curation_agents.model import ParsedRecord
from curation_agents.redact import redact
from curation_agents.terminal_screen import TerminalScreen, clean_tool_output

# A transcript item: [kind ("i" | "r" | "end"), seconds, input data, current line, finished lines, fullscreen]
TranscriptItem = list[Any]


def render_transcript(
    events: list[list[Any]], width: int, height: int, counts: Counter[str]
) -> list[TranscriptItem]:
    """Feed output events through the screen; emit an item at every input, resize and the end."""
    screen = TerminalScreen(width, height)
    items: list[TranscriptItem] = []
    last_t = 0.0
    for t, code, data in events:
        last_t = t
        if code == "o":
            screen.feed(data)
        elif code == "i":
            finished = [redact(line, counts) for line in screen.take_finished()]
            items.append(
                [
                    "i",
                    t,
                    redact(data, counts),
                    redact(screen.current_line, counts),
                    finished,
                    screen.in_fullscreen,
                ]
            )
        elif code == "r":
            cols, _, rows = str(data).partition("x")
            if cols.isdigit() and rows.isdigit():
                screen.width = max(2, min(int(cols), 1000))
                screen.height = max(2, min(int(rows), 500))
    finished = [redact(line, counts) for line in screen.take_finished()]
    current = redact(screen.current_line, counts)
    items.append(["end", last_t, "", current, finished, screen.in_fullscreen])
    return items


def denoise_record(parsed: ParsedRecord, counts: Counter[str]) -> ParsedRecord:
    """Clean every text field of a parsed record in place and return it."""
    if parsed.get("events") is not None:
        parsed["transcript"] = render_transcript(
            parsed["events"], parsed.get("width", 80), parsed.get("height", 24), counts
        )
        parsed["events"] = []  # the transcript replaces the raw events; free them
    if isinstance(parsed.get("task"), str):
        parsed["task"] = redact(clean_tool_output(parsed["task"]), counts)
    system = parsed.get("system_prompt")
    if isinstance(system, str):
        parsed["system_prompt"] = redact(clean_tool_output(system), counts)
    for turn in parsed.get("turns", []):
        turn["action"] = redact(clean_tool_output(turn.get("action", "")), counts)
        turn["observation"] = redact(clean_tool_output(turn.get("observation", "")), counts)
        thought = turn.get("metadata", {}).get("thought")
        if isinstance(thought, str):
            turn["metadata"]["thought"] = redact(thought, counts)
    initial = parsed.get("metadata", {}).get("initial_state")
    if isinstance(initial, str):
        parsed["metadata"]["initial_state"] = redact(initial, counts)
    return parsed
