"""The one atomic writer (schemas.atomic): unique temporary names, the old file kept on failure, no
temporary file left behind, folders replaced whole."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from schemas import atomic


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_temporary_names_are_unique_and_hidden_beside_the_target(tmp_path: Path) -> None:
    target = tmp_path / "manifest.json"
    names = {atomic.temp_path(target) for _ in range(1000)}
    assert len(names) == 1000
    assert all(n.parent == tmp_path and n.name.startswith(".manifest.json.") for n in names)
    assert all(n.name.endswith(atomic.TEMP_SUFFIX) for n in names)


def test_concurrent_writers_of_one_path_never_tear_it(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    bodies = [{"writer": i, "payload": "x" * (1000 + i)} for i in range(16)]
    start = threading.Barrier(len(bodies))
    errors: list[BaseException] = []

    def write(body: dict[str, object]) -> None:
        start.wait()
        try:
            for _ in range(20):
                atomic.atomic_write_json(target, body)
        except BaseException as exc:  # collected: a thread's exception would otherwise be lost
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(b,)) for b in bodies]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert json.loads(target.read_text("utf-8")) in bodies  # one whole body, never a mix
    assert leftovers(tmp_path) == []


def test_a_failure_mid_write_keeps_the_old_file_and_removes_the_temporary(tmp_path: Path) -> None:
    target = tmp_path / "samples.jsonl"
    atomic.atomic_write_text(target, "old\n")
    with pytest.raises(RuntimeError, match="disk gone"):
        with atomic.atomic_open(target, "w") as fh:
            fh.write("new, half written")
            raise RuntimeError("disk gone")
    assert target.read_text("utf-8") == "old\n"
    assert leftovers(tmp_path) == []


def test_a_write_that_cannot_be_encoded_keeps_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "card.json"
    atomic.atomic_write_json(target, {"rows": 1})
    with pytest.raises(TypeError):
        atomic.atomic_write_json(target, {"rows": object()})
    assert json.loads(target.read_text("utf-8")) == {"rows": 1}
    assert leftovers(tmp_path) == []


def test_writes_create_the_folder_and_leave_nothing_else(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "ledger.tsv"
    atomic.atomic_write_bytes(target, b"id\tscore\n")
    with atomic.atomic_open(tmp_path / "a" / "text.txt", "w") as fh:
        fh.write("line\n")
    assert target.read_bytes() == b"id\tscore\n"
    assert (tmp_path / "a" / "text.txt").read_text("utf-8") == "line\n"
    assert leftovers(tmp_path / "a") == [] and leftovers(target.parent) == []
    atomic.atomic_write_json(tmp_path / "j.json", {"é": 1})
    assert (tmp_path / "j.json").read_text("utf-8") == '{\n  "é": 1\n}\n'  # indented, UTF-8, one newline


def test_publish_file_moves_a_finished_temporary_into_place(tmp_path: Path) -> None:
    target = tmp_path / "part-00000.parquet"
    target.write_bytes(b"old")
    tmp = atomic.temp_path(target)
    tmp.write_bytes(b"new")
    atomic.publish_file(tmp, target)
    assert target.read_bytes() == b"new" and not tmp.exists()


def test_replace_dir_swaps_a_whole_folder(tmp_path: Path) -> None:
    out = tmp_path / "index"
    (out / "tantivy").mkdir(parents=True)
    (out / "meta.json").write_text("old", "utf-8")
    staging = tmp_path / ".index.staging"
    staging.mkdir()
    (staging / "meta.json").write_text("new", "utf-8")
    atomic.replace_dir(staging, out)
    assert (out / "meta.json").read_text("utf-8") == "new" and not (out / "tantivy").exists()
    assert leftovers(tmp_path) == []
    fresh = tmp_path / ".fresh.staging"
    fresh.mkdir()
    atomic.replace_dir(fresh, tmp_path / "fresh")  # nothing to replace: a plain rename
    assert (tmp_path / "fresh").is_dir() and leftovers(tmp_path) == []


def test_the_pools_local_writes_go_through_the_atomic_writer(tmp_path: Path) -> None:
    from pipelines import fs

    target = str(tmp_path / "cpt" / "card.json")
    fs.write_json(target, {"pool": "cpt"})
    tmp = fs.temp_beside(str(tmp_path / "cpt" / "part-00000.parquet"))
    assert Path(tmp).parent == tmp_path / "cpt" and Path(tmp).name.startswith(".part-00000.parquet.")
    Path(tmp).write_bytes(b"rows")
    fs.publish_file(tmp, str(tmp_path / "cpt" / "part-00000.parquet"))
    assert json.loads(Path(target).read_text("utf-8")) == {"pool": "cpt"}
    assert (tmp_path / "cpt" / "part-00000.parquet").read_bytes() == b"rows"
    assert leftovers(tmp_path / "cpt") == []
