"""End-to-end pool builds on the real Beam runner: every filter and rule, exports, verify, runners."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from pipelines.build import resolve_inputs, run_build
from pipelines.config import PoolsConfig
from pipelines.finalize import finalize
from pipelines.verify import verify_pools
from tests.helpers.pools_data import build_fixture

CONFIG = """
assignment:
  by_kind: {infra: cpt, public: cpt, knowledge: cpt, inhouse: {sft: 1, rl: 1, eval: 1}}
"""

QWEN_CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build(root: Path, out: Path, beam_args: list[str], config: str = CONFIG) -> dict:  # type: ignore[type-arg]
    fx = build_fixture(root)
    (root / "pools.yaml").write_text(config)
    cfg = PoolsConfig.load(root / "pools.yaml")
    ins = [str(p) for p in fx["inputs"]]  # type: ignore[attr-defined]
    know, ev = [str(fx["knowledge"])], [str(fx["eval"])]
    run_build(resolve_inputs(ins, know, ev, cfg), str(out), cfg, beam_args)
    return finalize(out, cfg, ins, know, ev)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:  # type: ignore[type-arg]
    root = tmp_path_factory.mktemp("pools")
    manifest = build(root, root / "out", [])
    return root / "out", manifest


def rows(out: Path, pool: str) -> list[dict]:  # type: ignore[type-arg]
    return [r for f in sorted((out / pool).glob("part-*.parquet")) for r in pq.read_table(f).to_pylist()]


def test_every_filter_removes_its_known_count(built) -> None:  # type: ignore[no-untyped-def]
    _, m = built
    s = m["stats"]
    assert s["records_in"] == 25 and s["knowledge_in"] == 3
    assert s["quarantined.missing_id"] == 1
    assert s["dropped.too_few_turns"] == 1
    assert s["dropped.undeclared_tool"] == 1
    assert s["dropped.gui_env_failure"] == 2  # CAPTCHA page + collector's env_failure status
    assert s["turns_removed.gui_no_change_turns"] == 1
    assert s["turns_removed.empty_action_turns"] == 1
    assert s["turns_removed.retry_cycle_turns"] == 1
    assert s["dropped.exact_duplicate"] == 1
    assert s["dropped.near_duplicate"] == 1
    assert s["dropped.eval_overlap"] == 1
    assert m["counts"]["reconciles"] and m["counts"]["records_in"] == 28
    assert m["counts"]["pooled"] == 28 - 8


def test_pools_follow_the_paper_rules(built) -> None:  # type: ignore[no-untyped-def]
    out, m = built
    cpt, sft, rl = rows(out, "cpt"), rows(out, "sft"), rows(out, "rl")
    for r in cpt + sft + rl:
        assert r["trajectory_id"] and r["source_id"] and r["domain"]
    assert {r["source_kind"] for r in cpt} == {"infra", "public", "knowledge"}
    assert {r["source_kind"] for r in sft + rl} == {"inhouse"}
    assert sum(r["is_knowledge"] for r in cpt) == 3
    assert all(r["template_version"] == 1 for r in cpt if not r["is_knowledge"])
    assert all(2 <= r["template_version"] <= 11 for r in sft)
    assert all(r["template_version"] == 0 for r in rl)
    assert len({r["trajectory_id"] for r in rl}) == len(rl)
    for r in rl:
        assert 1 <= r["turn_index"] <= r["num_turns"]
        spec = json.loads(r["reward_spec"])
        assert spec["weights"] == (
            {"rubric": 0.9, "rule": 0.1} if r["verifier"] != "none" else {"rubric": 1.0, "rule": 0.0}
        )
    assert rl and sft
    # SFT: one sample per turn, history = earlier turns, target = the turn's observation
    by_traj: dict[str, list[dict]] = {}  # type: ignore[type-arg]
    for r in sft:
        by_traj.setdefault(r["trajectory_id"], []).append(r)
    for samples in by_traj.values():
        assert sorted(s["turn_index"] for s in samples) == list(range(1, len(samples) + 1))
        for s in samples:
            # AgentWorldBench's shape: system, a user/assistant pair per earlier turn, the action, the answer
            roles = [m["role"] for m in s["messages"]]
            assert roles == ["system"] + ["user", "assistant"] * s["turn_index"]
            assert s["messages"][-2]["content"].startswith(f"### Turn {s['turn_index']}\n")
            assert all(m["content"].startswith("**Environment Observation:**") for m in s["messages"][2:-2:2])
            assert s["messages"][-1]["content"].startswith("<predicted_observation>")
    # CPT spans: inside the text, sorted, one category per turn
    for r in cpt:
        ends = 0
        for span in r["loss_spans"]:
            assert ends <= span["start"] < span["end"] <= len(r["text"])
            ends = span["end"]
        assert r["loss_tokens"] <= r["tokens"]
    web = [r for r in sft + rl if r["trajectory_id"] == "inh-web-nochange"]
    web_cpt = [r["num_turns"] for r in rl if r["trajectory_id"] == "inh-web-nochange"]
    assert web and all(n == 4 for n in web_cpt)  # 5 turns in, the no-change turn is gone
    assert all(r["turn_index"] <= 4 for r in web)
    assert m["pools"]["eval"]["trajectories"] >= 1


def source_group_of(pool: str, row: dict) -> str:  # type: ignore[type-arg]
    """The source group a written row came from (the eval pool stores whole trajectories)."""
    if pool == "eval":
        return str(row["source"]["group"] or row["source"]["name"])
    return str(row["source_id"])


@pytest.fixture(scope="module")
def built_by_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture's records carry no explicit group: grouping by source name makes groups of several
    trajectories (the default, one group per task, makes single-trajectory groups here)."""
    root = tmp_path_factory.mktemp("pools-by-source")
    build(root, root / "out", [], CONFIG + "  group_by: source\n")
    return root / "out"


