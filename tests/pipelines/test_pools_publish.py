"""`pools build` output handling: staging + atomic publish, --overwrite, --incremental, --group-by,
Beam options after `--`, YAML errors and per-stage progress."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from schemas.shards import write_trajectories
from schemas.trajectory import SourceKind
from tests.helpers.pools_data import build_fixture, terminal
from worldline.cli import app

CONFIG = """
assignment:
  by_kind: {infra: cpt, public: cpt, knowledge: cpt, inhouse: {sft: 1, rl: 1, eval: 1}}
"""


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["pools", "build", *args])
    return result.exit_code, " ".join(result.output.split())  # rich wraps long lines


def tables(out: Path) -> dict[str, list[dict]]:  # type: ignore[type-arg]
    found = {}
    for name in ("cpt", "sft", "rl", "eval", "assignments", "removed"):
        found[name] = [
            r for f in sorted((out / name).glob("part-*.parquet")) for r in pq.read_table(f).to_pylist()
        ]
    return found


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("publish")
    build_fixture(root)
    (root / "pools.yaml").write_text(CONFIG)
    more = [terminal(f"new-{i}", f"inhouse-new-{i}", SourceKind.INHOUSE, 700 + i) for i in range(4)]
    more.append(terminal("new-cpt", "infra-new", SourceKind.INFRA, 800))
    write_trajectories(root / "more", more)
    return root


def base_args(root: Path, out: Path, *inputs: str) -> list[str]:
    ins = [a for name in inputs or ("shards",) for a in ("--in", str(root / name))]
    return [*ins, "--out", str(out), "--config", str(root / "pools.yaml"), "--eval", str(root / "eval")]


def leftovers(out: Path) -> list[str]:
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}."))


def test_existing_output_is_refused_then_replaced_atomically(data: Path) -> None:
    out = data / "out-overwrite"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    code, output = run(*base_args(data, out))
    assert code == 2 and "--overwrite" in output
    assert (out / "notes.txt").read_text() == "keep me" and leftovers(out) == []

    code, output = run(*base_args(data, out), "--overwrite")
    assert code == 0, output
    assert not (out / "notes.txt").exists() and (out / "manifest.json").exists()
    stale = out / "rl" / "part-09999-000.parquet"
    stale.write_bytes(sorted((out / "rl").glob("part-*.parquet"))[0].read_bytes())
    code, output = run(*base_args(data, out), "--overwrite")
    assert code == 0 and not stale.exists() and leftovers(out) == []


def test_failed_build_publishes_nothing(data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pipelines.finalize

    out = data / "out-failed"
    code, _ = run(*base_args(data, out))
    assert code == 0
    before = (out / "manifest.json").read_bytes()

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(pipelines.finalize, "finalize", broken)
    result = CliRunner().invoke(app, ["pools", "build", *base_args(data, out), "--overwrite"])
    assert result.exit_code != 0
    assert (out / "manifest.json").read_bytes() == before and leftovers(out) == []


def test_incremental_equals_a_full_rebuild(data: Path) -> None:
    inc, full = data / "out-inc", data / "out-full"
    assert run(*base_args(data, inc))[0] == 0
    code, output = run(*base_args(data, inc, "more"), "--incremental")
    assert code == 0, output
    assert "1 new input(s)" in output
    code, output = run(*base_args(data, full, "shards", "more"))
    assert code == 0, output
    a, b = tables(inc), tables(full)
    assert a == b and any(r["trajectory_id"].startswith("new-") for r in a["assignments"])
    ma, mb = (json.loads((o / "manifest.json").read_text()) for o in (inc, full))
    assert ma["stats"] == mb["stats"] and [i["path"] for i in ma["inputs"]] == [
        i["path"] for i in mb["inputs"]
    ]


def test_incremental_refuses_when_an_earlier_input_changed(data: Path, tmp_path: Path) -> None:
    import shutil

    src = tmp_path / "shards"
    shutil.copytree(data / "shards", src)
    out = tmp_path / "out"
    args = ["--in", str(src), "--out", str(out), "--config", str(data / "pools.yaml")]
    assert run(*args)[0] == 0
    manifest = src / "manifest.json"
    manifest.write_text(manifest.read_text().replace('"rows"', '"rows" ', 1))
    code, output = run("--in", str(data / "more"), *args[2:], "--incremental")
    assert code == 2 and "changed since the last build" in output
    code, output = run("--in", str(data / "more"), "--out", str(tmp_path / "none"), "--incremental")
    assert code == 2 and "run a full build first" in output


def test_group_by_default_warns_and_can_be_chosen(data: Path) -> None:
    groups = {}
    for mode in (None, "source", "record"):
        out = data / f"out-group-{mode}"
        code, output = run(*base_args(data, out), *(["--group-by", mode] if mode else []))
        assert code == 0, output
        assert "no source group" in output and "--group-by" in output
        groups[mode] = {r["trajectory_id"]: r["source_id"] for r in tables(out)["assignments"]}
    assert groups["source"]["infra-0"] == groups["source"]["infra-1"] == "infra-run-a"
    assert groups[None]["infra-0"] != groups[None]["infra-1"]  # different tasks
    assert groups[None]["infra-0"].startswith("infra-run-a/task:")
    assert groups["record"]["inh-1"] == "inhouse-1/record:inh-1"
    code, output = run(*base_args(data, data / "out-bad-group"), "--group-by", "galaxy")
    assert code == 2 and "group_by" in output


def test_unknown_options_yaml_errors_and_progress(data: Path) -> None:
    out = data / "out-options"
    code, output = run(*base_args(data, out), "--bogus", "1")
    assert code == 2 and "--bogus" in output
    code, output = run(*base_args(data, out), "--", "--not_a_beam_option", "1")
    assert code == 2 and "--not_a_beam_option" in output and not out.exists()
    bad = data / "bad.yaml"
    bad.write_text("assignment:\n  mode: [unclosed\n")
    code, output = run("--in", str(data / "shards"), "--out", str(out), "--config", str(bad))
    assert code == 2 and "not valid YAML" in output and "bad.yaml:" in output
    code, output = run(*base_args(data, out), "--", "--direct_num_workers", "1")
    assert code == 0, output
    assert "filter: " in output and "records_in=" in output and "render: " in output


def test_flex_template_launch_arguments_put_beam_options_after_the_separator() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("flex_main", "infra/dataflow/main.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    ours, beam = module.split_arguments(
        ["--in=gs://b/in", "--runner=DataflowRunner", "--out", "gs://b/out", "--project", "p", "--overwrite"]
    )
    assert ours == ["--in=gs://b/in", "--out", "gs://b/out", "--overwrite"]
    assert beam == ["--runner=DataflowRunner", "--project", "p"]
    from pipelines.runners import unknown_beam_options

    assert unknown_beam_options(beam) == []


def test_publish_on_an_object_store_replaces_every_object_and_moves_the_manifest_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On an object store nothing renames a folder: old objects go, new ones move in, and
    OUT/manifest.json (what readers start from) is removed first and written last."""
    from pipelines import fs, publish
    from tests.helpers import memfs

    url = f"{memfs.SCHEME}://bucket-{tmp_path.name}"
    out = f"{url}/pools"
    for name, data in {
        "manifest.json": b"old",
        "cpt/part-00000-000.parquet": b"old",
        "gone.txt": b"x",
    }.items():
        memfs.FILES[f"{out}/{name}"] = data
    with pytest.raises(publish.PublishError, match="--overwrite"):
        publish.check_target(out, overwrite=False, incremental=False)
    staging = publish.staging_folder(out)
    assert fs.split(staging)[0] == url and fs.split(staging)[1].startswith(".pools.staging-")
    for name in ("cpt/part-00000-000.parquet", "sft/part-00000-000.parquet", "manifest.json", ".tmp-upload"):
        memfs.FILES[f"{staging}/{name}"] = b"new"
    moves: list[list[str]] = []
    real_move = fs.move_files

    def record(sources: list[str], targets: list[str]) -> None:
        moves.append([fs.relative(t, out) for t in targets])
        assert not fs.is_file(f"{out}/manifest.json"), "the old manifest is still readable during the move"
        real_move(sources, targets)

    monkeypatch.setattr(fs, "move_files", record)
    try:
        publish.publish(staging, out)
        published = memfs.listing(out)
        left = memfs.listing(url)
    finally:
        memfs.clear(url)
    assert published == {
        "cpt/part-00000-000.parquet": b"new",
        "sft/part-00000-000.parquet": b"new",
        "manifest.json": b"new",
    }
    assert moves[-1] == ["manifest.json"] and all("manifest.json" not in m for m in moves[:-1])
    assert sorted(left) == sorted(f"pools/{k}" for k in published), "staging objects left behind"


