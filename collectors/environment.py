"""The environment interface every collector domain implements, the task format, and the registry.

Gymnasium-like: `reset(task)` starts a fresh environment and returns the first observation, the
recorded initial state and the action space (data: `ActionSpace` of tool schemas; some domains only
know it once the environment runs, e.g. an MCP server's `tools/list`), `step(action)` returns the
observation and info, `close()` always releases everything. Policies only ever see observations.

A task carries its domain's configuration as an object under the domain's name (`"mcp": {...}`,
`"search": {...}`, `"web": {...}`); each environment validates its own (`validate_task`). Whether a
domain needs the container engine is the environment's decision per task (`needs_engine`).
"""

from __future__ import annotations

import importlib
import json
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jsonschema

if TYPE_CHECKING:
    from docker import DockerClient

from collectors.recording import AsciicastWriter
from collectors.sandbox import WORK_DIR, Sandbox, SandboxError, SandboxLimits
from collectors.shell import PersistentShell, ShellOutput
from schemas import (
    Action,
    ActionKind,
    ActionSpace,
    Domain,
    Observation,
    ToolSpec,
    domain_spec,
    registered_domains,
)


def domain_config_keys() -> frozenset[str]:
    """Top-level task keys that hold a domain's configuration object: the registered domains' names."""
    return frozenset(spec.value for spec in registered_domains())


class TaskError(ValueError):
    """A task record is malformed; the message names the task, the field and the fix."""


class InfrastructureUnavailable(OSError):
    """Something an environment needs outside the task is missing or down (no Android device, an
    unreachable server): the attempt says nothing about the task, so its trajectory is retryable
    (`--resume` runs it again), never a final `env_failure`."""


def read_action(item: Any) -> Action:
    """One task-file action as an Action: a string is a command line (or a GUI domain's call); {"action",
    "role", "name"} is a GUI action on an element; {"keystrokes", "duration"} or a list of them is
    keystrokes; {"name"/"tool", "arguments"} is a tool call. The arguments go to the environment as
    written, so arguments that are not an object are the environment's error turn, as when an agent
    sends them. Raises ValueError (the form expected) for an item that is none of these."""
    if isinstance(item, str):
        return Action(kind=ActionKind.COMMAND, text=item)
    if isinstance(item, dict) and isinstance(item.get("action"), str):  # GUI: an element by role/name
        return Action(kind=ActionKind.GUI, text=json.dumps(item, ensure_ascii=False))
    if isinstance(item, list) or (isinstance(item, dict) and "keystrokes" in item):
        keys = item if isinstance(item, list) else [item]
        return Action(kind=ActionKind.KEYSTROKES, text=json.dumps(keys, ensure_ascii=False))
    if isinstance(item, dict) and ("name" in item or "tool" in item):
        name = item.get("name") if "name" in item else item.get("tool")
        if not isinstance(name, str) or not name:
            raise ValueError(f"a tool call's 'name' must be a non-empty string, got {name!r}")
        arguments = item.get("arguments", {})
        return Action(
            kind=ActionKind.TOOL_CALL,
            text=json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False),
            tool_name=name,
        )
    raise ValueError(
        f"cannot read action {item!r}; use a command string, {{'keystrokes', 'duration'}} objects, "
        "{'action', 'role', 'name'} for a GUI element, or {'name', 'arguments'} for a tool call"
    )


