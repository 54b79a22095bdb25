"""An eighth domain added with only its registry entry, its module and its judge prompt.

The engine-free test environment of tests/collectors/test_collectors_interface.py, registered under a domain of
its own (`loopback`), goes through every stage that reads domain facts: collection (the task's
configuration object is keyed by the new name), validation, `pools build` (filters, rendering, the
rule verifier, the eval export in AgentWorldBench's format), the AgentWorldBench import and the
judge's prompt lookup. Nothing else in the tree names the domain.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from collectors.collection import CollectConfig, collect
from schemas import ActionKind, Domain, DomainSpec, TrajectoryStatus, iter_trajectories, register_domain
from schemas.agentworldbench import read_samples, role_preamble, sample_to_trajectory
from schemas.domains import unregister_domain
from schemas.validate import validate_path
from tests.collectors.test_collectors_interface import EchoEnvironment
from worldline.cli import app
from worldline.judge import from_agentworldbench
from worldline.judge.prompts import has_judge_prompt, judge_messages, judge_system_prompt

LOOPBACK = DomainSpec(
    "loopback",
    "Loopback",
    "a tool server that answers every call with the tool's name and the call's arguments",
    ActionKind.TOOL_CALL,
    collector=__name__,
    rule_verifier=True,
    judge_prompt="tests:eighth_domain_judge.md",
)


class LoopbackEnvironment(EchoEnvironment):
    """The test environment under the new domain (set when the domain is registered)."""


ENVIRONMENT = LoopbackEnvironment

POOLS_CONFIG = """
assignment:
  by_kind: {infra: {sft: 1, rl: 1, eval: 1}, public: cpt, knowledge: cpt, inhouse: cpt}
"""


@pytest.fixture
def loopback(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Domain]:
    domain = register_domain(LOOPBACK)
    monkeypatch.setattr(LoopbackEnvironment, "domain", domain)
    monkeypatch.setenv("WORLDLINE_DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")  # no engine needed
    yield domain
    unregister_domain(LOOPBACK.value)


def tasks(n: int) -> str:
    """n tasks whose calls say different things (pools deduplicate and decontaminate by content)."""
    words = "amber basil cedar dune ember fjord grove heron iris juniper kelp lotus maple nectar onyx pine".split()
    rng = random.Random(7)
    rows = []
    for i in range(n):
        calls = [{"name": "echo", "arguments": {"text": " ".join(rng.sample(words, 9))}} for _ in range(3)]
        calls.append({"name": "read", "arguments": {"path": f"/notes/{'-'.join(rng.sample(words, 3))}.txt"}})
        rows.append(
            {
                "id": f"loop-{i}",
                "instruction": f"say {i} things",
                "loopback": {"tools": ["echo", "read"]},
                "actions": calls,
            }
        )
    return "".join(json.dumps(r) + "\n" for r in rows)


def rows(path: Path) -> list[dict]:  # type: ignore[type-arg]
    return [r for f in sorted(path.glob("part-*.parquet")) for r in pq.read_table(f).to_pylist()]


def test_a_registered_domain_is_collected_pooled_exported_and_judged(
    loopback: Domain, tmp_path: Path
) -> None:
    (tmp_path / "tasks.jsonl").write_text(tasks(12))
    collected = tmp_path / "collected"
    summary = collect(
        CollectConfig(env="loopback", tasks_path=tmp_path / "tasks.jsonl", policy="scripted", out=collected)
    )
    assert summary.written == 12
    trajectories = list(iter_trajectories(collected))
    assert {t.domain for t in trajectories} == {loopback}
    assert all(t.status is TrajectoryStatus.COMPLETE for t in trajectories)
    assert trajectories[0].turns[0].observation.text.startswith("echo: ")
    assert list(validate_path(collected)) == []

    (tmp_path / "pools.yaml").write_text(POOLS_CONFIG)
    out = tmp_path / "pools"
    result = CliRunner().invoke(
        app,
        [
            "pools",
            "build",
            "--in",
            str(collected),
            "--out",
            str(out),
            "--config",
            str(tmp_path / "pools.yaml"),
        ],
    )
    assert result.exit_code == 0, result.output
    pools = {name: rows(out / name) for name in ("sft", "rl", "eval")}
    assert all(pools.values()), {name: len(r) for name, r in pools.items()}
    assert {r["domain"] for rs in pools.values() for r in rs} == {"loopback"}
    assert "loopback environment" in pools["sft"][0]["messages"][0]["content"]  # the template's {domain}
    assert "exact_match" in {r["verifier"] for r in pools["rl"]}  # `read` calls, checked by rule

    exported = out / "exports" / "agentworldbench" / "loopback_test.jsonl"
    samples = list(read_samples(exported))
    assert samples and {s.domain_name for s in samples} == {"loopback"}
    assert all(s.system_str.startswith(role_preamble(loopback)) for s in samples)
    assert "You are a **Loopback World Model**: you simulate a tool server" in samples[0].system_str
    imported = sample_to_trajectory(samples[0])
    assert imported.domain is loopback
    assert {t.action.kind for t in imported.turns} == {ActionKind.TOOL_CALL}

    assert has_judge_prompt("loopback")
    prompt = judge_system_prompt("loopback")
    assert "# Domain: loopback" in prompt and "Deterministic content" in prompt  # its text after the rubric
    judged = from_agentworldbench(samples[0], "<predicted_observation>echo: {}</predicted_observation>")
    messages = judge_messages(
        judged.domain, list(judged.history), judged.current_prompt, "echo: {}", judged.ground_truth
    )
    assert messages[0]["content"] == prompt


def test_a_domain_is_unknown_until_registered_and_after_it_is_removed() -> None:
    with pytest.raises(ValueError):
        Domain("loopback")
    assert not has_judge_prompt("loopback")


def test_optional_parts_come_from_the_registry_entry(tmp_path: Path) -> None:
    """A domain's generator, explorer, replay refusal and shell flag are read from its entry alone."""
    from dataclasses import replace

    from collectors.environment import Task
    from collectors.explore import TerminalExplorer, explorer_class, explorer_domain
    from collectors.generators import families, generator_domains
    from collectors.grounding import ground_trajectory
    from collectors.replay import replayability
    from schemas import ActionSpace, Source, SourceKind, Trajectory

    register_domain(
        replace(
            LOOPBACK,
            generator="collectors.generators.terminal",
            explorer="collectors.explore:TerminalExplorer",
            not_replayable="the loopback server keeps no state to rebuild",
        )
    )
    try:
        assert "loopback" in generator_domains() and families("loopback") == families("terminal")
        assert explorer_class("loopback") is TerminalExplorer
        task = Task(id="t", instruction="x", config={"loopback": {}})
        assert explorer_domain(task, ActionSpace()) == "loopback"
        traj = Trajectory(
            id="l1", domain=Domain("loopback"), source=Source(SourceKind.INFRA, "test"), task="x"
        )
        assert replayability(traj) == "the loopback server keeps no state to rebuild"
        grounded = ground_trajectory(traj, {}, tmp_path / "tasks.jsonl", None, tmp_path)
        assert (grounded.verdict, grounded.cause) == ("not_groundable", "the loopback domain")
    finally:
        unregister_domain(LOOPBACK.value)
    assert "loopback" not in generator_domains() and explorer_class("loopback") is None
    register_domain(LOOPBACK)  # an entry that names neither
    try:
        assert explorer_class("loopback") is None and explorer_class("web") is not None
        assert "terminal" in generator_domains() and "loopback" not in generator_domains()
    finally:
        unregister_domain(LOOPBACK.value)