def test_every_source_group_lands_in_exactly_one_pool(built_by_source: Path) -> None:
    out = built_by_source
    pools_of: dict[str, set[str]] = {}
    members: dict[str, set[str]] = {}
    for pool in ("cpt", "sft", "rl", "eval"):
        for r in rows(out, pool):
            group = source_group_of(pool, r)
            pools_of.setdefault(group, set()).add(pool)
            members.setdefault(group, set()).add(r["trajectory_id"] if pool != "eval" else r["id"])
    # The written rows hold groups with several trajectories spread over the random pools, so a
    # per-trajectory (instead of per-group) choice would split at least one of them.
    random_pools = {p for g, ps in pools_of.items() if g.startswith("inhouse") for p in ps}
    assert len(random_pools) >= 2, pools_of
    assert sum(len(m) > 1 for g, m in members.items() if g.startswith("inhouse")) >= 3, members
    assert {g: sorted(ps) for g, ps in pools_of.items() if len(ps) != 1} == {}


def test_cards_manifest_and_exports(built) -> None:  # type: ignore[no-untyped-def]
    out, m = built
    for pool in ("cpt", "sft", "rl", "eval"):
        card = json.loads((out / pool / "card.json").read_text())
        assert card["filters_removed"]["dropped.undeclared_tool"] == 1
        assert card["inputs"] and (out / pool / "README.md").exists()
        assert card["tokenizer"]["name"].startswith("qwen") and card["tokenizer"]["chat_template"]
    assert m["tokenizer"] == card["tokenizer"]
    assert m["exports"]["agentworldbench"]
    for f in m["exports"]["agentworldbench"]:
        for line in (out / f).read_text().splitlines():
            sample = json.loads(line)
            assert set(sample) >= {
                "task",
                "id",
                "turn_idx",
                "total_turns",
                "system_str",
                "prompt",
                "response",
                "current_prompt",
            }
    first = json.loads((out / m["exports"]["sft_messages"][0]).read_text().splitlines()[0])
    assert [msg["role"] for msg in first["messages"]] == ["system", "user", "assistant"]


def test_verl_output_loads_with_datasets_and_renders_through_qwen_template(built) -> None:  # type: ignore[no-untyped-def]
    import datasets
    import jinja2

    out, m = built
    files = [str(out / f) for f in m["exports"]["verl"]]
    ds = datasets.load_dataset("parquet", data_files=files, split="train")
    assert len(ds) == m["pools"]["rl"]["samples"]
    assert set(ds.column_names) == {"data_source", "prompt", "ability", "reward_model", "extra_info"}
    template = jinja2.Environment().from_string(QWEN_CHAT_TEMPLATE)
    for row in ds:
        text = template.render(messages=row["prompt"], add_generation_prompt=True)
        assert text.startswith("<|im_start|>system\n") and text.endswith("<|im_start|>assistant\n")
        assert row["reward_model"]["ground_truth"]
        assert row["extra_info"]["turn_index"] >= 1