@dataclass
class Task:
    """One line of a task file: what to do, where, and (for the scripted policy) which actions."""

    id: str
    instruction: str
    image: str | None = None
    setup: list[str] = field(default_factory=list)  # shell commands run before recording starts
    files: dict[str, str] = field(default_factory=dict)  # work-directory files created before setup
    repo: dict[str, Any] | None = None  # SWE: {"files": {...}, "commit_message": "..."}
    network: bool = False
    limits: dict[str, Any] = field(default_factory=dict)
    actions: list[Any] = field(default_factory=list)  # scripted policy: the actions to replay
    max_turns: int | None = None
    deadline_s: float | None = None  # wall-clock limit of the whole episode (default: --episode-deadline)
    simulation_instruction: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    # Per-domain configuration objects by domain name, e.g. {"mcp": {"server": "filesystem"}}; in the
    # task file they are top-level keys named after the domain.
    config: dict[str, dict[str, Any]] = field(default_factory=dict)

    def domain_config(self, domain: str) -> dict[str, Any]:
        """This task's configuration object for `domain` ({} when the task gives none)."""
        return self.config.get(domain) or {}

    @classmethod
    def from_json(cls, obj: Any, where: str = "task") -> Task:
        if not isinstance(obj, dict):
            raise TaskError(f"{where}: a task must be a JSON object, got {type(obj).__name__}")
        task_id = obj.get("id")
        if not isinstance(task_id, str) or not task_id:
            raise TaskError(f"{where}: field 'id' must be a non-empty string")
        instruction = obj.get("instruction")
        if not isinstance(instruction, str) or not instruction.strip():
            raise TaskError(f"{where} (id {task_id}): field 'instruction' must be a non-empty string")
        obj = dict(obj)
        config: dict[str, dict[str, Any]] = {}
        config_keys = domain_config_keys()
        for key in sorted(config_keys & set(obj)):
            value = obj.pop(key)
            if not isinstance(value, dict):
                raise TaskError(
                    f"{where} (id {task_id}): field {key!r} is the {key} domain's configuration and must "
                    f"be a JSON object, got {type(value).__name__}"
                )
            config[key] = value
        known = set(cls.__dataclass_fields__) - {"config"}
        unknown = sorted(set(obj) - known)
        if unknown:
            raise TaskError(
                f"{where} (id {task_id}): unknown field(s) {', '.join(unknown)}; known: "
                f"{', '.join(sorted(known | config_keys))}"
            )
        for name, typ in (("setup", list), ("files", dict), ("limits", dict), ("actions", list)):
            if name in obj and not isinstance(obj[name], typ):
                raise TaskError(f"{where} (id {task_id}): field {name!r} must be a JSON {typ.__name__}")
        for index, item in enumerate(obj.get("actions") or []):
            try:
                read_action(item)
            except ValueError as exc:
                raise TaskError(f"{where} (id {task_id}): field 'actions[{index}]': {exc}") from None
        return cls(**obj, config=config)


