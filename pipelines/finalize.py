"""After the Beam job: per-pool manifests and dataset cards, trainer exports, and OUT/manifest.json.

Trainer formats are rendered from the pool Parquet rows, part by part (bounded memory): verl RL
parquet, chat-message JSONL (LLaMA-Factory / OpenRLHF SFT) and CPT text JSONL with loss spans are
written by the Beam job next to each part (pipelines.exports); AgentWorldBench JSONL for the eval
pool is streamed here.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from pipelines import fs
from pipelines.build import ASSIGNMENTS, REMOVED, WORK_DIR
from pipelines.config import ALL_POOLS, EVAL_POOL, PoolsConfig
from pipelines.exports import export_path
from pipelines.publish import input_digest
from pipelines.span_shares import ShareCount, build_shares, share_lines, shares_json
from pipelines.trainer_configs import write_trainer_configs
from schemas.agentworldbench import export_agentworldbench
from schemas.atomic import atomic_open
from schemas.grounding import VERDICTS
from schemas.shards import Manifest
from schemas.trajectory import SCHEMA_VERSION, Trajectory


def pool_parts(out: str | os.PathLike[str], name: str) -> list[str]:
    """The part files of one table of OUT (local or any Beam filesystem), in name order."""
    return fs.list_files(fs.join(os.fspath(out), name), "part-*.parquet", recursive=False)


def read_parquet(path: str, columns: list[str] | None = None) -> Any:
    with fs.open_read(path) as fh:
        return pq.read_table(fh, columns=columns)


def _file_entry(out: str, f: str) -> dict[str, Any]:
    with fs.open_read(f) as fh:
        rows = pq.ParquetFile(fh).metadata.num_rows
    return {"path": fs.relative(f, out), "rows": rows, "bytes": fs.size(f), "sha256": fs.sha256(f)}


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


def pool_summary(out: str | os.PathLike[str], pool: str) -> dict[str, Any]:
    """Counts per domain and token statistics of one pool, read from its parts."""
    per_domain: Counter[str] = Counter()
    licences: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    trajectories: set[str] = set()
    tokens: list[int] = []
    column = {"cpt": "tokens", "sft": "tokens", "rl": "prompt_tokens"}.get(pool)
    for f in pool_parts(out, pool):
        cols = ["domain", "trajectory_id", "licence", "source_kind"] + ([column] if column else [])
        if pool == EVAL_POOL:
            cols = ["domain", "id", "source"]
        t = read_parquet(f, cols)
        per_domain.update(t.column("domain").to_pylist())
        trajectories.update(t.column(cols[1]).to_pylist())
        if pool == EVAL_POOL:
            sources = t.column("source").to_pylist()
            licences.update(s["licence"] or "unknown" for s in sources)
            kinds.update(s["kind"] for s in sources)
        else:
            licences.update(x or "unknown" for x in t.column("licence").to_pylist())
            kinds.update(t.column("source_kind").to_pylist())
        if column:
            tokens.extend(t.column(column).to_pylist())
    return {
        "samples": sum(per_domain.values()),
        "trajectories": len(trajectories),
        "samples_per_domain": dict(sorted(per_domain.items())),
        "samples_per_licence": dict(sorted(licences.items())),
        "samples_per_source_kind": dict(sorted(kinds.items())),
        "tokens": _token_stats(tokens),
    }


def tokenizer_record(cfg: PoolsConfig) -> dict[str, Any]:
    """Which tokenizer and chat template the token counts and caps were computed with."""
    from worldline.chat_template import CHAT_TEMPLATE_NAME
    from worldline.tokenizer import get_token_counter

    return {
        "name": get_token_counter(cfg.tokenizer).name,
        "spec": cfg.tokenizer,
        "chat_template": CHAT_TEMPLATE_NAME,
        "counted": "SFT and RL: the conversation rendered with the chat template; CPT: the text",
    }


def write_card(
    out: str,
    pool: str,
    summary: dict[str, Any],
    stats: dict[str, int],
    cfg: PoolsConfig,
    lineage: list[dict[str, Any]],
    shares: Mapping[str, ShareCount] | None = None,
) -> None:
    """The pool's card.json and README.md. SHARES: its deterministic share per domain from replay
    span labels (pipelines/span_shares.py); None: "no labels"."""
    filters = {k: v for k, v in stats.items() if k.startswith(("dropped.", "turns_removed.", "quarantined."))}
    excluded = excluded_benchmarks(stats, cfg)
    card = {
        "pool": pool,
        **summary,
        "filters_removed": filters,
        "excluded_benchmarks": excluded,
        "grounding": grounding_counts(stats, cfg),
        "config_fingerprint": cfg.fingerprint(),
        "config": cfg.to_json(),
        "tokenizer": tokenizer_record(cfg),
        "inputs": lineage,
        "deterministic_share": shares_json(shares),
    }
    fs.write_json(fs.join(out, pool, "card.json"), card)
    lines = [
        f"# worldline {pool.upper()} pool",
        "",
        f"{summary['samples']} samples from {summary['trajectories']} trajectories/documents.",
        "",
        "| domain | samples |",
        "|---|---|",
    ]
    lines += [f"| {d} | {n} |" for d, n in summary["samples_per_domain"].items()]
    lines += ["", "| licence | samples |", "|---|---|"]
    lines += [f"| {k} | {n} |" for k, n in summary["samples_per_licence"].items()]
    lines += ["", "| source kind | samples |", "|---|---|"]
    lines += [f"| {k} | {n} |" for k, n in summary["samples_per_source_kind"].items()]
    lines += ["", "Every row carries its `licence` and `source_kind`; filter on them before training."]
    tok = summary["tokens"]
    if tok.get("count"):
        tk = tokenizer_record(cfg)
        lines += [
            "",
            f"Tokens: mean {tok['mean']}, p50 {tok['p50']}, p95 {tok['p95']}, max {tok['max']} "
            f"(tokenizer {tk['name']}, chat template {tk['chat_template']}).",
        ]
    lines += ["", "## Removed before pooling (whole build)", "", "| rule | count |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in sorted(filters.items())]
    lines += ["", "## Held-out benchmarks (source-level decontamination)", ""]
    if excluded:
        lines += [
            "Trajectories recorded on these benchmarks (by provenance or task text) were dropped:",
            "",
            "| benchmark | trajectories excluded |",
            "|---|---|",
        ]
        lines += [f"| {k} | {v} |" for k, v in excluded.items()]
    else:
        lines += ["None: no benchmark was excluded (decontamination.exclude_benchmarks is empty)."]
    lines += ["", "## Grounding (public traces replayed for real)", ""]
    grounding = grounding_counts(stats, cfg)
    if grounding is None:
        lines += ["No grounding table was given (`grounding:` in pools.yaml is unset)."]
    else:
        lines += [
            f"Verdicts of `{cfg.grounding}` (`worldline replay --ground`) over the whole build; "
            "`disagrees` trajectories were dropped (`ungrounded`):",
            "",
            "| verdict | trajectories |",
            "|---|---|",
        ]
        lines += [f"| {k} | {v} |" for k, v in grounding.items()]
    lines += ["", "## Deterministic content (replay span labels)", ""]
    lines += share_lines(pool, shares)
    lines += ["", f"Config fingerprint `{cfg.fingerprint()}`; inputs and their manifests in card.json.", ""]
    fs.write_bytes(fs.join(out, pool, "README.md"), str(hf_card(pool, summary, "\n".join(lines))).encode())


def excluded_benchmarks(stats: dict[str, int], cfg: PoolsConfig) -> dict[str, int]:
    """Trajectories dropped per excluded benchmark (every benchmark on the list, 0 included)."""
    return {n: stats.get(f"excluded_benchmark.{n}", 0) for n in cfg.decontamination.exclude_benchmarks}


def grounding_counts(stats: dict[str, int], cfg: PoolsConfig) -> dict[str, int] | None:
    """Input trajectories per grounding verdict (`unlisted`: not in the table); None without a table."""
    if not cfg.grounding:
        return None
    return {v: stats.get(f"grounding.{v}", 0) for v in (*VERDICTS, "unlisted")}


TASK_CATEGORIES = {"cpt": ["text-generation"], "sft": ["text-generation"], "rl": ["text-generation"]}


def card_licence(licences: dict[str, int]) -> str:
    """The card's `license` tag: the one licence every row shares (lowercased SPDX id), else "other"."""
    known = [k for k in licences if k != "unknown"]
    return known[0].lower() if len(known) == 1 and len(licences) == 1 else "other"


