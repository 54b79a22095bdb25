"""Every input of `pools build` reaches the build, or the command refuses it by name: several values
after one option, stray arguments, folders without shards, pool folders as inputs, pools a
configuration leaves empty."""

from __future__ import annotations

import json
from pathlib import Path

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
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "300"})
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result.exit_code, " ".join(result.output.split())


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("inputs")
    build_fixture(root)
    (root / "pools.yaml").write_text(CONFIG)
    write_trajectories(root / "more", [terminal("more-0", "infra-more", SourceKind.INFRA, 900)])
    return root


@pytest.mark.parametrize(
    "args",
    [
        ["--in", "{shards}", "{more}"],
        ["--in", "{shards}", "--eval", "{eval}", "{more}"],
        ["--in", "{shards}", "--knowledge", "{knowledge}", "{more}", "--", "--direct_num_workers", "1"],
        ["--in", "{shards}", "--", "{more}"],
    ],
)
def test_several_values_after_one_option_are_refused_by_name(data: Path, args: list[str]) -> None:
    paths = {
        "shards": data / "shards",
        "more": data / "more",
        "eval": data / "eval",
        "knowledge": data / "knowledge.jsonl",
    }
    filled = [a.format(**{k: str(v) for k, v in paths.items()}) for a in args]
    out = data / "out-several"
    code, output = run("pools", "build", "--out", str(out), *filled)
    assert code == 2, output
    assert str(data / "more") in output and "repeat" in output and "--in A --in B" in output
    assert not out.exists() and "Traceback" not in output


def test_verify_refuses_stray_arguments(data: Path) -> None:
    code, output = run("pools", "verify", str(data / "nope"), str(data / "also"))
    assert code == 2 and str(data / "also") in output and "Traceback" not in output


def test_clean_beam_refuses_unknown_options_and_stray_arguments(
    data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pipelines.clean_beam import run as clean_beam

    trace = data / "eval" / "terminal_test.jsonl"
    for argv in (
        [str(trace), "--out", str(data / "cb"), "--source-nmae", "x"],
        [str(trace), "--out", str(data / "cb"), "--licence", "MIT", "extra.cast"],
    ):
        with pytest.raises(SystemExit) as exc:
            clean_beam(argv)
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert argv[-1] in err or argv[-2] in err, err
    assert not (data / "cb").exists()


@pytest.fixture(scope="module")
def built(data: Path) -> Path:
    out = data / "built"
    code, output = run(
        "pools",
        "build",
        "--in",
        str(data / "shards"),
        "--out",
        str(out),
        "--config",
        str(data / "pools.yaml"),
    )
    assert code == 0, output
    return out


def test_a_pool_folder_is_a_dataset_every_reader_accepts(built: Path, data: Path) -> None:
    import worldline
    from schemas import get_trajectory

    manifest = json.loads((built / "manifest.json").read_text())
    n_eval = manifest["pools"]["eval"]["trajectories"]
    assert n_eval > 0
    pool_manifest = json.loads((built / "eval" / "manifest.json").read_text())
    assert all((built / "eval" / f["path"]).is_file() for f in pool_manifest["files"])

    code, output = run("stats", str(built / "eval"), "--json", "--no-tokens")
    assert code == 0, output
    assert json.loads(output)["total"]["trajectories"] == n_eval
    code, output = run("validate", str(built / "eval"))
    assert code == 0 and "all records valid" in output, output
    code, output = run("export", "jsonl", str(built / "eval"), "--out", str(data / "eval.jsonl"))
    assert code == 0, output
    ids = [json.loads(line)["id"] for line in (data / "eval.jsonl").read_text().splitlines()]
    assert len(ids) == n_eval
    assert get_trajectory(built / "eval", ids[0]).id == ids[0]
    assert worldline.open_dataset(built / "eval").collect().height == n_eval

    code, output = run(
        "pools", "build", "--in", str(data / "more"), "--eval", str(built / "eval"), "--out", str(data / "b2")
    )
    assert code == 0, output
    assert " 0 evaluation turn(s)" not in output and "evaluation turn(s)" in output


def test_pool_manifests_written_relative_to_out_still_read(built: Path, tmp_path: Path) -> None:
    import shutil

    old = tmp_path / "old"
    shutil.copytree(built, old)
    m = json.loads((old / "eval" / "manifest.json").read_text())
    for f in m["files"]:
        f["path"] = f"eval/{f['path']}"
    (old / "eval" / "manifest.json").write_text(json.dumps(m))
    code, output = run("validate", str(old / "eval"))
    assert code == 0 and "all records valid" in output, output


def test_readers_say_what_is_wrong_with_a_pool_or_a_missing_part(built: Path, tmp_path: Path) -> None:
    import shutil

    code, output = run("stats", str(built / "rl"), "--json")
    assert code == 0, output
    for command in (["validate"], ["export", "jsonl"]):
        extra = ["--out", str(tmp_path / "x.jsonl")] if command[0] == "export" else []
        code, output = run(*command, str(built / "sft"), *extra)
        assert code != 0 and "sft pool" in output and "corrupt" not in output, output
        code, output = run(*command, str(built), *extra)
        assert code != 0 and "pools build" in output and "/eval" in output, output
    copy = tmp_path / "copy"
    shutil.copytree(built / "eval", copy)
    for part in copy.glob("part-*.parquet"):
        part.unlink()
    code, output = run("stats", str(copy), "--no-tokens")
    assert code != 0 and "missing" in output and "corrupt" not in output, output


def test_nothing_to_read_is_an_error(data: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("no shards here")
    code, output = run("stats", str(empty))
    assert code != 0 and str(empty) in output and "Traceback" not in output, output
    code, output = run("export", "jsonl", str(empty), "--out", str(tmp_path / "e.jsonl"))
    assert code != 0 and str(empty) in output, output
    assert not (tmp_path / "e.jsonl").exists()
    out = tmp_path / "pools"
    bare = tmp_path / "bare"  # a .txt file is a knowledge document: an empty folder is no corpus
    bare.mkdir()
    for option, folder in (("--in", empty), ("--eval", empty), ("--knowledge", bare)):
        ins = ["--in", str(data / "shards")] if option != "--in" else []
        code, output = run("pools", "build", *ins, option, str(folder), "--out", str(out))
        assert code == 2 and str(folder) in output and option in output, (option, output)
        assert not out.exists()
    write_trajectories(tmp_path / "zero", [])
    code, output = run("pools", "build", "--in", str(tmp_path / "zero"), "--out", str(out))
    assert code == 2 and str(tmp_path / "zero") in output and not out.exists(), output


def test_a_pool_no_source_kind_maps_to_is_named(data: Path, tmp_path: Path) -> None:
    """The default rules send infra (collected) data to CPT only: SFT, RL and eval stay empty, and the
    build says which pools and why."""
    infra = tmp_path / "infra"
    write_trajectories(infra, [terminal(f"c-{i}", f"infra-{i}", SourceKind.INFRA, 300 + i) for i in range(3)])
    code, output = run("pools", "build", "--in", str(infra), "--out", str(tmp_path / "o"))
    assert code == 0, output
    for pool in ("sft", "rl", "eval"):
        assert f"pool {pool} is empty" in output, output
    assert "assignment.by_kind" in output and "infra" in output
    assert "pool cpt is empty" not in output
