"""The explore policy on the real environments: terminal, swe, mcp (real servers), search (the real
index), web (Chromium) and os (AT-SPI desktop). Determinism: a fresh policy with the same seed, fed the
observations a real run recorded, chooses exactly the actions that run took; another seed does not."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from collectors.collection import CollectConfig, collect
from collectors.environment import Task
from collectors.explore import ENV_VAR, ExplorePolicy, Mix, typo
from collectors.generators import generate, write_tasks
from collectors.gui_common import gui_call_from_action
from collectors.policies import POLICIES, PolicyError, make_policy
from schemas import Action, ActionSpace, Observation, Trajectory, TrajectoryStatus, iter_trajectories


def _run(domain: str, tasks: list[dict[str, Any]], tmp_path: Path, concurrency: int = 2) -> list[Trajectory]:
    os.environ.setdefault("DOCKER_HOST", "unix:///tmp/worldline-podman.sock")
    path = tmp_path / f"{domain}.jsonl"
    write_tasks(path, tasks)
    out = tmp_path / f"out-{domain}"
    collect(CollectConfig(env=domain, tasks_path=path, policy="explore", out=out, concurrency=concurrency))
    return sorted(iter_trajectories(out), key=lambda t: t.metadata["task_id"])


def _replay(traj: Trajectory, task: dict[str, Any], seed: int | None = None) -> list[str]:
    """The actions a fresh explore policy picks when shown the observations `traj` recorded."""
    policy = ExplorePolicy(max_turns=30, seed=seed)
    parsed = Task.from_json(task)
    policy.begin(parsed, traj.action_space, Observation(text=str(traj.metadata["initial_observation"])))
    actions: list[str] = []
    observation: Observation | None = None
    for turn in traj.turns:
        decision = policy.next_action(observation)
        if decision.action is None:  # another seed draws another budget
            break
        actions.append(canonical(traj.domain.value, decision.action))
        observation = turn.observation
    return actions


def canonical(domain: str, action: Action) -> str:
    """The action as the environment records it: GUI domains record their own spelling of a call."""
    if domain in ("web", "os"):
        try:
            return gui_call_from_action(action).text()
        except Exception:  # a malformed call is recorded as sent
            return action.text
    return action.text


def _check_run(trajectories: list[Trajectory], tasks: list[dict[str, Any]]) -> None:
    by_id = {t["id"]: t for t in tasks}
    for traj in trajectories:
        # Exploring the web may reach the bundled sites' failure pages (/status/: an HTTP 500, a CAPTCHA),
        # which the web domain ends as env_failure by design.
        failure_page = traj.status == TrajectoryStatus.ENV_FAILURE and "/status/" in (
            traj.status_reason or ""
        )
        assert failure_page or traj.status in (TrajectoryStatus.COMPLETE, TrajectoryStatus.TRUNCATED), (
            traj.status_reason
        )
        assert traj.source.agent == "explore"
        first = traj.turns[0].metadata["policy"]
        assert first["explore"]["mix"] == json.loads(json.dumps(first["explore"]["mix"]))
        assert failure_page or first["explore"]["budget"] == len(traj.turns)
        assert all("behaviour" in t.metadata["policy"] for t in traj.turns)
        task = by_id[traj.metadata["task_id"]]
        recorded = [t.action.text for t in traj.turns]
        assert _replay(traj, task) == recorded  # same seed, same observations: same actions
        assert _replay(traj, task, seed=1) != recorded
        assert traj.metadata["task.generator"] == task["metadata"]["generator"]


def test_registered_and_mix_errors_name_the_field() -> None:
    assert "explore" in POLICIES
    assert isinstance(make_policy("explore"), ExplorePolicy)
    with pytest.raises(PolicyError, match="unknown explore mix field.*typos"):
        Mix.from_json({"typos": 0.1}, "task t")
    with pytest.raises(PolicyError, match="'pipe' must be a number >= 0"):
        Mix.from_json({"pipe": -1}, "task t")
    policy = ExplorePolicy()
    task = Task(id="t", instruction="look around", metadata={"explore": {"seed": "x"}})
    with pytest.raises(PolicyError, match="seed must be an integer"):
        policy.begin(task, ActionSpace(), Observation(text="$ "))


def test_typos_change_one_word() -> None:
    import random

    rng = random.Random(3)
    for command in ("grep -rn error logs", "python3 -m unittest", "ls -la"):
        slipped = typo(rng, command)
        assert slipped != command
        assert sum(a != b for a, b in zip(command.split(" "), slipped.split(" "), strict=False)) <= 1


def test_terminal_explore_is_grounded_and_deterministic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        ENV_VAR, json.dumps({"seed": 7, "mix": {"min_turns": 8, "max_turns": 10, "interrupt": 0.2}})
    )
    tasks = generate("terminal", 3, 12)
    trajectories = _run("terminal", tasks, tmp_path)
    for traj in trajectories:
        assert traj.turns[0].metadata["policy"]["explore"]["seed"] == 7
        assert traj.turns[0].metadata["policy"]["explore"]["mix"]["interrupt"] == 0.2
    monkeypatch.setenv(
        ENV_VAR, json.dumps({"seed": 7, "mix": {"min_turns": 8, "max_turns": 10, "interrupt": 0.2}})
    )
    for traj in trajectories:
        task = next(t for t in tasks if t["id"] == traj.metadata["task_id"])
        assert _replay(traj, task) == [t.action.text for t in traj.turns]
    monkeypatch.delenv(ENV_VAR)
    # grounding: some command names a path that only an earlier observation showed
    seen_paths = 0
    for traj in trajectories:
        task = next(t for t in tasks if t["id"] == traj.metadata["task_id"])
        files = set(task.get("files", {})) | {p.rsplit("/", 1)[-1] for p in task.get("files", {})}
        seen_paths += sum(1 for t in traj.turns if any(f in t.action.text for f in files))
    assert seen_paths > 0


def test_swe_and_search_explore(tmp_path: Path) -> None:
    swe = generate("swe", 2, 3)
    trajectories = _run("swe", swe, tmp_path)
    _check_run(trajectories, swe)
    tools = {t.action.tool_name for traj in trajectories for t in traj.turns}
    assert {"Read", "Bash"} <= tools
    search = generate("search", 2, 3)
    trajectories = _run("search", search, tmp_path)
    _check_run(trajectories, search)
    extracted = [t for traj in trajectories for t in traj.turns if t.action.tool_name == "web_extractor"]
    urls = {
        u
        for traj in trajectories
        for t in traj.turns
        for u in t.observation.text.split()
        if u.startswith("https://")
    }
    assert any(json.loads(t.action.text)["arguments"].get("url") in urls for t in extracted)


def test_mcp_explore_calls_every_tool_from_its_schema(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_VAR, json.dumps({"mix": {"min_turns": 14, "max_turns": 14, "invalid": 0.3}}))
    tasks = [t for t in generate("mcp", 4, 5) if t["mcp"]["server"] in ("sqlite", "filesystem")]
    for task in tasks:
        task["mcp"]["start_timeout_s"] = 120  # the shared machine is slow to start servers
    trajectories = _run("mcp", tasks, tmp_path, concurrency=1)
    monkeypatch.setenv(ENV_VAR, json.dumps({"mix": {"min_turns": 14, "max_turns": 14, "invalid": 0.3}}))
    _check_run(trajectories, tasks)
    for traj in trajectories:
        used = {t.action.tool_name for t in traj.turns}
        assert len(used & set(traj.action_space.tool_names())) >= 6, used
        invalid = [t for t in traj.turns if ":invalid:" in t.metadata["policy"]["behaviour"]]
        assert invalid and all(t.metadata.get("schema_violation") or t.observation.is_error for t in invalid)
        valid = [t for t in traj.turns if t.metadata["policy"]["behaviour"] in traj.action_space.tool_names()]
        assert any(not t.observation.is_error for t in valid)


@pytest.mark.slow
def test_web_and_os_explore(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_VAR, json.dumps({"mix": {"min_turns": 8, "max_turns": 8}}))
    web = generate("web", 2, 4)
    trajectories = _run("web", web, tmp_path, concurrency=1)
    _check_run(trajectories, web)
    behaviours = {
        t.metadata["policy"]["behaviour"].split(":")[0] for traj in trajectories for t in traj.turns
    }
    assert behaviours & {"click", "fill", "select_option"}
    assert any(t.state_changed for traj in trajectories for t in traj.turns)
    desktop = [
        t for t in generate("os", 4, 4) if t["metadata"]["generator"].endswith(("gedit-append", "calculator"))
    ]
    trajectories = _run("os", desktop, tmp_path, concurrency=1)
    _check_run(trajectories, desktop)
    assert any(t.state_changed for traj in trajectories for t in traj.turns)