def load_tasks(path: str | Path) -> list[Task]:
    """Tasks from a JSONL file; errors name the line. Duplicate ids are an error (resume keys on them)."""
    tasks: list[Task] = []
    seen: set[str] = set()
    for lineno, line in enumerate(Path(path).read_text("utf-8").splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        where = f"{path}:{lineno}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TaskError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from exc
        task = Task.from_json(obj, where)
        if task.id in seen:
            raise TaskError(f"{where}: duplicate task id {task.id!r}; ids must be unique within a task file")
        seen.add(task.id)
        tasks.append(task)
    return tasks


@dataclass
class ResetResult:
    """The first observation, the recorded initial state (packages, files, environment, a server's
    identity) and the action space as the running environment offers it."""

    observation: Observation
    initial_state: str
    action_space: ActionSpace
    info: dict[str, Any] = field(default_factory=dict)
    # The trajectory's simulation instruction when the environment sets conditions of its own (search
    # perturbations); None keeps the task's `simulation_instruction`.
    simulation_instruction: str | None = None


# StepResult.info keys the collection job acts on, for every domain:
# - INFO_SYNC_LOST: str, why later observations could not be attributed to their actions; the collection job
#   keeps this turn and ends the trajectory as env_failure with that reason.
# - INFO_EPISODE_END: {"status": "complete" | "env_failure", "reason": str}; the environment cannot take
#   another action (the agent exited the shell, the shell was killed, the sandbox died); the collection job keeps
#   this turn and ends the trajectory with that status.
# - INFO_INFRA_FAILURE: True with `env_failure` when the cause is outside the task (a device that went
#   away): the trajectory is retryable, not final.
INFO_SYNC_LOST = "sync_lost"
INFO_EPISODE_END = "episode_end"
INFO_INFRA_FAILURE = "infrastructure_failure"


@dataclass
class StepResult:
    """What one action did: the action as recorded, the observation, and facts for the turn."""

    action: Action
    observation: Observation
    exit_code: int | None = None
    info: dict[str, Any] = field(default_factory=dict)
    state_changed: bool | None = None  # GUI domains: did the normalised state change (None: not tracked)
    env_failure: str | None = None  # the environment is in an error state: ends the trajectory as env_failure


@dataclass(frozen=True)
class EnvironmentOptions:
    """What the collection job passes to every environment it creates."""

    client: DockerClient | None = None  # None when no task of the run needs the container engine
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    cast_path: Path | None = None  # where to write the session's asciicast, if the domain has one
    run_label: str = ""


class Environment(ABC):
    """An environment of one domain; its module, named by the domain's `DomainSpec.collector` in
    schemas/domains.py, exposes the subclass as `ENVIRONMENT`."""

    domain: Domain
    default_image: str | None = None  # the sandbox image, for domains that run in a container

    def __init__(self, options: EnvironmentOptions) -> None:
        self.options = options
        self.sandbox: Sandbox | None = None
        self.task: Task | None = None
        self.casts: list[Path] = []

    @classmethod
    def needs_engine(cls, task: Task | None = None) -> bool:
        """Whether `task` (or, with None, a typical task of this domain) runs in a container sandbox."""
        return cls.default_image is not None

    @classmethod
    def validate_task(cls, task: Task, where: str = "task") -> None:
        """Raise TaskError when `task` cannot run in this domain. The base check refuses configuration
        objects meant for another domain; domains with a configuration object check its fields."""
        foreign = sorted(k for k in task.config if k != cls.domain.value)
        if foreign:
            raise TaskError(
                f"{where} (id {task.id}): field(s) {', '.join(foreign)} configure another domain; "
                f"this run collects {cls.domain.value!r} (choose --env {foreign[0]} or drop the field)"
            )

    @classmethod
    def declared_action_space(cls, task: Task) -> ActionSpace | None:
        """The action space known before `reset`, recorded when the environment fails to start;
        None for domains that learn it from the running environment."""
        return None

    @classmethod
    def doctor_checks(cls) -> list[Check]:
        """What this domain needs beyond the container engine (servers, browsers, devices, indexes)."""
        return []

    @abstractmethod
    def reset(self, task: Task) -> ResetResult:
        """Start a fresh environment for `task`; return the first observation and the action space."""

    @abstractmethod
    def step(self, action: Action) -> StepResult:
        """Apply one action and return what the environment showed."""

    @abstractmethod
    def close(self) -> None:
        """Remove the sandbox; idempotent and safe after any failure."""

    def interrupt(self) -> None:
        """Called from another thread when the episode's wall-clock deadline passes: make a blocked
        `reset` or `step` return (or raise) soon. The default closes the environment; the collection job still
        calls `close()` afterwards."""
        self.close()

    def __enter__(self) -> Environment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- shared helpers ----------------------------------------------------------------------------
    def _start_sandbox(self, task: Task) -> Sandbox:
        if self.options.client is None:
            raise SandboxError(
                f"task {task.id}: the {self.domain.value} domain needs the container engine, but the collection job "
                "was started without one"
            )
        image = task.image or self.default_image
        if image is None:
            raise SandboxError(f"task {task.id}: no sandbox image (set the task's 'image')")
        limits = self.options.limits.with_overrides(task.limits)
        if task.network:
            limits = limits.with_overrides({"network": True})
        sandbox = Sandbox.create(self.options.client, image, limits, run_label=self.options.run_label)
        self.sandbox = sandbox
        if task.files:
            sandbox.put_files(task.files)
        for command in task.setup:
            result = sandbox.exec(command)
            if result.timed_out:
                raise SandboxError(
                    f"task {task.id}: setup command {command!r} did not finish within "
                    f"{limits.helper_timeout_s:g} s (limits.helper_timeout_s) and was killed"
                )
            if result.exit_code != 0:
                raise SandboxError(
                    f"task {task.id}: setup command {command!r} exited {result.exit_code}: "
                    f"{result.output.strip()[-500:]}"
                )
        return sandbox


@dataclass
class Check:
    """One requirement of a domain: its name, whether it holds, what we saw, and the fix when not."""

    name: str
    ok: bool
    detail: str
    fix: str = ""
    domain: str = "engine"  # the domain the requirement belongs to; "engine" for the shared engine
    required: bool = True  # False: a gap is a warning (e.g. no Android device plugged in), not a failure


class ShellEnvironment(Environment):
    """An environment driven through one persistent PTY shell, recorded as an asciicast when asked."""

    screen_cols = 160
    screen_rows = 40
    observation_cols: int | None = None  # None: observations wrap at screen_cols, as the terminal showed them
    shell_environment: Mapping[str, str] = {}  # variables the shell starts with (the domain's conventions)

    def __init__(self, options: EnvironmentOptions) -> None:
        super().__init__(options)
        self.shell: PersistentShell | None = None
        self.recorder: AsciicastWriter | None = None

    def _start_shell(self, sandbox: Sandbox, task: Task, workdir: str = WORK_DIR) -> str:
        """Open the shell (and its recording when the collection job asked for one); returns the first prompt."""
        if self.options.cast_path is not None:
            self.recorder = AsciicastWriter(
                self.options.cast_path, cols=self.screen_cols, rows=self.screen_rows, title=task.id
            )
            self.casts.append(self.options.cast_path)
        self.shell = PersistentShell(
            sandbox,
            cols=self.screen_cols,
            rows=self.screen_rows,
            recorder=self.recorder,
            workdir=workdir,
            observation_cols=self.observation_cols,
            environment=self.shell_environment,
        )
        return self.shell.start()

    def interrupt(self) -> None:
        """Unblock a step from another thread: shut the PTY down and remove the sandbox (a blocked
        helper call returns when its container goes); `close()` then releases the rest."""
        if self.shell is not None:
            self.shell.interrupt()
        if self.sandbox is not None:
            self.sandbox.close()

    def shell_step_info(self, output: ShellOutput) -> dict[str, Any]:
        """Turn metadata of a shell step, with the episode's end when the shell is gone."""
        info = output.info()
        if output.shell_ended:
            exited = output.shell_ended.startswith("the shell exited")
            info[INFO_EPISODE_END] = {
                "status": "complete" if exited else "env_failure",
                "reason": output.shell_ended,
            }
        return info

    def close(self) -> None:
        if self.shell is not None:
            self.shell.close()
            self.shell = None
        if self.recorder is not None:
            self.recorder.close()
            self.recorder = None
        if self.sandbox is not None:
            self.sandbox.close()


def out_of_action_space(action: Action, space: ActionSpace) -> StepResult:
    """The turn for a call to a tool the task does not offer: recorded as such, never executed."""
    available = ", ".join(sorted(space.tool_names())) or "none"
    return StepResult(
        action=action,
        observation=Observation(
            text=f"Error: tool {action.tool_name!r} is not available here. Available tools: {available}.",
            is_error=True,
        ),
        info={"out_of_action_space": True},
    )


def parse_tool_call(action: Action) -> tuple[str, dict[str, Any]]:
    """(name, arguments) of a TOOL_CALL action whose text is {"name": ..., "arguments": {...}}."""
    try:
        obj = json.loads(action.text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"tool call is not JSON ({exc.msg}): {action.text[:200]!r}") from exc
    if not isinstance(obj, dict):
        raise ValueError(f"tool call must be a JSON object, got {type(obj).__name__}: {action.text[:200]!r}")
    name = obj.get("name") or action.tool_name
    arguments = obj.get("arguments")
    if arguments is None:
        arguments = {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments or "{}")
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"the arguments of {name!r} are not valid JSON ({exc.msg} at column {exc.colno}): "
                f"{arguments[:200]!r}"
            ) from exc
    if not isinstance(name, str) or not isinstance(arguments, dict):
        raise ValueError(
            f"a tool call needs a string 'name' and an object 'arguments', got arguments of type "
            f"{type(arguments).__name__}: {action.text[:200]!r}"
        )
    return name, arguments


