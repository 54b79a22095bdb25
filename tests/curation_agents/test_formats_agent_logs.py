"""Agent logs from the projects that write them (SWE-agent, mini-swe-agent, OpenHands, Harbor's ATIF),
cleaned whole: turns counted in the source by a parser written here, apart from worldline's, and what
each source field becomes (tests/fixtures/<format>/SOURCES.md names every file's origin)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from curation_agents.clean_run import CleanRun
from curation_agents.model import CleanConfig
from schemas import Domain, Trajectory, iter_trajectories

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SWE = FIXTURES / "swe_agent"
MINI = FIXTURES / "mini_swe_agent"
OPENHANDS = FIXTURES / "openhands"
ATIF = FIXTURES / "atif"

# mini-swe-agent's own action regex (its text-based configs' `action_regex`).
_MSWEA_ACTION = re.compile(r"```mswea_bash_command\s*\n(.*?)\n```", re.DOTALL)


def _redacted_from(cleaned: str | None, source: str) -> bool:
    """CLEANED is SOURCE (CRLF normalised) with some spans replaced by redaction markers."""
    parts = re.split(r"\[REDACTED:\w+\]", cleaned or "\x00")
    pattern = "(?:.+?)".join(re.escape(p) for p in parts)
    return re.fullmatch(pattern, source.replace("\r\n", "\n"), re.DOTALL) is not None


def _clean(paths: list[Path], out: Path) -> dict[str, Trajectory]:
    summary = CleanRun([str(p) for p in paths], out, CleanConfig(licence="MIT")).run()
    assert summary["records_in"] == summary["accepted"] + summary["quarantined"]
    return {t.source.uri: t for t in iter_trajectories(out)}


def _records(path: Path) -> list[tuple[str, Any]]:
    if path.suffix == ".jsonl":
        lines = path.read_text().splitlines()
        return [(f"line-{n}", json.loads(line)) for n, line in enumerate(lines, 1) if line.strip()]
    return [("file", json.loads(path.read_text()))]


def _source_turns(path: Path, record: Any) -> int:
    """Steps the agent took, counted in the source's own terms."""
    if path.parent == SWE:
        if isinstance(record.get("trajectory"), list):
            return sum(1 for step in record["trajectory"] if str(step.get("action", "")).strip())
        return sum(1 for e in record["history"] if e["role"] == "assistant" and not e.get("is_demo"))
    if path.parent == MINI:
        messages = record["messages"] if isinstance(record, dict) else record
        return sum(
            1
            for m in messages
            if m["role"] == "assistant"
            and (m.get("tool_calls") or _MSWEA_ACTION.search(str(m.get("content"))))
        )
    if path.parent == OPENHANDS:
        # Every executed action has exactly one observation (tied to it by `cause` where events have
        # ids); recalls answer the user's message, and an error without a cause rejected a malformed
        # call before any action existed.
        events = record["history"]
        linked = any("cause" in e for e in events)
        return sum(
            1
            for e in events
            if "observation" in e and e["observation"] != "recall" and ("cause" in e or not linked)
        )
    if path.parent == ATIF:
        # A step's calls are its actions, except that a batch of Terminus keystrokes (answered by one
        # terminal screen) is one action; a Terminus reply written as a JSON message (no calls) with
        # a non-empty `commands` list is such a batch too. Steps copied in from an earlier file
        # (`is_copied_context`) were counted there.
        def actions(step: dict[str, Any]) -> int:
            calls = step.get("tool_calls") or []
            if not calls:
                try:
                    reply = json.loads(step.get("message") or "")
                except (TypeError, ValueError):
                    return 0
                return 1 if isinstance(reply, dict) and reply.get("commands") else 0
            batch = all(set(c["arguments"]) <= {"keystrokes", "duration"} for c in calls)
            return 1 if batch else len(calls)

        return sum(
            actions(step)
            for step in record["steps"]
            if step["source"] == "agent" and not step.get("is_copied_context")
        )
    raise AssertionError(path)


