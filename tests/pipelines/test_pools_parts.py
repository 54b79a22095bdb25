"""Parts are bounded by bytes and written streaming: a small bound rolls parts over without changing
what the pools hold."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.build import resolve_inputs, run_build
from pipelines.config import PoolsConfig
from pipelines.finalize import finalize
from pipelines.stages.write import part_stem
from tests.helpers.pools_data import build_fixture

CONFIG = {
    "assignment": {
        "by_kind": {"infra": "cpt", "public": "cpt", "knowledge": "cpt", "inhouse": {"sft": 1, "rl": 1}}
    }
}


def build(root: Path, out: Path, **overrides: object) -> dict:  # type: ignore[type-arg]
    fx = build_fixture(root)
    cfg = PoolsConfig.from_dict({**CONFIG, **overrides})
    ins, know, ev = [str(p) for p in fx["inputs"]], [str(fx["knowledge"])], [str(fx["eval"])]  # type: ignore[attr-defined]
    run_build(resolve_inputs(ins, know, ev, cfg), str(out), cfg, [])
    return finalize(out, cfg, ins, know, ev)


def test_parts_roll_over_at_the_byte_bound(tmp_path: Path) -> None:
    limit = 12_000
    small = build(tmp_path / "a", tmp_path / "small", part_max_bytes=limit)
    whole = build(tmp_path / "b", tmp_path / "whole")
    assert small["stats"] == whole["stats"]
    for pool in ("cpt", "sft", "rl", "assignments"):
        parts = sorted((tmp_path / "small" / pool).glob("part-*.parquet"))
        tables = [pq.read_table(p) for p in parts]
        for t in tables:
            assert t.nbytes <= limit or t.num_rows == 1, pool
        key = "trajectory_id" if pool == "assignments" else "sample_id"
        merged = pa.concat_tables(tables).sort_by(key)
        reference = pa.concat_tables(
            [pq.read_table(p) for p in sorted((tmp_path / "whole" / pool).glob("part-*.parquet"))]
        ).sort_by(key)
        assert merged.equals(reference), pool
    assert len(list((tmp_path / "small" / "sft").glob("part-*.parquet"))) > len(
        list((tmp_path / "whole" / "sft").glob("part-*.parquet"))
    )
    sft_exports = small["exports"]["sft_messages"]
    assert len(sft_exports) == len(list((tmp_path / "small" / "sft").glob("part-*.parquet")))
    index = [
        r["extra_info"]["index"]
        for f in small["exports"]["verl"]
        for r in pq.read_table(tmp_path / "small" / f).to_pylist()
    ]
    assert len(index) == len(set(index))


@pytest.mark.parametrize("limit", [200_000, 60_000_000], ids=["streaming-merge", "arrow-merge"])
def test_write_part_merges_sorted_runs_into_rolled_parts(tmp_path: Path, limit: int) -> None:
    import random

    from pipelines.stages.spill import ASSIGNMENTS, spill_runs
    from pipelines.stages.write import write_part

    def row(i: int) -> dict[str, object]:
        return {
            "trajectory_id": f"t{i:05d}",
            "pool": "cpt",
            "source_id": "g",
            "source_kind": "infra",
            "domain": "terminal",
            "dedup_cluster": f"t{i:05d}",
            "num_turns": 3,
            "signature": [random.Random(i).getrandbits(63) for _ in range(128)],
        }

    work = str(tmp_path / "work")
    runs = [
        path
        for k in range(3)  # three runs with interleaved keys, one row duplicated across runs
        for _, path in spill_runs(
            {(ASSIGNMENTS, 7): [row(i) for i in range(k, 3000, 3)] + [row(1)]}, work, f"r{k}"
        )
    ]
    stats = dict(write_part(((ASSIGNMENTS, 7), runs), str(tmp_path / "out"), limit))
    parts = sorted((tmp_path / "out" / ASSIGNMENTS).glob("part-*.parquet"))
    assert parts[0].stem == "part-00007-000" and (len(parts) > 2) == (limit < 1_000_000)
    ids = [r for p in parts for r in pq.read_table(p, columns=["trajectory_id"]).column(0).to_pylist()]
    assert ids == [f"t{i:05d}" for i in range(3000)]  # merged in key order, the copies collapsed
    assert stats == {"collapsed_copies.assignments": 3}  # row 1: in run 1 and appended to all three
    assert all(pq.read_table(p).nbytes <= limit for p in parts)


def test_part_names() -> None:
    assert part_stem(3, 0) == "part-00003-000" and part_stem(3, 2) == "part-00003-002"
