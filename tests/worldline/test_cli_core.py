"""`worldline validate / stats / schema`: one clear line per problem (file, record, field), no tracebacks."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from schemas import TRAJECTORY_SCHEMA, to_table, write_trajectories
from tests.schemas.test_schemas_shards import make_traj
from worldline.cli import app

runner = CliRunner()


def run(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


def write_rows(path: Path, rows: list[dict], schema: pa.Schema = TRAJECTORY_SCHEMA) -> Path:
    """Write rows bypassing the model, as a foreign or buggy writer would."""
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    return path


def relaxed(schema: pa.Schema) -> pa.Schema:
    """The same columns with every field nullable, as polars or a hand-rolled writer would produce."""

    def loosen(t: pa.DataType) -> pa.DataType:
        if pa.types.is_struct(t):
            return pa.struct([pa.field(f.name, loosen(f.type), nullable=True) for f in t])
        if pa.types.is_list(t):
            return pa.list_(pa.field("item", loosen(t.value_type), nullable=True))
        return t

    return pa.schema([pa.field(f.name, loosen(f.type), nullable=True) for f in schema])


def good_record(i: int = 0) -> dict:
    return make_traj(i).to_record()


def test_valid_dataset_exits_zero(tmp_path: Path) -> None:
    write_trajectories(tmp_path, [make_traj(i) for i in range(3)])
    code, out = run("validate", str(tmp_path))
    assert code == 0 and "all records valid" in out


@pytest.mark.parametrize(
    ("mutate", "field", "reason"),
    [
        (lambda r: r.update(domain="spaceship"), "domain", "invalid_enum"),
        (lambda r: r.update(task=None), "task", "missing_field"),
        (lambda r: r["source"].update(kind="stolen"), "source.kind", "invalid_enum"),
        (lambda r: r["turns"][1]["action"].update(kind="teleport"), "turns[1].action.kind", "invalid_enum"),
        (
            lambda r: r["turns"][0]["observation"].update(text=None),
            "turns[0].observation.text",
            "missing_field",
        ),
        (lambda r: r.update(metadata="{not json"), "metadata", "invalid_json"),
        (lambda r: r.update(schema_version="9.0.0"), "schema_version", "newer_schema"),
    ],
)
def test_bad_record_names_file_record_and_field(tmp_path: Path, mutate, field: str, reason: str) -> None:  # type: ignore[no-untyped-def]
    bad = good_record(1)
    mutate(bad)
    path = write_rows(tmp_path / "bad.parquet", [good_record(0), bad], schema=relaxed(TRAJECTORY_SCHEMA))
    code, out = run("validate", str(path), "--json")
    assert code == 1
    problems = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert len(problems) == 1, out
    p = problems[0]
    assert (p["file"], p["row"], p["record_id"], p["field"], p["reason"]) == (
        str(path),
        1,
        bad["id"],
        field,
        reason,
    )
    # the human form says the same on one line
    code, out = run("validate", str(path))
    assert code == 1 and f"id={bad['id']}" in out and field in out and "Traceback" not in out


def test_invalid_utf8_is_located(tmp_path: Path) -> None:
    table = to_table([make_traj(0), make_traj(1)])
    turns = table.column("turns").combine_chunks()
    # Corrupt the bytes of one observation text in row 1 without Arrow's UTF-8 checks.
    flat = turns.flatten()
    obs = flat.field("observation")
    texts = obs.field("text")
    values = [v.encode() for v in texts.to_pylist()]
    values[3] = b"bad \xff\xfe bytes"
    bad_texts = pa.array(values, type=pa.binary()).view(pa.string())
    new_obs = pa.StructArray.from_arrays(
        [bad_texts, obs.field("format"), obs.field("is_error")], fields=list(obs.type)
    )
    new_flat = pa.StructArray.from_arrays(
        [new_obs if f.name == "observation" else flat.field(f.name) for f in flat.type],
        fields=list(flat.type),
    )
    new_turns = pa.ListArray.from_arrays(turns.offsets, new_flat, type=turns.type)
    table = table.set_column(
        table.schema.get_field_index("turns"), TRAJECTORY_SCHEMA.field("turns"), new_turns
    )
    path = tmp_path / "utf8.parquet"
    pq.write_table(table, path)
    code, out = run("validate", str(path), "--json")
    assert code == 1
    p = json.loads(out.splitlines()[0])
    assert p["reason"] == "invalid_utf8" and p["row"] == 1 and p["field"] == "turns[1].observation.text"


def test_truncated_parquet(tmp_path: Path) -> None:
    write_trajectories(tmp_path / "ds", [make_traj(i) for i in range(5)])
    part = next((tmp_path / "ds" / "trajectories").glob("part-*.parquet"))
    data = part.read_bytes()
    part.write_bytes(data[: len(data) // 2])
    code, out = run("validate", str(tmp_path / "ds"))
    assert code == 1 and "truncated or corrupt" in out and part.name in out and "Traceback" not in out


def test_wrong_schema_and_newer_file_version(tmp_path: Path) -> None:
    foreign = write_rows(tmp_path / "f.parquet", [{"x": 1}], schema=pa.schema([("x", pa.int64())]))
    code, out = run("validate", str(foreign))
    assert code == 1 and "missing column(s) id" in out
    future = tmp_path / "future.parquet"
    pq.write_table(
        to_table([make_traj(0)]).replace_schema_metadata({b"worldline.schema_version": b"2.0.0"}), future
    )
    code, out = run("validate", str(future))
    assert code == 1 and "2.0.0" in out and "upgrade worldline" in out


def test_missing_required_column_type_mismatch(tmp_path: Path) -> None:
    schema = TRAJECTORY_SCHEMA.set(TRAJECTORY_SCHEMA.get_field_index("task"), pa.field("task", pa.int64()))
    rec = good_record()
    rec["task"] = 5
    path = write_rows(tmp_path / "t.parquet", [rec], schema=schema)
    code, out = run("validate", str(path))
    assert code == 1 and "'task'" in out and "expected string" in out


def test_jsonl_validation(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    good = make_traj(0).to_json()
    bad = make_traj(1).to_json()
    del bad["source"]["name"]
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n{oops\n")
    code, out = run("validate", str(path), "--json")
    problems = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert code == 1
    assert [(p["row"], p["field"]) for p in problems] == [(2, "source.name"), (3, "(line)")]


def test_stats_counts_per_domain_and_source_kind(tmp_path: Path) -> None:
    trajs = [
        make_traj(i, domain=d, turns=n)
        for i, (d, n) in enumerate([("terminal", 2), ("terminal", 3), ("swe", 1)])
    ]
    write_trajectories(tmp_path, trajs)
    code, out = run("stats", str(tmp_path), "--json")
    assert code == 0
    data = json.loads(out)
    rows = {(r["domain"], r["source_kind"]): r for r in data["by_domain_and_source_kind"]}
    assert rows[("terminal", "infra")]["trajectories"] == 2 and rows[("terminal", "infra")]["turns"] == 5
    assert rows[("swe", "infra")]["turns"] == 1
    from worldline.tokenizer import get_token_counter

    counter = get_token_counter()
    expected = counter.count("\n".join(["task 2", "", "", "", "echo 2-0", "2-0\n$ "]))
    assert rows[("swe", "infra")]["tokens"] == expected
    assert data["total"]["trajectories"] == 3


def test_schema_json_is_valid_json_schema() -> None:
    import jsonschema

    code, out = run("schema", "--json")
    assert code == 0
    schema = json.loads(out)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert set(schema["properties"]["domain"]["enum"]) == {
        "mcp",
        "search",
        "terminal",
        "swe",
        "android",
        "web",
        "os",
    }


def test_files_from_other_writers_with_loose_nullability_are_read(tmp_path: Path) -> None:
    from schemas import arrow_dataset, iter_trajectories, open_dataset

    path = write_rows(
        tmp_path / "loose.parquet", [good_record(0), good_record(1)], schema=relaxed(TRAJECTORY_SCHEMA)
    )
    assert [t.id for t in iter_trajectories(path)] == [good_record(0)["id"], good_record(1)["id"]]
    assert open_dataset(path).collect().height == 2
    assert arrow_dataset(path).count_rows() == 2
    assert run("validate", str(path))[0] == 0


def test_each_command_module_registers_exactly_the_commands_it_is_listed_with() -> None:
    """`worldline X` imports only the module listed for X, so the list must name what each module
    really registers, no more, no less; otherwise a command would be missing when run on its own."""
    import typer

    from worldline.cli import COMMAND_MODULES, make_app

    everything = set()
    for module, listed in COMMAND_MODULES.items():
        alone = make_app([module])
        names = {c.name for c in alone.registered_commands} | {g.name for g in alone.registered_groups}
        assert names == set(listed), module
        everything |= names
    full = make_app()
    assert {c.name for c in full.registered_commands} | {g.name for g in full.registered_groups} == everything
    assert isinstance(full, typer.Typer)


def test_a_pools_command_line_imports_neither_the_container_client_nor_polars() -> None:
    import subprocess
    import sys

    code = (
        "import sys; from worldline.cli import app_for; app_for(['pools', 'build', '--help']); "
        "print(sorted(m for m in ('docker', 'polars', 'collectors.cli') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    code = (
        "import sys; from worldline.cli import app_for; app_for([]); print('collectors.cli' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "True"  # no command named: every command is listed


def test_every_command_runs_with_only_its_own_module_mounted() -> None:
    from worldline.cli import COMMAND_MODULES, app_for

    for commands in COMMAND_MODULES.values():
        for command in commands:
            result = CliRunner().invoke(app_for([command]), [command, "--help"], prog_name="worldline")
            assert result.exit_code == 0, (command, result.output)
            usage = next(line for line in result.output.splitlines() if "Usage:" in line)
            assert f"worldline {command} " in usage, (command, usage)