def test_incremental_and_overwrite_on_an_object_store(data: Path) -> None:
    """The scheduled-job path with gs://-like inputs and output: refuse, incremental (equal to a full
    build), overwrite; no staging or spill objects are left in the bucket."""
    from tests.helpers import memfs

    url = f"{memfs.SCHEME}://bucket-{data.name}-inc"
    for name in ("shards", "more", "eval"):
        memfs.upload_tree(data / name, f"{url}/{name}")

    def remote(out: str, *inputs: str) -> list[str]:
        ins = [a for name in inputs for a in ("--in", f"{url}/{name}")]
        return [*ins, "--out", f"{url}/{out}", "--config", str(data / "pools.yaml"), "--eval", f"{url}/eval"]

    try:
        assert run(*remote("inc", "shards"))[0] == 0
        first = memfs.listing(f"{url}/inc")
        code, output = run(*remote("inc", "shards"))
        assert code == 2 and "--overwrite" in output
        code, output = run(*remote("inc", "more"), "--incremental")
        assert code == 0 and "1 new input(s)" in output, output
        assert run(*remote("full", "shards", "more"))[0] == 0
        inc, full = memfs.listing(f"{url}/inc"), memfs.listing(f"{url}/full")
        assert run(*remote("full", "shards"), "--overwrite")[0] == 0
        replaced = memfs.listing(f"{url}/full")
        everything = memfs.listing(url)
    finally:
        memfs.clear(url)
    parts = sorted(k for k in inc if k.endswith(".parquet") and not k.startswith("_build/"))
    assert parts and parts == sorted(
        k for k in full if k.endswith(".parquet") and not k.startswith("_build/")
    )
    assert all(inc[k] == full[k] for k in parts)
    stats = [json.loads(m["manifest.json"])["stats"] for m in (inc, full, replaced)]
    assert stats[0] == stats[1] and stats[2]["records_in"] < stats[1]["records_in"]
    # Overwritten: exactly the objects of a build of the first input, none of the bigger build's left.
    assert sorted(replaced) == sorted(first)
    assert all(replaced[k] == first[k] for k in replaced if k.endswith(".parquet") and "_build" not in k)
    assert not [k for k in everything if ".staging-" in k or "/_build/kept/" in k or "/_build/runs/" in k]


