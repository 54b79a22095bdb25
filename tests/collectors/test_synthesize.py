"""`worldline tasks synthesize` against the scripted OpenAI-compatible server, through the real client:
valid proposals kept with provenance, invalid ones and near-duplicates dropped with reasons, faults
retried, and the same run answered from the cache."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from collectors.environment import Task, environment_class, load_tasks
from collectors.synthesize import SynthesisError, synthesize
from tests.helpers.fakellm import FakeReply
from worldline.cli import app
from worldline.llm import SyncLLMClient

SEEDS_FILE = Path(__file__).resolve().parents[2] / "collectors" / "tasks" / "terminal_examples.jsonl"


def seeds() -> list[dict[str, Any]]:
    return [json.loads(line) for line in SEEDS_FILE.read_text().splitlines() if line.strip()]


def new_task(k: int) -> dict[str, Any]:
    """A task unlike the seeds: its own data file and goal."""
    rows = "\n".join(f"{k}-{i},{['red', 'green', 'blue'][i % 3]},{i * k}" for i in range(12))
    return {
        "instruction": f"Sum the third column of inventory{k}.csv per colour and report the largest total.",
        "files": {f"inventory{k}.csv": "sku,colour,count\n" + rows + "\n"},
        "actions": [
            f"awk -F, 'NR>1 {{s[$2]+=$3}} END {{for (c in s) print s[c], c}}' inventory{k}.csv | sort -rn"
        ],
    }


def answer(*tasks: Any) -> str:
    return "Here are the tasks:\n```json\n" + json.dumps(list(tasks)) + "\n```"


def test_valid_tasks_are_kept_and_the_rest_dropped_with_reasons(fake_llm: Any) -> None:
    seed_tasks = seeds()
    copy_of_seed = {k: v for k, v in seed_tasks[3].items() if k != "id"}
    fake_llm.script(
        answer(
            new_task(1),
            {"instruction": "", "files": {}},  # no instruction: invalid
            {"instruction": "Run it.", "files": "not an object"},  # a field of the wrong type
            copy_of_seed,  # a seed again
            new_task(1),  # the first proposal again
            "just a string",
        ),
        "I cannot answer in JSON today.",
        answer(new_task(2)),
    )
    with SyncLLMClient(fake_llm.config()) as client:
        result = synthesize("terminal", seed_tasks, 2, client, seed=3, batch=6)
    assert [t["id"] for t in result.tasks] == ["syn-terminal-3-00000", "syn-terminal-3-00001"]
    assert result.dropped == {
        "invalid_task": 2,
        "near_duplicate": 2,
        "not_an_object": 1,
        "unparseable_answer": 1,
    }
    assert any("seed:3" in d for d in result.details) and any(
        "syn-terminal-3-00000" in d for d in result.details
    )
    assert result.rounds == 3 and result.proposed == 7
    for task in result.tasks:  # valid as the collector reads it, with where it came from
        environment_class("terminal").validate_task(Task.from_json(task, "t"), "t")
        meta = task["metadata"]
        assert meta["synthesizer"].startswith("collectors.synthesize/") and meta["model"] == "fake-model"
        assert len(meta["prompt_sha256"]) == 64 and set(meta["seed_ids"]) <= {s["id"] for s in seed_tasks}
    prompts = [r.messages[-1]["content"] for r in fake_llm.requests]
    assert "Domain: terminal" in prompts[0] and "Proposal round 1" in prompts[0]
    assert len(set(prompts)) == 3  # every round asks differently (the cache would repeat an answer)
    assert all((r.body or {})["model"] == "fake-model" for r in fake_llm.requests)


def test_faults_are_retried_and_a_rerun_comes_from_the_cache(fake_llm: Any) -> None:
    fake_llm.script(FakeReply.rate_limited(0), FakeReply.server_error(), answer(new_task(5), new_task(6)))
    with SyncLLMClient(fake_llm.config()) as client:
        first = synthesize("terminal", seeds(), 2, client, seed=1)
    assert len(first.tasks) == 2 and len(fake_llm.requests) == 3
    with SyncLLMClient(fake_llm.config()) as client:  # same cache file, nothing scripted: no new call
        again = synthesize("terminal", seeds(), 2, client, seed=1)
    assert again.tasks == first.tasks and len(fake_llm.requests) == 3


def test_the_rounds_stop_at_the_limit(fake_llm: Any) -> None:
    fake_llm.set_default(lambda request: FakeReply(text="[]"))
    with SyncLLMClient(fake_llm.config()) as client:
        result = synthesize("terminal", seeds(), 3, client, max_rounds=2)
    assert result.tasks == [] and result.rounds == 2 and len(fake_llm.requests) == 2


def test_bad_seeds_are_refused(fake_llm: Any) -> None:
    with SyncLLMClient(fake_llm.config()) as client:
        with pytest.raises(SynthesisError, match="no seed tasks"):
            synthesize("terminal", [], 1, client)
        with pytest.raises(SynthesisError, match="seed task 1"):
            synthesize("terminal", [{"id": "x"}], 1, client)
        with pytest.raises(SynthesisError, match="unknown domain"):
            synthesize("chess", seeds(), 1, client)
    assert fake_llm.requests == []


def test_the_command_writes_the_task_file(
    fake_llm: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "syn.jsonl"
    args = [
        "tasks",
        "synthesize",
        "--env",
        "terminal",
        "--seeds",
        str(SEEDS_FILE),
        "--n",
        "1",
        "--out",
        str(out),
    ]
    monkeypatch.delenv("WORLDLINE_LLM_BASE_URL", raising=False)
    missing = CliRunner().invoke(app, args)
    assert missing.exit_code == 2 and "WORLDLINE_LLM_BASE_URL" in missing.output and not out.exists()
    monkeypatch.setenv("WORLDLINE_LLM_BASE_URL", fake_llm.base_url)
    monkeypatch.setenv("WORLDLINE_LLM_MODEL_TASK_GENERATOR", "fake-model")
    monkeypatch.setenv("WORLDLINE_LLM_CACHE", str(tmp_path / "cache.sqlite"))
    fake_llm.script(answer(new_task(9)))
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "wrote 1 synthesized terminal tasks" in result.output
    (task,) = load_tasks(out)
    assert task.id == "syn-terminal-0-00000" and "inventory9.csv" in task.files
