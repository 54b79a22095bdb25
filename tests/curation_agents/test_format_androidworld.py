"""AndroidWorld episode files (tests/fixtures/androidworld/README.md: written as AndroidWorld's
checkpointer writes them), cleaned through the cleaning run; the source is read here with pickle
itself and its stand-in classes, apart from worldline's restricted reader."""

from __future__ import annotations

import gzip
import json
import pickle
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from curation_agents.clean_run import CleanRun
from curation_agents.formats import Format
from curation_agents.model import CleanConfig
from curation_agents.reader import sniff
from pipelines.benchmarks_exclusion import DEFAULT_EXCLUDED, ExclusionMatcher
from schemas import Domain, Trajectory, iter_trajectories

FILE = Path(__file__).resolve().parents[1] / "fixtures" / "androidworld" / "ContactsAddContact.pkl.gz"


@dataclass
class BoundingBox:
    x_min: float
    x_max: float
    y_min: float
    y_max: float


class UIElement:
    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)


def _episodes() -> list[dict[str, Any]]:
    """The file read by plain pickle, the android_world classes replaced by local ones."""
    module = types.ModuleType("android_world.env.representation_utils")
    module.BoundingBox = BoundingBox  # type: ignore[attr-defined]
    module.UIElement = UIElement  # type: ignore[attr-defined]
    saved = {k: sys.modules.get(k) for k in ("android_world", "android_world.env", module.__name__)}
    sys.modules.update(
        {
            "android_world": types.ModuleType("android_world"),
            "android_world.env": types.ModuleType("android_world.env"),
            module.__name__: module,
        }
    )
    try:
        episodes: list[dict[str, Any]] = pickle.loads(gzip.decompress(FILE.read_bytes()))
    finally:
        for key, value in saved.items():
            if value is None:
                sys.modules.pop(key, None)
            else:
                sys.modules[key] = value
    return episodes


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], list[Trajectory], Path]:
    out = tmp_path_factory.mktemp("androidworld") / "out"
    summary = CleanRun([str(FILE)], out, CleanConfig()).run()
    return summary, list(iter_trajectories(out)), out


def test_each_episode_is_a_record_and_the_summary_reconciles(
    run: tuple[dict[str, Any], list[Trajectory], Path],
) -> None:
    summary, trajs, out = run
    episodes = _episodes()
    assert sniff(FILE)[0] == Format.ANDROIDWORLD
    assert summary["records_in"] == len(episodes) == summary["accepted"] + summary["quarantined"]
    rows = pl.read_parquet(sorted((out / "quarantine" / "parts").glob("*.parquet"))).to_dicts()
    failed = [i for i, e in enumerate(episodes) if e["exception_info"]]
    assert [(r["locator"], r["reason"]) for r in rows] == [(f"episode-{i}", "env_failure") for i in failed]
    assert len(trajs) == len(episodes) - len(failed)


def test_steps_become_turns(run: tuple[dict[str, Any], list[Trajectory], Path]) -> None:
    _, (traj,), _ = run
    episode = _episodes()[0]
    data = episode["episode_data"]
    assert len(traj.turns) == len(data["step_number"]) == episode["episode_length"]
    for i, t in enumerate(traj.turns):
        action = json.loads(data["action_output"][i].split("Action:", 1)[1])
        assert json.loads(t.action.text) == action and t.action.tool_name == action["action_type"]
        assert t.action.kind.value == "gui"
        after = data["after_element_list"][i]
        assert t.observation.text.count("UI element ") == len(after)
        assert all(e.text in t.observation.text for e in after if e.text)
        assert data["summary"][i] in t.metadata["thought"]
    assert traj.initial_state is not None
    assert all(
        e.content_description in traj.initial_state
        for e in data["before_element_list"][0]
        if e.content_description
    )


def test_provenance_names_the_benchmark(run: tuple[dict[str, Any], list[Trajectory], Path]) -> None:
    _, (traj,), _ = run
    episode = _episodes()[0]
    assert traj.domain == Domain.ANDROID
    assert traj.task == episode["goal"] or "[REDACTED:" in traj.task
    assert traj.source.agent == episode["agent_name"]
    assert traj.metadata["benchmark"] == "AndroidWorld"
    assert traj.metadata["task_id"] == episode["task_template"]
    assert traj.metadata["is_successful"] == episode["is_successful"]
    assert traj.status.value == "complete"
    hit = ExclusionMatcher(DEFAULT_EXCLUDED).match(traj)
    assert hit is not None and hit[0] == "androidworld"


class _Evil:
    def __reduce__(self) -> tuple[Any, ...]:
        return (print, ("pickle code ran",))


def test_a_pickle_that_would_run_code_is_quarantined_unrun(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    episode = {"goal": "g", "task_template": "T", "episode_data": {"step_number": [0]}, "hook": _Evil()}
    path = tmp_path / "T.pkl.gz"
    path.write_bytes(gzip.compress(pickle.dumps([episode])))
    summary = CleanRun([str(path)], tmp_path / "out", CleanConfig()).run()
    assert (summary["records_in"], summary["quarantined"]) == (1, 1)
    assert summary["per_reason"] == {"unsupported_format": 1}
    assert "pickle code ran" not in capsys.readouterr().out
