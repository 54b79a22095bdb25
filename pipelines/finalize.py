"""After the Beam job: per-pool manifests and dataset cards, trainer exports, and OUT/manifest.json.

Trainer formats are rendered here from the pool Parquet rows, part by part (bounded memory):
verl (RL and SFT parquet), chat-message JSONL (LLaMA-Factory / OpenRLHF SFT), CPT text JSONL with
loss spans, and AgentWorldBench JSONL for the eval pool.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.build import ASSIGNMENTS, REMOVED, WORK_DIR
from pipelines.config import ALL_POOLS, EVAL_POOL, PoolsConfig
from schemas.shards import atomic_write_bytes, atomic_write_json, read_manifest, sha256_file
from schemas.trajectory import SCHEMA_VERSION, Trajectory
from worldline.agentworldbench import export_agentworldbench

VERL_SCHEMA = pa.schema(
    [
        pa.field("data_source", pa.string(), False),
        pa.field(
            "prompt",
            pa.list_(
                pa.field(
                    "item",
                    pa.struct(
                        [pa.field("role", pa.string(), False), pa.field("content", pa.string(), False)]
                    ),
                    nullable=False,
                )
            ),
            False,
        ),
        pa.field("ability", pa.string(), False),
        pa.field(
            "reward_model",
            pa.struct([pa.field("style", pa.string(), False), pa.field("ground_truth", pa.string(), False)]),
            False,
        ),
        pa.field(
            "extra_info",
            pa.struct(
                [
                    pa.field("trajectory_id", pa.string(), False),
                    pa.field("source_id", pa.string(), False),
                    pa.field("domain", pa.string(), False),
                    pa.field("turn_index", pa.int32(), False),
                    pa.field("template_version", pa.int32(), False),
                    pa.field("verifier", pa.string(), False),
                    pa.field("reward_spec", pa.string(), False),
                    pa.field("index", pa.int64(), False),
                ]
            ),
            False,
        ),
    ]
)


def pool_parts(out: Path, name: str) -> list[Path]:
    folder = out / name
    return sorted(f for f in folder.glob("part-*.parquet")) if folder.is_dir() else []


def _file_entry(out: Path, f: Path) -> dict[str, Any]:
    return {
        "path": str(f.relative_to(out)),
        "rows": pq.read_metadata(f).num_rows,
        "bytes": f.stat().st_size,
        "sha256": sha256_file(f),
    }


def _token_stats(values: list[int]) -> dict[str, float]:
    if not values:
        return {"count": 0}
    s = sorted(values)
    return {
        "count": len(s),
        "sum": sum(s),
        "mean": round(sum(s) / len(s), 1),
        "min": s[0],
        "p50": s[len(s) // 2],
        "p95": s[min(len(s) - 1, int(len(s) * 0.95))],
        "max": s[-1],
    }


def pool_summary(out: Path, pool: str) -> dict[str, Any]:
    """Counts per domain and token statistics of one pool, read from its parts."""
    per_domain: Counter[str] = Counter()
    trajectories: set[str] = set()
    tokens: list[int] = []
    column = {"cpt": "tokens", "sft": "tokens", "rl": "prompt_tokens"}.get(pool)
    for f in pool_parts(out, pool):
        cols = ["domain", "trajectory_id"] + ([column] if column else [])
        if pool == EVAL_POOL:
            cols = ["domain", "id"]
        t = pq.read_table(f, columns=cols)
        per_domain.update(t.column("domain").to_pylist())
        trajectories.update(t.column(cols[1]).to_pylist())
        if column:
            tokens.extend(t.column(column).to_pylist())
    return {
        "samples": sum(per_domain.values()),
        "trajectories": len(trajectories),
        "samples_per_domain": dict(sorted(per_domain.items())),
        "tokens": _token_stats(tokens),
    }


def write_card(
    out: Path,
    pool: str,
    summary: dict[str, Any],
    stats: dict[str, int],
    cfg: PoolsConfig,
    lineage: list[dict[str, Any]],
) -> None:
    filters = {k: v for k, v in stats.items() if k.startswith(("dropped.", "turns_removed.", "quarantined."))}
    card = {
        "pool": pool,
        **summary,
        "filters_removed": filters,
        "config_fingerprint": cfg.fingerprint(),
        "config": cfg.to_json(),
        "inputs": lineage,
    }
    atomic_write_json(out / pool / "card.json", card)
    lines = [
        f"# {pool.upper()} pool",
        "",
        f"{summary['samples']} samples from {summary['trajectories']} trajectories/documents.",
        "",
        "| domain | samples |",
        "|---|---|",
    ]
    lines += [f"| {d} | {n} |" for d, n in summary["samples_per_domain"].items()]
    tok = summary["tokens"]
    if tok.get("count"):
        lines += ["", f"Tokens: mean {tok['mean']}, p50 {tok['p50']}, p95 {tok['p95']}, max {tok['max']}."]
    lines += ["", "## Removed before pooling (whole build)", "", "| rule | count |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in sorted(filters.items())]
    lines += ["", f"Config fingerprint `{cfg.fingerprint()}`; inputs and their manifests in card.json.", ""]
    atomic_write_bytes(out / pool / "README.md", "\n".join(lines).encode())


def export_verl(out: Path) -> list[str]:
    """RL rows as verl's RLHF dataset parquet: data_source, prompt, ability, reward_model, extra_info."""
    written = []
    for f in pool_parts(out, "rl"):
        rows = []
        for i, r in enumerate(pq.read_table(f).to_pylist()):
            rows.append(
                {
                    "data_source": f"worldline/{r['domain']}",
                    "prompt": r["messages"],
                    "ability": f"world_model/{r['domain']}",
                    "reward_model": {
                        "style": "rule" if r["verifier"] != "none" else "model",
                        "ground_truth": r["ground_truth"],
                    },
                    "extra_info": {
                        "trajectory_id": r["trajectory_id"],
                        "source_id": r["source_id"],
                        "domain": r["domain"],
                        "turn_index": r["turn_index"],
                        "template_version": r["template_version"],
                        "verifier": r["verifier"],
                        "reward_spec": r["reward_spec"],
                        "index": i,
                    },
                }
            )
        target = out / "exports" / "verl" / f"rl-{f.stem}.parquet"
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.tmp")
        pq.write_table(pa.Table.from_pylist(rows, schema=VERL_SCHEMA), tmp, compression="zstd")
        tmp.replace(target)
        written.append(str(target.relative_to(out)))
    return written


