"""kill -9 and SIGTERM at random points of each long command, then a rerun: the final outputs equal an
uninterrupted run's (same rows, no duplicates, nothing missing) and nothing of the killed run is left
(staging folders, processes of its session, sandboxes it owned, recordings of no trajectory).

Trials per case: WORLDLINE_RELIABILITY_TRIALS (default 1); the delay is seeded per case
(WORLDLINE_RELIABILITY_SEED), so a failure reproduces.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from schemas import iter_trajectories
from tests.reliability.harness import ROOT, Trial, run, trial, worldline

pytestmark = pytest.mark.slow

TRIALS = int(os.environ.get("WORLDLINE_RELIABILITY_TRIALS", "1"))
SEED = int(os.environ.get("WORLDLINE_RELIABILITY_SEED", "20261202"))
SAMPLES = ROOT / "curation_agents" / "samples"
CLEAN_INPUTS = sorted(str(p) for p in SAMPLES.iterdir() if p.is_file() and p.name != "SOURCES.md")
SIGNALS = {"kill": signal.SIGKILL, "term": signal.SIGTERM}


def content(path: Path) -> dict[str, Any]:
    """A dataset by trajectory id: status, and each turn's action and observation."""
    out: dict[str, Any] = {}
    for traj in iter_trajectories(path):
        out.setdefault(traj.id, []).append(
            (
                traj.status.value,
                [
                    (
                        t.action.to_record()["text"] if "text" in t.action.to_record() else "",
                        t.observation.text,
                    )
                    for t in traj.turns
                ],
            )
        )
    return out


def compare_datasets(reference: Path, candidate: Path) -> tuple[bool, int, int]:
    ref, got = content(reference), content(candidate)
    lost = len(set(ref) - set(got))
    duplicated = sum(len(v) - 1 for v in got.values())
    return ref == got, lost, duplicated


def rng_for(case: str) -> random.Random:
    return random.Random(f"{SEED}-{case}")


def check(results: list[Trial]) -> None:
    failed = [r for r in results if not r.survived]
    assert not failed, "\n".join(json.dumps(r.__dict__) for r in failed)


# --- clean --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def clean_reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, float]:
    out = tmp_path_factory.mktemp("clean-ref") / "out"
    code, seconds, log = run(
        worldline("clean", *CLEAN_INPUTS, "--out", str(out), "--workers", "2", "--no-llm")
    )
    assert code == 0, log
    return out, seconds


@pytest.mark.parametrize("sig", sorted(SIGNALS))
def test_clean_with_workers_survives(sig: str, clean_reference: tuple[Path, float], tmp_path: Path) -> None:
    reference, seconds = clean_reference
    out = tmp_path / "out"
    cmd = worldline("clean", *CLEAN_INPUTS, "--out", str(out), "--workers", "2", "--no-llm")
    rng = rng_for(f"clean-{sig}")

    def compare() -> tuple[bool, int, int]:
        equal, lost, dup = compare_datasets(reference, out)
        ref_summary = json.loads((reference / "summary.json").read_text())
        got_summary = json.loads((out / "summary.json").read_text())
        keys = ("records_in", "accepted", "quarantined")
        same_counts = all(ref_summary.get(k) == got_summary.get(k) for k in keys)
        return equal and same_counts, lost, dup

    def reset() -> None:
        shutil.rmtree(out, ignore_errors=True)

    results = [
        trial(
            "clean --workers 2",
            cmd,
            SIGNALS[sig],
            rng,
            seconds,
            compare=compare,
            debris=lambda sid: [],
            reset=reset,
        )
        for _ in range(TRIALS)
    ]
    check(results)


# --- pools build --------------------------------------------------------------------------------------


def pool_rows(out: Path) -> dict[str, list[dict[str, Any]]]:
    tables: dict[str, list[dict[str, Any]]] = {}
    for part in sorted(out.rglob("*.parquet")):
        rel = part.relative_to(out)
        if "_build" in rel.parts:
            continue
        tables[str(rel)] = pq.read_table(part).to_pylist()
    return tables


@pytest.fixture(scope="module")
def pools_reference(
    clean_reference: tuple[Path, float], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, float, list[str]]:
    cleaned, _ = clean_reference
    out = tmp_path_factory.mktemp("pools-ref") / "out"
    args = ["--config", str(ROOT / "pipelines/configs/demo.yaml"), "--in", str(cleaned)]
    args += ["--eval", str(ROOT / "worldline/samples")]
    code, seconds, log = run(worldline("pools", "build", *args, "--out", str(out)))
    assert code == 0, log
    return out, seconds, args


