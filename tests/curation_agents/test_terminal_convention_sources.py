"""The terminal observation convention (docs/observations.md) holds for every source: the bundled
AgentWorldBench terminal sample as imported, and real recordings as cleaned."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from curation_agents.agentworldbench_import import import_agentworldbench
from curation_agents.shell_prompts import PROMPT
from schemas import Domain, iter_trajectories
from tests.curation_agents.test_terminal_exact_turns_pty import cleaned
from worldline.samples import sample_files

TERMINAL = Path(__file__).resolve().parents[1] / "fixtures" / "terminal"


def follows_the_convention(action: str, observation: str) -> bool:
    """The row the command was typed on (a prompt, then the command's first line), and a last row
    that is the next prompt, its trailing space kept."""
    rows = observation.split("\n")
    first = PROMPT.match(rows[0])
    last = PROMPT.match(rows[-1])
    return (
        first is not None
        and rows[0][first.end() :] == action.split("\n")[0]
        and last is not None
        and last.end() == len(rows[-1])
        and rows[-1].endswith(" ")
    )


def test_imported_agentworldbench_terminal_samples_follow_it(tmp_path: Path) -> None:
    files = [p for p in sample_files() if p.name.startswith("terminal")]
    assert files
    import_agentworldbench(files, tmp_path / "ds", pii=frozenset())
    turns = [
        t for traj in iter_trajectories(tmp_path / "ds") if traj.domain == Domain.TERMINAL for t in traj.turns
    ]
    assert turns
    for turn in turns:
        keys = json.loads(turn.action.text) if turn.action.text.startswith("[") else None
        typed = "".join(k["keystrokes"] for k in keys).rstrip("\n") if keys else turn.action.text
        assert follows_the_convention(typed, turn.observation.text), turn.observation.text


@pytest.mark.parametrize("cast", sorted(TERMINAL.glob("*.cast")), ids=lambda p: p.stem)
def test_cleaned_recordings_follow_it(cast: Path) -> None:
    turns = cleaned(cast)
    assert turns and all(follows_the_convention(t["action"], t["observation"]) for t in turns)