def _jsonl_export(out: Path, pool: str, folder: str, render: Any) -> list[str]:
    written = []
    for f in pool_parts(out, pool):
        lines = [json.dumps(render(r), ensure_ascii=False) for r in pq.read_table(f).to_pylist()]
        target = out / "exports" / folder / f"{f.stem}.jsonl"
        atomic_write_bytes(target, ("\n".join(lines) + ("\n" if lines else "")).encode())
        written.append(str(target.relative_to(out)))
    return written


def export_chat(out: Path) -> list[str]:
    """SFT rows as chat-message JSONL (LLaMA-Factory `sharegpt`-style with OpenAI roles, OpenRLHF)."""
    return _jsonl_export(
        out,
        "sft",
        "sft_messages",
        lambda r: {
            "messages": r["messages"],
            "trajectory_id": r["trajectory_id"],
            "turn_index": r["turn_index"],
            "template_version": r["template_version"],
            "domain": r["domain"],
        },
    )


def export_cpt_text(out: Path) -> list[str]:
    """CPT rows as text with loss spans [start, end, share] (character offsets)."""
    return _jsonl_export(
        out,
        "cpt",
        "cpt_text",
        lambda r: {
            "text": r["text"],
            "loss_spans": [[s["start"], s["end"], s["share"]] for s in r["loss_spans"]],
            "trajectory_id": r["trajectory_id"],
            "domain": r["domain"],
        },
    )


def export_eval(out: Path, cfg: PoolsConfig) -> list[str]:
    trajs = [
        Trajectory.from_record(r) for f in pool_parts(out, EVAL_POOL) for r in pq.read_table(f).to_pylist()
    ]
    report = export_agentworldbench(
        trajs, out / "exports" / "agentworldbench", turns="paper", seed=cfg.eval_export.seed
    )
    return sorted(str(Path(p).relative_to(out)) for p in report.files.values())


def finalize(
    out: Path, cfg: PoolsConfig, inputs: list[str], knowledge: list[str], evals: list[str]
) -> dict[str, Any]:
    """Write per-pool manifests and cards, exports and OUT/manifest.json; return the top manifest."""
    stats = (
        json.loads((out / WORK_DIR / "stats.json").read_text("utf-8"))
        if (out / WORK_DIR / "stats.json").exists()
        else {}
    )
    lineage = []
    for item in inputs:
        m = read_manifest(item) if Path(item).is_dir() else None
        mpath = Path(item) / "manifest.json"
        lineage.append(
            {
                "path": str(Path(item).resolve()),
                "rows": m.rows if m else None,
                "manifest_sha256": sha256_file(mpath) if mpath.exists() else None,
            }
        )
    pools: dict[str, Any] = {}
    for pool in ALL_POOLS:
        (out / pool).mkdir(parents=True, exist_ok=True)
        files = [_file_entry(out, f) for f in pool_parts(out, pool)]
        summary = pool_summary(out, pool)
        atomic_write_json(
            out / pool / "manifest.json",
            {"kind": f"worldline.pool.{pool}", "files": files, "rows": sum(f["rows"] for f in files)},
        )
        write_card(out, pool, summary, stats, cfg, lineage)
        pools[pool] = {**summary, "files": files}
    exports = {
        "verl": export_verl(out),
        "sft_messages": export_chat(out),
        "cpt_text": export_cpt_text(out),
        "agentworldbench": export_eval(out, cfg),
    }
    removed_reasons: Counter[str] = Counter()
    for f in pool_parts(out, REMOVED):
        removed_reasons.update(pq.read_table(f, columns=["reason"]).column("reason").to_pylist())
    pooled = sum(v for k, v in stats.items() if k.startswith("pooled."))
    removed_total = sum(v for k, v in stats.items() if k.startswith(("dropped.", "quarantined.")))
    records_in = stats.get("records_in", 0) + stats.get("knowledge_in", 0)
    manifest = {
        "kind": "worldline.pools",
        "schema_version": SCHEMA_VERSION,
        "config_fingerprint": cfg.fingerprint(),
        "config": cfg.to_json(),
        "inputs": lineage,
        "knowledge": knowledge,
        "evaluation_sets": evals,
        "counts": {
            "records_in": records_in,
            "pooled": pooled,
            "removed": removed_total,
            "reconciles": records_in == pooled + removed_total,
        },
        "stats": stats,
        "pools": pools,
        "assignments": [_file_entry(out, f) for f in pool_parts(out, ASSIGNMENTS)],
        "removed": [_file_entry(out, f) for f in pool_parts(out, REMOVED)],
        "exports": exports,
        "per_pool_rules": {
            "rl_max_prompt_tokens": cfg.rl.max_prompt_tokens,
            "sft_max_tokens": cfg.sft.max_tokens,
            "rl_template_version": cfg.rl.template_version,
            "cpt_template_version": cfg.cpt.template_version,
            "sft_template_versions": cfg.sft.template_versions,
        },
    }
    atomic_write_json(out / "manifest.json", manifest)
    return manifest