@pytest.mark.parametrize("sig", sorted(SIGNALS))
def test_pools_build_survives(
    sig: str, pools_reference: tuple[Path, float, list[str]], tmp_path: Path
) -> None:
    reference, seconds, args = pools_reference
    out = tmp_path / "pools"
    cmd = worldline("pools", "build", *args, "--out", str(out), "--overwrite")
    expected = pool_rows(reference)

    def compare() -> tuple[bool, int, int]:
        got = pool_rows(out)
        lost = sum(max(0, len(v) - len(got.get(k, []))) for k, v in expected.items())
        dup = sum(max(0, len(v) - len(expected.get(k, []))) for k, v in got.items())
        return got == expected, lost, dup

    def debris(_sid: int) -> list[str]:
        return [f"staging folder {p}" for p in tmp_path.iterdir() if ".staging" in p.name]

    results = [
        trial(
            "pools build", cmd, SIGNALS[sig], rng_for(f"pools-{sig}"), seconds, compare=compare, debris=debris
        )
        for _ in range(TRIALS)
    ]
    check(results)


# --- collect (three domains, real sandboxes) ------------------------------------------------------------

COLLECT_CASES = [("terminal", "kill"), ("terminal", "term"), ("mcp", "kill"), ("search", "term")]


@pytest.fixture(scope="module")
def engine_env() -> dict[str, str]:
    from collectors import engine

    try:
        engine.connect().ping()
    except Exception as exc:
        pytest.fail(f"the container engine is not reachable ({exc}); run `make setup`")
    return dict(os.environ)


@pytest.fixture(scope="module")
def collect_reference(
    engine_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str], tuple[Path, Path, float]]:
    made: dict[str, tuple[Path, Path, float]] = {}

    def get(domain: str) -> tuple[Path, Path, float]:
        if domain not in made:
            root = tmp_path_factory.mktemp(f"collect-{domain}")
            tasks = root / "tasks.jsonl"
            code, _, log = run(
                worldline(
                    "tasks", "generate", "--env", domain, "--n", "4", "--seed", "7", "--out", str(tasks)
                )
            )
            assert code == 0, log
            out = root / "ref"
            code, seconds, log = run(collect_command(domain, tasks, out), engine_env)
            assert code == 0, log
            made[domain] = (tasks, out, seconds)
        return made[domain]

    return get


def collect_command(domain: str, tasks: Path, out: Path) -> list[str]:
    """The collection every case runs: generated tasks, the exploration policy, two sandboxes."""
    args = ["--env", domain, "--tasks", str(tasks), "--policy", "explore", "--out", str(out)]
    return worldline("collect", *args, "-j", "2", "--no-progress")


def summary(path: Path) -> dict[str, tuple[str, int]]:
    """By trajectory id: status and number of turns (observations hold PIDs and times that vary)."""
    return {t.id: (t.status.value, len(t.turns)) for t in iter_trajectories(path)}


@pytest.mark.engine
@pytest.mark.parametrize(("domain", "sig"), COLLECT_CASES)
def test_collect_survives(
    domain: str,
    sig: str,
    collect_reference: Callable[[str], tuple[Path, Path, float]],
    tmp_path: Path,
    engine_env: dict[str, str],
) -> None:
    from collectors import engine
    from tests.helpers.sandboxes import owned_by

    tasks, reference, seconds = collect_reference(domain)
    out = tmp_path / "out"
    base = collect_command(domain, tasks, out)
    expected = summary(reference)
    client = engine.connect()

    def compare() -> tuple[bool, int, int]:
        ids = Counter(t.id for t in iter_trajectories(out))
        got = {tid: status for tid, (status, _) in summary(out).items()}
        want = {tid: status for tid, (status, _) in expected.items()}
        # An environment can fail on its own (a server slow to start on a loaded machine): such a task
        # may differ in status, never in being there exactly once.
        same = set(got) == set(want) and all(
            got[t] == want[t] or "env_failure" in (got[t], want[t]) for t in want if t in got
        )
        return same, len(set(want) - set(got)), sum(n - 1 for n in ids.values())

    def debris(sid: int) -> list[str]:
        left = [f"sandbox {c[:12]} of the killed run" for c in owned_by(client, sid)]
        named = {
            str(t.metadata.get("asciicast")) for t in iter_trajectories(out) if t.metadata.get("asciicast")
        }
        casts = out / "casts"
        if casts.is_dir():
            left += [
                f"recording {p.name} of no trajectory"
                for p in casts.rglob("*")
                if p.is_file() and str(p.relative_to(out)) not in named
            ]
        return left

    rng = rng_for(f"collect-{domain}-{sig}")
    results = []
    for _ in range(TRIALS):
        shutil.rmtree(out, ignore_errors=True)
        # The rerun continues the killed run's folder.
        results.append(
            trial(
                f"collect {domain}",
                base,
                SIGNALS[sig],
                rng,
                seconds,
                compare=compare,
                debris=debris,
                env=engine_env,
                rerun=[*base, "--resume"],
            )
        )
    check(results)
