"""Terminal domain: a persistent bash on a PTY in a container; actions are command lines or keystrokes.

Observations are what the terminal showed, from the row the action was typed on (the prompt and the
echo) through the output to the next prompt, as rows of the 160-column terminal (docs/observations.md);
full-screen programs are observed as their screen. The session is also written as an asciicast v2 file.
"""

from __future__ import annotations

import json
from typing import Any

from collectors.engine import DEBIAN_IMAGE
from collectors.environment import (
    ResetResult,
    ShellEnvironment,
    StepResult,
    Task,
    TaskError,
    checked_tool_call,
    record_initial_state,
)
from collectors.sandbox import WORK_DIR, SandboxError, SandboxLimits
from collectors.shell import ShellOutput
from schemas import Action, ActionKind, ActionSpace, Domain, Observation, ObservationFormat, ToolSpec

DEFAULT_KEY_DURATION_S = 1.0

ACTION_SPACE = ActionSpace(
    description=(
        "You operate a bash terminal (160x40) in a Linux container; the working directory is /work. "
        "Each action is either a command line, run to completion, or a JSON array of keystroke objects "
        '{"keystrokes": "...", "duration": seconds}: the keys are typed and the terminal is watched for '
        "`duration` seconds. A trailing newline submits a line; tmux key names such as C-c, Enter, Up, "
        "Escape send that key; empty keystrokes just wait. The observation is what the terminal shows."
    ),
    tools=[
        ToolSpec(
            name="run_command",
            description="Type a command line into the shell and wait for it to finish.",
            parameters={
                "type": "object",
                "properties": {"command": {"type": "string", "description": "The command line."}},
                "required": ["command"],
            },
        ),
        ToolSpec(
            name="send_keystrokes",
            description="Send keystrokes (for interactive programs, Ctrl-C, REPLs) and wait.",
            parameters={
                "type": "object",
                "properties": {
                    "keystrokes": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "keystrokes": {"type": "string"},
                                "duration": {"type": "number", "minimum": 0},
                            },
                            "required": ["keystrokes"],
                        },
                    }
                },
                "required": ["keystrokes"],
            },
        ),
    ],
)


def normalise_keystrokes(value: Any) -> list[dict[str, Any]]:
    """The Terminus form as a list of {"keystrokes", "duration"} objects (one object is allowed too)."""
    items = value if isinstance(value, list) else [value]
    out: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, str):
            item = {"keystrokes": item}
        if not isinstance(item, dict) or not isinstance(item.get("keystrokes", ""), str):
            raise ValueError(f"keystrokes must be objects with a string 'keystrokes': {item!r}")
        duration = float(item.get("duration", DEFAULT_KEY_DURATION_S))
        out.append({"keystrokes": item.get("keystrokes", ""), "duration": duration})
    return out


def check_sandbox_limits(task: Task, where: str) -> None:
    """A task's `limits` (including `"root": true`) must name known limits with values of their type."""
    try:
        SandboxLimits().with_overrides(task.limits)
    except ValueError as exc:
        raise TaskError(f"{where} (id {task.id}): field 'limits': {exc}") from exc


class TerminalEnvironment(ShellEnvironment):
    """One persistent PTY shell per trajectory inside a fresh container, as the sandbox's agent user
    (or root inside the sandbox's user namespace for a task with `"limits": {"root": true}`)."""

    domain = Domain.TERMINAL
    default_image = DEBIAN_IMAGE

    @classmethod
    def validate_task(cls, task: Task, where: str = "task") -> None:
        super().validate_task(task, where)
        check_sandbox_limits(task, where)

    @classmethod
    def declared_action_space(cls, task: Task) -> ActionSpace:
        return ACTION_SPACE

    def reset(self, task: Task) -> ResetResult:
        self.task = task
        sandbox = self._start_sandbox(task)
        initial_state = record_initial_state(sandbox, WORK_DIR)
        prompt = self._start_shell(sandbox, task)
        return ResetResult(
            observation=Observation(text=prompt, format=ObservationFormat.TERMINAL),
            initial_state=initial_state,
            action_space=ACTION_SPACE,
            info={"image": sandbox.image, "limits": sandbox.limits.to_json()},
        )

    def step(self, action: Action) -> StepResult:
        if self.shell is None or self.sandbox is None:
            raise SandboxError("step() before reset(): call reset(task) first")
        timeout = self.sandbox.limits.step_timeout_s
        if action.kind == ActionKind.TOOL_CALL:
            checked = checked_tool_call(action, ACTION_SPACE)
            if isinstance(checked, StepResult):
                return checked
            name, arguments = checked
            if name == "run_command":
                action = Action(kind=ActionKind.COMMAND, text=str(arguments["command"]))
            else:
                keys = normalise_keystrokes(arguments["keystrokes"])
                action = Action(kind=ActionKind.KEYSTROKES, text=json.dumps(keys, ensure_ascii=False))
        if action.kind == ActionKind.COMMAND:
            output = self.shell.run_command(action.text, timeout_s=timeout)
            return self._result(action, output)
        if action.kind == ActionKind.KEYSTROKES:
            try:
                keys = normalise_keystrokes(json.loads(action.text))
            except (ValueError, TypeError) as exc:
                return StepResult(
                    action=action,
                    observation=Observation(text=f"Error: cannot read keystrokes: {exc}", is_error=True),
                    info={"invalid_tool_call": True},
                )
            action = Action(kind=ActionKind.KEYSTROKES, text=json.dumps(keys, ensure_ascii=False))
            outputs: list[ShellOutput] = []
            for k in keys:
                outputs.append(
                    self.shell.send_keys(k["keystrokes"], duration_s=k["duration"], timeout_s=timeout)
                )
                if outputs[-1].shell_ended:
                    break  # the rest of the keys have no terminal to go to
            merged = ShellOutput(
                text="".join(o.text for o in outputs),
                exit_code=next((o.exit_code for o in reversed(outputs) if o.exit_code is not None), None),
                prompt_returned=outputs[-1].prompt_returned if outputs else False,
                late_bytes=sum(o.late_bytes for o in outputs),
                shell_ended=next((o.shell_ended for o in outputs if o.shell_ended), None),
                flooded=any(o.flooded for o in outputs),
                omitted_bytes=sum(o.omitted_bytes for o in outputs),
                total_bytes=sum(o.total_bytes for o in outputs),
                flood_limit_bytes=next((o.flood_limit_bytes for o in outputs if o.flooded), None),
                no_prompt_after_s=next((o.no_prompt_after_s for o in outputs if o.no_prompt_after_s), None),
            )
            return self._result(action, merged)
        return StepResult(
            action=action,
            observation=Observation(
                text=f"Error: a terminal action must be a command or keystrokes, not {action.kind.value}.",
                is_error=True,
            ),
            info={"out_of_action_space": True},
        )

    def _result(self, action: Action, output: ShellOutput) -> StepResult:
        return StepResult(
            action=action,
            observation=Observation(text=output.text, format=ObservationFormat.TERMINAL),
            exit_code=output.exit_code,
            info=self.shell_step_info(output),
        )


ENVIRONMENT = TerminalEnvironment
