# Beam's FileSystems API carries no type annotations.
# mypy: disable-error-code="no-untyped-call"
"""Trainer formats rendered from pool rows, one pool part at a time (bounded memory, runs in the Beam job).

verl RL parquet (data_source, prompt, ability, reward_model, extra_info), chat-message JSONL for
LLaMA-Factory / OpenRLHF SFT, and CPT text JSONL with loss spans. Each export file mirrors one pool
part (`exports/verl/rl-part-00000-000.parquet` <- `rl/part-00000-000.parquet`), so exports are written by the
same worker that writes the part, from the rows it just sorted, and published atomically.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems

from pipelines import fs

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
                    pa.field("sample_id", pa.string(), False),
                    pa.field("source_kind", pa.string(), False),
                    pa.field("licence", pa.string(), True),
                    # The conversation without its system prompt: verl hands the reward function
                    # `extra_info`, not the prompt, and the judge needs the history and the action.
                    pa.field(
                        "messages",
                        pa.list_(
                            pa.struct(
                                [
                                    pa.field("role", pa.string(), False),
                                    pa.field("content", pa.string(), False),
                                ]
                            )
                        ),
                        False,
                    ),
                ]
            ),
            False,
        ),
    ]
)


PART_INDEX_STRIDE = 1_000_000_000
"""verl's `extra_info.index` = (bucket x 1000 + roll-over number) x stride + position in the part file:
unique across all part files."""


def verl_row(r: dict[str, Any], index: int) -> dict[str, Any]:
    """One RL pool row as a verl RLHF dataset row; `index` is unique across all parts."""
    return {
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
            "index": index,
            "sample_id": r["sample_id"],
            "source_kind": r["source_kind"],
            "licence": r["licence"],
            "messages": [m for m in r["messages"] if m["role"] != "system"],
        },
    }


def chat_record(r: dict[str, Any]) -> dict[str, Any]:
    """An SFT row as chat messages (LLaMA-Factory `sharegpt`-style with OpenAI roles, OpenRLHF)."""
    return {
        "messages": r["messages"],
        "trajectory_id": r["trajectory_id"],
        "turn_index": r["turn_index"],
        "template_version": r["template_version"],
        "domain": r["domain"],
        "source_kind": r["source_kind"],
        "licence": r["licence"],
    }


def cpt_text_record(r: dict[str, Any]) -> dict[str, Any]:
    """A CPT row as text with typed loss spans {start, end, weight} (character offsets)."""
    return {
        "text": r["text"],
        "loss_spans": [
            {"start": s["start"], "end": s["end"], "weight": s["weight"]} for s in r["loss_spans"]
        ],
        "trajectory_id": r["trajectory_id"],
        "domain": r["domain"],
        "source_kind": r["source_kind"],
        "licence": r["licence"],
    }


JSONL_EXPORTS: dict[str, tuple[str, Callable[[dict[str, Any]], dict[str, Any]]]] = {
    "sft": ("sft_messages", chat_record),
    "cpt": ("cpt_text", cpt_text_record),
}
"""Pool -> (export folder, row renderer) of the JSONL exports."""


def export_path(out: str, pool: str, part_stem: str) -> str | None:
    """Where the export of one pool part goes (None: the pool has no per-part export)."""
    if pool == "rl":
        return FileSystems.join(out, "exports", "verl", f"rl-{part_stem}.parquet")
    if pool in JSONL_EXPORTS:
        return FileSystems.join(out, "exports", JSONL_EXPORTS[pool][0], f"{part_stem}.jsonl")
    return None


def write_export(out: str, pool: str, part_stem: str, chunks: Iterator[pa.Table]) -> str | None:
    """Render a pool part's rows (given in part order, chunk by chunk) into its trainer export."""
    target = export_path(out, pool, part_stem)
    if target is None:
        for _ in chunks:
            pass
        return None
    folder = target.rsplit("/", 1)[0]
    try:
        FileSystems.mkdirs(folder)
    except OSError:
        pass
    tmp = fs.temp_beside(target)
    with FileSystems.create(tmp) as fh:
        if pool == "rl":
            writer = pq.ParquetWriter(fh, VERL_SCHEMA, compression="zstd")
            bucket, roll = (int(x) for x in part_stem.split("-")[1:3])  # part-SSSSS-RRR
            index = (bucket * 1000 + roll) * PART_INDEX_STRIDE
            for chunk in chunks:
                rows = []
                for r in chunk.to_pylist():
                    rows.append(verl_row(r, index))
                    index += 1
                writer.write_table(pa.Table.from_pylist(rows, schema=VERL_SCHEMA))
            writer.close()
        else:
            render = JSONL_EXPORTS[pool][1]
            for chunk in chunks:
                # orjson: UTF-8 JSON, compact, ~4x faster than json.dumps on these rows
                lines = [orjson.dumps(render(r)) for r in chunk.to_pylist()]
                if lines:
                    fh.write(b"\n".join(lines) + b"\n")
    fs.publish_file(tmp, target)
    return target
