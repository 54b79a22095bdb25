"""No input stops a run: damaged gzip, compression bombs, very long lines, many tiny records and inputs
that share a name are each quarantined or processed, the summary reconciles, and a rerun resumes."""

from __future__ import annotations

import gzip
import io
import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from curation_agents.clean_run import CleanRun
from curation_agents.formats.common import ExpansionGuard
from curation_agents.model import CleanConfig, Limits
from curation_agents.reader import discover, iter_lines, iter_records, root_labels
from curation_agents.terminal_screen import screen_text


def _chat_line(i: int) -> str:
    messages = [
        {"role": "user", "content": f"task {i}"},
        {"role": "assistant", "content": f"```bash\nls dir{i}\n```"},
        {"role": "user", "content": f"file{i}.txt other{i}.txt"},
        {"role": "assistant", "content": f"```bash\ncat file{i}.txt\n```"},
        {"role": "user", "content": f"contents of file {i} " * 3},
    ]
    return json.dumps({"messages": messages})


def _run(paths: list[Path], out: Path, config: CleanConfig | None = None) -> dict[str, Any]:
    summary = CleanRun([str(p) for p in paths], out, config or CleanConfig()).run()
    assert summary["records_in"] == summary["accepted"] + summary["quarantined"]
    on_disk = json.loads((out / "summary.json").read_text())
    assert on_disk["records_in"] == summary["records_in"]
    return summary