def argument_errors(tool: ToolSpec, arguments: Any) -> list[str]:
    """Why `arguments` do not fit `tool`'s JSON schema ([] when they do). Fields the schema does not
    name are an error unless the schema allows them explicitly, so nothing the agent invents (or an
    internal field) reaches our code."""
    schema = dict(tool.parameters or {"type": "object", "properties": {}})
    schema.setdefault("additionalProperties", False)
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
    out = []
    for error in errors:
        where = "/".join(str(p) for p in error.absolute_path)
        out.append(f"{where}: {error.message}" if where else error.message)
    return out


def checked_tool_call(action: Action, space: ActionSpace) -> tuple[str, dict[str, Any]] | StepResult:
    """(name, arguments) of a TOOL_CALL action that names a tool of `space` with arguments matching its
    schema; otherwise the turn to record: the action as the agent sent it and an error observation
    (`invalid_tool_call` or `out_of_action_space` in the info). Never raises on what an agent sends."""
    try:
        name, arguments = parse_tool_call(action)
    except (ValueError, TypeError) as exc:
        return StepResult(
            action=action,
            observation=Observation(text=f"Error: {exc}", is_error=True),
            info={"invalid_tool_call": True},
        )
    tools = {t.name: t for t in space.tools}
    if name not in tools:
        return out_of_action_space(action, space)
    errors = argument_errors(tools[name], arguments)
    if errors:
        return StepResult(
            action=action,
            observation=Observation(
                text=f"Error: invalid arguments for {name}: " + "; ".join(errors[:5]), is_error=True
            ),
            info={"invalid_tool_call": True},
        )
    return name, arguments


