"""The MCP domain against real servers: every bundled server (seeded state, tools/list, several calls
including failing ones), a custom stdio server from a task's command, streamable HTTP, failures that
become observations or env_failure trajectories, the openai policy, and the runner at concurrency > 1."""

from __future__ import annotations

import asyncio
import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from docker import DockerClient
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from collectors import engine
from collectors.collection import CollectConfig, CollectError, collect
from collectors.doctor import run_checks
from collectors.environment import EnvironmentOptions, Task, TaskError, tool_call_action
from collectors.mcp import ArgumentCheck, MCPEnvironment
from collectors.mcp_client import ALLOWED_URLS_ENV, MCPConnection, MCPServerError, render_tool_result
from collectors.mcp_seed import SeedRefused, write_file
from collectors.mcp_servers import BUNDLED, Launch
from collectors.sandbox import LABEL, LABEL_OWNER_PID
from schemas import TrajectoryStatus, iter_trajectories
from schemas.mcp_observation import STRUCTURED_CONTENT, write_json
from schemas.turn_facts import ENDED, OUT_OF_ACTION_SPACE, TIMED_OUT, facts
from tests.helpers.fakellm import FakeReply, FakeToolCall
from tests.helpers.strategies import json_value
from worldline.cli import app

ROOT = Path(__file__).resolve().parents[2]
TEST_SERVER = str(ROOT / "tests" / "fixtures" / "mcp_test_server.py")
TASKS = ROOT / "collectors" / "tasks" / "mcp_examples.jsonl"


@pytest.fixture(scope="module")
def client() -> DockerClient:
    return engine.connect()


def own_sandboxes(client: DockerClient) -> list[Any]:
    """Sandboxes this test process created (other helpers share the engine)."""
    return [
        c
        for c in client.containers.list(all=True, filters={"label": LABEL})
        if (c.labels or {}).get(LABEL_OWNER_PID) == str(os.getpid())
    ]


def custom_task(task_id: str = "custom", **extra: Any) -> Task:
    """The test server, on this machine by the task's explicit choice (a task's command is sandboxed
    unless it says `"sandbox": false`)."""
    cfg = {"command": sys.executable, "args": [TEST_SERVER], "timeout_s": 8, "sandbox": False, **extra}
    return Task(id=task_id, instruction="use the test server", config={"mcp": cfg})


def call(env: MCPEnvironment, name: str, **arguments: Any) -> Any:
    return env.step(tool_call_action(name, arguments))


# -- every bundled server, for real ----------------------------------------------------------------

