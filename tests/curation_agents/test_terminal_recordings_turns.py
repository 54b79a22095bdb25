"""Real asciinema recordings of bash sessions (tests/fixtures/terminal): the turns in the source,
counted by a parser of the recording's own keystrokes, against the turns the cleaner gives, and the
observations against pyte's screen of the whole session (docs/observations.md)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.curation_agents.test_terminal_exact_turns_pty import cleaned, pyte_screen, tiled

TERMINAL = Path(__file__).resolve().parents[1] / "fixtures" / "terminal"
CASTS = sorted(TERMINAL.glob("*.cast"))
_ESCAPE = re.compile(r"\x1b(?:\[[0-9;]*[A-Za-z~]|O.)")


def typed_lines(cast: Path) -> list[str]:
    """The lines typed in the recording, from its input events alone: keys up to each Enter, with
    backspaces applied and escape keys left out."""
    lines, current = [], ""
    for event in map(json.loads, cast.read_text().splitlines()[1:]):
        if event[1] != "i":
            continue
        for ch in _ESCAPE.sub("", event[2]):
            if ch in "\r\n":
                lines.append(current)
                current = ""
            elif ch in "\x7f\b":
                current = current[:-1]
            elif ch >= " ":
                current += ch
    return lines


@pytest.mark.parametrize("cast", CASTS, ids=[c.stem for c in CASTS])
def test_turns_in_the_source_are_the_turns_in_worldline(cast: Path) -> None:
    typed = [line for line in typed_lines(cast) if line.strip()]
    # The `exit` that ends the recorded shell is how the recording stops, not a turn.
    source_turns = typed[:-1] if typed and typed[-1].strip() == "exit" else typed
    turns = cleaned(cast)
    print(f"{cast.name}: {len(source_turns)} turns in the source, {len(turns)} in worldline")
    assert [t["action"] for t in turns] == source_turns
    screen = pyte_screen(cast)
    if source_turns != typed:  # the screen from the `exit` on is the end of the recording, not a turn
        last = max(i for i, row in enumerate(screen) if row.endswith(" exit"))
        screen = [*screen[:last], screen[last].removesuffix(" exit")]
    assert tiled(turns) == screen
