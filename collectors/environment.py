"""The environment interface every collector domain implements, the task format, and the registry.

Gymnasium-like: `reset(task)` starts a fresh sandbox and returns the first observation with the recorded
initial state, `step(action)` returns the observation and info, `close()` always removes the sandbox.
The action space is data (`ActionSpace` of tool schemas). Policies only ever see observations.
"""

from __future__ import annotations

import importlib
import json
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from docker import DockerClient

from collectors.recording import AsciicastWriter
from collectors.sandbox import WORK_DIR, Sandbox, SandboxError, SandboxLimits
from collectors.shell import PersistentShell
from schemas import Action, ActionKind, ActionSpace, Domain, Observation


class TaskError(ValueError):
    """A task record is malformed; the message names the task, the field and the fix."""


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
    simulation_instruction: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

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
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(obj) - known)
        if unknown:
            raise TaskError(
                f"{where} (id {task_id}): unknown field(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
            )
        for name, typ in (("setup", list), ("files", dict), ("limits", dict), ("actions", list)):
            if name in obj and not isinstance(obj[name], typ):
                raise TaskError(f"{where} (id {task_id}): field {name!r} must be a JSON {typ.__name__}")
        return cls(**obj)


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
    """The first observation and the recorded initial state (packages, files, environment)."""

    observation: Observation
    initial_state: str
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class StepResult:
    """What one action did: the action as recorded, the observation, and facts for the turn."""

    action: Action
    observation: Observation
    exit_code: int | None = None
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class EnvironmentOptions:
    """What the runner passes to every environment it creates."""

    client: DockerClient
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    cast_path: Path | None = None  # where to write the session's asciicast, if the domain has one
    run_label: str = ""


class Environment(ABC):
    """A sandboxed environment of one domain. Subclasses register themselves in DOMAIN_MODULES."""

    domain: Domain
    default_image: str

    def __init__(self, options: EnvironmentOptions) -> None:
        self.options = options
        self.sandbox: Sandbox | None = None
        self.task: Task | None = None
        self.casts: list[Path] = []

    @abstractmethod
    def action_space(self, task: Task) -> ActionSpace:
        """The tools/actions available for this task, as data."""

    @abstractmethod
    def reset(self, task: Task) -> ResetResult:
        """Start a fresh sandbox for `task` and return the first observation."""

    @abstractmethod
    def step(self, action: Action) -> StepResult:
        """Apply one action and return what the environment showed."""

    @abstractmethod
    def close(self) -> None:
        """Remove the sandbox; idempotent and safe after any failure."""

    def __enter__(self) -> Environment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- shared helpers ----------------------------------------------------------------------------
    def _start_sandbox(self, task: Task) -> Sandbox:
        limits = self.options.limits.with_overrides(task.limits)
        if task.network:
            limits = limits.with_overrides({"network": True})
        sandbox = Sandbox.create(
            self.options.client, task.image or self.default_image, limits, run_label=self.options.run_label
        )
        self.sandbox = sandbox
        if task.files:
            sandbox.put_files(task.files)
        for command in task.setup:
            result = sandbox.exec(command)
            if result.exit_code != 0:
                raise SandboxError(
                    f"task {task.id}: setup command {command!r} exited {result.exit_code}: "
                    f"{result.output.strip()[-500:]}"
                )
        return sandbox


class ShellEnvironment(Environment):
    """An environment driven through one persistent PTY shell, recorded as an asciicast when asked."""

    screen_cols = 160
    screen_rows = 40

    def __init__(self, options: EnvironmentOptions) -> None:
        super().__init__(options)
        self.shell: PersistentShell | None = None
        self.recorder: AsciicastWriter | None = None

    def _start_shell(self, sandbox: Sandbox, task: Task, workdir: str = WORK_DIR) -> str:
        """Open the shell (and its recording when the runner asked for one); returns the first prompt."""
        if self.options.cast_path is not None:
            self.recorder = AsciicastWriter(
                self.options.cast_path, cols=self.screen_cols, rows=self.screen_rows, title=task.id
            )
            self.casts.append(self.options.cast_path)
        self.shell = PersistentShell(
            sandbox, cols=self.screen_cols, rows=self.screen_rows, recorder=self.recorder, workdir=workdir
        )
        return self.shell.start()

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
    name = obj.get("name") or action.tool_name
    arguments = obj.get("arguments") or {}
    if isinstance(arguments, str):
        arguments = json.loads(arguments or "{}")
    if not isinstance(name, str) or not isinstance(arguments, dict):
        raise ValueError(f"tool call needs a string 'name' and an object 'arguments': {action.text[:200]!r}")
    return name, arguments


def tool_call_action(name: str, arguments: dict[str, Any]) -> Action:
    return Action(
        kind=ActionKind.TOOL_CALL,
        text=json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False),
        tool_name=name,
    )


# --------------------------------------------------------------------------------------------------
# Registry: adding a domain is adding a module here plus its file.
# --------------------------------------------------------------------------------------------------

DOMAIN_MODULES: dict[str, str] = {
    Domain.TERMINAL.value: "collectors.terminal",
    Domain.SWE.value: "collectors.swe",
}


def environment_class(domain: str) -> type[Environment]:
    """The Environment subclass of a domain (each module exposes it as ENVIRONMENT)."""
    module_name = DOMAIN_MODULES.get(domain)
    if module_name is None:
        raise KeyError(f"unknown collector domain {domain!r}; available: {', '.join(sorted(DOMAIN_MODULES))}")
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
