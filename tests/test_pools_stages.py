"""Stage contracts: every counter a build emits is declared by the stage that emits it."""

from __future__ import annotations

from pathlib import Path

from pipelines.build import resolve_inputs, run_build
from pipelines.config import PoolsConfig
from pipelines.stages import Stage, all_stages, undeclared_counters
from tests.pools_data import build_fixture


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
