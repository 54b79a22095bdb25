"""`autoresearch run` end to end: small loops (2 runs x 2 iterations) against the fake server playing
optimizer, world model and judge; resume after a crash, noise floor, parse failures, budget, rejected
candidates, approval and export."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner, Result

from prompt_autoresearch.cli import app
from prompt_autoresearch.ledger import LEDGER_SCHEMA
from schemas.templates import REQUIRED_PLACEHOLDERS, load_template_set, system_values
from tests.helpers.autoresearch_world import FakeWorld, env_for, terminal_trajectories, write_data
from tests.helpers.fakellm import FakeLLMServer

REPO = Path(__file__).resolve().parents[2]
SMALL = ["--domain", "terminal", "--runs", "2", "--iterations", "2", "--eval-size", "2", "--quiet"]


def invoke(server: FakeLLMServer, data: Path, rundir: Path, *extra: str) -> Result:
    args = ["run", *SMALL, "--data", str(data), "--out", str(rundir), *extra]
    return CliRunner().invoke(app, args, env=env_for(server.base_url), catch_exceptions=False)


def state_of(rundir: Path) -> dict[str, Any]:
    return json.loads((rundir / "state.json").read_text())


def rows(rundir: Path) -> list[dict[str, Any]]:
    return pq.read_table(rundir / "ledger.parquet").to_pylist()


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return write_data(tmp_path)


def serve(world: FakeWorld) -> FakeLLMServer:
    server = FakeLLMServer().start()
    server.set_default(world)
    return server


def test_small_loop_keeps_improvements_and_writes_ledger(tmp_path: Path, data: Path) -> None:
    rundir = tmp_path / "rd"
    with serve(FakeWorld()) as server:
        result = invoke(server, data, rundir)
        assert result.exit_code == 0, result.output
        sent = len(server.requests)
        # A second run on the finished RUNDIR sends nothing.
        assert invoke(server, data, rundir).exit_code == 0
        assert len(server.requests) == sent
    assert "estimate:" in result.output
    table = pq.read_table(rundir / "ledger.parquet")
    assert table.schema.equals(LEDGER_SCHEMA)
    ledger = table.to_pylist()
    assert [(r["run"], r["iteration"]) for r in ledger] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    tsv = (rundir / "ledger.tsv").read_text().splitlines()
    assert tsv[0].split("\t") == LEDGER_SCHEMA.names and len(tsv) == 7
    for row in ledger:
        assert (rundir / row["template_path"]).read_text().count("{{task}}") >= 1
        assert row["calls"] > 0 and row["prompt_tokens"] > 0 and row["lines"] > 0 and row["tokens"] > 0
        assert row["valid"] == 2 and row["failed"] == 0
    # Seed scored twice (noise 0 then +2 levels): floor 10, incumbent = mean; +4 levels (20) is kept.
    seed = ledger[0]
    assert seed["status"] == "keep" and seed["noise_floor"] == pytest.approx(10.0)
    assert seed["score"] == pytest.approx(25.0)
    assert [r["status"] for r in ledger if r["iteration"] > 0] == ["keep"] * 4
    assert ledger[1]["parent"] == "r00i00" and ledger[2]["parent"] == "r00i01"
    state = state_of(rundir)
    for rs in state["runs"].values():
        assert rs["status"] == "done" and rs["recheck"]["accepted"] is True
        assert rs["result"] == rs["incumbent"] != rs["seed"]
    assert state["usage"]["calls"] == sent


def test_candidate_inside_noise_floor_is_discarded(tmp_path: Path, data: Path) -> None:
    world = FakeWorld(plan={("short constraint list", 1): "up:2", ("short constraint list", 2): "up:0"})
    with serve(world) as server:
        assert invoke(server, data, tmp_path / "rd").exit_code == 0
    run0 = [r for r in rows(tmp_path / "rd") if r["run"] == 0]
    inside = run0[1]
    assert inside["status"] == "discard" and inside["score"] > run0[0]["score"]
    assert "inside the noise floor" in inside["reason"]
    assert run0[2]["status"] == "discard" and "not better" in run0[2]["reason"]
    rs = state_of(tmp_path / "rd")["runs"]["0"]
    assert rs["result"] == rs["seed"] and rs["recheck"]["reason"] == "no candidate beat the seed"


def test_judge_parse_failure_is_counted(tmp_path: Path, data: Path) -> None:
    # Level 8 (the first candidate of each run) gets answers the judge parser cannot read.
    with serve(FakeWorld(garbage_levels=frozenset({8}))) as server:
        assert invoke(server, data, tmp_path / "rd").exit_code == 0
    first = [r for r in rows(tmp_path / "rd") if r["iteration"] == 1]
    for row in first:
        assert row["parse_failures"] == 2 and row["failed"] == 2 and row["valid"] == 0
        assert row["status"] == "discard" and row["score"] is None
        assert row["calls"] == 1 + 2 + 2 * 3  # optimizer, world model, three judge attempts per turn


def test_candidate_missing_placeholder_is_rejected(tmp_path: Path, data: Path) -> None:
    world = FakeWorld(
        plan={("short constraint list", 1): "drop:tool_definitions", ("concise checklist", 1): "garbage"}
    )
    with serve(world) as server:
        assert invoke(server, data, tmp_path / "rd").exit_code == 0
    ledger = {(r["run"], r["iteration"]): r for r in rows(tmp_path / "rd")}
    dropped = ledger[(0, 1)]
    assert dropped["status"] == "crash" and "tool_definitions" in dropped["reason"]
    assert dropped["reason"].startswith("rejected:") and dropped["calls"] == 1  # never evaluated
    assert "{{tool_definitions}}" not in (tmp_path / "rd" / dropped["template_path"]).read_text()
    garbage = ledger[(1, 1)]
    assert garbage["status"] == "crash" and "no <template>" in garbage["reason"]
    # The next iteration still starts from the incumbent and is told why the candidate was rejected.
    assert ledger[(0, 2)]["parent"] == "r00i00" and ledger[(0, 2)]["status"] == "keep"


def test_candidate_the_world_model_rejects_is_a_crash(tmp_path: Path, data: Path) -> None:
    plan = {(style, 2): "up:5" for style in ("short constraint list", "concise checklist")}
    with serve(FakeWorld(plan=plan, rejected_levels=frozenset({8}))) as server:
        assert invoke(server, data, tmp_path / "rd").exit_code == 0
    first = [r for r in rows(tmp_path / "rd") if r["iteration"] == 1]
    assert all(r["status"] == "crash" and "HTTP 400" in r["reason"] for r in first)
    assert all(r["status"] == "keep" for r in rows(tmp_path / "rd") if r["iteration"] == 2)


def test_budget_stop_then_resume_with_more(tmp_path: Path, data: Path) -> None:
    rundir = tmp_path / "rd"
    with serve(FakeWorld()) as server:
        # Without --quiet: the live progress display runs too.
        args = ["run", *SMALL[:-1], "--data", str(data), "--out", str(rundir), "--max-calls", "20"]
        stopped = CliRunner().invoke(app, args, env=env_for(server.base_url))
        assert stopped.exit_code == 3, stopped.output
        assert "fewer than 3 proposals" in stopped.output and "budget" in stopped.output
        state = state_of(rundir)
        assert state["stopped"].startswith("budget:") and state["usage"]["calls"] == 20
        assert len(server.requests) == 20
        done = invoke(server, data, rundir, "--max-calls", "200")
        assert done.exit_code == 0, done.output
    assert state_of(rundir)["stopped"] is None
    assert len(rows(rundir)) == 6
    assert "run 00" in stopped.output  # the progress lines


def test_token_budget_stops_before_the_first_call(tmp_path: Path, data: Path) -> None:
    with serve(FakeWorld()) as server:
        result = invoke(server, data, tmp_path / "rd", "--max-tokens", "5000")
        assert result.exit_code == 3 and server.requests == []
    assert "fewer than 3 proposals" in result.output
    assert "token budget" in state_of(tmp_path / "rd")["stopped"]


def test_unreachable_endpoint_fails_with_a_resumable_error(tmp_path: Path, data: Path) -> None:
    with serve(FakeWorld()) as server:
        env = env_for(server.base_url) | {"WORLDLINE_LLM_MODEL_WORLD_MODEL": "missing-model"}
        args = ["run", *SMALL, "--data", str(data), "--out", str(tmp_path / "rd")]
        result = CliRunner().invoke(app, args, env=env)
    assert result.exit_code == 1 and "rerun the same command to resume" in result.output


def test_judge_equal_to_world_model_warns(tmp_path: Path, data: Path) -> None:
    with serve(FakeWorld()) as server:
        env = env_for(server.base_url) | {"WORLDLINE_LLM_MODEL_JUDGE": "wm-model"}
        result = CliRunner().invoke(
            app,
            ["run", *SMALL, "--data", str(data), "--out", str(tmp_path / "rd"), "--estimate-only"],
            env=env,
        )
        assert result.exit_code == 0 and "the judge is the world model" in result.output
        assert server.requests == []


def test_resume_refuses_other_settings(tmp_path: Path, data: Path) -> None:
    with serve(FakeWorld()) as server:
        assert invoke(server, data, tmp_path / "rd", "--estimate-only").exit_code == 0
        assert invoke(server, data, tmp_path / "rd").exit_code == 0
        other = CliRunner().invoke(
            app,
            ["run", *SMALL[:-1], "--seed", "7", "--data", str(data), "--out", str(tmp_path / "rd")],
            env=env_for(server.base_url),
        )
    assert other.exit_code == 2 and "seed" in other.output and "other settings" in other.output


@pytest.mark.slow
def test_crash_mid_run_then_resume_sends_no_repeated_call(tmp_path: Path, data: Path) -> None:
    """Kill the process mid-run (SIGKILL from the server while a request is open), resume, and compare
    with an uninterrupted experiment: the same ledger, and every answered request sent exactly once."""
    serial = ["--parallel-runs", "1", "--concurrency", "1"]
    with serve(FakeWorld()) as server:
        assert invoke(server, data, tmp_path / "reference", *serial).exit_code == 0
        reference_calls = len(server.requests)
    reference = rows(tmp_path / "reference")

    kill_at = reference_calls // 2
    child: list[subprocess.Popen[bytes]] = []

    def crash(number: int) -> bool:
        if number == kill_at and child:
            os.kill(child[0].pid, signal.SIGKILL)
            return True
        return False

    world = FakeWorld(on_request=crash)
    rundir = tmp_path / "crashed"
    with serve(world) as server:
        env = os.environ | env_for(server.base_url)
        args = ["run", *SMALL, *serial, "--data", str(data), "--out", str(rundir)]
        child.append(
            subprocess.Popen(
                [sys.executable, "-m", "prompt_autoresearch.cli", *args],
                cwd=REPO,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        assert child[0].wait(timeout=120) == -signal.SIGKILL
        world.on_request = None
        before = len(server.requests)
        assert before == kill_at
        resumed = invoke(server, data, rundir, *serial)
        assert resumed.exit_code == 0, resumed.output
        after = len(server.requests) - before
    # The request open at the kill was never answered: it is the only one sent again.
    assert (kill_at - 1) + after == reference_calls
    assert world.answered == reference_calls
    assert rows(rundir) == reference


def test_approval_gate_and_export_order(tmp_path: Path, data: Path) -> None:
    rundir, out = tmp_path / "rd", tmp_path / "evolved"
    runner = CliRunner()
    # Run 0 is made longer than run 1 by its optimizer, so length order and approval order disagree.
    world = FakeWorld(plan={("short constraint list", 2): "up:4"})
    with serve(world) as server:
        partial = invoke(server, data, rundir, "--max-calls", "20")
        assert partial.exit_code == 3
        early = runner.invoke(app, ["approve", str(rundir), "--run", "0", "--as", "v3"])
        assert early.exit_code == 2 and "not finished" in early.output
        nothing = runner.invoke(app, ["export", str(rundir), "--out", str(out)])
        assert nothing.exit_code == 2 and "nothing is approved" in nothing.output
        assert invoke(server, data, rundir).exit_code == 0
    state = state_of(rundir)
    results = {
        int(k): next(r for r in rs["candidates"] if r["candidate_id"] == rs["result"])
        for k, rs in state["runs"].items()
    }
    assert results[0]["lines"] > results[1]["lines"] or results[0]["lines"] < results[1]["lines"]
    longer = 0 if results[0]["lines"] > results[1]["lines"] else 1
    shorter = 1 - longer
    assert runner.invoke(app, ["approve", str(rundir), "--run", str(longer), "--as", "v2"]).exit_code == 0
    assert runner.invoke(app, ["approve", str(rundir), "--run", str(shorter), "--as", "v5"]).exit_code == 0
    bad = runner.invoke(app, ["approve", str(rundir), "--run", "0", "--as", "v12"])
    assert bad.exit_code == 2 and "v0..v11" in bad.output
    exported = runner.invoke(app, ["export", str(rundir), "--out", str(out)])
    assert exported.exit_code == 0, exported.output
    assert "written as" in exported.output
    tset = load_template_set(str(out))
    assert sorted(tset.templates) == list(range(12))
    # Approved templates fill the approved slots shortest first; the rest come from the seed set.
    assert tset.get(2).text == results[shorter]["text"] and tset.get(5).text == results[longer]["text"]
    index = json.loads((out / "index.json").read_text())
    origins = {e["version"]: e["origin"] for e in index["templates"]}
    assert "autoresearch run" in origins[2] and "not approved" in origins[0]
    assert runner.invoke(app, ["check", str(out)]).exit_code == 0
    # Exporting again replaces the set; a folder that is not a template set is never overwritten.
    assert runner.invoke(app, ["export", str(rundir), "--out", str(out)]).exit_code == 0
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    refused = runner.invoke(app, ["export", str(rundir), "--out", str(tmp_path / "mine")])
    assert refused.exit_code == 2 and "not a template set" in refused.output
    # The pools render the exported templates with a trajectory's own parts.
    traj = terminal_trajectories(1)[0]
    rendered = tset.get(2).render(system_values(traj))
    assert traj.task in rendered and "files: notes0.txt" in rendered
    for name in REQUIRED_PLACEHOLDERS:
        assert "{{" + name in tset.get(5).text
