"""Quarantine tables: a record that left the data, where it came from, and why (a `ReasonCode`).

Two writers keep one verdict: the cleaner (`quarantine/parts/*.parquet` of a clean run, one row per
quarantined record or episode) and the pools build (`_build/removed.parquet`, one row per removed
record). Both rows end in the same three columns, `VERDICT_FIELDS`: the stage that removed the record,
its reason code (`schemas.reasons.ReasonCode`) and a detail for a human. What locates the record
differs, because the inputs differ: the cleaner reads raw files (a record key, a file, a locator
inside it, a format, an episode), the pools read trajectory shards (a trajectory id and its file).
The two layouts are kept as they are on disk; each is defined here, once.
"""

from __future__ import annotations

import pyarrow as pa

VERDICT_FIELDS: tuple[pa.Field, ...] = (
    pa.field("stage", pa.string(), nullable=False),
    pa.field("reason", pa.string(), nullable=False),  # a schemas.reasons.ReasonCode value
    pa.field("detail", pa.string(), nullable=False),
)

CLEAN_QUARANTINE_SCHEMA = pa.schema(
    [
        pa.field("record_key", pa.string(), nullable=False),
        pa.field("source_path", pa.string(), nullable=False),
        pa.field("locator", pa.string(), nullable=False),
        pa.field("format", pa.string(), nullable=False),
        *VERDICT_FIELDS,
        pa.field("episode", pa.int32(), nullable=True),
        # "quarantined": the whole record; "accepted": one episode of a record whose other episodes passed.
        pa.field("record_outcome", pa.string(), nullable=False),
    ],
    metadata={b"worldline.content": b"curation quarantine"},
)
"""The cleaner's quarantine (`curation_agents.clean_run`, `pipelines.clean_beam`)."""

POOL_QUARANTINE_FIELDS: tuple[pa.Field, ...] = (
    pa.field("record_id", pa.string(), nullable=False),
    pa.field("input_file", pa.string(), nullable=False),
    *VERDICT_FIELDS,
)
"""The pools' removed records (`pipelines.rows.QUARANTINE_SCHEMA` adds the pool-row version)."""