FILES = sorted(p for d in (SWE, MINI, OPENHANDS, ATIF) for p in d.glob("*") if p.suffix not in (".md", ".py"))


@pytest.fixture(scope="module")
def cleaned(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Trajectory]:
    return _clean(FILES, tmp_path_factory.mktemp("agent-logs") / "out")


def test_every_public_agent_log_keeps_its_turns(cleaned: dict[str, Trajectory]) -> None:
    by_uri = cleaned
    figures = {}
    for path in FILES:
        for locator, record in _records(path):
            traj = by_uri[f"{path.name}#{locator}"]
            figures[f"{path.name}#{locator}"] = (_source_turns(path, record), len(traj.turns))
    assert figures and all(source == cleaned for source, cleaned in figures.values()), figures


def test_swe_agent_demonstrations_are_not_the_task(cleaned: dict[str, Trajectory]) -> None:
    by_uri = cleaned
    for path in [SWE / "pydicom__pydicom-1458.traj", SWE / "swe-agent__test-repo-i1.traj"]:
        history = json.loads(path.read_text())["history"]
        (demo,) = [e for e in history if e.get("is_demo")]
        issue = next(e for e in history if e["role"] == "user" and not e.get("is_demo"))
        traj = by_uri[f"{path.name}#file"]
        assert _redacted_from(traj.task, issue["content"]) and "--- DEMONSTRATION ---" not in traj.task
        assert _redacted_from(traj.demonstrations, demo["content"])  # redacted like every other text
        assert _redacted_from(traj.metadata["source_system_prompt"], history[0]["content"])  # the commands
        assert "demonstrations" not in traj.metadata
        tools = {t.name: t for t in traj.action_space.tools}
        # The special commands of the system prompt's COMMANDS section, then plain shell commands.
        assert {"open", "goto", "scroll_down", "scroll_up", "create", "edit", "submit", "find_file"} <= set(
            tools
        )
        assert tools["open"].parameters == {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "the path to the file to open"},
                "line_number": {
                    "type": "integer",
                    "description": "the line number to move the window to (if not provided, the window "
                    "will start at the top of the file)",
                },
            },
            "required": ["path"],
        }
        assert "end_of_edit" in (tools["edit"].description or "")  # the signature's replacement text
        used = [t.action.tool_name for t in traj.turns]
        assert "bash" in used and set(used) <= set(tools) and used[-1] == "submit"


def test_swe_agent_history_only_files_and_step_by_step_demonstrations(
    cleaned: dict[str, Trajectory], tmp_path: Path
) -> None:
    traj = cleaned["function_calling_simple.traj#file"]
    assert traj.domain == Domain.SWE and traj.metadata["format_version"] == "history"
    assert [t.action.tool_name for t in traj.turns] == ["find_file", "open", "edit", "bash", "submit"]
    assert traj.turns[0].observation.text.startswith('Found 1 matches for "missing_colon.py"')
    assert traj.task.startswith("We're currently solving the following issue")

    # SWE-agent 1.x with `put_demos_in_history`: the demonstration's own steps sit in the history
    # flagged `is_demo` (sweagent/agent/agents.py); they are demonstrations, not turns or the task.
    record = json.loads((SWE / "function_calling_simple.traj").read_text())
    demo = [dict(e, is_demo=True) for e in record["history"] if e["role"] != "system"]
    record["history"] = record["history"][:1] + demo + record["history"][1:]
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "with_demo.traj").write_text(json.dumps(record))
    (again,) = _clean([tmp_path / "in" / "with_demo.traj"], tmp_path / "out2").values()
    assert [t.action.text for t in again.turns] == [t.action.text for t in traj.turns]
    assert again.task == traj.task
    assert again.demonstrations == "\n".join(e["content"] for e in demo)


