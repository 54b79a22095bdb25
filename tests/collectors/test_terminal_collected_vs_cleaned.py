"""One observation convention whatever the source (docs/observations.md): a terminal session collected
with the real engine, and the same session's own asciicast cleaned by the cleaner, give the same turns
and the same observations, row for row."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from docker import DockerClient

from collectors import engine
from collectors.environment import EnvironmentOptions, Task
from collectors.terminal import TerminalEnvironment
from curation_agents.denoise import denoise_record
from curation_agents.formats.terminal import parse_asciicast
from curation_agents.model import CleanConfig, Limits
from curation_agents.segment import segment_record
from schemas import Action, ActionKind

pytestmark = pytest.mark.engine

LONG = "x" * 139  # `agent@sandbox:/work$ echo ` + this reaches past the 160th column
MARGIN = "echo " + "m" * (160 - len("agent@sandbox:/work$ ") - len("echo "))  # ends exactly at the margin

# What a session of a terminal task does: commands of every shape, then input read by programs.
COMMANDS: list[str | list[dict[str, Any]]] = [
    "ls -la /work | head -3",
    "mkdir -p deep/er && cd deep/er && pwd",
    "cd /work",
    f"echo {LONG}",
    MARGIN,
    "printf 'progress 10%%\\rprogress 100%%\\n'",
    "printf 'a\\tb\\tc\\n'",
    "printf '\\033[31mred\\033[0m plain\\n'",
    "for i in 1 2 3; do\necho line $i\ndone",
    "cat <<'EOF'\nfirst\n  indented\nEOF",
    "echo 'quoted\nnewline'",
    "python3 -c 'print(sum(range(10)))'",
    "ls /nonexistent",
    "seq 1 12",
    [{"keystrokes": "cat > notes.txt\n", "duration": 0.5}],
    [{"keystrokes": "typed line one\n", "duration": 0.3}],
    [{"keystrokes": "typed line two\n", "duration": 0.3}],
    [{"keystrokes": "C-d", "duration": 0.5}],
    "cat notes.txt",
    [{"keystrokes": "read -p 'Name: ' who\n", "duration": 0.5}],
    [{"keystrokes": "bob\n", "duration": 0.5}],
    'echo "hello $who"',
]


def typed_text(action: str | list[dict[str, Any]]) -> str:
    """The text an action types, as the cleaner names it: a line without its Enter, Ctrl-D as ^D."""
    if isinstance(action, str):
        return action
    keys = "".join(k["keystrokes"] for k in action)
    return "^D" if keys == "C-d" else keys.removesuffix("\n")


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[tuple[str, str]], Path]:
    """(typed text, observation) per collected step, and the session's asciicast."""
    client: DockerClient = engine.connect()
    cast = tmp_path_factory.mktemp("collect") / "session.cast"
    env = TerminalEnvironment(EnvironmentOptions(client=client, cast_path=cast))
    steps: list[tuple[str, str]] = []
    with env:
        env.reset(Task(id="same", instruction="x"))
        for action in COMMANDS:
            if isinstance(action, str):
                result = env.step(Action(kind=ActionKind.COMMAND, text=action))
            else:
                result = env.step(Action(kind=ActionKind.KEYSTROKES, text=json.dumps(action)))
            steps.append((typed_text(action), result.observation.text))
    return steps, cast


def cleaned(cast: Path) -> list[tuple[str, str]]:
    parsed = parse_asciicast(str(cast), Limits())
    counts: Counter[str] = Counter()
    denoise_record(parsed, counts)
    turns = [t for episode in segment_record(parsed, CleanConfig(), counts) for t in episode]
    return [(t["action"], t["observation"]) for t in turns]


def test_collected_and_cleaned_give_the_same_turns_and_observations(
    session: tuple[list[tuple[str, str]], Path],
) -> None:
    collected, cast = session
    clean = cleaned(cast)
    equal = sum(1 for a, b in zip(collected, clean, strict=False) if a == b)
    print(f"collected vs cleaned: {equal} of {len(collected)} turns equal ({len(clean)} cleaned turns)")
    assert [a for a, _ in clean] == [a for a, _ in collected]
    for (action, ours), (_, theirs) in zip(collected, clean, strict=True):
        assert theirs == ours, action
    assert equal == len(collected)


def test_the_convention_holds_in_the_collected_observations(
    session: tuple[list[tuple[str, str]], Path],
) -> None:
    collected, _ = session
    by_action = dict(collected)
    prompt = "agent@sandbox:/work$ "
    # The row the command was typed on, the output, the next prompt (its trailing space kept).
    assert by_action["ls /nonexistent"].startswith(prompt + "ls /nonexistent\nls: cannot access")
    assert by_action["ls /nonexistent"].endswith("\n" + prompt)
    # Rows of the 160-column terminal: the echo wraps where the screen wrapped it.
    rows = by_action[f"echo {LONG}"].split("\n")
    assert rows[:3] == [(prompt + "echo " + LONG)[:160], (prompt + "echo " + LONG)[160:], LONG]
    # A command reaching exactly the right margin is one row, then its output.
    assert by_action[MARGIN].split("\n")[:2] == [prompt + MARGIN, MARGIN[5:]]
    # A multi-line command shows its continuation prompts.
    assert by_action["for i in 1 2 3; do\necho line $i\ndone"] == (
        f"{prompt}for i in 1 2 3; do\n> echo line $i\n> done\nline 1\nline 2\nline 3\n{prompt}"
    )
    # Input read by a program: its echo, then the row the next key goes to.
    assert by_action["typed line one"] == "typed line one\n"
    assert "[worldline" not in json.dumps(collected)