def tool_call_action(name: str, arguments: dict[str, Any]) -> Action:
    return Action(
        kind=ActionKind.TOOL_CALL,
        text=json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False),
        tool_name=name,
    )


def collector_domains() -> list[str]:
    """The names `--env` accepts: every registered domain (schemas/domains.py), sorted."""
    return sorted(spec.value for spec in registered_domains())


def environment_class(domain: str) -> type[Environment]:
    """The Environment subclass of a domain: `ENVIRONMENT` of the module its `DomainSpec.collector` names."""
    try:
        module_name = domain_spec(domain).collector
    except KeyError:
        raise KeyError(
            f"unknown collector domain {domain!r}; available: {', '.join(collector_domains())}"
        ) from None
    cls: type[Environment] = importlib.import_module(module_name).ENVIRONMENT
    return cls


INITIAL_STATE_SCRIPT = r"""
echo "## System"
if [ -r /etc/os-release ]; then . /etc/os-release; echo "${PRETTY_NAME:-unknown}"; else echo "unknown"; fi
echo "user: $(id -un 2>/dev/null || id -u)  shell: $(command -v bash || command -v sh)"
echo
echo "## Installed packages"
if command -v dpkg-query >/dev/null 2>&1; then
  dpkg-query -W -f='${Package} ${Version}\n' | sort
elif [ -x /bin/busybox ]; then
  echo "busybox $(/bin/busybox | head -n 1 | cut -d' ' -f2)"
fi
for tool in python3 git; do
  command -v "$tool" >/dev/null 2>&1 && echo "$tool: $("$tool" --version 2>&1 | head -n 1)"
done
echo
echo "## Work directory ($WORK_DIR)"
cd "$WORK_DIR" && find . -mindepth 1 -maxdepth 4 -not -path './.git/*' -not -path '*/.git/*' 2>/dev/null \
  | sort | head -n 300
echo
echo "## Environment"
env | grep -Ev '^(HOSTNAME|PWD|SHLVL|_|OLDPWD|container)=' | sort
"""


def record_initial_state(sandbox: Sandbox, work_dir: str) -> str:
    """The paper's initial state: installed packages and versions, the work directory's layout, and
    the environment, gathered from inside the sandbox before the first action."""
    result = sandbox.exec(["/bin/sh", "-c", f"WORK_DIR={work_dir}\n{INITIAL_STATE_SCRIPT}"])
    return result.output.rstrip("\n")
