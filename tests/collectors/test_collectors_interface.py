"""The environment interface that every domain builds on: per-domain task configuration, the action
space reported by `reset`, the container engine only where a domain needs it, per-domain doctor checks.

The engine-free domain below is a test environment registered under a real domain name: it exercises
the runner's contract without a container, the way tool-call domains (search on a local index, an MCP
server that touches no files) use it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from collectors.collection import CollectConfig, CollectError, collect
from collectors.doctor import run_checks
from collectors.environment import (
    Check,
    Environment,
    ResetResult,
    StepResult,
    Task,
    TaskError,
    load_tasks,
    parse_tool_call,
)
from collectors.terminal import TerminalEnvironment
from schemas import (
    Action,
    ActionSpace,
    Domain,
    Observation,
    ToolSpec,
    TrajectoryStatus,
    domain_spec,
    iter_trajectories,
    register_domain,
)


class EchoEnvironment(Environment):
    """Engine-free: its tools are only known after reset (named by the task's configuration object,
    the one keyed by its domain)."""

    domain = Domain.SEARCH

    @classmethod
    def validate_task(cls, task: Task, where: str = "task") -> None:
        super().validate_task(task, where)
        if not isinstance(task.domain_config(cls.domain.value).get("tools", []), list):
            raise TaskError(
                f"{where} (id {task.id}): field {cls.domain.value}.tools must be a list of tool names"
            )

    @classmethod
    def doctor_checks(cls) -> list[Check]:
        return [Check("echo backend", True, "in process")]

    def reset(self, task: Task) -> ResetResult:
        self.task = task
        config = task.domain_config(self.domain.value)
        if config.get("fail"):
            raise OSError(f"backend {config['fail']!r} is not reachable")
        space = ActionSpace(
            description="echo tools", tools=[ToolSpec(name=n) for n in config.get("tools", ["echo"])]
        )
        self.space = space
        return ResetResult(observation=Observation(text="ready"), initial_state="empty", action_space=space)

    def step(self, action: Action) -> StepResult:
        name, arguments = parse_tool_call(action)
        return StepResult(action=action, observation=Observation(text=f"{name}: {json.dumps(arguments)}"))

    def close(self) -> None:
        self.task = None


ENVIRONMENT = EchoEnvironment


@pytest.fixture
def echo_domain(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    search = domain_spec("search")
    register_domain(replace(search, collector=__name__), replace=True)
    # No engine anywhere: a run that needed one would fail to connect.
    monkeypatch.setenv("WORLDLINE_DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    yield
    register_domain(search, replace=True)


def test_domain_configuration_objects_are_parsed_by_domain_name() -> None:
    task = Task.from_json({"id": "t", "instruction": "x", "mcp": {"server": "filesystem"}})
    assert task.domain_config("mcp") == {"server": "filesystem"}
    assert task.domain_config("web") == {}
    with pytest.raises(TaskError, match=r"id t\).*'search'.*must be a JSON object"):
        Task.from_json({"id": "t", "instruction": "x", "search": "local"})
    with pytest.raises(TaskError, match=r"unknown field\(s\) serach; known: .*search"):
        Task.from_json({"id": "t", "instruction": "x", "serach": {}})


def test_a_configuration_for_another_domain_is_refused_naming_the_task() -> None:
    task = Task.from_json({"id": "web-1", "instruction": "x", "web": {"start_url": "http://127.0.0.1/"}})
    with pytest.raises(TaskError, match=r"id web-1\).*web configure another domain.*--env web"):
        TerminalEnvironment.validate_task(task)
    TerminalEnvironment.validate_task(Task.from_json({"id": "t", "instruction": "x", "terminal": {}}))


def test_engine_free_domain_collects_without_an_engine_and_records_the_reset_action_space(
    echo_domain: None, tmp_path: Path
) -> None:
    tasks = tmp_path / "tasks.jsonl"
    rows: list[dict[str, Any]] = [
        {
            "id": "ok",
            "instruction": "echo twice",
            "search": {"tools": ["echo", "shout"]},
            "actions": [{"name": "echo", "arguments": {"q": 1}}, {"name": "shout", "arguments": {}}],
        },
        {"id": "down", "instruction": "x", "search": {"fail": "http://10.0.0.1"}, "actions": ["a"]},
    ]
    tasks.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert len(load_tasks(tasks)) == 2
    summary = collect(CollectConfig(env="search", tasks_path=tasks, policy="scripted", out=tmp_path / "out"))
    assert summary.written == 2
    by_task = {t.metadata["task_id"]: t for t in iter_trajectories(tmp_path / "out")}
    ok = by_task["ok"]
    assert ok.status == TrajectoryStatus.COMPLETE
    assert ok.action_space.tool_names() == {"echo", "shout"}  # learned at reset, not declared up front
    assert [t.observation.text for t in ok.turns] == ['echo: {"q": 1}', "shout: {}"]
    down = by_task["down"]
    assert down.status == TrajectoryStatus.ENV_FAILURE
    assert "10.0.0.1" in (down.status_reason or "")
    assert down.action_space.tools == []  # nothing was declared and the environment never ran


def test_invalid_domain_configuration_stops_the_run_before_any_task(
    echo_domain: None, tmp_path: Path
) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "bad", "instruction": "x", "search": {"tools": "echo"}}) + "\n")
    with pytest.raises(CollectError, match=r"id bad\).*search.tools"):
        collect(CollectConfig(env="search", tasks_path=tasks, policy="scripted", out=tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_doctor_reports_per_domain_and_skips_the_engine_for_engine_free_domains(echo_domain: None) -> None:
    checks = run_checks(["search"])
    assert [(c.domain, c.name, c.ok) for c in checks] == [("search", "echo backend", True)]
    engine_checks = [c for c in run_checks(["terminal"]) if c.domain == "engine"]
    assert engine_checks and engine_checks[0].name == "container engine answers"
    assert not engine_checks[0].ok  # the engine socket of this test does not exist
