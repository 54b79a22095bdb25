"""Source-level decontamination: `pools build` drops every trajectory recorded on a held-out
benchmark (by default the evaluator's nine source benchmarks), by provenance or task text in any
spelling, never one that merely mentions a word; the cards count them and `pools verify` proves it."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from pipelines.benchmarks_exclusion import (
    BENCHMARKS,
    DEFAULT_EXCLUDED,
    ExclusionMatcher,
    UnknownBenchmark,
    canonical_list,
)
from pipelines.config import ConfigError, PoolsConfig
from pipelines.job import verify_built_pools
from pipelines.verify import verify_pools
from schemas.shards import write_trajectories
from schemas.trajectory import SourceKind, Trajectory
from tests.helpers.pools_data import build_pools_from, pooled_ids, terminal
from worldline.cli import app

TB1, TB2, OSW = "terminal-bench-1.0", "terminal-bench-2.0", "osworld-verified"


def traj(tid: str, seed: int, **fields: object) -> Trajectory:
    t = terminal(tid, f"g-{tid}", SourceKind.INHOUSE, seed)
    for key, value in fields.items():
        if key in ("name", "uri", "group"):
            setattr(t.source, key, value)
        else:
            setattr(t, key, value)
    return t


# (trajectory, benchmark it is from)
FROM_BENCHMARKS = [
    (traj("a1", 1, name="terminal-bench"), TB2),
    (traj("a2", 2, uri="harbor://jobs/2025-11-02/terminal_bench@2.0/hello-world"), TB2),
    (traj("a3", 3, metadata={"dataset": "terminal-bench-core==0.1.1"}), TB1),
    (traj("a4", 4, name="Terminal Bench 1.0"), TB1),
    (traj("a5", 5, metadata={"benchmark": "OSWorld-Verified", "task_id": "bb5e4c0d"}), OSW),
    (traj("a6", 6, task="[osworld] Make the desktop background blue"), OSW),
    (traj("a7", 7, task="tbench@2.0 fix-git: recover the lost commit"), TB2),
    (traj("tbench-hello-world-8", 8), TB2),
    (traj("a9", 9, metadata={"source": {"task_source": "os_world"}}), OSW),
]
UNRELATED = [
    traj("u1", 11, task="Open a terminal and list the files in the os folder"),
    traj("u2", 12, task="Use the os module and a bench of tests", name="inhouse-shell"),
    traj("u3", 13, task="Open the Android world clock and set an alarm", metadata={"dataset": "my os tasks"}),
    traj("u4", 14, name="visualwebarena-mirror", task="terminal bench press log: sum the weights"),
    traj("u5", 15, uri="https://example.org/terminal/benchmarks/cpu.json", task="report CPU benchmark speed"),
    traj(
        "u6",
        16,
        metadata={
            "task_description": "Open the Android World clock and compare OS World time zones",
            "source_system_prompt": "You are an agent on a terminal bench; the os is Linux. " * 6,
        },
    ),
]


def build(tmp_path: Path, yaml_text: str = "") -> Path:
    trajectories = [t for t, _ in FROM_BENCHMARKS] + UNRELATED
    return build_pools_from(tmp_path, trajectories, "assignment:\n  by_kind: {inhouse: sft}\n" + yaml_text)


def pooled(out: Path) -> set[str]:
    return pooled_ids(out, "sft")


def test_default_list_drops_every_benchmark_trajectory_and_no_other(tmp_path: Path) -> None:
    out = build(tmp_path)
    assert pooled(out) == {t.id for t in UNRELATED}
    removed = {r["record_id"]: r for r in pq.read_table(out / "removed").to_pylist()}
    assert set(removed) == {t.id for t, _ in FROM_BENCHMARKS}
    for t, bench in FROM_BENCHMARKS:
        assert removed[t.id]["reason"] == "held_out_benchmark" and bench in removed[t.id]["detail"]
    card = json.loads((out / "sft" / "card.json").read_text())
    assert card["excluded_benchmarks"] == {n: 0 for n in DEFAULT_EXCLUDED} | {TB1: 2, TB2: 4, OSW: 3}
    assert card["filters_removed"]["dropped.held_out_benchmark"] == 9
    readme = (out / "sft" / "README.md").read_text()
    assert f"| {TB2} | 4 |" in readme and f"| {OSW} | 3 |" in readme and "| mcpmark | 0 |" in readme
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["counts"]["reconciles"]
    assert manifest["config"]["decontamination"]["exclude_benchmarks"] == list(DEFAULT_EXCLUDED)
    assert not [v for v in verify_built_pools(str(out), recount_tokens=False)]


def test_verify_fails_when_the_pool_holds_an_excluded_benchmark(tmp_path: Path) -> None:
    out = build(tmp_path, "decontamination:\n  exclude_benchmarks: []\n")
    assert len(pooled(out)) == len(FROM_BENCHMARKS) + len(UNRELATED)
    assert json.loads((out / "sft" / "card.json").read_text())["excluded_benchmarks"] == {}
    assert "None: no benchmark was excluded" in (out / "sft" / "README.md").read_text()
    assert not [
        v for v in verify_built_pools(str(out), recount_tokens=False) if v.check == "held_out_benchmark"
    ]
    # Tamper: the manifest claims the default exclusions over a pool that holds benchmark data.
    mpath = out / "manifest.json"
    manifest = json.loads(mpath.read_text())
    manifest["config"]["decontamination"]["exclude_benchmarks"] = list(DEFAULT_EXCLUDED)
    mpath.write_text(json.dumps(manifest))
    found = [v for v in verify_built_pools(str(out), recount_tokens=False) if v.check == "held_out_benchmark"]
    assert len(found) == 1
    assert sorted(r.split(":")[0] for r in found[0].rows) == sorted(t.id for t, _ in FROM_BENCHMARKS)
    cfg = PoolsConfig.from_dict(manifest["config"])
    as_beam_job = verify_pools(str(out), cfg, recount_tokens=False, beam_args=[])
    assert [v for v in as_beam_job if v.check == "held_out_benchmark"] == found


def test_one_benchmark_only(tmp_path: Path) -> None:
    out = build(tmp_path, "decontamination:\n  exclude_benchmarks: [OSWorld]\n")
    assert pooled(out) == {t.id for t in UNRELATED} | {t.id for t, b in FROM_BENCHMARKS if b != OSW}
    assert json.loads((out / "sft" / "card.json").read_text())["excluded_benchmarks"] == {OSW: 3}


def test_unversioned_name_counts_for_the_excluded_version() -> None:
    only_v1 = ExclusionMatcher([TB1])
    assert only_v1.match_identifier("terminal-bench") == TB1
    assert only_v1.match_identifier("terminal_bench@2.0") is None  # another version, not excluded
    assert ExclusionMatcher(["Terminal-Bench"]).names == [TB1, TB2]


SPELLINGS = {
    TB2: ["terminal-bench@2.0", "Terminal Bench 2.0", "TERMINAL_BENCH_2", "tbench2", "TerminalBench2.0"],
    TB1: ["terminal-bench-core==0.1.1", "Terminal-Bench 1.0", "tbench_1.0"],
    OSW: ["OSWorld-Verified", "os-world", "osworld_verified", "xlang-ai/OSWorld"],
    "toolathlon": ["Toolathlon", "Tool Decathlon", "tool_decathlon"],
    "mcpmark": ["MCPMark", "mcp-mark", "eval-sys/mcpmark"],
    "widesearch": ["WideSearch", "wide_search"],
    "androidworld": ["AndroidWorld", "android_world", "google-research/android_world"],
    "webarena-verified": ["WebArena-Verified", "web_arena", "webarena"],
}


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(sorted((b, s) for b, ss in SPELLINGS.items() for s in ss)),
    st.sampled_from(["", "data/", "hf://datasets/x/", "runs/2025-10-01_"]),
    st.sampled_from(["", "/task-17", "#3", ".jsonl"]),
)
def test_spelling_variants_in_provenance_match(pick: tuple[str, str], before: str, after: str) -> None:
    bench, spelling = pick
    assert ExclusionMatcher(DEFAULT_EXCLUDED).match_identifier(before + spelling + after) == bench


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            "open a terminal the os module bench press world clock android phone web arena of ideas "
            "tool search wide mark mcp server benchmarks os.path".split()
        ),
        min_size=1,
        max_size=12,
    )
)
def test_innocent_words_in_task_text_never_match(words: list[str]) -> None:
    text = " ".join(words)
    assert ExclusionMatcher(DEFAULT_EXCLUDED).match_text(text) is None


def test_every_benchmark_resolves_by_name_and_title() -> None:
    assert len(BENCHMARKS) == 9
    for b in BENCHMARKS:
        assert canonical_list([b.name]) == canonical_list([b.title]) == [b.name]
    with pytest.raises(UnknownBenchmark, match="known: mcpmark"):
        canonical_list(["SuperBench"])


def test_unknown_name_in_config_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "pools.yaml"
    path.write_text("decontamination:\n  exclude_benchmarks: [osworld, nobench]\n")
    with pytest.raises(ConfigError, match=r"exclude_benchmarks: unknown benchmark 'nobench'; known: "):
        PoolsConfig.load(path)


def test_fingerprint_reflects_the_list(tmp_path: Path) -> None:
    path = tmp_path / "pools.yaml"
    path.write_text("decontamination:\n  exclude_benchmarks: [OSWorld Verified]\n")
    one = PoolsConfig.load(path)
    assert one.decontamination.exclude_benchmarks == [OSW]
    assert one.fingerprint() != PoolsConfig.load(None).fingerprint()


runner = CliRunner()


def cli_build(tmp_path: Path, *args: str) -> tuple[int, str, Path]:
    if not (tmp_path / "in").exists():
        write_trajectories(tmp_path / "in", [t for t, _ in FROM_BENCHMARKS] + UNRELATED)
    out = tmp_path / f"out{len(list(tmp_path.iterdir()))}"
    result = runner.invoke(
        app,
        ["pools", "build", "--in", str(tmp_path / "in"), "--out", str(out), *args],
        env={"COLUMNS": "300"},
    )
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output, out


def test_cli_options(tmp_path: Path) -> None:
    code, text, _ = cli_build(tmp_path, "--exclude-benchmark", "nobench")
    assert code == 2 and "unknown benchmark 'nobench'" in text and "osworld-verified" in text
    code, text, out = cli_build(
        tmp_path,
        "--no-default-exclusions",
        "--exclude-benchmark",
        "os_world",
        "--exclude-benchmark",
        "tbench@1.0",
    )
    assert code == 0, text
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["decontamination"]["exclude_benchmarks"] == [TB1, OSW]
    assert manifest["stats"]["excluded_benchmark.osworld-verified"] == 3
    # unversioned mentions (a1, tbench-hello-world-8) count for the one excluded version; the 2.0 ones stay
    assert manifest["stats"]["excluded_benchmark.terminal-bench-1.0"] == 4
    assert "excluded_benchmark.terminal-bench-2.0" not in manifest["stats"]
    assigned = set(pq.read_table(out / "assignments").column("trajectory_id").to_pylist())
    assert assigned == {t.id for t in UNRELATED} | {"a2", "a7"}
