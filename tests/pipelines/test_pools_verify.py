"""`pools verify` proves from content: each planted violation is caught, also when the manifest and
its checksums are rewritten to hide it."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from pipelines.config import PoolsConfig
from pipelines.finalize import pool_summary
from pipelines.verify import verify_pools
from pipelines.verify_checks import spread_violation
from schemas.shards import sha256_file, write_trajectories
from tests.helpers.pools_data import build_fixture_pools
from worldline.cli import app


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, Any]]:
    root = tmp_path_factory.mktemp("verify")
    out, manifest = build_fixture_pools(root)
    return root, out, manifest


def copy(built: tuple[Path, Path, dict[str, Any]], tmp_path: Path) -> Path:
    bad = tmp_path / "bad"
    shutil.copytree(built[1], bad)
    return bad


def rows(out: Path, table: str) -> list[dict[str, Any]]:
    return [r for f in sorted((out / table).glob("part-*.parquet")) for r in pq.read_table(f).to_pylist()]


def edit_part(out: Path, table: str, change: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]) -> None:
    part = sorted((out / table).glob("part-*.parquet"))[0]
    t = pq.read_table(part)
    pq.write_table(pa.Table.from_pylist(change(t.to_pylist()), schema=t.schema), part)


def hide(
    out: Path, summaries: bool = True, manifest_edit: Callable[[dict[str, Any]], None] | None = None
) -> None:
    """What a tamperer does: recompute every checksum (and the pool statistics) in the manifest."""
    m = json.loads((out / "manifest.json").read_text())
    for pool in m["pools"]:
        files = [
            {
                "path": str(f.relative_to(out)),
                "rows": pq.read_metadata(f).num_rows,
                "bytes": f.stat().st_size,
                "sha256": sha256_file(f),
            }
            for f in sorted((out / pool).glob("part-*.parquet"))
        ]
        m["pools"][pool]["files"] = files
        if summaries:
            m["pools"][pool].update(pool_summary(out, pool))
            rs = rows(out, pool)
            m["stats"][f"samples.{pool}"] = len(rs)
            key = "id" if pool == "eval" else "trajectory_id"
            m["stats"][f"pooled.{pool}"] = len({r[key] for r in rs})
    if manifest_edit:
        manifest_edit(m)
    (out / "manifest.json").write_text(json.dumps(m))


def checks(out: Path, cfg: PoolsConfig | None = None) -> set[str]:
    """The checks that fail, in process; the Beam verify job must give the very same report."""
    m = json.loads((out / "manifest.json").read_text())
    cfg = cfg or PoolsConfig.from_dict(m["config"])
    in_process = verify_pools(out, cfg)
    as_beam_job = verify_pools(out, cfg, beam_args=[])
    assert [v.to_json() for v in as_beam_job] == [v.to_json() for v in in_process]
    assert not list((out / "_build").glob("verify-*")), "the verify job left its work folder"
    return {v.check for v in in_process}


def pooled_row(out: Path, pool: str, new_id: str) -> dict[str, Any]:
    r = dict(rows(out, pool)[0])
    r.update(
        sample_id=f"{pool}:{new_id}", trajectory_id=new_id, source_id=f"group-{new_id}", dedup_cluster=new_id
    )
    return r


def assign(out: Path, tid: str, pool: str) -> None:
    def add(rs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [
            *rs,
            {**rs[0], "trajectory_id": tid, "pool": pool, "source_id": f"group-{tid}", "dedup_cluster": tid},
        ]

    edit_part(out, "assignments", add)


def test_clean_build_verifies(built: tuple[Path, Path, dict[str, Any]]) -> None:
    assert checks(built[1]) == set()


def test_verify_job_on_separate_worker_processes(
    built: tuple[Path, Path, dict[str, Any]], tmp_path: Path
) -> None:
    """`pools verify OUT -- <Beam options>` runs the job on the runner they name (here two worker
    processes) and reports what the in-process verify reports."""
    bad = copy(built, tmp_path)
    edit_part(bad, "rl", lambda rs: rs[1:])
    hide(bad, summaries=False)
    multi = ["--", "--direct_num_workers", "2", "--direct_running_mode", "multi_processing"]
    results = [
        CliRunner().invoke(app, ["pools", "verify", str(out), *args])
        for out in (built[1], bad)
        for args in ([], multi)
    ]
    assert [r.exit_code for r in results] == [0, 0, 1, 1], [r.output for r in results]
    assert "stats" in results[3].output and results[2].output == results[3].output
    refused = CliRunner().invoke(app, ["pools", "verify", str(built[1]), "--no-such-option"])
    assert refused.exit_code == 2 and "--no-such-option" in refused.output


def test_hidden_near_duplicate_across_pools(built: tuple[Path, Path, dict[str, Any]], tmp_path: Path) -> None:
    bad = copy(built, tmp_path)
    sft_id = rows(bad, "sft")[0]["trajectory_id"]
    from schemas.shards import iter_trajectories

    twin = next(t for t in iter_trajectories(built[0] / "shards") if t.id == sft_id)
    twin.id = "planted-twin"
    twin.turns[0].observation.text = twin.turns[0].observation.text.replace(" ", "  ", 1) + " extra"
    write_trajectories(tmp_path / "more", [twin])
    edit_part(bad, "cpt", lambda rs: [*rs, pooled_row(bad, "cpt", "planted-twin")])
    assign(bad, "planted-twin", "cpt")
    hide(bad, manifest_edit=lambda m: m["inputs"].append({"path": str(tmp_path / "more")}))
    found = checks(bad)
    assert "checksum" not in found and "stats" not in found
    assert found & {"near_duplicates", "exact_duplicates"}


@pytest.mark.parametrize(
    ("source", "target"), [("cpt", "sft"), ("sft", "rl"), ("rl", "cpt"), ("eval", "sft")]
)
def test_hidden_exact_copy_across_any_two_pools(
    built: tuple[Path, Path, dict[str, Any]], tmp_path: Path, source: str, target: str
) -> None:
    """Exact content keys are compared across every pair of pools, not only against eval."""
    from schemas.shards import iter_trajectories

    bad = copy(built, tmp_path)
    key = "id" if source == "eval" else "trajectory_id"
    source_ids = {r[key] for r in rows(bad, source) if not r.get("is_knowledge")}
    twin = next(t for t in iter_trajectories(built[0] / "shards") if t.id in source_ids)
    twin.id = "planted-copy"
    write_trajectories(tmp_path / "more", [twin])
    edit_part(bad, target, lambda rs: [*rs, pooled_row(bad, target, "planted-copy")])
    assign(bad, "planted-copy", target)
    hide(bad, manifest_edit=lambda m: m["inputs"].append({"path": str(tmp_path / "more")}))
    found = checks(bad)
    assert "checksum" not in found and "stats" not in found
    assert "exact_duplicates" in found


def test_hidden_contaminated_record(built: tuple[Path, Path, dict[str, Any]], tmp_path: Path) -> None:
    bad = copy(built, tmp_path)
    edit_part(bad, "cpt", lambda rs: [*rs, pooled_row(bad, "cpt", "contaminated")])
    assign(bad, "contaminated", "cpt")
    edit_part(bad, "removed", lambda rs: [r for r in rs if r["record_id"] != "contaminated"])
    hide(bad)
    found = checks(bad)
    assert "eval_overlap" in found and "checksum" not in found


def test_caps_targets_spans_and_shape(built: tuple[Path, Path, dict[str, Any]], tmp_path: Path) -> None:
    bad = copy(built, tmp_path)

    def sft(rs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        rs[0]["messages"][-1]["content"] = "<predicted_observation>\n\n</predicted_observation>"
        rs[1]["messages"][-1]["content"] = "<predicted_observation>\ncut without its closing tag"
        rs[2]["messages"][1]["content"] += " and more words the recorded count does not include"
        rs[3]["messages"] = rs[3]["messages"][:1] + rs[3]["messages"][3:]
        return rs

    edit_part(bad, "sft", sft)

    def cpt(rs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        rs[0]["loss_spans"][-1]["end"] = len(rs[0]["text"]) + 5
        return rs

    edit_part(bad, "cpt", cpt)
    hide(bad)
    found = checks(bad)
    assert {"sft_target", "sft_token_cap", "conversation_shape", "loss_spans"} <= found


def test_over_cap_rows_under_a_rewritten_config(
    built: tuple[Path, Path, dict[str, Any]], tmp_path: Path
) -> None:
    bad = copy(built, tmp_path)
    longest = max(r["prompt_tokens"] for r in rows(bad, "rl"))
    m = json.loads((bad / "manifest.json").read_text())
    cfg = PoolsConfig.from_dict(m["config"])
    cfg.rl.max_prompt_tokens = longest - 1
    cfg.sft.max_tokens = max(r["tokens"] for r in rows(bad, "sft")) - 1
    assert {"rl_token_cap", "sft_token_cap"} <= checks(bad, cfg)


def test_statistics_must_equal_the_rows(built: tuple[Path, Path, dict[str, Any]], tmp_path: Path) -> None:
    bad = copy(built, tmp_path)
    edit_part(bad, "rl", lambda rs: rs[1:])
    hide(bad, summaries=False)
    found = checks(bad)
    assert "stats" in found and "checksum" not in found


def test_template_spread() -> None:
    versions = list(range(2, 12))
    assert spread_violation(Counter({v: 10 for v in versions}), versions) == ""
    assert spread_violation(Counter({2: 100}), versions) != ""
    assert spread_violation(Counter({2: 5}), versions) == ""  # too few samples to judge


def test_ground_truth_must_be_the_trajectorys_observation(
    built: tuple[Path, Path, dict[str, Any]], tmp_path: Path
) -> None:
    bad = copy(built, tmp_path)

    def rl(rs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        rs[0]["ground_truth"] = "a made-up observation"
        return rs

    edit_part(bad, "rl", rl)
    hide(bad)
    assert "lineage" in checks(bad)


def test_missing_inputs_fail_never_skip(built: tuple[Path, Path, dict[str, Any]], tmp_path: Path) -> None:
    bad = copy(built, tmp_path)
    hide(bad, manifest_edit=lambda m: m["inputs"].append({"path": str(tmp_path / "gone")}))
    assert "input_missing" in checks(bad)
    bad2 = tmp_path / "bad2"
    shutil.copytree(built[1], bad2)
    hide(bad2, manifest_edit=lambda m: m["evaluation_sets"].append(str(tmp_path / "gone.jsonl")))
    assert "input_missing" in checks(bad2)
    result = CliRunner().invoke(app, ["pools", "verify", str(bad2)])
    assert result.exit_code == 1 and "input_missing" in result.output