@pytest.mark.parametrize("name", ["github_issue.traj.json", "local.traj.json", "v2_textbased.traj.json"])
def test_mini_swe_agent_v2_fenced_actions(name: str, cleaned: dict[str, Trajectory]) -> None:
    record = json.loads((MINI / name).read_text())
    messages = record["messages"] if isinstance(record, dict) else record
    traj = cleaned[f"{name}#file"]
    commands = [
        m for msg in messages if msg["role"] == "assistant" for m in _MSWEA_ACTION.findall(msg["content"])
    ]
    assert [t.action.text for t in traj.turns] == [c.strip() for c in commands]
    assert traj.metadata["format"] == "mini-swe-agent" and traj.domain == Domain.SWE
    assert all(t.action.tool_name == "bash" for t in traj.turns)
    codes = [
        int(c) for msg in messages for c in re.findall(r"<returncode>(-?\d+)</returncode>", msg["content"])
    ]
    assert [t.exit_code for t in traj.turns if t.exit_code is not None] == codes


def test_mini_swe_agent_v2_files_give_the_same_steps_either_way(cleaned: dict[str, Trajectory]) -> None:
    """The shipped text-based and tool-call configs, run on the same steps: the same turns, the
    command's raw output as the observation, the exit message's status."""
    record = json.loads((MINI / "v2_toolcall.traj.json").read_text())
    text, calls = cleaned["v2_textbased.traj.json#file"], cleaned["v2_toolcall.traj.json#file"]
    results = [m["extra"] for m in record["messages"] if m["role"] == "tool"]
    assert [t.action.text for t in calls.turns] == [t.action.text for t in text.turns]
    assert [t.observation.text for t in calls.turns] == [t.observation.text for t in text.turns]
    assert [t.observation.text for t in calls.turns[: len(results)]] == [r["raw_output"] for r in results]
    assert [t.exit_code for t in calls.turns[: len(results)]] == [r["returncode"] for r in results]
    assert all(t.action.kind.value == "command" and t.action.tool_name == "bash" for t in calls.turns)
    assert record["info"]["exit_status"] == "Submitted" and calls.status.value == "complete"


def test_openhands_output_rows(cleaned: dict[str, Trajectory]) -> None:
    by_uri = cleaned
    row = json.loads((OPENHANDS / "multi_swe_bench_output.jsonl").read_text())
    evaluation = by_uri["multi_swe_bench_output.jsonl#line-1"]
    system = row["history"][0]["args"]
    assert _redacted_from(evaluation.metadata["source_system_prompt"], system["content"])
    assert [t.name for t in evaluation.action_space.tools] == [t["function"]["name"] for t in system["tools"]]
    assert _redacted_from(evaluation.task, row["history"][1]["args"]["content"])
    assert evaluation.metadata["instance_id"] == row["instance_id"] == "ponylang__ponyc-4593"
    assert (
        evaluation.source.agent == "CodeActAgent" and evaluation.source.model == "meta-llama/llama-4-maverick"
    )
    assert evaluation.turns[1].exit_code == 2 and evaluation.turns[1].observation.text.startswith(
        "ls: cannot"
    )

    # A `think` tool call is answered like any other call: a turn of its own, not narration whose
    # answer would be appended to the turn before it.
    thinking = by_uri["multi_swe_bench_output_think.jsonl#line-1"]
    (think,) = [t for t in thinking.turns if t.action.tool_name == "think"]
    assert think.observation.text == "Your thought has been logged."
    assert all(
        "Your thought has been logged." not in t.observation.text for t in thinking.turns if t is not think
    )

    rows = [json.loads(line) for line in (OPENHANDS / "resolver_output.jsonl").read_text().splitlines()]
    resolver = by_uri["resolver_output.jsonl#line-1"]
    assert (
        _redacted_from(resolver.task, rows[0]["instruction"])
        and resolver.metadata["issue"] == "neubig/pr-viewer#5"
    )
    assert [t.action.text for t in resolver.turns][::2] == ["touch LICENSE", "cat LICENSE"]
    ipython = json.loads(resolver.turns[1].action.text)
    assert ipython["name"] == "run_ipython" and ipython["arguments"]["code"] == rows[0]["history"][3]["code"]
    assert resolver.turns[2].observation.text.startswith("MIT License")
