"""MCP domain: JSON tool calls to a real MCP server (stdio or streamable HTTP) through the `mcp` SDK.

The action space is the server's own `tools/list` (names, descriptions, input schemas), or the part of it
the task offers (`mcp.tools`), known only once the server runs, so `reset` returns it. An observation is
the `tools/call` reply as it came off the wire, in the one MCP convention of schemas/mcp_observation.py
(the content blocks as sent; binary payloads described instead of inlined). What worldline knows beyond
that (a call outside the action space, a timeout, the server dying) is a turn fact
(schemas/turn_facts.py), never text in the observation; after the server died the episode ends as
`env_failure` with the reason and the server's last stderr lines.

Every episode owns one asyncio event loop (collectors/mcp_client.py), driven from the episode's worker
thread: `--concurrency N` still means N servers and N episodes at once.

Where servers run: a bundled server that serves state (filesystem, memory, git, sqlite) always runs in a
worldline/mcp sandbox, and its state is seeded and snapshotted inside that sandbox by
collectors/mcp_seed.py, so no host process writes, reads or runs task content; a task's own stdio
server runs in a sandbox too unless the task says `"sandbox": false`, the explicit choice to run that
command on the collector's machine. Only `time` and `everything` (which take no task content but a
checked time-zone name) and `url` servers run without a sandbox by default. A `url` is reached from
this machine, so it must be http(s) at public addresses unless the operator allowed its origin
(`URLPolicy` in collectors/mcp_client.py, checked at validation, at connect and on every connection).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sys
import tempfile
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, TextIO

import docker.errors
import jsonschema
import jsonschema.exceptions
import jsonschema.validators
import jsonschema_rs
import referencing
import referencing.exceptions
from mcp import types
from mcp.shared.exceptions import MCPError

from collectors import engine, mcp_seed
from collectors.environment import (
    Check,
    Environment,
    ResetResult,
    StepResult,
    Task,
    TaskError,
    parse_tool_call,
)
from collectors.mcp_client import (
    DEFAULT_START_TIMEOUT_S,
    URL_FIX,
    MCPConnection,
    MCPServerError,
    URLPolicy,
    URLRefused,
    exc_text,
)
from collectors.mcp_servers import BUNDLED, INSTALL_FIX, SANDBOX_IMAGE, SANDBOX_LAYOUT, BundledServer, Launch
from collectors.sandbox import Sandbox
from schemas import Action, ActionSpace, Domain, Observation, ObservationFormat, ToolSpec, mcp_observation
from schemas.turn_facts import ENDED, OUT_OF_ACTION_SPACE, TIMED_OUT, record

STDERR_TAIL_CHARS = 1500
CONNECTION_KEYS = ("server", "command", "url")
COMMON_KEYS = {
    "server",
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "timeout_s",
    "start_timeout_s",
    "sandbox",
    "tools",
}
# The seeder runs from its source inside the sandbox (python3 -I -c), so the image needs nothing of ours.
SEED_PROGRAM = Path(mcp_seed.__file__).read_text("utf-8")
# An IANA time-zone name (Europe/Paris, Etc/GMT+5, UTC): what `mcp.timezone` may be.
TIMEZONE_NAME = re.compile(r"[A-Za-z0-9_+-]+(/[A-Za-z0-9_+-]+)*")
# What the bridge process needs to find the same container engine as the collector.
ENGINE_ENV = (
    "WORLDLINE_DOCKER_HOST",
    "DOCKER_HOST",
    "DOCKER_CERT_PATH",
    "DOCKER_TLS_VERIFY",
    "CONTAINERS_CONF",
)


def tool_spec(tool: types.Tool) -> ToolSpec:
    description = tool.description or tool.title or ""
    return ToolSpec(name=tool.name, description=description, parameters=dict(tool.input_schema or {}))


class ArgumentCheck:
    """A tool's input schema, compiled once per tool at reset, that says why arguments break it.

    jsonschema is the reference: its best match is the `schema_violation` we record. It costs 10 us on
    a one-field schema and 150 us on a nested one, per call, so jsonschema_rs (the same drafts, compiled
    to native code, under 1 us) answers first, and jsonschema runs only on arguments it rejects (or when
    it cannot compile the schema). Where the two disagree, a rejection by jsonschema_rs alone counts as
    conforming (jsonschema's verdict), an acceptance stands (the one known case: a float `multipleOf`,
    which jsonschema's float division gets wrong). Formats are not checked, as jsonschema does without
    a format checker; a remote `$ref` is never fetched (by either), and arguments it would need are not
    checked.
    """

    def __init__(self, schema: dict[str, Any] | None) -> None:
        self.reference: Any = None
        self.fast: Any = None
        if not schema:
            return
        try:
            cls = jsonschema.validators.validator_for(schema)
            cls.check_schema(schema)
        except jsonschema.SchemaError:
            return  # not valid JSON Schema: nothing can be checked against it
        # `retrieve` is referencing's documented argument; mypy reads the attrs field's private name.
        registry = referencing.Registry(retrieve=_refuse_remote_reference)  # type: ignore[call-arg]
        self.reference = cls(schema, registry=registry)
        try:
            self.fast = jsonschema_rs.validator_for(
                schema, validate_formats=False, retriever=_refuse_remote_reference
            )
        except (ValueError, TypeError, jsonschema_rs.ReferencingError):
            # a draft, $ref or keyword it does not take: jsonschema alone
            self.fast = None

    def violation(self, arguments: dict[str, Any]) -> str | None:
        """Why `arguments` break the schema (None when they conform or it cannot be checked)."""
        if self.reference is None:
            return None
        if self.fast is not None:
            try:
                if self.fast.is_valid(arguments):
                    return None
            except (ValueError, TypeError, OverflowError, jsonschema_rs.ReferencingError):
                pass  # a value it cannot convert or a $ref it cannot follow: the reference decides
        try:
            error = jsonschema.exceptions.best_match(self.reference.iter_errors(arguments))
        except referencing.exceptions.Unresolvable:
            return None
        if error is None:
            return None
        where = "/".join(str(p) for p in error.absolute_path) or "arguments"
        return f"{where}: {error.message}"


def _refuse_remote_reference(uri: str) -> Any:
    raise ValueError(f"remote schema {uri} is not fetched")


# -- the environment -------------------------------------------------------------------------------


class MCPEnvironment(Environment):
    """One MCP server per episode, seeded in its sandbox, driven through the SDK; a host folder of the
    episode's own holds the server's stderr (and is the working directory of a server run here)."""

    domain = Domain.MCP
    default_image = SANDBOX_IMAGE

    def __init__(self, options: Any) -> None:
        super().__init__(options)
        self.connection: MCPConnection | None = None
        self.workspace: Path | None = None
        self.tools: dict[str, types.Tool] = {}  # the task's action space
        self.served: set[str] = set()  # every tool the server listed (the task may offer fewer)
        self._tools_may_change = False  # the server announces changes to its tool list
        self.argument_checks: dict[str, ArgumentCheck] = {}
        self.space = ActionSpace()
        self._stderr: TextIO | None = None
        self._server_died: str | None = None
        self._served_state = ""

    # -- task configuration ----------------------------------------------------------------------
    @classmethod
    def validate_task(cls, task: Task, where: str = "task") -> None:
        super().validate_task(task, where)
        cfg = task.domain_config("mcp")
        at = f"{where} (id {task.id})"
        given = [k for k in CONNECTION_KEYS if k in cfg]
        if len(given) != 1:
            raise TaskError(
                f"{at}: field 'mcp' needs exactly one of 'server' (a bundled server: "
                f"{', '.join(sorted(BUNDLED))}), 'command' (any stdio server) or 'url' (streamable HTTP); "
                f"got {', '.join(given) or 'none'}"
            )
        seed_keys: set[str] = set()
        if "server" in cfg:
            server = BUNDLED.get(cfg["server"]) if isinstance(cfg["server"], str) else None
            if server is None:
                raise TaskError(
                    f"{at}: field 'mcp.server' names an unknown server {cfg['server']!r}; bundled servers: "
                    f"{', '.join(sorted(BUNDLED))} (or give 'mcp.command' to start any stdio server)"
                )
            seed_keys = set(server.seed_keys)
            _check_seed(cfg, at)
            fixed = sorted(k for k in ("args", "env", "cwd") if k in cfg)
            if fixed:
                raise TaskError(
                    f"{at}: field(s) {', '.join('mcp.' + k for k in fixed)} do not apply to the bundled "
                    f"{server.name} server, whose command, environment and folders are fixed; drop them "
                    "(or start your own server with 'mcp.command')"
                )
            if server.touches_state and cfg.get("sandbox") is False:
                raise TaskError(
                    f"{at}: field 'mcp.sandbox' is false, but the bundled {server.name} server is seeded "
                    "from the task and always runs in a sandbox; drop 'mcp.sandbox'"
                )
        unknown = sorted(set(cfg) - COMMON_KEYS - seed_keys)
        if unknown:
            raise TaskError(
                f"{at}: unknown field(s) {', '.join('mcp.' + k for k in unknown)}; known here: "
                f"{', '.join(sorted(COMMON_KEYS | seed_keys))}"
            )
        if "command" in cfg and (not isinstance(cfg["command"], str) or not cfg["command"].strip()):
            raise TaskError(f"{at}: field 'mcp.command' must be a non-empty string (the program to start)")
        if "url" in cfg and (
            not isinstance(cfg["url"], str) or not cfg["url"].startswith(("http://", "https://"))
        ):
            raise TaskError(
                f"{at}: field 'mcp.url' must be an http:// or https:// URL of a streamable HTTP server"
            )
        if "args" in cfg and not (
            isinstance(cfg["args"], list) and all(isinstance(a, str) for a in cfg["args"])
        ):
            raise TaskError(f"{at}: field 'mcp.args' must be a list of strings")
        for key in ("env", "headers"):
            value = cfg.get(key, {})
            if not (isinstance(value, dict) and all(isinstance(v, str) for v in value.values())):
                raise TaskError(f"{at}: field 'mcp.{key}' must be an object of string values")
        if "cwd" in cfg and not isinstance(cfg["cwd"], str):
            raise TaskError(f"{at}: field 'mcp.cwd' must be a string (a folder path)")
        if "tools" in cfg and not (
            isinstance(cfg["tools"], list) and cfg["tools"] and all(isinstance(t, str) for t in cfg["tools"])
        ):
            raise TaskError(
                f"{at}: field 'mcp.tools' must be a non-empty list of tool names (the tools the task offers)"
            )
        if "sandbox" in cfg and not isinstance(cfg["sandbox"], bool):
            raise TaskError(f"{at}: field 'mcp.sandbox' must be true or false")
        if cfg.get("sandbox") and "url" in cfg:
            raise TaskError(
                f"{at}: field 'mcp.sandbox' cannot apply to a server reached by 'mcp.url'; drop one"
            )
        for key in ("timeout_s", "start_timeout_s"):
            value = cfg.get(key, 1)
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise TaskError(f"{at}: field 'mcp.{key}' must be a positive number of seconds")
        if "url" in cfg:
            _check_url(cfg["url"], at)

    @classmethod
    def sandboxed(cls, task: Task) -> bool:
        """Whether the task's server runs in a sandbox: always for the bundled servers that serve files or
        state (filesystem, memory, git, sqlite), by default for a task's own stdio server (`"sandbox":
        false` runs it on this machine, by the task's explicit choice), and for `time` and `everything`
        only when `"sandbox": true`."""
        cfg = task.domain_config("mcp")
        if "url" in cfg:
            return False
        if cfg.get("server") in BUNDLED:
            return BUNDLED[cfg["server"]].touches_state or bool(cfg.get("sandbox", False))
        return bool(cfg.get("sandbox", True))

    @classmethod
    def needs_engine(cls, task: Task | None = None) -> bool:
        # A typical task (None) serves files or state, so `sandbox doctor --env mcp` checks the engine.
        return True if task is None else cls.sandboxed(task)

    @classmethod
    def doctor_checks(cls) -> list[Check]:
        checks = [
            Check(
                "node (for the npm MCP servers)",
                shutil.which("node") is not None,
                shutil.which("node") or "not on PATH",
                "apt-get install nodejs (node 18 or newer)",
                domain="mcp",
            )
        ]
        image = cls._image_check()
        if image is not None:
            checks.append(image)
        for server in BUNDLED.values():
            ok = server.is_installed()
            checks.append(
                Check(
                    f"MCP server '{server.name}' ({server.package})",
                    ok,
                    str(server.installed_path()) if ok else f"missing: {server.installed_path()}",
                    INSTALL_FIX,
                    domain="mcp",
                )
            )
        return checks

    @classmethod
    def _image_check(cls) -> Check | None:
        """Whether the sandbox image is built; None when the engine is down (its own check says so)."""
        name = f"image {SANDBOX_IMAGE} (sandbox of the servers that serve files or state)"
        fix = "bash infra/build-mcp-image.sh   (part of `make setup`)"
        try:
            client = engine.connect()
            ref = engine.image_reference(client, SANDBOX_IMAGE)
        except engine.EngineUnavailable:
            return None
        except docker.errors.DockerException as exc:
            return Check(name, False, f"missing: {exc}", fix, "mcp")
        return Check(name, True, ref, domain="mcp")

    # -- episode ---------------------------------------------------------------------------------
    def _launch(self, task: Task, cfg: dict[str, Any], workspace: Path, sandboxed: bool) -> Launch:
        if "server" in cfg:
            server = BUNDLED[cfg["server"]]
            if not server.is_installed():
                raise MCPServerError(
                    f"task {task.id}: the bundled MCP server {server.name!r} is not installed "
                    f"({server.installed_path()} is missing); run {INSTALL_FIX}"
                )
            return server.launch(workspace, cfg, SANDBOX_LAYOUT if sandboxed else None)
        # A custom server on this machine runs where the collector runs (relative paths in its arguments
        # mean what they say) unless the task names a folder.
        cwd = cfg.get("cwd") or (str(SANDBOX_LAYOUT.workspace) if sandboxed else None)
        return Launch(cfg["command"], list(cfg.get("args", [])), dict(cfg.get("env", {})), cwd)

    def _seed(self, task: Task, server: BundledServer, cfg: dict[str, Any], sandbox: Sandbox) -> str:
        """Seed the server's state inside its sandbox and return the snapshot of it, read there too.

        The host sends the seed as one JSON file (a name of ours, in a tar through the engine's archive
        API, owned by the sandbox's user) and runs collectors/mcp_seed.py from its source; a seed it refuses (a path leaving
        the served folder, a `.git` path, an ATTACH...) fails the episode with the seeder's reason."""
        assert server.seed is not None
        data = json.dumps(server.seed(cfg), ensure_ascii=False)
        name = f"worldline-seed-{uuid.uuid4().hex[:12]}.json"
        sandbox.put_files({name: data}, base="/tmp")
        workspace = str(SANDBOX_LAYOUT.workspace)
        result = sandbox.exec(
            [SANDBOX_LAYOUT.python, "-I", "-c", SEED_PROGRAM, server.name, f"/tmp/{name}", workspace]
        )
        answer: dict[str, Any] = {}
        for line in reversed(result.output.splitlines()):
            if line.startswith('{"worldline_seed"'):
                with contextlib.suppress(ValueError):
                    answer = json.loads(line)
                break
        if result.timed_out:
            raise MCPServerError(
                f"task {task.id}: seeding the {server.name} server did not finish within "
                f"{sandbox.limits.helper_timeout_s:g} s (limits.helper_timeout_s)"
            )
        if "refused" in answer:
            raise MCPServerError(f"task {task.id}: the {server.name} seed is refused: {answer['refused']}")
        if "failed" in answer:
            raise MCPServerError(f"task {task.id}: cannot seed the {server.name} server: {answer['failed']}")
        if result.exit_code != 0 or not isinstance(answer.get("snapshot"), str):
            raise MCPServerError(
                f"task {task.id}: the {server.name} seeder exited {result.exit_code} in the sandbox: "
                f"{result.output.strip()[-500:]}"
            )
        return str(answer["snapshot"])

    def _bridge(self, sandbox: Sandbox, inside: Launch) -> Launch:
        """The launch of the bridge that runs `inside` in the sandbox over stdio."""
        target = str(SANDBOX_LAYOUT.workspace)
        bridge_env = {k: os.environ[k] for k in ENGINE_ENV if k in os.environ}
        args = ["-m", "collectors.mcp_bridge", "--workdir", inside.cwd or target]
        for key, value in inside.env.items():
            args += ["--env", f"{key}={value}"]
        command = [sandbox.container.id, "--", inside.command, *inside.args]
        return Launch(sys.executable, [*args, *command], bridge_env, None)

    def reset(self, task: Task) -> ResetResult:
        self.task = task
        cfg = task.domain_config("mcp")
        self.workspace = Path(tempfile.mkdtemp(prefix="worldline-mcp-"))
        timeout = float(cfg.get("timeout_s", self.options.limits.step_timeout_s))
        self._stderr = (self.workspace / "server.stderr").open("w", encoding="utf-8")
        sandboxed = self.sandboxed(task)
        launch = None if "url" in cfg else self._launch(task, cfg, self.workspace, sandboxed)
        connect = launch
        server = BUNDLED.get(cfg.get("server", ""))
        self._served_state = server.state_note if server is not None else ""
        if sandboxed and launch is not None:
            sandbox = self._start_sandbox(task)
            if server is not None and server.seed is not None:
                self._served_state = self._seed(task, server, cfg, sandbox)
            connect = self._bridge(sandbox, launch)
        self.connection = MCPConnection(
            launch=connect,
            url=cfg.get("url"),
            headers=cfg.get("headers"),
            errlog=self._stderr,
            call_timeout_s=timeout,
        )
        try:
            init = self.connection.open(float(cfg.get("start_timeout_s", DEFAULT_START_TIMEOUT_S)))
            tools = self.connection.list_tools()
        except (MCPServerError, MCPError, OSError, TimeoutError) as exc:
            where = ""
            if sandboxed and "command" in cfg:
                where = (
                    f"\n(the task's command runs in a {SANDBOX_IMAGE} sandbox, where only the image's "
                    'programs exist; "sandbox": false runs it on the collector\'s machine instead)'
                )
            raise MCPServerError(
                f"task {task.id}: the MCP server failed to start: {exc_text(exc)}{where}{self._stderr_tail()}"
            ) from exc
        self.served = {t.name for t in tools}
        offered = cfg.get("tools")
        if offered is not None:
            missing = sorted(set(offered) - self.served)
            if missing:
                raise MCPServerError(
                    f"task {task.id}: field 'mcp.tools' names tool(s) the server does not have: "
                    f"{', '.join(missing)}; it lists: {', '.join(sorted(self.served)) or 'none'}"
                )
            tools = [t for t in tools if t.name in set(offered)]
        self.tools = {t.name: t for t in tools}
        self.argument_checks = {t.name: ArgumentCheck(t.input_schema) for t in tools}
        self._tools_may_change = bool(init.capabilities.tools and init.capabilities.tools.list_changed)
        info = init.server_info
        self.space = ActionSpace(
            description=(
                f"You call the tools of the MCP server {info.name!r} (version {info.version}). Each action is "
                'a JSON tool call {"name": ..., "arguments": {...}}; the observation is the tool result\'s content '
                "as MCP JSON (one content block as an object, several as an array), or the JSON-RPC error."
                + (f"\nServer instructions: {init.instructions}" if init.instructions else "")
            ),
            tools=[tool_spec(t) for t in tools],
        )
        initial_state = self._initial_state(cfg, init, launch)
        info_extra: dict[str, Any] = {}
        if self.sandbox is not None:
            info_extra = {"image": self.sandbox.image, "limits": self.sandbox.limits.to_json()}
        first: dict[str, Any] = {
            "server": info.name,
            "version": info.version,
            "protocolVersion": init.protocol_version,
            "tools": sorted(self.tools),
        }
        if "server" in cfg and BUNDLED[cfg["server"]].hint:
            first["note"] = BUNDLED[cfg["server"]].hint
        return ResetResult(
            observation=Observation(
                text=json.dumps(first, ensure_ascii=False), format=ObservationFormat.JSON
            ),
            initial_state=initial_state,
            action_space=self.space,
            info={
                "mcp_server": info.name,
                "mcp_server_version": info.version,
                "mcp_protocol": init.protocol_version,
                **info_extra,
            },
        )

    def _initial_state(self, cfg: dict[str, Any], init: types.InitializeResult, launch: Launch | None) -> str:
        info = init.server_info
        lines = ["## MCP server", f"name: {info.name}", f"version: {info.version}"]
        lines.append(f"protocol: {init.protocol_version}")
        if "server" in cfg:
            lines.append(f"bundled: {cfg['server']} ({BUNDLED[cfg['server']].package})")
        if launch is not None:
            lines.append(f"command: {launch.command} {' '.join(launch.args)}")
            lines.append(f"working directory: {launch.cwd or 'that of the collector'}")
        else:
            lines.append(f"url: {cfg['url']}")
        if self.sandbox is not None:
            network = "on" if self.sandbox.limits.network else "off"
            lines.append(f"sandbox: image {self.sandbox.image}, network {network}")
        elif launch is not None and "server" not in cfg:
            lines.append(
                "sandbox: none (the task's \"sandbox\": false runs its command on the collector's machine)"
            )
        caps = init.capabilities.model_dump(by_alias=True, mode="json", exclude_none=True)
        lines.append(f"capabilities: {json.dumps(caps, sort_keys=True)}")
        lines.append("")
        lines.append("## Served state")
        if "server" in cfg:
            lines.append(self._served_state)
        else:
            lines.append("not inspected (a server started from the task's command or url)")
        return "\n".join(lines)

    def step(self, action: Action) -> StepResult:
        if self.connection is None:
            raise MCPServerError("step() before reset(): call reset(task) first")
        if self._server_died is not None:
            raise MCPServerError(self._server_died)
        try:
            name, arguments = parse_tool_call(action)
        except ValueError as exc:
            # Nothing reached the server, so nothing was observed; the turn says why.
            return _unobserved(action, {"malformed_call": str(exc)})
        info: dict[str, Any] = {}
        if name not in self.tools:
            if not self._unknown_to_server(name):
                # The server has this tool and the task did not offer it: a call could change state the
                # task does not cover, so it is not sent.
                record(info, OUT_OF_ACTION_SPACE, {"tool": name, "sent": False})
                return _unobserved(action, info)
            # A tool the server does not have can only be answered with an error: the server's own
            # answer is the observation.
            record(info, OUT_OF_ACTION_SPACE, {"tool": name, "sent": True})
        else:
            violation = self.argument_checks[name].violation(arguments)
            if violation:
                info["schema_violation"] = violation
        connection = self.connection
        try:
            result = connection.call_tool(name, arguments)
        except MCPError as exc:
            if exc.code == types.CONNECTION_CLOSED or not connection.server_alive():
                self._server_died = (
                    f"the MCP server exited during the episode: {exc.message}{self._stderr_tail()}"
                )
                info["server_exited"] = True
                record(info, ENDED, {"reason": self._server_died})
                return StepResult(
                    action=action,
                    observation=Observation(text="", format=ObservationFormat.JSON),
                    info=info,
                    env_failure=self._server_died,
                )
            if exc.code == types.REQUEST_TIMEOUT and connection.last_reply is None:
                record(info, TIMED_OUT, {"after_s": connection.call_timeout_s})
                return _unobserved(action, info)
            return self._observed(action, info, connection, partial(render_error_of, exc))
        except MCPServerError as exc:  # the call was cut short (the episode's deadline): nothing answered it
            record(info, ENDED, {"reason": exc_text(exc)})
            return _unobserved(action, info)
        except Exception as exc:  # a reply the SDK could not validate: the reply itself is the observation
            info["client_error"] = exc_text(exc)
            return self._observed(action, info, connection, None)
        return self._observed(
            action,
            info,
            connection,
            lambda: mcp_observation.render_result(
                result.model_dump(by_alias=True, mode="json", exclude_none=True)
            ),
        )

    def _observed(
        self,
        action: Action,
        info: dict[str, Any],
        connection: MCPConnection,
        fallback: Callable[[], tuple[str, bool, Any]] | None,
    ) -> StepResult:
        """The turn of a call the server answered: its reply as it came off the wire (`fallback`, from the
        SDK's validated result, only when the wire form was not seen)."""
        reply = connection.last_reply
        if reply is not None and "result" in reply:
            text, is_error, structured = mcp_observation.render_result(reply["result"])
        elif reply is not None:
            text, is_error, structured = mcp_observation.render_error(reply["error"]), True, None
        elif fallback is not None:
            text, is_error, structured = fallback()
        else:
            return _unobserved(action, info)
        if structured is not None:
            info[mcp_observation.STRUCTURED_CONTENT] = structured
        return StepResult(
            action=action,
            observation=Observation(text=text, format=ObservationFormat.JSON, is_error=is_error),
            info=info,
        )

    def _unknown_to_server(self, name: str) -> bool:
        """Whether the server has no tool `name`, so a call can only be refused by it. A server whose tool
        list may change is asked again; if it cannot answer, the tool is taken to exist."""
        if name in self.served:
            return False
        if not self._tools_may_change or self.connection is None:
            return True
        try:
            listed = {t.name for t in self.connection.list_tools()}
        except Exception:
            return False
        return name not in listed

    def _stderr_tail(self) -> str:
        if self.workspace is None:
            return ""
        if self._stderr is not None:
            self._stderr.flush()
        path = self.workspace / "server.stderr"
        try:
            text = path.read_text("utf-8", errors="replace").strip()
        except OSError:
            return ""
        return f"\nserver stderr (last lines):\n{text[-STDERR_TAIL_CHARS:]}" if text else ""

    def interrupt(self) -> None:
        """The episode's deadline passed (called from the collection job's timer thread): the tool call in
        flight returns at once as an error observation and the session refuses more calls. The
        session's event loop belongs to the episode's thread, so closing it from here is left to the
        collection job's `close()`."""
        connection = self.connection
        if connection is not None:
            connection.interrupt("the episode's wall-clock deadline passed")

    def close(self) -> None:
        if self.connection is not None:
            with contextlib.suppress(Exception):
                self.connection.close()
            self.connection = None
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None
        if self.sandbox is not None:
            self.sandbox.close()
            self.sandbox = None
        if self.workspace is not None:
            shutil.rmtree(self.workspace, ignore_errors=True)
            self.workspace = None


def _unobserved(action: Action, info: dict[str, Any]) -> StepResult:
    """A turn whose action reached no server answer: an empty observation, the reason in `info`."""
    return StepResult(
        action=action,
        observation=Observation(text="", format=ObservationFormat.JSON, is_error=True),
        info=info,
    )


def render_error_of(exc: MCPError) -> tuple[str, bool, Any]:
    """A JSON-RPC error as the SDK reported it, for a reply whose wire form was not seen."""
    error: dict[str, Any] = {"code": exc.code, "message": exc.message}
    if exc.data is not None:
        error["data"] = exc.data
    return mcp_observation.render_error(error), True, None


def _check_url(url: str, at: str) -> None:
    """`mcp.url` is reachable under the operator's URL policy: an http(s) server at public addresses,
    or an origin the operator allowed. A host name that does not resolve now passes; connecting checks
    it again (and every address it resolves to then)."""
    try:
        policy = URLPolicy.from_env()
    except ValueError as exc:
        raise TaskError(f"{at}: field 'mcp.url' cannot be checked: {exc}") from exc
    try:
        policy.check_url(url, resolve_failure_ok=True)
    except URLRefused as exc:
        raise TaskError(f"{at}: field 'mcp.url' is refused: {exc}; {URL_FIX}") from exc


def _check_seed(cfg: dict[str, Any], at: str) -> None:
    """The seeded state's fields have the right shapes (files: path -> text; sql: statements; ...)."""
    for key in ("files", "uncommitted"):
        if key in cfg and not (
            isinstance(cfg[key], dict) and all(isinstance(v, str) for v in cfg[key].values())
        ):
            raise TaskError(f"{at}: field 'mcp.{key}' must be an object of relative path -> file text")
    if "sql" in cfg and not (isinstance(cfg["sql"], list) and all(isinstance(s, str) for s in cfg["sql"])):
        raise TaskError(f"{at}: field 'mcp.sql' must be a list of SQL statements (strings)")
    if "commits" in cfg and not (
        isinstance(cfg["commits"], list) and all(isinstance(c, dict) and "files" in c for c in cfg["commits"])
    ):
        raise TaskError(
            f"{at}: field 'mcp.commits' must be a list of {{'files': {{...}}, 'message': ...}} objects"
        )
    zone = cfg.get("timezone")
    if zone is not None and not (isinstance(zone, str) and len(zone) <= 64 and TIMEZONE_NAME.fullmatch(zone)):
        raise TaskError(f"{at}: field 'mcp.timezone' must be an IANA time-zone name such as 'Europe/Paris'")
    graph = cfg.get("graph")
    if graph is not None and not (
        isinstance(graph, dict)
        and isinstance(graph.get("entities", []), list)
        and isinstance(graph.get("relations", []), list)
    ):
        raise TaskError(f"{at}: field 'mcp.graph' must be {{'entities': [...], 'relations': [...]}}")


ENVIRONMENT = MCPEnvironment
