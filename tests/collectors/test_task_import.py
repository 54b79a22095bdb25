"""`worldline tasks import`: each suite's reader on files from that suite (tests/fixtures/task_suites/),
every task valid for its domain with its provenance, and real collections of imported tasks."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from collectors.collection import CollectConfig, collect
from collectors.generators import state_hash, validated, write_tasks
from collectors.task_import import SuiteError, import_suite
from collectors.task_import.terminal_bench import apply_dockerfile, dockerfile_lines
from schemas import TrajectoryStatus, iter_trajectories
from worldline.cli import app

SUITES = Path(__file__).resolve().parents[1] / "fixtures" / "task_suites"


def _provenance(task: dict[str, Any], suite: str, suite_id: str) -> None:
    meta = task["metadata"]
    assert meta["suite"] == suite and meta["suite_task_id"] == suite_id
    assert meta["state_hash"] == state_hash(task)


def test_terminal_bench_folder_becomes_a_valid_terminal_task() -> None:
    result = import_suite("terminal-bench", SUITES / "terminal_bench")
    assert result.skipped == []
    [(domain, task)] = result.tasks
    assert domain == "terminal"
    validated("terminal", task)
    _provenance(task, "terminal-bench", "hello-world")
    assert task["instruction"] == 'Create a file called /app/hello.txt. Write "Hello, world!" to it.'
    assert task["image"] == "worldline/tbench" and task["deadline_s"] == 900.0
    assert task["actions"] == ['echo "Hello, world!" > /app/hello.txt']  # from solution.sh
    # the suite's tests are named, never shipped into the sandbox
    assert task["metadata"]["suite_tests"] == ["tests/test_outputs.py"]
    assert not any("test_outputs" in path for path in task["files"])
    assert task["metadata"]["difficulty"] == "easy"


def test_harbor_folder_applies_what_works_offline_and_names_the_rest() -> None:
    [(domain, task)] = import_suite("terminal-bench", SUITES / "harbor").tasks
    assert domain == "terminal" and task["instruction"].startswith("Write a Python script at /app/hello.py")
    _provenance(task, "terminal-bench", "hello-world")
    meta = task["metadata"]
    assert meta["suite_layout"] == "task.toml" and meta["dockerfile"] == "environment/Dockerfile"
    assert task["deadline_s"] == 120.0 and meta["difficulty"] == "easy"
    assert meta["dockerfile_applied"] == ["WORKDIR /app"]
    whys = {
        d["step"].split()[0] + " " + d["step"].split()[1]: d["why"] for d in meta["dockerfile_not_applied"]
    }
    assert set(whys) == {
        "FROM python:3.12-slim",
        "RUN apt-get",
        "RUN curl",
        'ENV PATH="/root/.local/bin:$PATH"',
    }
    assert "network" in whys["RUN apt-get"] and "network" in whys["RUN curl"]


def test_dockerfile_steps_applied_offline_or_named_with_why(tmp_path: Path) -> None:
    (tmp_path / "data.csv").write_text("a,b\n1,2\n")
    text = (
        "FROM ghcr.io/laude-institute/t-bench/ubuntu-24-04:latest\n"
        "RUN apt-get update && apt-get install -y \\\n    curl\n"
        "WORKDIR /app\n"
        "COPY data.csv /app/data.csv\n"
        "RUN mkdir -p out && echo ready > out/flag\n"
        "RUN pip install numpy\n"
        "ENV FOO=bar\n"
    )
    assert [w for w, _ in dockerfile_lines(text)] == ["FROM", "RUN", "WORKDIR", "COPY", "RUN", "RUN", "ENV"]
    built = apply_dockerfile(tmp_path, text)
    assert built["files"] == {"app/data.csv": "a,b\n1,2\n"}
    assert built["setup"] == ["mkdir -p /app", "cd /app && mkdir -p out && echo ready > out/flag"]
    why = {
        step.split()[0] + " " + step.split()[1]: w
        for step, w in ((d["step"], d["why"]) for d in built["not_applied"])
    }
    assert "network" in why["RUN apt-get"] and "network" in why["RUN pip"]
    assert "replaced" in why["FROM ghcr.io/laude-institute/t-bench/ubuntu-24-04:latest"]
    assert "ENV FOO=bar" in why


def test_osworld_tasks_for_missing_apps_are_skipped_with_reasons() -> None:
    result = import_suite("osworld", SUITES / "osworld")
    assert result.tasks == []
    assert result.reasons() == {"application not on this desktop: os": 2}
    assert {s.task_id for s in result.skipped} == {
        "94d95f96-9699-4208-98ba-3c3119edf9c2",
        "0b35aee5-6f2a-4c71-b2da-aed0105fdbde",
    }


def test_osworld_gedit_task_is_imported(tmp_path: Path) -> None:
    # An OSWorld task JSON whose related app is on this desktop (fields as in the suite's files).
    real = json.loads((SUITES / "osworld" / "os" / "94d95f96-9699-4208-98ba-3c3119edf9c2.json").read_text())
    real.update({"id": "x-gedit", "related_apps": ["gedit"], "config": []})
    (tmp_path / "x.json").write_text(json.dumps(real))
    [(domain, task)] = import_suite("osworld", tmp_path / "x.json").tasks
    assert domain == "os" and task["os"] == {"apps": [["gedit"]]}
    _provenance(task, "osworld", "x-gedit")
    assert task["metadata"]["osworld_evaluator"]["func"] == "check_include_exclude"


def test_swe_bench_instance_against_a_local_repository(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "base"], check=True)
    base = subprocess.run(
        [*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    (repo / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    subprocess.run([*git, "commit", "-qam", "fix"], check=True)
    instance = {
        "instance_id": "acme__calc-1",
        "repo": "acme/calc",
        "base_commit": base,
        "problem_statement": "add() subtracts.",
        "patch": "gold",
        "test_patch": "tests",
        "FAIL_TO_PASS": '["tests/test_calc.py::test_add"]',
        "PASS_TO_PASS": "[]",
        "version": "0.1",
    }
    (tmp_path / "instances.jsonl").write_text(
        json.dumps(instance)
        + "\n"
        + json.dumps({**instance, "instance_id": "acme__calc-2", "base_commit": "0" * 40})
        + "\n"
    )
    result = import_suite("swe-bench", tmp_path / "instances.jsonl", repo_source=repo)
    [(domain, task)] = result.tasks
    assert domain == "swe" and task["repo"]["files"] == {"calc.py": "def add(a, b):\n    return a - b\n"}
    assert task["metadata"]["fail_to_pass"] == ["tests/test_calc.py::test_add"]
    assert "gold" not in json.dumps(task)
    _provenance(task, "swe-bench", "acme__calc-1")
    assert [s.task_id for s in result.skipped] == ["acme__calc-2"]
    with pytest.raises(SuiteError):
        import_suite("swe-bench", tmp_path / "instances.jsonl")


def test_mcp_server_tools_list_becomes_one_task_per_tool() -> None:
    result = import_suite("mcp", "everything")
    tools = result.tasks[0][1]["metadata"]["mcp_server_tools"]
    assert len(result.tasks) == len(tools) >= 5 and result.skipped == []
    assert sorted(t["mcp"]["tools"][0] for _, t in result.tasks) == sorted(tools)
    for domain, task in result.tasks:
        assert domain == "mcp"
        assert task["actions"][0]["name"] == task["mcp"]["tools"][0]
        _provenance(task, "mcp", f"everything/{task['mcp']['tools'][0]}")
    again = import_suite("mcp", "everything")
    assert [t for _, t in again.tasks] == [t for _, t in result.tasks]


def test_cli_prints_the_summary(tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"
    run = CliRunner().invoke(app, ["tasks", "import", "osworld", str(SUITES / "osworld"), "--out", str(out)])
    assert run.exit_code == 0, run.output
    assert (
        "imported 0 osworld tasks" in run.output
        and "skipped 2: application not on this desktop: os" in run.output
    )
    bad = CliRunner().invoke(app, ["tasks", "import", "nope", ".", "--out", str(out)])
    assert bad.exit_code == 2 and "unknown suite" in bad.output


@pytest.mark.slow
def test_terminal_bench_task_collected_end_to_end(tmp_path: Path) -> None:
    os.environ.setdefault("DOCKER_HOST", "unix:///tmp/worldline-podman.sock")
    out = tmp_path / "tasks.jsonl"
    run = CliRunner().invoke(
        app, ["tasks", "import", "terminal-bench", str(SUITES / "terminal_bench"), "--out", str(out)]
    )
    assert run.exit_code == 0, run.output
    assert "image: " in run.output
    [task] = [json.loads(line) for line in out.read_text().splitlines()]
    task["actions"].append("cat /app/hello.txt")
    write_tasks(out, [task])
    summary = collect(CollectConfig(env="terminal", tasks_path=out, policy="scripted", out=tmp_path / "data"))
    assert summary.written == 1
    [trajectory] = list(iter_trajectories(tmp_path / "data"))
    assert trajectory.status == TrajectoryStatus.COMPLETE
    assert trajectory.metadata["task.suite"] == "terminal-bench"
    assert trajectory.metadata["task.suite_task_id"] == "hello-world"
    assert [t.exit_code for t in trajectory.turns] == [0, 0]
    assert "Hello, world!" in trajectory.turns[-1].observation.text


@pytest.mark.slow
def test_sandboxed_mcp_server_tasks_collected_end_to_end(tmp_path: Path) -> None:
    os.environ.setdefault("DOCKER_HOST", "unix:///tmp/worldline-podman.sock")
    result = import_suite("mcp", "filesystem")
    tasks = [t for _, t in result.tasks]
    out = tmp_path / "tasks.jsonl"
    write_tasks(out, tasks)
    summary = collect(
        CollectConfig(env="mcp", tasks_path=out, policy="scripted", out=tmp_path / "data", concurrency=2)
    )
    assert summary.written == len(tasks)
    trajectories = list(iter_trajectories(tmp_path / "data"))
    assert {t.status for t in trajectories} == {TrajectoryStatus.COMPLETE}
    called = sorted(turn.action.tool_name or "" for t in trajectories for turn in t.turns)
    assert called == sorted(tasks[0]["metadata"]["mcp_server_tools"])
    assert {t.metadata["task.suite"] for t in trajectories} == {"mcp"}
