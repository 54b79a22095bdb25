"""The replay job on real sandboxes: collect scripted terminal tasks, replay them, check the labels."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from collectors.collection import CollectConfig, collect
from collectors.replay import ReplayConfig, ReplaySummary, replay, replay_report, replay_trajectory
from schemas import Domain
from schemas.shards import iter_trajectories
from schemas.span_labels import SpanLabel, read_span_labels

pytestmark = [pytest.mark.engine, pytest.mark.slow]

# Each turn of the race task lets two background writers race for one file; which one wrote last
# decides the exit status, so a replay reproduces all six statuses only by chance (about 1 in 4096).
RACE = "rm -f r; ( (sleep 0.0$((RANDOM % 3)); echo a > r) & (sleep 0.0$((RANDOM % 3)); echo b > r) & wait ); grep -qx a r"
# A fresh sandbox has its own PID namespace, so an idle shell's `$$` is often the same in every run
# (and then rightly deterministic); a few forks first, as many as $RANDOM says, make the PID vary.
FORKED_PID = "for i in $(seq $((RANDOM % 50 + 1))); do /bin/true; done; sh -c 'echo $$'"
TASKS = [
    {
        "id": "deterministic",
        "instruction": "write and read a file",
        "files": {"notes.txt": "alpha\nbeta\n"},
        "actions": [
            "cat notes.txt",
            "echo gamma >> notes.txt; wc -l notes.txt",
            "seq 3; printf 'x=%d\\n' 42",
        ],
    },
    {
        "id": "runtime",
        "instruction": "print runtime values",
        "files": {"a.txt": "six b\n"},
        "actions": [
            "cat a.txt",
            FORKED_PID,
            "date",
            "mktemp",
            "touch a.txt; ls -l --full-time a.txt",
            "echo done",
            "echo $$",
        ],
    },
    {"id": "race", "instruction": "race two writers", "actions": [RACE] * 6},
]


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ReplaySummary]:
    root = tmp_path_factory.mktemp("replay")
    tasks = root / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(t) + "\n" for t in TASKS), "utf-8")
    collect(CollectConfig(env="terminal", tasks_path=tasks, policy="scripted", out=root / "collected"))
    summary = replay(ReplayConfig(source=root / "collected", out=root / "replay", times=2, concurrency=2))
    return root, summary


def _result(summary: ReplaySummary, task_id: str):  # type: ignore[no-untyped-def]
    return next(r for r in summary.results if r.trajectory.metadata["task_id"] == task_id)


def test_a_deterministic_task_replays_identically(replayed: tuple[Path, ReplaySummary]) -> None:
    _, summary = replayed
    result = _result(summary, "deterministic")
    assert result.not_replayable is None
    assert result.first_divergent_turn is None
    assert len(result.labels) == 3
    for labels in result.labels:
        assert [s.label for s in labels.spans] == [SpanLabel.DETERMINISTIC]
        assert labels.replays == 2
    for replay_run in result.replays:
        assert [t.observation.text for t in replay_run.turns] == [
            t.observation.text for t in result.trajectory.turns
        ]


def test_pid_date_mktemp_and_ls_are_exactly_the_runtime_spans(replayed: tuple[Path, ReplaySummary]) -> None:
    _, summary = replayed
    result = _result(summary, "runtime")
    assert result.first_divergent_turn is None
    by_turn = {}
    for turn, labels in zip(result.trajectory.turns, result.labels, strict=True):
        text = turn.observation.text
        assert not [s for s in labels.spans if s.label == SpanLabel.VARIABLE], text
        by_turn[labels.turn] = [
            (text[s.start : s.end], s.pattern) for s in labels.spans if s.label == SpanLabel.RUNTIME
        ]
    texts = [t.observation.text.splitlines()[-2] for t in result.trajectory.turns]  # before the prompt
    assert by_turn[0] == [] and by_turn[5] == []  # cat, echo: deterministic
    assert by_turn[1] == [(texts[1], "pid")]
    assert by_turn[6] in ([], [(texts[6], "pid")])  # the idle shell's own PID: runtime when it differs
    assert by_turn[2] == [(texts[2], "time")]
    assert by_turn[3] == [(texts[3], "temp_path")] and texts[3].startswith("/tmp/tmp.")
    (mtime,) = by_turn[4]
    assert mtime[1] == "time" and mtime[0] in texts[4] and mtime[0].startswith("20")


def test_a_race_gets_the_divergence_flag(replayed: tuple[Path, ReplaySummary]) -> None:
    _, summary = replayed
    result = _result(summary, "race")
    assert result.first_divergent_turn is not None
    flagged = [labels for labels in result.labels if labels.diverged]
    assert flagged[0].turn == result.first_divergent_turn
    assert {labels.divergence_cause for labels in flagged} == {"exit code differs"}


def test_the_table_manifest_and_figures_are_written(replayed: tuple[Path, ReplaySummary]) -> None:
    root, summary = replayed
    out = root / "replay"
    table = read_span_labels(out / "span_labels.parquet")
    assert len(table) == 3 + 7 + 6
    manifest = json.loads((out / "manifest.json").read_text("utf-8"))
    assert manifest["kind"] == "worldline.replay" and manifest["times"] == 2
    assert manifest["by_domain"]["terminal"]["replayed"] == 3
    assert len(list(iter_trajectories(out / "replays" / "run-2"))) == 3
    assert len(list(iter_trajectories(root / "collected"))) == 3  # the trajectories are not rewritten
    (line,) = replay_report(summary)
    assert line.startswith("terminal: 3/3 replayed") and "exit code differs" in line


def test_the_command_prints_the_figures_per_domain(replayed: tuple[Path, ReplaySummary]) -> None:
    from typer.testing import CliRunner

    from worldline.cli import app_for

    root, _ = replayed
    out = root / "cli"
    args = ["replay", str(root / "collected"), "--out", str(out), "--times", "1", "--no-progress"]
    result = CliRunner().invoke(app_for(["replay"]), args, prog_name="worldline")
    assert result.exit_code == 0, result.output
    assert "terminal: 3/3 replayed" in result.output
    assert (out / "span_labels.parquet").is_file()


def test_web_and_a_lost_tasks_file_are_reported_not_replayable(
    replayed: tuple[Path, ReplaySummary], tmp_path: Path
) -> None:
    root, summary = replayed
    original = _result(summary, "deterministic").trajectory
    config = ReplayConfig(source=root / "collected", out=tmp_path, times=1)
    web = replay_trajectory(replace(original, domain=Domain.WEB), config, tmp_path)
    assert web.not_replayable is not None and "not reproducible" in web.not_replayable
    lost = replace(original, metadata={**original.metadata, "tasks_file": str(tmp_path / "gone.jsonl")})
    result = replay_trajectory(lost, config, tmp_path)
    assert result.not_replayable is not None and "--tasks" in result.not_replayable
    assert result.replays == [] and result.labels == []