def test_verify_passes_on_a_clean_build_and_catches_planted_violations(built, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out, m = built
    cfg = PoolsConfig.from_dict(m["config"])
    assert verify_pools(out, cfg) == []
    bad = tmp_path / "bad"
    shutil.copytree(out, bad)
    rl_part = sorted((bad / "rl").glob("part-*.parquet"))[0]
    sft_part = sorted((bad / "sft").glob("part-*.parquet"))[0]
    rl_table = pq.read_table(rl_part)
    sft_row = pq.read_table(sft_part).slice(0, 1).to_pylist()[0]
    planted = rl_table.slice(0, 1).to_pylist()[0]
    twin = {**planted, "sample_id": planted["sample_id"] + ":again", "turn_index": 1, "template_version": 3}
    leak = {
        **planted,
        "sample_id": "rl:" + sft_row["trajectory_id"],
        "trajectory_id": sft_row["trajectory_id"],
        "source_id": sft_row["source_id"],
        "dedup_cluster": sft_row["dedup_cluster"],
    }
    pq.write_table(
        pa.concat_tables([rl_table, pa.Table.from_pylist([twin, leak], schema=rl_table.schema)]), rl_part
    )
    removed = [r for f in (bad / "removed").glob("*.parquet") for r in pq.read_table(f).to_pylist()]
    contaminated = next(r["record_id"] for r in removed if r["stage"] == "decontamination")
    a_part = sorted((bad / "assignments").glob("part-*.parquet"))[0]
    a_table = pq.read_table(a_part)
    extra = {
        **a_table.slice(0, 1).to_pylist()[0],
        "trajectory_id": contaminated,
        "pool": "cpt",
        "source_id": "infra-run-b",
        "dedup_cluster": contaminated,
        "signature": [1] * 128,
    }
    pq.write_table(pa.concat_tables([a_table, pa.Table.from_pylist([extra], schema=a_table.schema)]), a_part)
    checks = {v.check for v in verify_pools(bad, cfg)}
    assert {
        "checksum",
        "rl_one_turn",
        "template_version",
        "disjoint_trajectory_id",
        "disjoint_source_id",
        "disjoint_dedup_cluster",
        "lineage",
        "eval_overlap",
    } <= checks

    from worldline.cli import app

    result = CliRunner().invoke(app, ["pools", "verify", str(bad), "--no-recount-tokens"])
    assert result.exit_code == 1 and "rl_one_turn" in result.output
    result = CliRunner().invoke(app, ["pools", "verify", str(out)])
    assert result.exit_code == 0, result.output


def test_cli_build_and_summary(tmp_path: Path) -> None:
    from worldline.cli import app

    fx = build_fixture(tmp_path)
    result = CliRunner().invoke(
        app,
        [
            "pools",
            "build",
            "--config",
            "pipelines/configs/pools.yaml",
            "--in",
            str(tmp_path / "shards"),
            "--out",
            str(tmp_path / "out"),
            "--knowledge",
            str(fx["knowledge"]),
            "--eval",
            str(fx["eval"]),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "reconciles" in result.output
    result = CliRunner().invoke(app, ["pools", "summary", str(tmp_path / "out")])
    assert result.exit_code == 0 and "cpt" in result.output


@pytest.mark.slow
def test_multi_process_runner_builds_identical_pools(built, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out, m = built
    other = tmp_path / "mp"
    m2 = build(
        tmp_path / "in", other, ["--direct_num_workers", "2", "--direct_running_mode", "multi_processing"]
    )
    assert m2["stats"] == m["stats"]
    for name in ("cpt", "sft", "rl", "eval", "assignments", "removed"):
        a = [pq.read_table(f) for f in sorted((out / name).glob("part-*.parquet"))]
        b = [pq.read_table(f) for f in sorted((other / name).glob("part-*.parquet"))]
        assert len(a) == len(b), name
        for x, y in zip(a, b, strict=True):
            if name == "removed":  # input paths differ between the two temp folders
                x, y = x.drop_columns(["input_file"]), y.drop_columns(["input_file"])
            assert x.equals(y), name


def test_rule_verifier_only_for_deterministic_content() -> None:
    from pipelines.render import rule_verifier
    from schemas.trajectory import SourceKind
    from tests.helpers.pools_data import terminal, web

    t = terminal("v", "g", SourceKind.INHOUSE, 1)
    assert rule_verifier(t, 1) == "exact_match"  # `cat FILE`
    t.turns[0].observation.text += " at 12:30:01"
    assert rule_verifier(t, 1) == "none"  # runtime metadata: judged for plausibility only
    assert rule_verifier(web("w", "g", SourceKind.INHOUSE, 2), 1) == "none"


@given(
    st.lists(st.lists(st.integers(1, 700), min_size=1, max_size=4), min_size=1, max_size=4),
    st.integers(1, 300),
)
def test_read_splits_cover_every_row_once(files: list[list[int]], split_rows: int) -> None:
    from pipelines.build import plan_splits

    splits = plan_splits([(f"f{i}", groups) for i, groups in enumerate(files)], split_rows)
    assert [s.index for s in splits] == list(range(len(splits)))
    assert all(0 < s.length <= split_rows for s in splits)
    for i, groups in enumerate(files):
        for rg, n in enumerate(groups):
            ranges = sorted((s.offset, s.length) for s in splits if s.path == f"f{i}" and s.row_group == rg)
            covered = [r for off, length in ranges for r in range(off, off + length)]
            assert covered == list(range(n))


def test_intermediate_files_are_removed_and_exports_mirror_parts(built) -> None:  # type: ignore[no-untyped-def]
    out, m = built
    assert not (out / "_build" / "kept").exists() and not (out / "_build" / "runs").exists()
    for pool, folder in (("rl", "verl"), ("sft", "sft_messages"), ("cpt", "cpt_text")):
        parts = sorted((out / pool).glob("part-*.parquet"))
        assert len(m["exports"][folder]) == len(parts) > 0
        rows_in_exports = sum(
            pq.read_metadata(out / f).num_rows
            if f.endswith(".parquet")
            else len((out / f).read_text().splitlines())
            for f in m["exports"][folder]
        )
        assert rows_in_exports == sum(pq.read_metadata(p).num_rows for p in parts)


def test_records_sharing_an_id_leave_one_row_and_the_rest_are_quarantined(tmp_path: Path) -> None:
    """Two inputs holding the same id: identical copies collapse into one row; different content under
    one id keeps exactly one of them (the same one in every build) and quarantines the other as
    `duplicate_id`; counts reconcile."""
    from schemas.shards import write_trajectories
    from schemas.trajectory import SourceKind
    from tests.helpers.pools_data import terminal

    first = [
        terminal(t, f"g-{t}", SourceKind.INHOUSE, seed) for t, seed in (("same", 1), ("diff", 2), ("solo", 3))
    ]
    second = [
        terminal("same", "g-same", SourceKind.INHOUSE, 1),
        terminal("diff", "g-diff", SourceKind.INHOUSE, 5),
    ]
    write_trajectories(tmp_path / "a", first)
    write_trajectories(tmp_path / "b", second)
    cfg = PoolsConfig()
    inputs = resolve_inputs([str(tmp_path / "a"), str(tmp_path / "b")], [], [], cfg)
    survivors = []
    for run in ("one", "two"):
        out = tmp_path / run
        run_build(inputs, str(out), cfg, [])
        assignments = pq.read_table(out / "assignments").column("trajectory_id").to_pylist()
        assert sorted(assignments) == ["diff", "same", "solo"]
        removed = pq.read_table(out / "removed").to_pylist()
        assert [(r["record_id"], r["reason"]) for r in removed] == [("diff", "duplicate_id")]
        stats = json.loads((out / "_build" / "stats.json").read_text())
        assert stats["records_in"] == 5 and stats["dropped.duplicate_id"] == 1
        rows = [
            r for p in ("cpt", "sft", "rl") if (out / p).exists() for r in pq.read_table(out / p).to_pylist()
        ]
        texts = {json.dumps(r.get("messages") or r.get("text")) for r in rows if r["trajectory_id"] == "diff"}
        kept = [seed for seed in (2, 5) if any(f"notes{seed}_0.txt" in t for t in texts)]
        assert len(kept) == 1, "exactly one of the two records called `diff` is rendered"
        survivors.append(kept[0])
    assert survivors[0] == survivors[1]
