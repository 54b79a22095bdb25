"""Every input of `pools build` reaches the build, or the command refuses it by name: several values
after one option, stray arguments, folders without shards, pool folders as inputs, pools a
configuration leaves empty."""

from __future__ import annotations

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
