"""Personas of the openai policy, end to end without a container: the engine-free echo environment of
test_collectors_interface, the fake OpenAI-compatible server and the real openai client. The persona
is a function of (seed, task id, rollout); what the endpoint receives carries its system text and
sampling settings, and nothing else of the request changes; the trajectory records it."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from collectors.collection import CollectConfig, CollectError, collect
from collectors.personas import DEFAULT_MIX, MIX, PERSONAS, PersonaSetting, draw
from collectors.policies import AGENT_SYSTEM_PROMPT
from schemas import Trajectory, TrajectoryStatus, domain_spec, iter_trajectories, register_domain
from tests.helpers.fakellm import FakeLLMServer, FakeReply, FakeToolCall
from worldline.cli import app

SPACE = "echo tools"  # EchoEnvironment's action space description


@pytest.fixture
def echo_search(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """The search domain served by the in-process EchoEnvironment; no engine anywhere."""
    search = domain_spec("search")
    register_domain(replace(search, collector="tests.collectors.test_collectors_interface"), replace=True)
    monkeypatch.setenv("WORLDLINE_DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    yield
    register_domain(search, replace=True)


@pytest.fixture
def agent(fake_llm: FakeLLMServer) -> FakeLLMServer:
    """The fake model calls `echo` once, then answers without a tool call."""

    def respond(request: dict[str, Any]) -> FakeReply:
        if request["messages"][-1]["role"] == "tool":
            return FakeReply(text="done")
        return FakeReply(tool_calls=[FakeToolCall("echo", {"q": 1})])

    fake_llm.set_default(respond)
    return fake_llm


def write_tasks(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps({"instruction": "echo once", **r}) + "\n" for r in rows))
    return path


def run(tmp_path: Path, llm: FakeLLMServer, rows: list[dict[str, Any]], **config: Any) -> list[Trajectory]:
    tasks = write_tasks(tmp_path / "tasks.jsonl", rows)
    out = tmp_path / config.pop("out", "out")
    collect(
        CollectConfig(
            env="search", tasks_path=tasks, policy="openai", out=out, llm_config=llm.config(), **config
        )
    )
    return sorted(
        iter_trajectories(out), key=lambda t: (t.metadata["task_id"], int(t.metadata.get("rollout", 0)))
    )


def base_system(instruction: str = "echo once") -> str:
    return AGENT_SYSTEM_PROMPT.format(task=instruction, space=SPACE)


def test_the_draw_is_a_function_of_seed_task_and_rollout_and_spreads_rollouts() -> None:
    mix = PersonaSetting(MIX)
    first = [mix.choose("task-a", r) for r in range(len(PERSONAS))]
    again = [PersonaSetting(MIX).choose("task-a", r) for r in range(len(PERSONAS))]
    assert first == again
    # Equal weights: as many distinct personas as rollouts, up to the number of personas.
    assert len({p.name for p in first if p is not None}) == len(PERSONAS)
    # Integer weights are met exactly over whole cycles, whatever the task; weight 0 is never drawn.
    weights = {"careful": 3.0, "novice": 1.0, "explorer": 0.0}
    for task_id in ("a", "b", "c"):
        counts = Counter(draw(weights, 7, task_id, r) for r in range(8))
        assert counts == {"careful": 6, "novice": 2}
    # One rollout per task: tasks spread over the whole mix, each persona about as often as the others.
    counts = Counter(draw(DEFAULT_MIX, 0, f"t{i}", 0) for i in range(1200))
    assert set(counts) == set(PERSONAS) and min(counts.values()) > 120
    # The seed and the task id both change the order.
    sequence = [draw(DEFAULT_MIX, 0, "task-a", r) for r in range(6)]
    assert any([draw(DEFAULT_MIX, s, "task-a", r) for r in range(6)] != sequence for s in range(1, 5))
    assert any([draw(DEFAULT_MIX, 0, f"task-{x}", r) for r in range(6)] != sequence for x in "bcde")


def test_rollouts_get_distinct_personas_sent_to_the_endpoint_and_recorded(
    tmp_path: Path, agent: FakeLLMServer, echo_search: None
) -> None:
    trajectories = run(tmp_path, agent, [{"id": "t"}], rollouts=6, persona=PersonaSetting(MIX))
    assert [t.status for t in trajectories] == [TrajectoryStatus.COMPLETE] * 6
    names = [t.metadata["persona"]["name"] for t in trajectories]
    assert sorted(names) == sorted(PERSONAS)  # six rollouts, six personas
    assert names == [PersonaSetting(MIX).choose("t", r).name for r in range(6)]  # type: ignore[union-attr]

    requests = agent.requests
    assert len(requests) == 12  # two per episode, none answered from another rollout's cache
    base = base_system()
    tools = {json.dumps(r.body["tools"], sort_keys=True) for r in requests if r.body}
    assert len(tools) == 1  # the action space is the same for every persona
    by_system: dict[str, list[dict[str, Any]]] = {}
    for request in requests:
        body = request.body or {}
        system = body["messages"][0]
        assert system["role"] == "system" and system["content"].startswith(base)
        assert body["messages"][1]["content"] == "The environment is ready. Current state:\nready"
        by_system.setdefault(system["content"], []).append(body)
    assert len(by_system) == 6  # the system prompts differ by persona

    for trajectory in trajectories:
        meta = trajectory.metadata["persona"]
        persona = PERSONAS[meta["name"]]
        bodies = by_system[base + persona.system_text]
        assert len(bodies) == 2
        assert {(b["temperature"], b["top_p"]) for b in bodies} == {(persona.temperature, persona.top_p)}
        # The hash is of what the endpoint received after the plain prompt.
        sent = bodies[0]["messages"][0]["content"][len(base) :]
        assert meta["prompt_sha256"] == hashlib.sha256(sent.encode("utf-8")).hexdigest()
        assert meta["sampling"] == {"temperature": bodies[0]["temperature"], "top_p": bodies[0]["top_p"]}
        assert meta["set_by"] == "run"
        assert meta["drawn_from"] == {
            "mix": DEFAULT_MIX,
            "seed": 0,
            "rollout": trajectory.metadata["rollout"],
        }
        assert trajectory.task == "echo once"  # the instruction is the task's, unchanged

    # The same seed draws the same personas in a new run; another seed draws another order.
    agent.reset()
    agent.set_default(lambda request: FakeReply(text="done"))  # the cache answers what was asked before
    rerun = run(tmp_path, agent, [{"id": "t"}], rollouts=6, persona=PersonaSetting(MIX), out="rerun")
    assert [t.metadata["persona"]["name"] for t in rerun] == names
    seeds = {
        s: [PersonaSetting(MIX, seed=s).choose("t", r).name for r in range(6)]  # type: ignore[union-attr]
        for s in range(1, 4)
    }
    assert any(order != names for order in seeds.values())


def test_a_pinned_persona_the_tasks_persona_and_none(
    tmp_path: Path, agent: FakeLLMServer, echo_search: None
) -> None:
    rows = [
        {"id": "run-pin"},
        {"id": "task-pin", "metadata": {"persona": "minimalist"}},
        {"id": "task-mix", "metadata": {"persona": {"mix": {"explorer": 1}, "seed": 5}}},
        {"id": "task-none", "metadata": {"persona": "none"}},
    ]
    trajectories = run(tmp_path, agent, rows, rollouts=2, temperature=0.4, persona=PersonaSetting("careful"))
    by_task: dict[str, list[Trajectory]] = {}
    for t in trajectories:
        by_task.setdefault(t.metadata["task_id"], []).append(t)
    careful = PERSONAS["careful"]
    for t in by_task["run-pin"]:
        assert t.metadata["persona"] == {
            "name": "careful",
            "prompt_sha256": careful.prompt_sha256,
            "sampling": {"temperature": 0.2, "top_p": 0.9},
            "set_by": "run",
        }
    assert [t.metadata["persona"]["name"] for t in by_task["task-pin"]] == ["minimalist"] * 2
    assert {t.metadata["persona"]["set_by"] for t in by_task["task-pin"]} == {"task"}
    mixed = [t.metadata["persona"] for t in by_task["task-mix"]]
    assert [m["name"] for m in mixed] == ["explorer"] * 2
    assert [m["drawn_from"] for m in mixed] == [
        {"mix": {"explorer": 1.0}, "seed": 5, "rollout": r} for r in range(2)
    ]
    assert all("persona" not in t.metadata for t in by_task["task-none"])

    def bodies(marker: str) -> list[dict[str, Any]]:
        return [r.body for r in agent.requests if r.body and marker in r.body["messages"][0]["content"]]

    plain = [b for b in bodies("Task: echo once") if b["messages"][0]["content"] == base_system()]
    assert len(plain) == 4  # task-none: the plain prompt, at the run's temperature, twice per rollout
    assert {b["temperature"] for b in plain} == {0.4} and all("top_p" not in b for b in plain)
    assert {b["temperature"] for b in bodies(PERSONAS["minimalist"].prompt)} == {0.3}
    assert len(bodies(careful.prompt)) == 4


def test_unknown_personas_are_refused_before_anything_runs_naming_the_known_ones(
    tmp_path: Path, fake_llm: FakeLLMServer, echo_search: None
) -> None:
    known = ", ".join(PERSONAS)
    with pytest.raises(CollectError, match=rf"unknown persona 'wizard'; known: {known}"):
        run(tmp_path, fake_llm, [{"id": "t"}], persona=PersonaSetting("wizard"))
    with pytest.raises(
        CollectError, match=rf"task t2: metadata.persona: unknown persona 'wizrd'; known: {known}"
    ):
        run(tmp_path, fake_llm, [{"id": "t1"}, {"id": "t2", "metadata": {"persona": "wizrd"}}])
    with pytest.raises(CollectError, match=r"task t: metadata.persona: unknown field\(s\) style"):
        run(tmp_path, fake_llm, [{"id": "t", "metadata": {"persona": {"style": "x"}}}])
    with pytest.raises(CollectError, match=r"weight of persona 'novice' must be a number >= 0"):
        run(tmp_path, fake_llm, [{"id": "t", "metadata": {"persona": {"mix": {"novice": -1}}}}])
    assert fake_llm.requests == [] and not (tmp_path / "out").exists()


def test_the_command_line_options(tmp_path: Path, agent: FakeLLMServer, echo_search: None) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", [{"id": "t"}])
    env = {
        "WORLDLINE_LLM_BASE_URL": agent.base_url,
        "WORLDLINE_LLM_API_KEY": "k",
        "WORLDLINE_LLM_MODEL": "fake-model",
        "WORLDLINE_LLM_CACHE": "off",
        "COLUMNS": "400",  # error messages on one line
    }
    head = ["collect", "--env", "search", "--tasks", str(tasks), "--policy", "openai", "--no-progress"]
    runner = CliRunner()
    refused = runner.invoke(app, [*head, "--out", str(tmp_path / "x"), "--persona", "wizard"], env=env)
    assert refused.exit_code == 2
    assert "unknown persona 'wizard'" in refused.output and "help_seeker" in refused.output
    refused = runner.invoke(
        app, [*head, "--out", str(tmp_path / "x"), "--persona-mix", "careful=lots"], env=env
    )
    assert refused.exit_code == 2 and "expected NAME=WEIGHT" in refused.output
    assert not (tmp_path / "x").exists() and agent.requests == []

    out = tmp_path / "cli"
    args = [
        "--out",
        str(out),
        "--rollouts",
        "4",
        "--persona-mix",
        "careful=1,novice=1",
        "--persona-seed",
        "3",
    ]
    result = runner.invoke(app, [*head, *args], env=env)
    assert result.exit_code == 0, result.output
    recorded = [t.metadata["persona"] for t in iter_trajectories(out)]
    assert Counter(m["name"] for m in recorded) == {"careful": 2, "novice": 2}
    assert {m["drawn_from"]["seed"] for m in recorded} == {3}
    assert {(r.body or {})["temperature"] for r in agent.requests} == {0.2, 1.0}

    # By default the run draws from the whole mix; --persona none sends the plain prompt.
    agent.reset()
    agent.set_default(
        lambda request: (
            FakeReply(text="done")
            if request["messages"][-1]["role"] == "tool"
            else FakeReply(tool_calls=[FakeToolCall("echo", {})])
        )
    )
    result = runner.invoke(app, [*head, "--out", str(tmp_path / "plain"), "--persona", "none"], env=env)
    assert result.exit_code == 0, result.output
    (plain,) = iter_trajectories(tmp_path / "plain")
    assert "persona" not in plain.metadata
    assert {(r.body or {})["messages"][0]["content"] for r in agent.requests} == {base_system()}
    result = runner.invoke(app, [*head, "--out", str(tmp_path / "default"), "--rollouts", "6"], env=env)
    assert result.exit_code == 0, result.output
    assert {t.metadata["persona"]["name"] for t in iter_trajectories(tmp_path / "default")} == set(PERSONAS)


def test_the_documented_persona_table_is_the_code_s() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "collectors.md").read_text()
    lines = docs.splitlines()
    start = lines.index("| persona | works like | temperature | top_p |") + 2
    end = lines.index("", start)
    rows = [line.split("|")[1:-1] for line in lines[start:end]]
    table = {
        cells[0].strip().strip("`"): (cells[1].strip().replace("`", ""), float(cells[2]), float(cells[3]))
        for cells in rows
    }
    assert table == {p.name: (p.summary, p.temperature, p.top_p) for p in PERSONAS.values()}
