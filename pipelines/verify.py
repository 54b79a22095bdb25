"""`pools verify`: prove what the build promises, from the written files alone.

Checks: part checksums; pools disjoint in trajectory ids, source groups and near-duplicate clusters;
no two pooled records near-duplicates of each other (re-computed from stored MinHash signatures, not
from recorded cluster labels); no pooled trajectory near-duplicating an evaluation turn (re-computed
from the input shards); and the per-pool rules (one turn per trajectory in RL, token caps recounted,
template versions). Every violation names the rows that break it.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from pipelines.build import ASSIGNMENTS, REMOVED, WORK_DIR, EvalTurnMatcher, turn_texts
from pipelines.config import ALL_POOLS, EVAL_POOL, PoolsConfig
from pipelines.filters import apply_filters, validate_record
from pipelines.minhash import NearDuplicateIndex
from schemas.shards import iter_record_batches, sha256_file
from worldline.chat_template import count_chat_tokens


@dataclass(slots=True)
class Violation:
    check: str
    detail: str
    rows: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"check": self.check, "detail": self.detail, "rows": self.rows[:50], "count": len(self.rows)}


def _parts(out: Path, name: str) -> list[Path]:
    return sorted((out / name).glob("part-*.parquet")) if (out / name).is_dir() else []


def _rows(out: Path, name: str, columns: list[str] | None = None) -> list[dict[str, Any]]:
    return [r for f in _parts(out, name) for r in pq.read_table(f, columns=columns).to_pylist()]


def verify_pools(
    out: Path, cfg: PoolsConfig, *, recount_tokens: bool = True, check_inputs: bool = True
) -> list[Violation]:
    """All violations found in OUT (empty list: the pools are proven disjoint and rule-abiding)."""
    violations: list[Violation] = []
    manifest_path = out / "manifest.json"
    if not manifest_path.exists():
        return [Violation("manifest", f"{manifest_path} is missing; run `worldline pools build` first", [])]
    manifest = json.loads(manifest_path.read_text("utf-8"))

    # 1. Checksums: the files are the ones the build wrote.
    for pool, info in manifest["pools"].items():
        for f in info["files"]:
            path = out / f["path"]
            if not path.exists() or sha256_file(path) != f["sha256"]:
                violations.append(
                    Violation("checksum", f"{pool}: part changed or missing since the build", [f["path"]])
                )
        listed = {f["path"] for f in info["files"]}
        extra = [str(p.relative_to(out)) for p in _parts(out, pool) if str(p.relative_to(out)) not in listed]
        if extra:
            violations.append(Violation("checksum", f"{pool}: parts not in the manifest", extra))

    assignments = _rows(out, ASSIGNMENTS)
    assigned_pool = {a["trajectory_id"]: a["pool"] for a in assignments}

    # 2. Disjointness of ids, source groups and clusters, over pool rows and assignments alike.
    owners: dict[str, dict[str, set[str]]] = {
        k: defaultdict(set) for k in ("trajectory_id", "source_id", "dedup_cluster")
    }
    for a in assignments:
        for key in owners:
            owners[key][a[key]].add(a["pool"])
    for pool in ALL_POOLS:
        if pool == EVAL_POOL:
            for r in _rows(out, pool, ["id", "source"]):
                owners["trajectory_id"][r["id"]].add(pool)
                owners["source_id"][r["source"]["group"] or r["source"]["name"]].add(pool)
            continue
        for r in _rows(out, pool, ["trajectory_id", "source_id", "dedup_cluster"]):
            for key in owners:
                owners[key][r[key]].add(pool)
            if assigned_pool.get(r["trajectory_id"]) != pool:
                violations.append(
                    Violation(
                        "lineage",
                        f"{pool} row of {r['trajectory_id']} is assigned to "
                        f"{assigned_pool.get(r['trajectory_id'])}",
                        [r["trajectory_id"]],
                    )
                )
    for key, table in owners.items():
        shared = sorted(k for k, pools in table.items() if len(pools) > 1)
        if shared:
            violations.append(
                Violation(f"disjoint_{key}", f"{len(shared)} {key} value(s) in more than one pool", shared)
            )

    # 3. Near duplicates re-computed from signatures (independent of the recorded cluster labels).
    index = NearDuplicateIndex(cfg.dedup.threshold, cfg.dedup.num_perm)
    pairs = []
    for a in sorted(assignments, key=lambda a: a["trajectory_id"]):
        for other in index.query(a["signature"]):
            if other != a["trajectory_id"]:
                pairs.append(f"{other}~{a['trajectory_id']}")
        index.add(a["trajectory_id"], a["signature"])
    if pairs:
        violations.append(
            Violation("near_duplicates", "pooled records that near-duplicate each other", pairs)
        )

    # 4. Evaluation overlap: re-fingerprint pooled trajectories from the inputs against eval turns.
    removed_eval = {
        r["record_id"] for r in _rows(out, REMOVED, ["record_id", "stage"]) if r["stage"] == "decontamination"
    }
    leaked = sorted(removed_eval & set(assigned_pool))
    if leaked:
        violations.append(
            Violation("eval_overlap", "trajectories removed for eval overlap are pooled", leaked)
        )
    eval_file = out / WORK_DIR / "eval_turns.parquet"
    if check_inputs and eval_file.exists():
        eval_turns = [
            (r["eval_id"], r["turn_index"], r["signature"]) for r in pq.read_table(eval_file).to_pylist()
        ]
        if eval_turns:
            matcher = EvalTurnMatcher(cfg, eval_turns)
            hits = []
            for item in manifest.get("inputs", []):
                for _, batch in iter_record_batches(item["path"]):
                    for rec in batch.to_pylist():
                        if rec.get("id") not in assigned_pool:
                            continue
                        traj, _, _ = validate_record(rec)
                        outcome = apply_filters(traj, cfg.filters) if traj else None
                        if outcome and outcome.trajectory:
                            found = matcher.match(turn_texts(outcome.trajectory))
                            if found:
                                hits.append(f"{rec['id']}~{found}")
            if hits:
                violations.append(
                    Violation("eval_overlap", "pooled trajectories near-duplicate evaluation turns", hits)
                )

    # 5. Per-pool rules.
    rl = _rows(out, "rl")
    per_traj: dict[str, int] = defaultdict(int)
    for r in rl:
        per_traj[r["trajectory_id"]] += 1
    multi = sorted(t for t, n in per_traj.items() if n > 1)
    if multi:
        violations.append(Violation("rl_one_turn", "RL trajectories with more than one row", multi))
    bad_v = [r["sample_id"] for r in rl if r["template_version"] != cfg.rl.template_version]
    if bad_v:
        violations.append(Violation("template_version", f"RL rows not on v{cfg.rl.template_version}", bad_v))
    sft = _rows(out, "sft")
    bad_v = [r["sample_id"] for r in sft if r["template_version"] not in cfg.sft.template_versions]
    if bad_v:
        violations.append(Violation("template_version", "SFT rows outside sft.template_versions", bad_v))
    cpt = _rows(out, "cpt", ["sample_id", "template_version", "is_knowledge"])
    bad_v = [
        r["sample_id"]
        for r in cpt
        if r["template_version"] != (-1 if r["is_knowledge"] else cfg.cpt.template_version)
    ]
    if bad_v:
        violations.append(
            Violation("template_version", f"CPT rows not on v{cfg.cpt.template_version}", bad_v)
        )
    counter = None
    if recount_tokens:
        from worldline.tokenizer import get_token_counter

        counter = get_token_counter(cfg.tokenizer)
    over = []
    for r in rl:
        n = (
            count_chat_tokens(counter, r["messages"], add_generation_prompt=True)
            if counter
            else r["prompt_tokens"]
        )
        if n > cfg.rl.max_prompt_tokens or n != r["prompt_tokens"]:
            over.append(f"{r['sample_id']} ({n} tokens, recorded {r['prompt_tokens']})")
    if over:
        violations.append(
            Violation("rl_token_cap", f"RL prompts over {cfg.rl.max_prompt_tokens} or miscounted", over)
        )
    over = []
    for r in sft:
        n = count_chat_tokens(counter, r["messages"]) if counter else r["tokens"]
        if n > cfg.sft.max_tokens or n != r["tokens"]:
            over.append(f"{r['sample_id']} ({n} tokens)")
    if over:
        violations.append(Violation("sft_token_cap", f"SFT samples over {cfg.sft.max_tokens} tokens", over))
    return violations
