"""Decontamination by containment: evaluation text inside longer training text, against --eval sets,
knowledge corpora and the build's own eval pool."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.build import resolve_inputs, run_build
from pipelines.config import PoolsConfig
from pipelines.finalize import finalize
from pipelines.minhash import normalise
from pipelines.ngrams import ContainmentIndex, ngram_hashes, text_grams
from pipelines.stages.decontaminate import EvalTurnMatcher, turn_texts
from schemas.shards import write_trajectories
from schemas.trajectory import SourceKind
from tests.helpers.pools_data import prose, terminal

CONFIG = {"assignment": {"by_kind": {"infra": "cpt", "public": "cpt", "knowledge": "cpt", "inhouse": "eval"}}}
EVAL_TASK = (
    "Find the quarterly invoice totals for the northern region and write them into a summary file for finance"
)


def test_containment_finds_a_short_text_inside_a_long_one_where_jaccard_does_not() -> None:
    cfg = PoolsConfig()
    inner = normalise(prose(1, 40))
    outer = normalise(f"{prose(2, 300)} {prose(1, 40)} {prose(3, 300)}")
    index = ContainmentIndex.of(0.5, [("e#1", ngram_hashes(inner, 13, 8).tolist())])
    assert index.contained_in(text_grams(outer, 13, 0)) == "e#1"
    from pipelines.minhash import signatures

    sig = signatures([inner], num_perm=128, seed=1, width=3)[0]
    assert EvalTurnMatcher(cfg, [("e", 1, sig)]).match([outer]) == ""  # Jaccard alone misses it
    assert index.contained_in(text_grams(normalise(prose(4, 400)), 13, 0)) == ""


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(13, 80), st.integers(0, 200), st.integers(0, 200))
def test_any_inserted_evaluation_text_is_found(seed: int, words: int, before: int, after: int) -> None:
    inner = prose(seed, words)
    outer = normalise(" ".join(filter(None, [prose(seed + 1, before), inner, prose(seed + 2, after)])))
    index = ContainmentIndex.of(0.5, [("k", ngram_hashes(normalise(inner), 13, 8).tolist())])
    assert index.contained_in(text_grams(outer, 13, 0)) == "k"


def test_partial_overlap_below_the_threshold_is_not_contamination() -> None:
    inner = prose(5, 100).split()
    half_less = " ".join(inner[:35]) + " " + prose(6, 300)  # ~23 of 88 13-grams of the eval text
    index = ContainmentIndex.of(0.5, [("k", ngram_hashes(normalise(" ".join(inner)), 13, 8).tolist())])
    assert index.contained_in(text_grams(normalise(half_less), 13, 0)) == ""
    short = ContainmentIndex.of(0.5, [("s", ngram_hashes("only five words in here", 13, 8).tolist())])
    assert len(short) == 0  # too short to be evidence


def test_build_removes_contained_eval_turns_tasks_documents_and_eval_pool_text(tmp_path: Path) -> None:
    eval_obs = prose(21, 60)
    pool_eval = terminal("pool-eval", "heldout", SourceKind.INHOUSE, 11)
    pool_eval.turns[1].observation.text = prose(11, 60)
    leak_pool = terminal("leak-pool", "infra-a", SourceKind.INFRA, 12)
    leak_pool.turns[
        0
    ].observation.text = f"{prose(12, 80)}\n{pool_eval.turns[1].observation.text}\n{prose(13, 80)}"
    leak_eval = terminal("leak-eval", "infra-b", SourceKind.INFRA, 14)
    leak_eval.turns[2].observation.text = f"{prose(14, 200)}\n{eval_obs}\n{prose(15, 200)}"
    leak_task = terminal("leak-task", "infra-c", SourceKind.INFRA, 16)
    leak_task.task = f"Context for the agent. {EVAL_TASK}. Then report back."
    clean = terminal("clean", "infra-d", SourceKind.INFRA, 17)
    write_trajectories(tmp_path / "in", [pool_eval, leak_pool, leak_eval, leak_task, clean])
    sample = {
        "task": "terminal",
        "id": 7,
        "turn_idx": 1,
        "total_turns": 1,
        "system_str": EVAL_TASK,
        "prompt": [
            '### Turn 1\n**Action:**\n```json\n[{"keystrokes": "cat report.txt\\n", "duration": 1.0}]\n```'
        ],
        "response": [f"**Environment Observation:**\n{eval_obs}"],
        "current_prompt": '### Turn 1\n**Action:**\n```json\n[{"keystrokes": "cat report.txt\\n", "duration": 1.0}]\n```',
    }
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval" / "terminal_test.jsonl").write_text(json.dumps(sample) + "\n")
    docs = [{"text": f"{prose(30, 100)} {eval_obs} {prose(31, 100)}"}, {"text": prose(32, 100)}]
    (tmp_path / "kb.jsonl").write_text("\n".join(json.dumps(d) for d in docs) + "\n")
    cfg = PoolsConfig.from_dict(CONFIG)
    ins, know, ev = [str(tmp_path / "in")], [str(tmp_path / "kb.jsonl")], [str(tmp_path / "eval")]
    # Jaccard alone would keep the leaking turn: the evaluation turn is a small part of it.
    matcher = EvalTurnMatcher(cfg, resolve_inputs(ins, know, ev, cfg).eval_turns)
    assert matcher.match(turn_texts(leak_eval)) == ""
    run_build(resolve_inputs(ins, know, ev, cfg), str(tmp_path / "out"), cfg, [])
    manifest = finalize(tmp_path / "out", cfg, ins, know, ev)
    removed = {
        r["record_id"]: r
        for f in (tmp_path / "out" / "removed").glob("*.parquet")
        for r in pq.read_table(f).to_pylist()
    }
    assert (
        removed["leak-pool"]["reason"] == "eval_pool_overlap"
        and "pool-eval" in removed["leak-pool"]["detail"]
    )
    assert (
        removed["leak-eval"]["reason"] == "eval_overlap"
        and "contains its turn 1" in removed["leak-eval"]["detail"]
    )
    assert (
        removed["leak-task"]["reason"] == "eval_overlap"
        and "contains its task" in removed["leak-task"]["detail"]
    )
    knowledge = [r for r in removed.values() if r["record_id"].startswith("kn")]
    assert len(knowledge) == 1 and knowledge[0]["reason"] == "eval_overlap"
    pooled = {
        r["trajectory_id"]: r["pool"]
        for f in (tmp_path / "out" / "assignments").glob("*.parquet")
        for r in pq.read_table(f).to_pylist()
    }
    assert pooled.get("clean") == "cpt" and pooled.get("pool-eval") == "eval"
    assert manifest["counts"]["reconciles"]
    assert (
        manifest["stats"]["dropped.eval_pool_overlap"] == 1 and manifest["stats"]["dropped.eval_overlap"] == 3
    )