# server -> (seed configuration, [(tool, arguments, text expected in the observation, is_error)])
BUNDLED_CASES: dict[str, tuple[dict[str, Any], list[tuple[str, dict[str, Any], str, bool | None]]]] = {
    "filesystem": (
        {"files": {"plan.md": "# Plan\nship it on Friday\n", "src/app.py": "print('hi')\n"}},
        [
            ("read_text_file", {"path": "plan.md"}, "ship it on Friday", False),
            ("write_file", {"path": "out.txt", "content": "written"}, "out.txt", False),
            ("read_text_file", {"path": "out.txt"}, "written", False),
            ("read_text_file", {"path": "missing.md"}, "ENOENT", True),
        ],
    ),
    "memory": (
        {"graph": {"entities": [{"name": "Lyon", "entityType": "city", "observations": ["on the Rhone"]}]}},
        [
            ("search_nodes", {"query": "Lyon"}, "on the Rhone", False),
            (
                "create_entities",
                {"entities": [{"name": "Rhone", "entityType": "river", "observations": []}]},
                "Rhone",
                False,
            ),
            ("create_entities", {"entities": "Rhone"}, "expected array", True),
        ],
    ),
    "git": (
        {
            "commits": [
                {"files": {"a.txt": "one\n"}, "message": "First"},
                {"files": {"a.txt": "two\n"}, "message": "Second change"},
            ],
            "uncommitted": {"b.txt": "new\n"},
        },
        [
            ("git_log", {"repo_path": "."}, "Second change", False),
            ("git_status", {"repo_path": "."}, "b.txt", False),
            ("git_show", {"repo_path": ".", "revision": "no-such-ref"}, "no-such-ref", True),
        ],
    ),
    "time": (
        {"timezone": "Europe/Paris"},
        [
            (
                "convert_time",
                {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"},
                "21:00",
                False,
            ),
            (
                "convert_time",
                {"source_timezone": "UTC", "time": "noon", "target_timezone": "Asia/Tokyo"},
                "Invalid time",
                True,
            ),
        ],
    ),
    "sqlite": (
        {"sql": ["CREATE TABLE t (k TEXT, v INTEGER)", "INSERT INTO t VALUES ('x', 41), ('y', 1)"]},
        [
            ("read_query", {"query": "SELECT SUM(v) AS total FROM t"}, "42", False),
            ("list_tables", {}, "'t'", False),
            # This server reports SQL errors as text with isError false: recorded as returned.
            ("read_query", {"query": "SELECT * FROM missing"}, "no such table", False),
            ("read_query", {"sql": "SELECT 1"}, "'query' is a required property", True),
        ],
    ),
    "everything": (
        {},
        [
            ("echo", {"message": "ping"}, "ping", False),
            ("get-tiny-image", {}, "[image image/png", False),
            (
                "get-resource-reference",
                {"resourceType": "Text", "resourceId": 2},
                '"type":"resource"',
                False,
            ),
        ],
    ),
}


@pytest.mark.parametrize("server", sorted(BUNDLED_CASES))
def test_bundled_server_for_real(server: str, request: pytest.FixtureRequest) -> None:
    assert set(BUNDLED_CASES) == set(BUNDLED)
    seed, calls = BUNDLED_CASES[server]
    task = Task(id=f"bundled-{server}", instruction="x", config={"mcp": {"server": server, **seed}})
    MCPEnvironment.validate_task(task)
    sandboxed = MCPEnvironment.sandboxed(task)
    assert sandboxed == BUNDLED[server].touches_state
    client = request.getfixturevalue("client") if sandboxed else None
    env = MCPEnvironment(EnvironmentOptions(client=client, run_label="test-mcp"))
    try:
        reset = env.reset(task)
        names = reset.action_space.tool_names()
        assert {name for name, *_ in calls} <= names
        assert all(t.parameters and t.parameters.get("type") == "object" for t in reset.action_space.tools)
        first = json.loads(reset.observation.text)
        assert sorted(first["tools"]) == sorted(names)
        # Initial state: the server's identity and a snapshot of the seeded state it serves.
        assert f"name: {first['server']}" in reset.initial_state
        assert f"version: {first['version']}" in reset.initial_state
        for value in {
            "filesystem": ["plan.md", "ship it"],
            "memory": ["Lyon"],
            "git": ["Second change", "b.txt"],
        }.get(server, []) + {"sqlite": ["CREATE TABLE t", "x | 41"], "time": ["no served state"]}.get(
            server, []
        ):
            assert value in reset.initial_state
        if sandboxed:
            assert "sandbox: image worldline/mcp, network off" in reset.initial_state
            assert "/work" in reset.initial_state
        for name, arguments, expected, is_error in calls:
            step = call(env, name, **arguments)
            assert expected in step.observation.text, (name, step.observation.text)
            assert step.observation.is_error is is_error, (name, step.observation.text)
            # The content blocks as the server sent them: one as an object, several as an array.
            obj = json.loads(step.observation.text)
            assert all("type" in block for block in (obj if isinstance(obj, list) else [obj]))
    finally:
        env.close()
    if client is not None:
        assert own_sandboxes(client) == []


# -- the seeder's paths ----------------------------------------------------------------------------

path_component = st.sampled_from(["a", "b.txt", "..", ".", "", ".git", ".GIT", "link", "dirlink", "fifo"])


@given(
    parts=st.lists(path_component, min_size=1, max_size=4),
    absolute=st.booleans(),
    forbid_git=st.booleans(),
)
def test_the_seeder_writes_inside_the_served_folder_or_refuses(
    parts: list[str], absolute: bool, forbid_git: bool, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Whatever the path, collectors/mcp_seed.py writes one regular file under the served folder, never
    through a link or '..', or refuses with the field; nothing outside the folder changes."""
    base = tmp_path_factory.mktemp("seed")
    root, outside = base / "served", base / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "b.txt").write_text("outside")
    (root / "link").symlink_to(outside / "b.txt")
    (root / "dirlink").symlink_to(outside)
    os.mkfifo(root / "fifo")
    rel = ("/" if absolute else "") + "/".join(parts)
    try:
        write_file(root, rel, "seeded", "mcp.files[x]", forbid_git=forbid_git)
    except SeedRefused as exc:
        assert str(exc).startswith("mcp.files[x]: path ")
    else:
        kept = [p for p in parts if p not in ("", ".")]
        assert not absolute and ".." not in kept and kept[0] not in ("link", "dirlink", "fifo")
        assert not (forbid_git and any(p.lower() == ".git" for p in kept))
        written = root.joinpath(*kept)
        assert written.resolve().is_relative_to(root) and written.read_text() == "seeded"
    assert (
        sorted(p.name for p in outside.iterdir()) == ["b.txt"]
        and (outside / "b.txt").read_text() == "outside"
    )


# -- a custom stdio server: every kind of result and failure ---------------------------------------


def test_where_servers_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Seeded servers always in a sandbox; a task's own command in one unless it opts out; time and
    everything (no task content) on this machine unless asked; url servers are only reached."""

    def where(cfg: dict[str, Any]) -> bool:
        task = Task(id="w", instruction="x", config={"mcp": cfg})
        MCPEnvironment.validate_task(task)
        return MCPEnvironment.sandboxed(task)

    assert all(where({"server": s}) for s in ("filesystem", "memory", "git", "sqlite"))
    assert where({"server": "git", "sandbox": True})
    assert not where({"server": "time"}) and where({"server": "time", "sandbox": True})
    assert not where({"server": "everything"})
    assert where({"command": "my-server"}) and where({"command": "my-server", "sandbox": True})
    assert not where({"command": "my-server", "sandbox": False})
    monkeypatch.setenv(ALLOWED_URLS_ENV, "http://127.0.0.1:1")  # the operator opts in to a loopback server
    assert not where({"url": "http://127.0.0.1:1/mcp"})


def test_custom_server_results_and_failures_are_recorded_as_the_client_got_them() -> None:
    env = MCPEnvironment(EnvironmentOptions())
    try:
        reset = env.reset(custom_task())
        assert reset.action_space.tool_names() == {"echo", "add", "picture", "fail", "slow", "crash"}
        assert "not inspected" in reset.initial_state
        assert 'sandbox: none (the task\'s "sandbox": false runs its command' in reset.initial_state
        assert "A server for the collector tests." in (reset.action_space.description or "")

        added = call(env, "add", a=2, b=40)
        assert added.info[STRUCTURED_CONTENT] == {"sum": 42} and added.observation.is_error is False
        assert json.loads(added.observation.text)["type"] == "text"

        picture = json.loads(call(env, "picture").observation.text)
        image, resource = picture
        assert image["type"] == "image" and image["mimeType"] == "image/png"
        assert image["data"].startswith("[image image/png, 68 bytes, sha256 ")  # described, not inlined
        assert resource["resource"] == {"uri": "memo://note", "mimeType": "text/plain", "text": "a note"}

        failed = call(env, "fail", reason="boom")
        assert failed.observation.is_error is True and json.loads(failed.observation.text)["type"] == "text"

        invalid = call(env, "add", a="two", b=1)
        assert invalid.info["schema_violation"].startswith("a: 'two' is not of type 'integer'")
        assert invalid.observation.is_error is True

        # The server has no such tool, so the call is sent and its answer recorded.
        outside = call(env, "delete_everything")
        assert facts(outside.info) == {OUT_OF_ACTION_SPACE: {"tool": "delete_everything", "sent": True}}
        assert outside.observation.is_error and "delete_everything" in outside.observation.text

        slow = call(env, "slow", seconds=30)
        assert facts(slow.info) == {TIMED_OUT: {"after_s": 8.0}} and slow.observation.text == ""
        assert json.loads(call(env, "echo", text="still here").observation.text)["text"] == "still here"

        crashed = call(env, "crash")
        assert crashed.info.get("server_exited") is True and ENDED in facts(crashed.info)
        assert crashed.observation.text == "" and crashed.env_failure
        with pytest.raises(MCPServerError, match="(?s)exited during the episode.*crashing on purpose"):
            call(env, "echo", text="after the crash")
    finally:
        env.close()


def test_render_tool_result_gives_the_content_blocks_in_wire_form() -> None:
    from mcp import types

    result = types.CallToolResult(
        content=[types.TextContent(type="text", text="hi")], structured_content={"a": 1}, is_error=False
    )
    assert json.loads(render_tool_result(result)) == {"type": "text", "text": "hi"}


@given(value=json_value | st.floats() | st.dictionaries(st.text(), json_value))
def test_observations_are_written_as_compact_json_dumps_writes_them(value: Any) -> None:
    assert write_json(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# -- the argument check ----------------------------------------------------------------------------

# Input schemas as servers write them: zod-to-json-schema's draft-07 (nested objects and arrays, a
# format, a pattern) and the SDK's 2020-12 without $schema ($defs and $ref, prefixItems, closed objects).
CHECKED_SCHEMAS: list[dict[str, Any]] = [
    {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {
            "entities": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"name": {"type": "string", "minLength": 1}, "tags": {"type": "array"}},
                    "required": ["name"],
                },
            },
            "email": {"type": "string", "format": "email"},
            "code": {"type": "string", "pattern": "^[A-Z]{2}[0-9]+$"},
            "limit": {"type": "integer", "minimum": 0, "maximum": 10},
        },
        "required": ["entities"],
    },
    {
        "type": "object",
        "$defs": {"point": {"type": "array", "prefixItems": [{"type": "number"}, {"type": "number"}]}},
        "properties": {
            "at": {"$ref": "#/$defs/point"},
            "mode": {"enum": ["fast", "exact", None]},
            "flag": {"type": "boolean"},
        },
        "additionalProperties": False,
    },
]
SCHEMA_KEYS = ["entities", "email", "code", "limit", "at", "mode", "flag", "name", "tags"]
arguments = st.dictionaries(st.sampled_from(SCHEMA_KEYS), json_value, max_size=4) | st.fixed_dictionaries(
    {"entities": st.lists(st.fixed_dictionaries({"name": st.text(max_size=3)}), max_size=2)},
    optional={
        "email": st.sampled_from(["a@b.c", "not an address"]),
        "code": st.sampled_from(["FR75", "fr75", "FR"]),
        "limit": st.integers(-2, 12) | st.floats(-1, 11),
        "at": st.lists(st.integers() | st.text(max_size=2), max_size=3),
        "mode": st.sampled_from(["fast", "slow", None]),
    },
)