def test_truncated_gzip_keeps_what_was_read_quarantines_the_rest_and_resumes(tmp_path: Path) -> None:
    rng = random.Random(5)
    # Incompressible content, so cutting the file in half cuts the records in half too.
    body = "\n".join(_chat_line(i).replace("task", rng.randbytes(300).hex()) for i in range(300)).encode()
    packed = gzip.compress(body)
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "cut.jsonl.gz").write_bytes(packed[: len(packed) // 2])
    (tmp_path / "in" / "fine.jsonl").write_text(_chat_line(1) + "\n")
    summary = _run([tmp_path / "in"], tmp_path / "out")
    assert summary["per_reason"].get("corrupt_input") == 1
    assert summary["accepted"] >= 2  # records before the damage and the other file
    again = _run([tmp_path / "in"], tmp_path / "out")
    assert again["resumed_records"] == again["records_in"] == summary["records_in"]


def test_corrupt_gzip_is_quarantined_with_its_reason(tmp_path: Path) -> None:
    packed = bytearray(gzip.compress(("\n".join(_chat_line(i) for i in range(50))).encode()))
    packed[len(packed) // 2 : len(packed) // 2 + 16] = b"\xff" * 16
    (tmp_path / "bad.jsonl.gz").write_bytes(bytes(packed))
    summary = _run([tmp_path / "bad.jsonl.gz"], tmp_path / "out")
    assert set(summary["per_reason"]) <= {"corrupt_input", "bad_encoding", "parse_error"}
    assert "corrupt_input" in summary["per_reason"]


def test_newline_gzip_bomb_stops_at_the_expansion_bound(tmp_path: Path) -> None:
    path = tmp_path / "bomb.jsonl.gz"
    with gzip.open(path, "wb", compresslevel=9) as fh:
        fh.write((_chat_line(0) + "\n").encode())
        for _ in range(48):
            fh.write(b"\n" * (1 << 22))
    limits = Limits(max_record_bytes=1 << 20, max_gzip_expansion=20)
    records = list(iter_records(path, limits))
    assert records[0].failure is None
    assert records[-1].failure is not None and records[-1].failure.reason.value == "too_large"
    summary = _run([path], tmp_path / "out", CleanConfig(limits=limits))
    assert summary["records_in"] == 2


@pytest.mark.slow
def test_a_long_single_line_renders_in_linear_time(tmp_path: Path) -> None:
    words = [f"\x1b[3{i % 8}mword{i}\x1b[0m" for i in range(200_000)]
    rendered = screen_text(" ".join(words), width=80)
    assert rendered == " ".join(f"word{i}" for i in range(200_000))
    p = "dev@box:~$ "
    events = [
        [0.0, "o", p],
        [0.5, "i", "cat big\r"],
        [0.6, "o", "cat big\r\n" + " ".join(words) + "\r\n" + p],
    ]
    events += [[1.0, "i", "ls\r"], [1.1, "o", "ls\r\nx\r\n" + p]]
    cast = tmp_path / "long.cast"
    cast.write_text("\n".join(json.dumps(e) for e in [{"version": 2, "width": 80, "height": 24}, *events]))
    summary = _run([cast], tmp_path / "out")
    assert summary["accepted"] == 1


@pytest.mark.slow
def test_many_tiny_records(tmp_path: Path) -> None:
    path = tmp_path / "tiny.jsonl"
    path.write_text("".join(f'{{"n": {i}}}\n' for i in range(20_000)))
    summary = _run([path], tmp_path / "out")
    assert summary["records_in"] == 20_000 and summary["per_reason"] == {"unsupported_format": 20_000}


def test_two_input_folders_with_the_same_name(tmp_path: Path) -> None:
    for parent in ("team-a", "team-b"):
        folder = tmp_path / parent / "logs"
        folder.mkdir(parents=True)
        (folder / "s.jsonl").write_text(_chat_line(1) + "\n")
    paths = [tmp_path / "team-a" / "logs", tmp_path / "team-b" / "logs"]
    assert sorted(dataset for _, dataset in discover([str(p) for p in paths])) == [
        "team-a/logs/s.jsonl",
        "team-b/logs/s.jsonl",
    ]
    summary = _run(paths, tmp_path / "out")
    assert summary["records_in"] == 2 and summary["accepted"] == 2


def test_root_labels_are_unique_and_short() -> None:
    assert root_labels(["/x/a/logs", "/y/a/logs", "/z/other"]) == {
        "/x/a/logs": "x/a/logs",
        "/y/a/logs": "y/a/logs",
        "/z/other": "other",
    }
    assert root_labels(["gs://bucket/one/data", "gs://bucket/two/data/"]) == {
        "gs://bucket/one/data": "one/data",
        "gs://bucket/two/data/": "two/data",
    }


def test_jsonl_whose_lines_are_message_arrays_is_read_record_by_record(tmp_path: Path) -> None:
    path = tmp_path / "arrays.jsonl"
    path.write_text("\n".join(json.dumps(json.loads(_chat_line(i))["messages"]) for i in range(3)) + "\n")
    records = list(iter_records(path, Limits()))
    assert [r.locator for r in records] == ["line-1", "line-2", "line-3"]
    assert all(r.failure is None and r.format.value == "openai-messages" for r in records)


def _naive_lines(data: bytes, max_line: int) -> list[tuple[int, bytes | None]]:
    out: list[tuple[int, bytes | None]] = []
    lines = data.split(b"\n")
    for number, line in enumerate(lines, start=1):
        full = (line + b"\n" if number < len(lines) else line).lstrip(b" \t\r")
        if not full.strip():
            continue  # blank lines are skipped whatever their length
        out.append((number, None if len(full) > max_line else full))
    return out


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from([b"\n", b" ", b"\t", b"\r\n", b"{}", b"abc", b"x" * 7, b"\n\n\n"]), max_size=40
    ).map(b"".join),
    st.integers(min_value=1, max_value=9),
    st.integers(min_value=1, max_value=12),
)
def test_iter_lines_equals_splitting_on_newlines(data: bytes, chunk: int, max_line: int) -> None:
    assert list(iter_lines(io.BytesIO(data), max_line, chunk_size=chunk)) == _naive_lines(data, max_line)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.binary(max_size=300), min_size=1, max_size=4),
    st.lists(st.integers(min_value=-1, max_value=400), min_size=1, max_size=30),
    st.booleans(),
)
def test_gzip_reader_returns_what_gzip_returns(members: list[bytes], sizes: list[int], lines: bool) -> None:
    packed = b"".join(gzip.compress(m) for m in members)
    guard = ExpansionGuard(io.BytesIO(packed), 1 << 30, "t")
    out = b""
    for size in sizes * 50:
        piece = guard.readline(size) if lines else guard.read(size)
        out += piece
        if not piece and size != 0:
            break
    out += guard.read()
    assert out == b"".join(members)
