"""The cleaner on every real fixture: public agent logs and real terminal recordings."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from curation_agents.clean_run import CleanRun
from curation_agents.denoise import denoise_record
from curation_agents.formats.terminal import parse_asciicast
from curation_agents.model import CleanConfig, Limits
from curation_agents.segment import segment_record
from schemas import ActionKind, Domain, SourceKind, iter_trajectories
from schemas.quarantine import CLEAN_QUARANTINE_SCHEMA

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PUBLIC = FIXTURES / "public"
TERMINAL = FIXTURES / "terminal"
EXPECTED = json.loads((TERMINAL / "expected.json").read_text())


def _clean(paths: list[Path], out: Path, **config: object) -> tuple[dict, dict]:
    summary = CleanRun([str(p) for p in paths], out, CleanConfig(licence="MIT", **config)).run()  # type: ignore[arg-type]
    by_uri = {t.source.uri: t for t in iter_trajectories(out)}
    return summary, by_uri


def _quarantine_rows(out: Path) -> list[dict]:
    rows = []
    for f in sorted((out / "quarantine" / "parts").glob("*.parquet")):
        table = pq.read_table(f)
        assert table.schema.equals(CLEAN_QUARANTINE_SCHEMA, check_metadata=False)
        rows.extend(table.to_pylist())
    return rows


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_terminal_recordings_recover_the_exact_commands(name: str) -> None:
    spec = EXPECTED[name]
    parsed = parse_asciicast(str(TERMINAL / spec["cast"]), Limits())
    counts: Counter[str] = Counter()
    denoise_record(parsed, counts)
    turns = [t for episode in segment_record(parsed, CleanConfig(), counts) for t in episode]
    assert [t["action"] for t in turns] == spec["commands"]
    transcript = "\n".join(t["observation"] for t in turns)
    for text in spec["expect"]:
        assert text in transcript
    assert "\x1b" not in transcript and "\r" not in transcript


def test_terminal_recordings_through_the_whole_graph(tmp_path: Path) -> None:
    casts = [TERMINAL / spec["cast"] for spec in EXPECTED.values()]
    summary, by_uri = _clean(casts, tmp_path / "out")
    assert summary["records_in"] == 2 and summary["accepted"] == 2
    for spec in EXPECTED.values():
        traj = by_uri[f"{spec['cast']}#file"]
        assert traj.domain == Domain.TERMINAL
        assert [t.action.text for t in traj.turns] == spec["commands"]
        assert all(t.action.kind == ActionKind.COMMAND for t in traj.turns)
        assert traj.turns[0].started_at is not None and traj.source.collected_at is not None
    repl = by_uri["dev_repl_and_typo.cast#file"]
    # The python REPL nests inside the shell: its prompt is kept, and the typo's error is real output.
    assert repl.turns[2].metadata["repl"] == ">>>"
    assert "command not found" in repl.turns[0].observation.text
    assert repl.turns[2].observation.text == ">>> [i*i for i in range(4)]\n[0, 1, 4, 9]\n>>> "


def test_every_public_fixture_has_a_reasoned_outcome(tmp_path: Path) -> None:
    files = sorted(p for p in PUBLIC.iterdir() if p.name != "SOURCES.md")
    summary, by_uri = _clean(files, tmp_path / "out", source_name="adp-samples")
    assert summary["records_in"] == summary["accepted"] + summary["quarantined"] == 8

    swe = by_uri["swe-agent_marshmallow-1867.traj#file"]
    assert swe.domain == Domain.SWE and len(swe.turns) == 11
    assert swe.turns[0].action.text == "create reproduce.py" and swe.turns[0].action.tool_name == "create"
    assert {"create", "edit", "submit", "bash"} <= swe.action_space.tool_names()
    assert "\r" not in swe.turns[0].observation.text  # CRLF normalised
    assert (
        swe.source.model == "gpt-4o" and swe.source.kind == SourceKind.PUBLIC and swe.source.licence == "MIT"
    )

    oh = by_uri["openhands_events_wrong_initial_state.json#file"]
    assert oh.task == "Please rename game_2048.py to 2048.py"
    assert [t.action.tool_name for t in oh.turns] == [
        "str_replace_editor",
        "execute_bash",
        "str_replace_editor",
    ]
    assert oh.turns[1].action.text == "mv /workspace/game_2048.py /workspace/2048.py"
    assert oh.turns[1].exit_code == 0
    assert json.loads(oh.turns[0].action.text) == {
        "name": "str_replace_editor",
        "arguments": {"command": "view", "path": "/workspace"},
    }
    assert oh.metadata["empty_actions_stripped"] == 1  # the closing `finish` message is narration

    mini = by_uri["openai_messages_mini-coder_sample.json#item-0"]
    assert mini.turns[0].action.text == "ls -la bleach/" and mini.turns[0].exit_code == 0
    assert mini.turns[0].observation.text.startswith("total 104")
    share = by_uri["sharegpt_toolcall_sample.json#item-0"]
    assert share.turns[0].action.text == "ls -la bleach/"
    # The two logs of the same run agree on the commands.
    assert [t.action.text for t in share.turns] == [t.action.text for t in mini.turns]

    web = by_uri["webarena_axtree_trajectories_sample.json#item-1"]
    assert web.domain == Domain.WEB and web.turns[0].observation.format.value == "axtree"
    assert web.initial_state and web.initial_state.startswith("Tab 0")

    reasons = {(r["record_key"], r["stage"], r["reason"]) for r in _quarantine_rows(tmp_path / "out")}
    assert ("uiautomator_window_dump.xml#file", "ingest", "not_a_trajectory") in reasons
    assert ("webarena_axtree_trajectories_sample.json#item-0", "score", "too_few_turns") in reasons
    assert summary["per_reason"] == {"not_a_trajectory": 1, "too_few_turns": 2}


def test_ids_are_stable_across_runs_and_folders(tmp_path: Path) -> None:
    files = [PUBLIC / "swe-agent_marshmallow-1867.traj", TERMINAL / "dev_basics.cast"]
    copies = tmp_path / "elsewhere"
    copies.mkdir()
    for f in files:
        shutil.copy(f, copies / f.name)
    _, first = _clean(files, tmp_path / "a")
    _, second = _clean(files, tmp_path / "b")
    _, moved = _clean([copies / f.name for f in files], tmp_path / "c")
    ids = sorted(t.id for t in first.values())
    assert len(ids) == len(set(ids)) >= len(files)  # every file gave at least one trajectory
    assert sorted(t.id for t in second.values()) == ids  # another run, another output folder
    assert sorted(t.id for t in moved.values()) == ids  # the same files read from another folder


def test_inhouse_logs_are_tagged_as_such(tmp_path: Path) -> None:
    _, by_uri = _clean(
        [TERMINAL / "dev_basics.cast"], tmp_path / "out", source_kind="inhouse", source_name="team-shell-logs"
    )
    (traj,) = by_uri.values()
    assert traj.source.kind == SourceKind.INHOUSE and traj.source.name == "team-shell-logs"