def _job_processes(staging: Path) -> list[int]:
    from pipelines.publish import job_processes

    return job_processes(str(staging))


def _start_build(data: Path, out: Path) -> Any:
    import os
    import subprocess
    import sys

    worldline = str(Path(sys.executable).parent / "worldline")
    cmd = [worldline, "pools", "build", *base_args(data, out), "--overwrite"]
    cmd += ["--", "--direct_num_workers", "2", "--direct_running_mode", "multi_processing"]
    env = {**os.environ, "PYTHONPATH": str(Path.cwd())}
    log = open(out.parent / f"{out.name}.log", "ab")  # a file, not a pipe nobody reads while it runs
    return subprocess.Popen(cmd, env=env, stdout=log, stderr=log)


def _wait_for_workers(proc: Any, out: Path, timeout_s: float = 180.0) -> Path:
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, (out.parent / f"{out.name}.log").read_text()[-2000:]
        staging = [p for p in leftovers(out) if ".staging-" in p]
        if staging and _job_processes(out.parent / staging[0]):
            return out.parent / staging[0]
        time.sleep(0.2)
    raise AssertionError("the build started no worker processes in time")


@pytest.mark.slow
def test_a_terminated_or_killed_build_leaves_no_staging_and_no_workers(data: Path) -> None:
    """SIGTERM to a real multi-process build: its staging folder and Beam workers are gone when it
    exits. kill -9: the next build of the same OUT removes both before it runs."""
    import signal
    import time

    out = data / "out-signals"
    proc = _start_build(data, out)
    try:
        staging = _wait_for_workers(proc, out)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) != 0
    finally:
        if proc.poll() is None:  # a hung build must not outlive the test
            proc.kill()
    assert not staging.exists() and [p for p in leftovers(out) if ".staging-" in p] == []
    assert _job_processes(staging) == []

    proc = _start_build(data, out)
    staging = _wait_for_workers(proc, out)
    proc.kill()
    proc.wait(timeout=30)
    time.sleep(0.5)
    assert staging.exists()  # a kill -9 runs no cleanup
    code, output = run(*base_args(data, out), "--overwrite")
    assert code == 0, output
    assert not staging.exists() and [p for p in leftovers(out) if ".staging-" in p] == []
    assert _job_processes(staging) == []
