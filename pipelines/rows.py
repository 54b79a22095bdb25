"""Explicit Arrow schemas of pool rows, assignments and quarantine: the pools' one internal form.

Trainer formats (verl, chat messages, CPT text with spans, AgentWorldBench) are rendered from these
rows as late as possible (`pipelines.exports`). Every pool row carries trajectory_id, source_id (the
source group), domain and template_version; RL and SFT rows carry turn_index (1-based).
"""

from __future__ import annotations

import pyarrow as pa

from schemas.quarantine import POOL_QUARANTINE_FIELDS

POOL_ROW_VERSION = "1.0.0"

MESSAGE_TYPE = pa.struct([pa.field("role", pa.string(), False), pa.field("content", pa.string(), False)])
MESSAGES_TYPE = pa.list_(pa.field("item", MESSAGE_TYPE, nullable=False))

LOSS_SPAN_TYPE = pa.struct(
    [
        pa.field("start", pa.int32(), False),  # character offsets into `text`, [start, end)
        pa.field("end", pa.int32(), False),
        pa.field("weight", pa.float32(), False),  # loss weight of every token starting inside the span
        pa.field("turn_index", pa.int32(), False),  # 0 = system prompt / document
        pa.field("category", pa.string(), False),  # loss-mask category (Table 3) of the turn
        pa.field("share", pa.float32(), False),  # the category's share of turn tokens (which the span keeps)
    ]
)
"""A CPT loss span: characters [start, end) of `text` are in the loss with `weight`; text outside
every span has weight 0 (context only). `worldline.pools.token_weights` turns spans into per-token
weights and -100 labels for a tokenizer."""

_COMMON = [
    pa.field("sample_id", pa.string(), False),
    pa.field("trajectory_id", pa.string(), False),
    pa.field("source_id", pa.string(), False),
    pa.field("source_kind", pa.string(), False),
    pa.field("licence", pa.string(), True),  # the source's licence (SPDX id where known), null if unknown
    pa.field("domain", pa.string(), False),
    pa.field("template_version", pa.int32(), False),  # -1: world-knowledge text, no template
    pa.field("dedup_cluster", pa.string(), False),
]

_META = {b"worldline.pool_row_version": POOL_ROW_VERSION.encode()}

CPT_SCHEMA = pa.schema(
    [
        *_COMMON,
        pa.field("text", pa.string(), False),
        pa.field("loss_spans", pa.list_(pa.field("item", LOSS_SPAN_TYPE, nullable=False)), False),
        pa.field("turn_categories", pa.list_(pa.field("item", pa.string(), nullable=False)), False),
        pa.field("num_turns", pa.int32(), False),
        pa.field("tokens", pa.int64(), False),
        pa.field("loss_tokens", pa.int64(), False),
        pa.field("is_knowledge", pa.bool_(), False),
    ],
    metadata={**_META, b"worldline.pool": b"cpt"},
)

SFT_SCHEMA = pa.schema(
    [
        *_COMMON,
        pa.field("turn_index", pa.int32(), False),
        pa.field("messages", MESSAGES_TYPE, False),
        pa.field("tokens", pa.int64(), False),
        pa.field("truncated", pa.bool_(), False),
        pa.field("dropped_history_turns", pa.int32(), False),
        pa.field("target_truncated", pa.bool_(), False),
        pa.field("tokens_before_truncation", pa.int64(), False),
    ],
    metadata={**_META, b"worldline.pool": b"sft"},
)

RL_SCHEMA = pa.schema(
    [
        *_COMMON,
        pa.field("turn_index", pa.int32(), False),
        pa.field("num_turns", pa.int32(), False),
        pa.field("messages", MESSAGES_TYPE, False),
        pa.field("ground_truth", pa.string(), False),
        pa.field("prompt_tokens", pa.int64(), False),
        pa.field("verifier", pa.string(), False),  # "exact_match" or "none"
        pa.field("reward_spec", pa.string(), False),  # JSON: rubric + rule mix
    ],
    metadata={**_META, b"worldline.pool": b"rl"},
)

ASSIGNMENT_SCHEMA = pa.schema(
    [
        pa.field("trajectory_id", pa.string(), False),
        pa.field("pool", pa.string(), False),
        pa.field("source_id", pa.string(), False),
        pa.field("source_kind", pa.string(), False),
        pa.field("domain", pa.string(), False),
        pa.field("dedup_cluster", pa.string(), False),
        pa.field("num_turns", pa.int32(), False),
        pa.field("signature", pa.list_(pa.field("item", pa.uint64(), nullable=False)), False),
    ],
    metadata={**_META, b"worldline.table": b"assignments"},
)

QUARANTINE_SCHEMA = pa.schema(POOL_QUARANTINE_FIELDS, metadata={**_META, b"worldline.table": b"quarantine"})

EVAL_TURNS_SCHEMA = pa.schema(
    [
        pa.field("eval_id", pa.string(), False),
        pa.field("turn_index", pa.int32(), False),
        pa.field("signature", pa.list_(pa.field("item", pa.uint64(), nullable=False)), False),
    ],
    metadata={**_META, b"worldline.table": b"eval_turns"},
)

POOL_SCHEMAS = {"cpt": CPT_SCHEMA, "sft": SFT_SCHEMA, "rl": RL_SCHEMA}
