"""Span labels: alignment of an observation with its replays, and the attribute table on disk."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas.span_labels import (
    SPAN_LABELS_SCHEMA,
    Span,
    SpanLabel,
    TurnLabels,
    deterministic_share,
    label_observation,
    read_span_labels,
    spans_of_label,
    write_span_labels,
)

ORIGINAL = """$ echo $$; date; mktemp; ls -l
4242
Wed Dec  2 11:35:45 UTC 2026
/tmp/tmp.AbCdEf1234
total 4
-rw-r--r-- 1 root root 6 Dec  2 11:35 a.txt
$ """
REPLAY = (
    ORIGINAL.replace("4242", "87")
    .replace("11:35:45", "11:36:01")
    .replace("AbCdEf1234", "ZZCdEf9934")
    .replace("11:35 a", "11:36 a")
)

_text = st.text(alphabet=st.sampled_from(list("ab1 2:\n/x-.")), max_size=80)


def _covers(spans: list[Span], text: str) -> bool:
    position = 0
    for span in spans:
        if span.start != position or span.end <= span.start:
            return False
        position = span.end
    return position == len(text)


@settings(max_examples=200, deadline=None)
@given(original=_text, replays=st.lists(_text, max_size=3))
def test_spans_cover_the_text_in_order(original: str, replays: list[str]) -> None:
    spans = label_observation(original, replays)
    assert _covers(spans, original)
    for span in spans:
        assert (span.pattern is not None) == (span.label == SpanLabel.RUNTIME)


@settings(max_examples=200, deadline=None)
@given(original=_text, times=st.integers(min_value=0, max_value=3))
def test_identical_replays_are_all_deterministic(original: str, times: int) -> None:
    spans = label_observation(original, [original] * times)
    assert all(s.label == SpanLabel.DETERMINISTIC for s in spans)


@settings(max_examples=100, deadline=None)
@given(original=_text, replay=_text)
def test_characters_labelled_deterministic_are_reproduced(original: str, replay: str) -> None:
    """Every deterministic span's text appears in the replay (its alignment found it there)."""
    for span in label_observation(original, [replay]):
        if span.label == SpanLabel.DETERMINISTIC:
            assert original[span.start : span.end] in replay


def test_runtime_spans_are_the_pid_date_temp_path_and_mtime() -> None:
    spans = label_observation(ORIGINAL, [REPLAY])
    runtime = [(ORIGINAL[s.start : s.end], s.pattern) for s in spans if s.label == SpanLabel.RUNTIME]
    assert runtime == [
        ("4242", "pid"),
        ("Wed Dec  2 11:35:45 UTC 2026", "time"),
        ("/tmp/tmp.AbCdEf1234", "temp_path"),
        ("Dec  2 11:35", "time"),
    ]
    assert not [s for s in spans if s.label == SpanLabel.VARIABLE]


def test_a_changed_value_outside_every_pattern_is_variable() -> None:
    spans = label_observation("count: apples\n", ["count: pears\n"])
    assert [("count: apples\n"[s.start : s.end], s.label) for s in spans] == [
        ("count: ", SpanLabel.DETERMINISTIC),
        ("apples", SpanLabel.VARIABLE),
        ("\n", SpanLabel.DETERMINISTIC),
    ]


def test_a_line_only_in_the_replay_marks_the_original_as_not_identical() -> None:
    spans = label_observation("a\nb\n", ["a\nextra\nb\n"])
    assert any(s.label != SpanLabel.DETERMINISTIC for s in spans)


def test_table_round_trips_with_its_explicit_schema(tmp_path: Path) -> None:
    spans = tuple(label_observation(ORIGINAL, [REPLAY]))
    rows = [
        TurnLabels("t1", 0, spans, 2, False, None),
        TurnLabels("t1", 1, (), 2, True, "error appeared"),
    ]
    path = tmp_path / "span_labels.parquet"
    write_span_labels(path, rows)
    written = pq.read_schema(path)
    assert written.equals(SPAN_LABELS_SCHEMA)
    assert written.metadata[b"worldline.span_labels_version"] == b"1.0.0"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    back = read_span_labels(path)
    assert back == {("t1", 0): rows[0], ("t1", 1): rows[1]}
    assert read_span_labels(tmp_path) == back
    assert spans_of_label(back[("t1", 0)], SpanLabel.RUNTIME)[0] == (31, 35)
    share = deterministic_share(back[("t1", 0)])
    assert 0.5 < share < 1.0
    assert deterministic_share(back[("t1", 1)]) == 1.0
