"""autoresearch accounting under kill -9: every request the endpoint receives is counted before it is
sent, in RUNDIR's request journal, so `status` after a kill and the resumed run's budget count it,
and `--max-calls` caps what the endpoint receives over all sessions."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from prompt_autoresearch.cli import app
from tests.helpers.autoresearch_world import FakeWorld, env_for, write_data
from tests.helpers.fakellm import FakeLLMServer
from tests.prompt_autoresearch.test_autoresearch_loop import REPO, SMALL, invoke, state_of

PARALLEL = ["--parallel-runs", "2", "--concurrency", "4"]


def serve(world: FakeWorld) -> FakeLLMServer:
    server = FakeLLMServer().start()
    server.set_default(world)
    return server


def killed_run(
    tmp_path: Path, data: Path, kill_at: int, *extra: str
) -> tuple[FakeWorld, FakeLLMServer, Path]:
    """Start `autoresearch run` in a subprocess and SIGKILL it when the server receives request
    `kill_at` (others may be in flight at that moment)."""
    child: list[subprocess.Popen[bytes]] = []

    def crash(number: int) -> bool:
        if number == kill_at and child:
            os.kill(child[0].pid, signal.SIGKILL)
            return True
        return False

    world = FakeWorld(on_request=crash)
    rundir = tmp_path / "killed"
    server = serve(world)
    args = ["run", *SMALL, *PARALLEL, "--data", str(data), "--out", str(rundir), *extra]
    child.append(
        subprocess.Popen(
            [sys.executable, "-m", "prompt_autoresearch.cli", *args],
            cwd=REPO,
            env=os.environ | env_for(server.base_url),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    )
    assert child[0].wait(timeout=120) == -signal.SIGKILL
    world.on_request = None
    return world, server, rundir


def test_requests_sent_before_a_kill_are_counted_and_the_cap_holds(tmp_path: Path) -> None:
    data = write_data(tmp_path)
    with serve(FakeWorld()) as server:
        assert invoke(server, data, tmp_path / "reference", *PARALLEL).exit_code == 0
        needed = len(server.requests)
    cap = needed - 4
    world, server, rundir = killed_run(tmp_path, data, needed // 2, "--max-calls", str(cap))
    with server:
        sent = len(server.requests)
        status = CliRunner().invoke(app, ["status", str(rundir), "--json"])
        assert status.exit_code == 0, status.output
        # every request that reached the endpoint is in the usage `status` reports, in-flight ones too
        counted = json.loads(status.output)["usage"]["calls"]
        assert sent <= counted <= sent + 4
        resumed = invoke(server, data, rundir, *PARALLEL, "--max-calls", str(cap))
        assert resumed.exit_code == 3, resumed.output  # the cap is below what the experiment needs
        total = len(server.requests)
    assert total <= cap
    assert state_of(rundir)["usage"]["calls"] == cap >= total
    assert world.answered <= total


def test_uninterrupted_run_counts_exactly_what_it_sent(tmp_path: Path) -> None:
    data = write_data(tmp_path)
    rundir = tmp_path / "rd"
    with serve(FakeWorld()) as server:
        assert invoke(server, data, rundir, *PARALLEL).exit_code == 0
        sent = len(server.requests)
    journal = [json.loads(line) for line in (rundir / "llm-requests.jsonl").read_text().splitlines()]
    assert sum("sent" in r for r in journal) == sent == state_of(rundir)["usage"]["calls"]
