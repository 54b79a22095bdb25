"""Using the pools in a trainer: CPT loss spans -> per-token weights and labels.

A CPT row carries `text` and `loss_spans`, a list of typed structs `{start: int32, end: int32,
weight: float32}` (plus the turn index, loss-mask category and share they come from): characters
[start, end) are in the loss with `weight`; characters outside every span are context only. Spans
are in characters so they survive any tokenizer; `token_weights` maps them onto one.

A token takes the weight of the span its first character falls in (0 outside every span); its label
is its own id when the weight is positive and -100 (ignored by Hugging Face and Megatron-style
cross-entropy) otherwise. Weighted trainers multiply per-token losses by `weights`; trainers with
hard masks use `labels`.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from worldline.tokenizer import TokenCounter, get_token_counter

IGNORE_INDEX = -100


def _token_starts(tokenizer: Any, text: str) -> tuple[list[int], list[int]]:
    """(token ids, character offset where each token starts) of `text`."""
    if isinstance(tokenizer, str) or tokenizer is None:
        tokenizer = get_token_counter(tokenizer)
    enc = getattr(tokenizer, "_enc", None)
    if enc is not None and hasattr(enc, "decode_with_offsets"):  # tiktoken (the Qwen vocabulary)
        ids = list(enc.encode_ordinary(text))
        _, offsets = enc.decode_with_offsets(ids)
        return ids, list(offsets)
    tok = getattr(tokenizer, "_tok", tokenizer)
    # transformers tokenizers also have encode / get_vocab, but their encode returns a plain list
    if callable(tok) and hasattr(tok, "convert_ids_to_tokens"):  # transformers tokenizer
        out = tok(text, add_special_tokens=False, return_offsets_mapping=True)
        return list(out["input_ids"]), [start for start, _ in out["offset_mapping"]]
    if hasattr(tok, "encode") and hasattr(tok, "get_vocab"):  # tokenizers.Tokenizer
        encoding = tok.encode(text, add_special_tokens=False)
        return list(encoding.ids), [start for start, _ in encoding.offsets]
    counter: TokenCounter = tokenizer
    ids = counter.encode(text)
    starts, pos = [], 0
    for i in range(len(ids)):
        starts.append(pos)
        pos = len(counter.decode(ids[: i + 1]))
    return ids, starts


def token_weights(
    text: str, spans: Sequence[Mapping[str, Any]], tokenizer: Any = None
) -> dict[str, list[Any]]:
    """Per-token `input_ids`, `weights` and `labels` (-100 where the weight is 0) of a CPT row.

    `tokenizer`: a worldline TokenCounter, a spec for `get_token_counter` (None: the Qwen
    vocabulary), a `tokenizers.Tokenizer` or a transformers tokenizer.
    """
    ordered = sorted((int(s["start"]), int(s["end"]), float(s["weight"])) for s in spans)
    for (s0, e0, _), (s1, _, _) in zip(ordered, ordered[1:], strict=False):
        if s1 < e0:
            raise ValueError(f"loss spans overlap: [{s0}, {e0}) and [{s1}, ...); spans must be disjoint")
    for s0, e0, w in ordered:
        if not 0 <= s0 < e0 <= len(text) or w < 0:
            raise ValueError(
                f"loss span [{s0}, {e0}) weight {w} does not fit a text of {len(text)} characters"
            )
    starts_of_spans = [s for s, _, _ in ordered]
    ids, starts = _token_starts(tokenizer, text)
    weights: list[float] = []
    for pos in starts:
        k = bisect.bisect_right(starts_of_spans, pos) - 1
        weights.append(ordered[k][2] if k >= 0 and pos < ordered[k][1] else 0.0)
    labels = [i if w > 0 else IGNORE_INDEX for i, w in zip(ids, weights, strict=True)]
    return {"input_ids": ids, "weights": weights, "labels": labels}


# --------------------------------------------------------------------------------------------------
# Browsing pool folders
# --------------------------------------------------------------------------------------------------


def pool_parts(path: str | Path) -> list[Path]:
    p = Path(path)
    return sorted(p.glob("part-*.parquet")) if p.is_dir() else ([p] if p.suffix == ".parquet" else [])


def pool_name(path: str | Path) -> str | None:
    """ "cpt", "sft" or "rl" when PATH is a pool folder (or one of its parts) `pools build` wrote."""
    import pyarrow.parquet as pq

    parts = pool_parts(path)
    if not parts:
        return None
    try:
        meta = pq.read_schema(parts[0]).metadata or {}
    except (OSError, ValueError):  # unreadable: the trajectory readers name the file and the fault
        return None
    name = meta.get(b"worldline.pool")
    return name.decode() if name else None


def open_dataset(path: str | Path) -> Any:
    """A lazy polars frame over a trajectory dataset or a pool folder (OUT/cpt, OUT/sft, OUT/rl;
    OUT/eval holds trajectories), scanned with the explicit schema of what it holds."""
    import polars as pl

    from schemas import open_dataset as open_trajectories

    p = Path(path)
    if (p / "manifest.json").is_file() and (p / "rl").is_dir() and (p / "sft").is_dir():
        raise ValueError(f"{p} holds several pools: open one of {p}/cpt, {p}/sft, {p}/rl or {p}/eval")
    name = pool_name(p)
    if name is None and (p / "card.json").is_file():  # OUT/eval: trajectories, listed by the pool card
        from schemas.shards import check_file_schema, polars_schema

        parts = pool_parts(p)
        for f in parts:
            check_file_schema(f)
        return pl.scan_parquet([str(f) for f in parts], schema=polars_schema())
    if name is None:
        return open_trajectories(p)
    from pipelines.rows import POOL_SCHEMAS

    empty = pl.from_arrow(POOL_SCHEMAS[name].empty_table())
    assert isinstance(empty, pl.DataFrame)
    return pl.scan_parquet([str(f) for f in pool_parts(p)], schema=empty.schema)


def pool_stats(path: str | Path) -> dict[str, Any]:
    """Samples, trajectories and recorded tokens per domain and source kind of one pool folder."""
    import pyarrow.parquet as pq

    name = pool_name(path)
    if name is None:
        raise ValueError(f"{path} is not a pool folder (OUT/cpt, OUT/sft or OUT/rl)")
    tokens_column = "prompt_tokens" if name == "rl" else "tokens"
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for f in pool_parts(path):
        for batch in pq.ParquetFile(f).iter_batches(
            batch_size=4096, columns=["domain", "source_kind", "trajectory_id", tokens_column]
        ):
            for d, k, t, n in zip(*(batch.column(i).to_pylist() for i in range(4)), strict=True):
                row = rows.setdefault((d, k), {"samples": 0, "trajectories": set(), "tokens": 0})
                row["samples"] += 1
                row["trajectories"].add(t)
                row["tokens"] += n
    by = [
        {
            "domain": d,
            "source_kind": k,
            "samples": v["samples"],
            "trajectories": len(v["trajectories"]),
            "tokens": v["tokens"],
        }
        for (d, k), v in sorted(rows.items())
    ]
    total = {key: sum(r[key] for r in by) for key in ("samples", "trajectories", "tokens")}
    return {"path": str(path), "pool": name, "by_domain_and_source_kind": by, "total": total}