def hf_card(pool: str, summary: dict[str, Any], body: str) -> Any:
    """A Hugging Face dataset card (YAML front matter + the markdown body), so that
    `datasets.load_dataset("OUT/<pool>")` finds the parts as the train split."""
    from huggingface_hub import DatasetCard, DatasetCardData

    n = summary["samples"]
    size = "n<1K" if n < 1_000 else "1K<n<10K" if n < 10_000 else "10K<n<100K" if n < 100_000 else "100K<n<1M"
    data = DatasetCardData(
        license=card_licence(summary["samples_per_licence"]),
        task_categories=TASK_CATEGORIES.get(pool, ["text-generation"]),
        tags=["world-model", "agent-trajectories", "worldline", f"worldline-{pool}"],
        pretty_name=f"worldline {pool} pool",
        size_categories=[size],
        configs=[{"config_name": "default", "data_files": [{"split": "train", "path": "part-*.parquet"}]}],
    )
    return DatasetCard(f"---\n{data.to_yaml()}\n---\n\n{body}")


def exports_of(out: str, pool: str) -> list[str]:
    """The trainer exports the Beam job wrote next to each part of `pool` (see pipelines.exports)."""
    written = []
    for f in pool_parts(out, pool):
        target = export_path(out, pool, fs.split(f)[1].removesuffix(".parquet"))
        if target is not None and fs.is_file(target):
            written.append(fs.relative(target, out))
    return written