@pytest.mark.parametrize("schema", CHECKED_SCHEMAS, ids=["draft-07", "2020-12"])
@given(instance=arguments)
def test_argument_check_gives_the_verdict_and_message_of_jsonschema(
    schema: dict[str, Any], instance: dict[str, Any]
) -> None:
    check = ArgumentCheck(schema)
    assert check.fast is not None  # the native check is in use for these schemas
    reference = jsonschema.validators.validator_for(schema)(schema)
    error = jsonschema.exceptions.best_match(reference.iter_errors(instance))
    if error is None:
        assert check.violation(instance) is None
    else:
        where = "/".join(str(p) for p in error.absolute_path) or "arguments"
        assert check.violation(instance) == f"{where}: {error.message}"


def test_argument_check_never_fetches_a_remote_schema() -> None:
    fetched: list[str] = []

    class Schemas(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            fetched.append(self.path)
            body = b'{"type": "string"}'
            self.send_response(200)
            self.send_header("Content-Type", "application/schema+json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Schemas)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/name.json"
        check = ArgumentCheck({"type": "object", "properties": {"name": {"$ref": url}}, "required": ["name"]})
        assert check.violation({"name": 1}) is None  # what the remote schema says cannot be known
        assert check.violation({}) == "arguments: 'name' is a required property"
    finally:
        server.shutdown()
    assert fetched == []


class StrayBaseException(BaseException):
    """A BaseException that asyncio neither re-raises from the loop nor treats as cancellation."""


@pytest.mark.timeout(120)  # the failure this guards against is a caller's thread waiting forever
@pytest.mark.parametrize(
    ("cut", "after"),
    [
        (KeyboardInterrupt, "unusable: a test request was interrupted"),
        (StrayBaseException, "takes no more requests: StrayBaseException"),
    ],
)
def test_a_request_cut_short_returns_control_and_the_session_says_why_it_refuses_more(
    cut: type[BaseException], after: str
) -> None:
    """A request ended by an exception the caller task does not keep (Ctrl-C, or any BaseException)
    still hands control back to the caller's thread; later requests get a clear error, and close()
    still stops the server."""
    with open(os.devnull, "w") as errlog:
        connection = MCPConnection(launch=Launch(sys.executable, [TEST_SERVER], {}, None), errlog=errlog)
        try:
            connection.open()
            assert connection.call_tool("echo", {"text": "one"}).content[0].text == "one"  # type: ignore[union-attr]

            async def cut_short() -> None:
                await asyncio.sleep(0)
                raise cut

            with pytest.raises(cut):
                connection._request(cut_short, "a test request")
            with pytest.raises(MCPServerError, match=after):
                connection.call_tool("echo", {"text": "two"})
        finally:
            connection.close()
        assert not connection.server_alive() and connection.loop.is_closed()


# -- streamable HTTP ------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def http_server() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, TEST_SERVER, "http", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, "the HTTP test server exited"
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_streamable_http_server(http_server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ALLOWED_URLS_ENV, http_server)  # as an operator would: the test server is on loopback
    task = Task(id="http", instruction="x", config={"mcp": {"url": http_server}})
    MCPEnvironment.validate_task(task)
    assert not MCPEnvironment.needs_engine(task)
    env = MCPEnvironment(EnvironmentOptions())
    try:
        reset = env.reset(task)
        assert f"url: {http_server}" in reset.initial_state
        assert json.loads(call(env, "echo", text="over http").observation.text)["text"] == "over http"
        assert call(env, "fail", reason="x").observation.is_error is True
    finally:
        env.close()


# -- bad input: clear errors, or env_failure with the reason while the run continues ---------------


@pytest.mark.parametrize(
    ("cfg", "message"),
    [
        (
            {"server": "postgres"},
            r"id t\): field 'mcp.server' names an unknown server 'postgres'; bundled servers: everything, filesystem",
        ),
        ({}, "needs exactly one of 'server'"),
        ({"server": "time", "command": "x"}, "got server, command"),
        ({"command": "x", "args": "--flag"}, "'mcp.args' must be a list of strings"),
        ({"command": "x", "env": {"A": 1}}, "'mcp.env' must be an object of string values"),
        ({"url": "ftp://x"}, "'mcp.url' must be an http"),
        ({"url": "http://x/mcp", "sandbox": True}, "cannot apply to a server reached by 'mcp.url'"),
        ({"server": "time", "timeout_s": 0}, "'mcp.timeout_s' must be a positive number"),
        ({"server": "time", "files": {"a": "b"}}, r"unknown field\(s\) mcp.files; known here"),
        ({"server": "sqlite", "sql": "DROP TABLE x"}, "'mcp.sql' must be a list of SQL statements"),
        (
            {"server": "git", "sandbox": False},
            "'mcp.sandbox' is false, but the bundled git server is seeded from the task and always runs",
        ),
        (
            {"server": "memory", "env": {"MEMORY_FILE_PATH": "/etc/x.jsonl"}},
            r"field\(s\) mcp.env do not apply to the bundled memory server",
        ),
        ({"server": "filesystem", "args": ["/"], "cwd": "/"}, r"mcp.args, mcp.cwd do not apply"),
        ({"server": "time", "timezone": "../../etc/passwd"}, "'mcp.timezone' must be an IANA time-zone name"),
        ({"server": "time", "timezone": "/etc/localtime"}, "'mcp.timezone' must be an IANA"),
    ],
)
def test_invalid_mcp_configuration_names_task_field_and_fix(cfg: dict[str, Any], message: str) -> None:
    with pytest.raises(TaskError, match=message):
        MCPEnvironment.validate_task(Task(id="t", instruction="x", config={"mcp": cfg}))


def test_unknown_server_stops_the_run_before_it_starts(tmp_path: Path) -> None:
    tasks = tmp_path / "t.jsonl"
    tasks.write_text(json.dumps({"id": "bad", "instruction": "x", "mcp": {"server": "nope"}}) + "\n")
    with pytest.raises(CollectError, match="id bad.*unknown server 'nope'"):
        collect(CollectConfig(env="mcp", tasks_path=tasks, policy="scripted", out=tmp_path / "out"))


def test_failing_servers_become_env_failures_and_the_run_continues(tmp_path: Path) -> None:
    tasks = tmp_path / "t.jsonl"
    rows = [
        {
            "id": "no-such-program",
            "instruction": "x",
            "mcp": {"command": "/nonexistent/mcp-server", "sandbox": False},
            "actions": [{"name": "a", "arguments": {}}],
        },
        {
            "id": "exits-at-once",
            "instruction": "x",
            "mcp": {
                "command": sys.executable,
                "args": ["-c", "import sys; sys.stderr.write('bad config\\n'); sys.exit(2)"],
                "sandbox": False,
            },
            "actions": [{"name": "a", "arguments": {}}],
        },
        {
            "id": "dies-mid-episode",
            "instruction": "x",
            "mcp": {"command": sys.executable, "args": [TEST_SERVER], "sandbox": False},
            "actions": [
                {"name": "echo", "arguments": {"text": "1"}},
                {"name": "crash", "arguments": {}},
                {"name": "echo", "arguments": {"text": "2"}},
            ],
        },
        {
            "id": "fine",
            "instruction": "x",
            "mcp": {"command": sys.executable, "args": [TEST_SERVER], "sandbox": False},
            "actions": [
                {"name": "add", "arguments": {"a": 1, "b": "x"}},
                {"name": "echo", "arguments": {"text": "ok"}},
            ],
        },
    ]
    tasks.write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = collect(
        CollectConfig(env="mcp", tasks_path=tasks, policy="scripted", out=tmp_path / "out", concurrency=2)
    )
    assert summary.written == 4
    by_id = {t.metadata["task_id"]: t for t in iter_trajectories(tmp_path / "out")}
    missing = by_id["no-such-program"]
    assert missing.status == TrajectoryStatus.ENV_FAILURE and "failed to start" in (
        missing.status_reason or ""
    )
    assert "/nonexistent/mcp-server" in (missing.status_reason or "") or "No such file" in (
        missing.status_reason or ""
    )
    assert by_id["exits-at-once"].status == TrajectoryStatus.ENV_FAILURE
    assert "bad config" in (by_id["exits-at-once"].status_reason or "")
    died = by_id["dies-mid-episode"]
    assert died.status == TrajectoryStatus.ENV_FAILURE
    assert "exited during the episode" in (died.status_reason or "") and "crashing on purpose" in (
        died.status_reason or ""
    )
    assert len(died.turns) == 2 and died.turns[1].metadata["server_exited"] is True
    fine = by_id["fine"]
    assert fine.status == TrajectoryStatus.COMPLETE
    assert "schema_violation" in fine.turns[0].metadata and fine.turns[0].observation.is_error
    assert {t.name for t in fine.action_space.tools} == {"echo", "add", "picture", "fail", "slow", "crash"}


def test_episode_deadline_ends_a_blocked_tool_call_and_the_run_goes_on(tmp_path: Path) -> None:
    """The deadline fires while a tool call waits on a server that answers long after it (the call's own
    timeout is longer still): the call returns as an error observation, the episode is an env_failure
    naming the deadline, the server is gone, and the next task runs."""
    tasks = tmp_path / "t.jsonl"
    server = {"command": sys.executable, "args": [TEST_SERVER], "timeout_s": 600, "sandbox": False}
    rows = [
        {
            "id": "blocked",
            "instruction": "x",
            "deadline_s": 20,  # room for the server to start on a loaded machine (10 s seen at load 12)
            "mcp": server,
            "actions": [
                {"name": "echo", "arguments": {"text": "before"}},
                {"name": "slow", "arguments": {"seconds": 300}},
                {"name": "echo", "arguments": {"text": "never sent"}},
            ],
        },
        {
            "id": "next",
            "instruction": "x",
            "mcp": server,
            "actions": [{"name": "echo", "arguments": {"text": "ok"}}],
        },
    ]
    tasks.write_text("".join(json.dumps(r) + "\n" for r in rows))
    done: list[Any] = []
    runner = threading.Thread(
        target=lambda: done.append(
            collect(CollectConfig(env="mcp", tasks_path=tasks, policy="scripted", out=tmp_path / "out"))
        ),
        daemon=True,
    )
    runner.start()
    runner.join(180)  # the blocked call would otherwise wait 300 s for the server
    assert done, "collect did not return: the deadline did not end the blocked tool call"
    by_id = {t.metadata["task_id"]: t for t in iter_trajectories(tmp_path / "out")}
    blocked = by_id["blocked"]
    assert blocked.status == TrajectoryStatus.ENV_FAILURE
    assert "deadline" in (blocked.status_reason or "") and blocked.metadata.get("deadline_exceeded") is True
    assert len(blocked.turns) == 2 and "before" in blocked.turns[0].action.text
    last = blocked.turns[1]
    # The server never answered: no observation of ours, the interruption is a fact of the turn.
    assert last.observation.text == "" and "interrupted" in facts(last.metadata)[ENDED]["reason"]
    assert by_id["next"].status == TrajectoryStatus.COMPLETE


# -- policies and the runner -----------------------------------------------------------------------


def test_openai_policy_calls_the_servers_real_tools(tmp_path: Path, fake_llm) -> None:  # type: ignore[no-untyped-def]
    fake_llm.script(
        FakeReply(
            text="",
            tool_calls=[
                FakeToolCall(
                    "convert_time",
                    {"source_timezone": "UTC", "time": "08:00", "target_timezone": "Asia/Kolkata"},
                )
            ],
        ),
        FakeReply(text="", tool_calls=[FakeToolCall("get_weather", {"city": "Delhi"})]),
        FakeReply(text="It is 13:30 in Delhi."),
    )
    tasks = tmp_path / "t.jsonl"
    tasks.write_text(
        json.dumps(
            {"id": "tz", "instruction": "What time is it in Delhi at 08:00 UTC?", "mcp": {"server": "time"}}
        )
        + "\n"
    )
    collect(
        CollectConfig(
            env="mcp", tasks_path=tasks, policy="openai", out=tmp_path / "out", llm_config=fake_llm.config()
        )
    )
    (trajectory,) = iter_trajectories(tmp_path / "out")
    assert trajectory.status == TrajectoryStatus.COMPLETE and trajectory.source.agent == "openai"
    assert {t["function"]["name"] for t in fake_llm.requests[0].body["tools"]} == {
        "convert_time",
        "get_current_time",
    }
    assert "13:30" in trajectory.turns[0].observation.text
    assert facts(trajectory.turns[1].metadata) == {OUT_OF_ACTION_SPACE: {"tool": "get_weather", "sent": True}}
    assert trajectory.metadata["out_of_action_space_calls"] == 1
    tool_message = fake_llm.requests[1].messages[-1]
    assert tool_message["role"] == "tool" and "13:30" in tool_message["content"]


@pytest.mark.engine
def test_example_tasks_collect_at_concurrency_three(tmp_path: Path, client: DockerClient) -> None:
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app, ["collect", "--env", "mcp", "--tasks", str(TASKS), "--out", str(out), "-j", "3", "--no-progress"]
    )
    assert result.exit_code == 0, result.output
    trajectories = list(iter_trajectories(out))
    rows = [json.loads(line) for line in TASKS.read_text().splitlines()]
    assert sorted(t.metadata["task_id"] for t in trajectories) == sorted(r["id"] for r in rows)
    for trajectory in trajectories:
        row = next(r for r in rows if r["id"] == trajectory.metadata["task_id"])
        assert trajectory.status == TrajectoryStatus.COMPLETE, trajectory.status_reason
        assert len(trajectory.turns) == len(row["actions"])
        assert trajectory.initial_state and "## Served state" in trajectory.initial_state
        assert any(t.observation.is_error for t in trajectory.turns)  # each example includes a failing call
    assert own_sandboxes(client) == []


def test_doctor_reports_the_mcp_servers() -> None:
    checks = [c for c in run_checks(["mcp"]) if c.domain == "mcp"]
    names = {c.name for c in checks}
    assert {f"MCP server '{s}' ({BUNDLED[s].package})" for s in BUNDLED} <= names
    assert all(c.ok for c in checks), [c for c in checks if not c.ok]


@pytest.mark.engine
def test_mcp_provisioning_is_idempotent() -> None:
    for script, expect in (
        ("install-mcp-servers.sh", "npm servers already installed"),
        ("build-mcp-image.sh", "worldline/mcp exists (cached)"),
    ):
        path = ROOT / "infra" / script
        assert subprocess.run(["bash", "-n", str(path)], capture_output=True).returncode == 0
        result = subprocess.run(["bash", str(path)], capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        assert expect in result.stdout


SANDBOXED_SERVER = """
import os, sys
from mcp.server.mcpserver import MCPServer
server = MCPServer("sandboxed-echo")

@server.tool()
def whereami() -> str:
    return os.getcwd() + " " + open("/etc/hostname").read().strip()

@server.tool()
def crash() -> str:
    sys.stderr.write("sandboxed server: crashing\\n"); sys.stderr.flush(); os._exit(4)

server.run()
"""


@pytest.mark.engine
def test_custom_server_in_a_sandbox_and_its_crash(client: DockerClient) -> None:
    cfg = {
        "command": "/usr/bin/python3",
        "args": ["-c", SANDBOXED_SERVER],
        "env": {"PYTHONPATH": "/opt/mcp/python/time/lib"},  # the mcp SDK the image already carries
        "sandbox": True,
    }
    task = Task(id="sandboxed", instruction="x", config={"mcp": cfg})
    assert MCPEnvironment.needs_engine(task)
    env = MCPEnvironment(EnvironmentOptions(client=client, run_label="test-mcp"))
    try:
        reset = env.reset(task)
        assert "sandbox: image worldline/mcp, network off" in reset.initial_state
        where = json.loads(call(env, "whereami").observation.text)["text"]
        assert where == "/work sandbox"  # the server ran inside the container
        crashed = call(env, "crash")
        assert crashed.info.get("server_exited") is True
        with pytest.raises(MCPServerError, match="(?s)exited during the episode.*sandboxed server: crashing"):
            call(env, "whereami")
    finally:
        env.close()
    assert own_sandboxes(client) == []
