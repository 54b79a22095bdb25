"""One pools build over a mix of real benchmark logs and other public traces, cleaned by the readers
that handle them, with the default exclusion list: no trajectory of the evaluator's source benchmarks
reaches a pool, the cards count the excluded ones per benchmark, and `pools verify` proves it.

Each fixture tree is copied under a neutral folder name first, so a benchmark is recognised from what
the reader takes out of the file (its provenance and task), never from the folder it happens to sit
in on this machine.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from curation_agents.clean_run import CleanRun
from curation_agents.model import CleanConfig
from pipelines.benchmarks_exclusion import DEFAULT_EXCLUDED, ExclusionMatcher
from pipelines.build import resolve_inputs, run_build
from pipelines.config import PoolsConfig
from pipelines.finalize import finalize
from pipelines.job import verify_built_pools
from schemas import iter_trajectories

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
# fixture tree -> the source benchmark its traces were recorded on (None: not one of the nine)
SOURCES: dict[str, str | None] = {
    "osworld": "osworld-verified",
    "androidworld": "androidworld",
    "mcpmark": "mcpmark",
    "toolathlon": "toolathlon",
    "widesearch": "widesearch",
    "mcp_universe": None,
    "swe_agent": None,
    "mini_swe_agent": None,
}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("mixed")
    where: dict[str, str] = {}  # neutral folder -> fixture tree
    for i, name in enumerate(SOURCES):
        neutral = f"src{i}"
        shutil.copytree(FIXTURES / name, root / "raw" / neutral)
        where[neutral] = name
    cleaned = root / "cleaned"
    summary = CleanRun([str(root / "raw")], cleaned, CleanConfig()).run()
    assert summary["records_in"] == summary["accepted"] + summary["quarantined"]
    cfg = PoolsConfig()
    out = root / "pools"
    run_build(resolve_inputs([str(cleaned)], [], [], cfg), str(out), cfg, [])
    finalize(str(out), cfg, [str(cleaned)], [], [])
    return cleaned, out, where


def fixture_of(uri: str, where: dict[str, str]) -> str:
    neutral = next(part for part in Path(uri.split("#")[0]).parts if part in where)
    return where[neutral]


def test_no_trajectory_of_a_source_benchmark_is_pooled_and_the_cards_count_them(
    built: tuple[Path, Path, dict[str, str]],
) -> None:
    cleaned, out, where = built
    by_tree = Counter(fixture_of(str(t.source.uri), where) for t in iter_trajectories(cleaned))
    assert set(by_tree) == set(SOURCES), by_tree  # every reader produced trajectories
    expected = Counter()
    for tree, n in by_tree.items():
        if SOURCES[tree]:
            expected[SOURCES[tree]] += n
    removed = [r for r in pq.read_table(out / "removed").to_pylist() if r["reason"] == "held_out_benchmark"]
    assert len(removed) == sum(expected.values())
    pooled = [
        r
        for pool in ("cpt", "sft", "rl", "eval")
        for f in (out / pool).glob("part-*.parquet")
        for r in pq.read_table(f, columns=["trajectory_id"]).to_pylist()
    ]
    assert pooled, "the traces of no source benchmark should still be pooled"
    by_id = {t.id: t for t in iter_trajectories(cleaned)}
    matcher = ExclusionMatcher(list(DEFAULT_EXCLUDED))
    for row in pooled:
        traj = by_id[row["trajectory_id"]]
        assert SOURCES[fixture_of(str(traj.source.uri), where)] is None, traj.source
        assert matcher.match(traj) is None
    card = json.loads((out / "cpt" / "card.json").read_text())
    assert {k: v for k, v in card["excluded_benchmarks"].items() if v} == dict(expected)
    assert set(card["excluded_benchmarks"]) == set(DEFAULT_EXCLUDED)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["counts"]["reconciles"]
    assert not list(verify_built_pools(str(out), recount_tokens=False))
