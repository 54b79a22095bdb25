"""Stage contracts: every counter a build emits is declared by the stage that emits it."""

from __future__ import annotations

from pathlib import Path

from pipelines.build import resolve_inputs, run_build
from pipelines.config import PoolsConfig
from pipelines.stages import Stage, all_stages, undeclared_counters
from tests.helpers.pools_data import build_fixture


def test_stages_are_in_pipeline_order_with_contracts() -> None:
    names = [s.name for s in all_stages()]
    assert names == ["read", "filter", "dedup", "decontaminate", "assign", "render", "write"]
    for stage in all_stages():
        assert stage.reads and stage.writes


def test_stage_declares_wildcard_counters() -> None:
    stage = Stage("x", ("a",), ("b",), ("dropped.*", "records_in"))
    assert stage.declares("dropped.too_few_turns") and stage.declares("records_in")
    assert not stage.declares("records_out") and not stage.declares("droppedX")
    assert undeclared_counters(["records_in", "made_up.counter"]) == ["made_up.counter"]


def test_every_counter_of_a_build_is_declared(tmp_path: Path) -> None:
    fx = build_fixture(tmp_path)
    cfg = PoolsConfig()
    inputs = resolve_inputs([str(p) for p in fx["inputs"]], [str(fx["knowledge"])], [str(fx["eval"])], cfg)  # type: ignore[attr-defined]
    import json

    run_build(inputs, str(tmp_path / "out"), cfg, [])
    stats = json.loads((tmp_path / "out" / "_build" / "stats.json").read_text())
    assert stats["records_in"] == fx["n_records"]
    assert undeclared_counters(list(stats)) == []


def test_bulk_gc_tunes_the_collector_for_the_job_and_restores_it_after() -> None:
    import gc
    import weakref
    from unittest import mock

    from pipelines.stages import BULK_GC_THRESHOLD, bulk_gc, tune_gc_for_bulk_work

    before, frozen_before = gc.get_threshold(), gc.get_freeze_count()

    class Node:
        pass

    with bulk_gc():
        assert gc.get_threshold()[0] == max(before[0], BULK_GC_THRESHOLD)
        assert gc.get_freeze_count() > frozen_before  # what was alive at the start is out of the scans
        with mock.patch.object(gc, "freeze") as freeze, mock.patch.object(gc, "set_threshold") as threshold:
            tune_gc_for_bulk_work()  # a stage set up inside the driver's job changes nothing more
        assert not freeze.called and not threshold.called
        a, b = Node(), Node()
        a.other, b.other = b, a  # type: ignore[attr-defined]
        alive = weakref.ref(a)
        del a, b
        gc.collect()
        assert alive() is None  # cyclic garbage made during the job is still collected
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_a_worker_process_keeps_the_bulk_settings() -> None:
    import subprocess
    import sys

    code = (
        "import gc; from pipelines.stages import BULK_GC_THRESHOLD, tune_gc_for_bulk_work; "
        "tune_gc_for_bulk_work(); print(gc.get_threshold()[0] == BULK_GC_THRESHOLD, gc.get_freeze_count() > 0)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "True"]


def test_copies_of_a_bundle_writing_the_same_file_at_once_all_succeed(tmp_path: Path) -> None:
    """A runner may run one bundle twice at once (a retry, a speculative copy, the DaskRunner computing
    a stage again for a side input): every copy publishes the same spill file without failing."""
    import threading

    import pyarrow as pa

    from pipelines.stages.spill import read_ipc, write_ipc

    table = pa.table({"x": list(range(5000)), "y": [str(i) * 20 for i in range(5000)]})
    path = str(tmp_path / "runs" / "split-000001.arrow")
    errors: list[BaseException] = []

    def write() -> None:
        try:
            for _ in range(25):
                write_ipc(path, table)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:1]
    assert read_ipc(path).equals(table)
    assert [p.name for p in (tmp_path / "runs").iterdir()] == ["split-000001.arrow"]  # no temp file left


def test_content_hash_is_deterministic_key_order_free_and_content_sensitive() -> None:
    """Records sharing an id are told apart by this hash: equal content, equal hash (whatever the key
    order); any change of a value, a nested value or a type, a different hash; values orjson refuses
    (integers beyond 64 bits, lone surrogates) still hash."""
    from datetime import UTC, datetime

    from hypothesis import given
    from hypothesis import strategies as st

    from pipelines.stages.dedup import content_hash

    leaf = st.one_of(
        st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=20)
    )
    records = st.dictionaries(
        st.text(max_size=8), st.recursive(leaf, lambda c: st.lists(c, max_size=3), max_leaves=6), max_size=6
    )

    @given(records)
    def check(rec: dict[str, object]) -> None:
        assert content_hash(rec) == content_hash(dict(reversed(list(rec.items()))))
        changed = {**rec, "\x00extra": 1}
        assert content_hash(changed) != content_hash(rec)

    check()
    base = {"id": "t1", "started_at": datetime(2026, 1, 1, tzinfo=UTC), "turns": [{"text": "ls"}]}
    assert content_hash(base) != content_hash({**base, "turns": [{"text": "ls "}]})
    assert len({content_hash({"n": v}) for v in (1, "1", True, 1.0, None, [1])}) == 6
    assert content_hash({"n": 2**70}) != content_hash({"n": 2**70 + 1})
    assert content_hash({"s": "x\ud800"}) != content_hash({"s": "x\ud801"})
