"""CPT loss spans -> per-token weights and -100 labels (worldline.pools.token_weights), Qwen tokenizer."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.config import PoolsConfig
from pipelines.render import Lineage, cpt_row
from pipelines.rows import LOSS_SPAN_TYPE
from schemas.templates import load_template_set
from schemas.trajectory import SourceKind
from tests.helpers.pools_data import terminal
from worldline.pools import IGNORE_INDEX, token_weights
from worldline.tokenizer import get_token_counter


def test_loss_span_struct_is_typed() -> None:
    import pyarrow as pa

    assert LOSS_SPAN_TYPE.field("start").type == pa.int32()
    assert LOSS_SPAN_TYPE.field("end").type == pa.int32()
    assert LOSS_SPAN_TYPE.field("weight").type == pa.float32()


def test_whole_and_empty_spans() -> None:
    counter = get_token_counter(None)
    text = "The quick brown fox jumps over the lazy dog."
    full = token_weights(text, [{"start": 0, "end": len(text), "weight": 1.0}], counter)
    assert full["input_ids"] == counter.encode(text) and full["labels"] == full["input_ids"]
    assert set(full["weights"]) == {1.0}
    none = token_weights(text, [], counter)
    assert set(none["labels"]) == {IGNORE_INDEX} and set(none["weights"]) == {0.0}
    with pytest.raises(ValueError, match="overlap"):
        token_weights(text, [{"start": 0, "end": 10, "weight": 1}, {"start": 5, "end": 12, "weight": 1}])
    with pytest.raises(ValueError, match="does not fit"):
        token_weights(text, [{"start": 0, "end": 999, "weight": 1}])


@settings(max_examples=40, deadline=None)
@given(st.text(min_size=1, max_size=120), st.data())
def test_tokens_take_the_weight_of_the_span_they_start_in(text: str, data: st.DataObject) -> None:
    counter = get_token_counter(None)
    a = data.draw(st.integers(0, len(text) - 1))
    b = data.draw(st.integers(a + 1, len(text)))
    out = token_weights(text, [{"start": a, "end": b, "weight": 0.5}], "qwen3.6")
    assert len(out["input_ids"]) == len(out["weights"]) == len(out["labels"]) == counter.count(text)
    for tid, w, label in zip(out["input_ids"], out["weights"], out["labels"], strict=True):
        assert w in (0.0, 0.5) and label == (tid if w else IGNORE_INDEX)


def test_cpt_row_spans_select_about_the_counted_loss_tokens() -> None:
    counter = get_token_counter(None)
    cfg = PoolsConfig()
    row = cpt_row(
        terminal("tw", "g", SourceKind.INFRA, 3),
        Lineage("g", "infra", "tw"),
        cfg,
        load_template_set(None),
        counter,
    )
    out = token_weights(row["text"], row["loss_spans"], counter)
    in_loss = sum(1 for w in out["weights"] if w > 0)
    # spans are cut on each turn block's own token edges: the whole text may merge a token at an edge
    assert abs(in_loss - row["loss_tokens"]) <= 2 * len(row["loss_spans"])
    assert len(out["input_ids"]) == row["tokens"]