def _eval_trajectories(out: str) -> Any:
    # Streamed part by part, batch by batch: the eval pool is never held in memory as a whole.
    for f in pool_parts(out, EVAL_POOL):
        with fs.open_read(f) as fh:
            for batch in pq.ParquetFile(fh).iter_batches(batch_size=256):
                for r in batch.to_pylist():
                    yield Trajectory.from_record(r)


def export_eval(out: str, cfg: PoolsConfig) -> list[str]:
    """AgentWorldBench JSONL of the eval pool under OUT/exports/agentworldbench/ (written locally,
    then uploaded when OUT is on another filesystem)."""
    target = fs.join(out, "exports", "agentworldbench")
    local = target if not fs.is_url(out) else tempfile.mkdtemp(prefix="worldline-awb-")
    try:
        report = export_agentworldbench(
            _eval_trajectories(out), local, turns="paper", seed=cfg.eval_export.seed
        )
        written = []
        for p in sorted(report.files.values()):
            unify_id_types(Path(p))
            dest = fs.join(target, Path(p).name)
            if fs.is_url(out):
                fs.write_bytes(dest, Path(p).read_bytes())
            written.append(fs.relative(dest, out))
        return written
    finally:
        if local != target:
            shutil.rmtree(local, ignore_errors=True)


def unify_id_types(path: Path) -> None:
    """Make every `id` in an AgentWorldBench export one type: ints stay ints when all are ints,
    otherwise all become strings (mixed types break `datasets` and typed readers)."""
    kinds = set()
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            kinds.add(type(json.loads(line)["id"]).__name__)
    if len(kinds) < 2:
        return
    with open(path, encoding="utf-8") as src, atomic_open(path, "w") as dst:
        for line in src:
            sample = json.loads(line)
            sample["id"] = str(sample["id"])
            dst.write(json.dumps(sample, ensure_ascii=False) + "\n")


def finalize(
    out: str | os.PathLike[str], cfg: PoolsConfig, inputs: list[str], knowledge: list[str], evals: list[str]
) -> dict[str, Any]:
    """Write per-pool manifests and cards, exports and OUT/manifest.json (last); return the top
    manifest. OUT and the inputs may be local or on any Beam filesystem."""
    out = os.fspath(out)
    stats_path = fs.join(out, WORK_DIR, "stats.json")
    stats = fs.read_json(stats_path) if fs.is_file(stats_path) else {}
    lineage = []
    for item in inputs:
        mpath = fs.join(item, "manifest.json")
        has_manifest = not fs.is_file(item) and fs.is_file(mpath)
        m = Manifest.from_json(fs.read_json(mpath)) if has_manifest else None
        lineage.append(
            {
                "path": fs.absolute(item),
                "rows": m.rows if m else None,
                "manifest_sha256": fs.sha256(mpath) if has_manifest else None,
                "digest": input_digest(item),
            }
        )
    pools: dict[str, Any] = {}
    shares = build_shares(out, cfg, [fs.absolute(item) for item in inputs])
    for pool in ALL_POOLS:
        fs.mkdirs(fs.join(out, pool))
        parts = pool_parts(out, pool)
        files = [_file_entry(out, f) for f in parts]
        summary = pool_summary(out, pool)
        # The pool folder is a dataset of its own: its manifest lists parts relative to it (OUT's
        # manifest, below, lists the same parts relative to OUT).
        fs.write_json(
            fs.join(out, pool, "manifest.json"),
            {
                "kind": f"worldline.pool.{pool}",
                "schema_version": SCHEMA_VERSION,
                "files": [
                    {**e, "path": fs.relative(f, fs.join(out, pool))}
                    for e, f in zip(files, parts, strict=True)
                ],
                "rows": sum(f["rows"] for f in files),
            },
        )
        write_card(out, pool, summary, stats, cfg, lineage, None if shares is None else shares.get(pool, {}))
        pools[pool] = {**summary, "files": files}
    exports = {
        "verl": exports_of(out, "rl"),
        "sft_messages": exports_of(out, "sft"),
        "cpt_text": exports_of(out, "cpt"),
        "agentworldbench": export_eval(out, cfg),
    }
    configs = write_trainer_configs(out, pools, exports, pool_parts(out, "rl"), cfg.tokenizer)
    exports["llama_factory_dataset_info"] = configs["llama_factory"][:1]
    exports["llama_factory_configs"] = configs["llama_factory"][1:]
    exports["verl_config"] = configs["verl_config"]
    removed_reasons: Counter[str] = Counter()
    for f in pool_parts(out, REMOVED):
        removed_reasons.update(read_parquet(f, ["reason"]).column("reason").to_pylist())
    pooled = sum(v for k, v in stats.items() if k.startswith("pooled."))
    removed_total = sum(v for k, v in stats.items() if k.startswith(("dropped.", "quarantined.")))
    records_in = stats.get("records_in", 0) + stats.get("knowledge_in", 0)
    manifest = {
        "kind": "worldline.pools",
        "schema_version": SCHEMA_VERSION,
        "config_fingerprint": cfg.fingerprint(),
        "config": cfg.to_json(),
        "tokenizer": tokenizer_record(cfg),
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
    fs.write_json(fs.join(out, "manifest.json"), manifest)
    return manifest
