"""SWE domain: a git repository in a container; tools Read, Edit (with the resulting diff) and Bash.

Read and Edit run a small Python helper inside the sandbox (the host never touches the files); Bash
runs in the trajectory's persistent shell. The tool schemas are recorded per trajectory.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from collectors.engine import DEBIAN_IMAGE
from collectors.environment import (
    ResetResult,
    ShellEnvironment,
    StepResult,
    Task,
    checked_tool_call,
    record_initial_state,
    tool_call_action,
)
from collectors.sandbox import WORK_DIR, SandboxError
from collectors.terminal import check_sandbox_limits
from schemas import (
    Action,
    ActionKind,
    ActionSpace,
    Domain,
    Observation,
    ObservationFormat,
    ToolSpec,
    turn_facts,
)

REPO_DIR = f"{WORK_DIR}/repo"
READ_DEFAULT_LIMIT = 2000
# The helper's request travels base64-encoded in argv; beyond this it is staged as a file instead.
_ARGV_LIMIT = 60_000

TOOLS = [
    ToolSpec(
        name="Read",
        description="Read a file with line numbers (cat -n style); optional 1-based offset and line limit.",
        parameters={
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path, relative to the repository root."},
                "offset": {"type": "integer", "minimum": 1, "description": "First line to show."},
                "limit": {"type": "integer", "minimum": 1, "description": "How many lines to show."},
            },
            "required": ["path"],
        },
    ),
    ToolSpec(
        name="Edit",
        description=(
            "Replace an exact string in a file (it must occur once unless replace_all), or create a file "
            "when old_string is empty. Returns the unified diff of the change."
        ),
        parameters={
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "old_string": {"type": "string"},
                "new_string": {"type": "string"},
                "replace_all": {"type": "boolean", "default": False},
            },
            "required": ["path", "old_string", "new_string"],
        },
    ),
    ToolSpec(
        name="Bash",
        description="Run a command in a persistent bash shell in the repository (state persists).",
        parameters={
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    ),
]

HELPER = r"""
import base64, difflib, json, os, re, stat, sys
req = json.loads(base64.b64decode(sys.argv[1]) if sys.argv[1] != "@" else open(sys.argv[2], "rb").read())
root, args = req["root"], req["args"]
rel = args["path"]
path = os.path.normpath(os.path.join(root, rel))
def done(text, error=False, **facts):
    sys.stdout.write(json.dumps({"text": text, "error": error, **facts}))
    sys.exit(0)
KINDS = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
         (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
MAGIC = ((b"\x7fELF", "ELF executable or library"), (b"\x89PNG", "PNG image"), (b"\xff\xd8\xff", "JPEG image"),
         (b"GIF8", "GIF image"), (b"%PDF", "PDF document"), (b"PK\x03\x04", "zip archive"),
         (b"\x1f\x8b", "gzip data"), (b"BZh", "bzip2 data"), (b"\xfd7zXZ", "xz data"), (b"SQLite format 3", "SQLite database"))
def special(p):
    try:
        mode = os.stat(p).st_mode
    except OSError as exc:
        return None if not os.path.lexists(p) else f"cannot be opened ({exc.strerror})"
    for test, name in KINDS:
        if test(mode):
            return name
    return None
if req["op"] == "read":
    if os.path.isdir(path):
        done("\n".join(sorted(e + ("/" if os.path.isdir(os.path.join(path, e)) else "") for e in os.listdir(path))))
    if not os.path.lexists(path):
        done(f"Error: file not found: {rel}", True)
    kind = special(path)
    if kind:
        done(f"Error: {rel} is {kind}, not a regular file; Read shows regular files only", True)
    size = os.path.getsize(path)
    cap = int(req["cap"])
    with open(path, "rb") as fh:
        head = fh.read(8192)
        if b"\0" in head:
            what = next((name for sig, name in MAGIC if head.startswith(sig)), "binary data")
            done(f"{rel} is a binary file ({what}, {size} bytes); its content is not shown. First bytes: "
                 + head[:32].hex(" "))
        fh.seek(0)
        offset = int(args.get("offset") or 1)
        limit = int(args.get("limit") or req["default_limit"])
        # Whole lines up to the cap (UTF-8 bytes, newlines included; a first line longer than the cap
        # is cut at it); past the cap lines are only counted: the reply says how large the whole
        # listing is, a harness fact for the turn's metadata, never text in the observation.
        out, used, total, n, cut = [], 0, 0, 0, False
        for n, raw in enumerate(fh, start=1):
            if n < offset:
                continue
            if n >= offset + limit:
                break
            entry = f"{n:6d}\t" + raw.decode("utf-8", "replace").rstrip("\n").rstrip("\r")
            size = len(entry.encode()) + (1 if n > offset else 0)
            total += size
            if not cut and used + size <= cap:
                out.append(entry)
                used += size
            elif not cut:
                cut = True
                if not out:
                    out.append(entry.encode()[:cap].decode("utf-8", "ignore"))
                    used = len(out[0].encode())
    if offset > max(n, 1):
        done(f"Error: offset {offset} is past the end of {rel} ({n} lines)", True)
    text = "\n".join(out)
    if total > used:
        done(text, truncated={"bytes_total": total, "bytes_kept": used})
    done(text)
if req["op"] == "edit":
    old, new = args["old_string"], args["new_string"]
    exists = os.path.lexists(path)
    before = ""
    if exists:
        if os.path.isdir(path):
            done(f"Error: {rel} is a directory", True)
        kind = special(path)
        if kind:
            done(f"Error: {rel} is {kind}, not a regular file; Edit changes regular files only", True)
        with open(path, "rb") as fh:
            before = fh.read().decode("utf-8", "surrogateescape")
    if old == "":
        if exists and before:
            done(f"Error: {rel} already exists and is not empty; give old_string to edit it", True)
        after = new
    else:
        if not exists:
            done(f"Error: file not found: {rel}", True)
        if old not in before and "\r\n" in before and "\n" in old and "\r\n" not in old:
            # The agent writes "\n"; the file uses CRLF: match and write in the file's own line endings.
            old, new = old.replace("\n", "\r\n"), new.replace("\r\n", "\n").replace("\n", "\r\n")
        count = before.count(old)
        if count == 0:
            done(f"Error: old_string not found in {rel}", True)
        if count > 1 and not args.get("replace_all"):
            done(f"Error: old_string occurs {count} times in {rel}; add context to make it unique or set replace_all", True)
        after = before.replace(old, new) if args.get("replace_all") else before.replace(old, new, 1)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(after.encode("utf-8", "surrogateescape"))
    name = os.path.relpath(path, root)
    # Lines end at "\n" only, as git sees them ("\r", form feeds and U+2028 are content).
    lines = lambda t: re.findall(r"[^\n]*\n|[^\n]+", t)
    diff = difflib.unified_diff(
        lines(before), lines(after),
        fromfile="/dev/null" if not exists else "a/" + name, tofile="b/" + name)
    text = "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in diff)
    done(text or "(no change)")
done(f"Error: unknown operation {req['op']}", True)
"""


class SWEEnvironment(ShellEnvironment):
    """A repository at /work/repo; Read/Edit through an in-sandbox helper, Bash in a persistent shell."""

    domain = Domain.SWE
    default_image = DEBIAN_IMAGE
    observation_cols = 4096  # Bash output is tool output: long lines stay whole
    # Bash is a tool whose output is read, not a terminal looked at: no pager (`git log`, `man`) waits
    # for keys, no progress bar redraws, as the SWE harnesses set it (mini-swe-agent's environment.env).
    shell_environment = {
        "PAGER": "cat",
        "MANPAGER": "cat",
        "LESS": "-R",
        "PIP_PROGRESS_BAR": "off",
        "TQDM_DISABLE": "1",
    }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.space = ActionSpace(description="Tools for working on a git repository.", tools=TOOLS)

    @classmethod
    def validate_task(cls, task: Task, where: str = "task") -> None:
        super().validate_task(task, where)
        check_sandbox_limits(task, where)

    @classmethod
    def declared_action_space(cls, task: Task) -> ActionSpace:
        repo_files = sorted((task.repo or {}).get("files", {}))
        listing = ", ".join(repo_files[:50]) + (" ..." if len(repo_files) > 50 else "")
        return ActionSpace(
            description=(
                f"You work in the git repository at {REPO_DIR} ({listing or 'empty'}). Call exactly one tool "
                "per turn: Read, Edit or Bash, with JSON arguments matching the tool's schema."
            ),
            tools=list(TOOLS),
        )

    def reset(self, task: Task) -> ResetResult:
        self.task = task
        self.space = self.declared_action_space(task)
        sandbox = self._start_sandbox(task)
        repo = task.repo or {}
        files = repo.get("files") or {}
        if not isinstance(files, dict):
            raise SandboxError(f"task {task.id}: field repo.files must be an object of path -> content")
        if files:
            sandbox.put_files(files, base=REPO_DIR)
        message = str(repo.get("commit_message", "Initial commit"))
        init = sandbox.exec(
            [
                "/bin/sh",
                "-c",
                f"mkdir -p {REPO_DIR} && cd {REPO_DIR} && git init -q -b main && git add -A && "
                'git -c user.name=worldline -c user.email=worldline@localhost commit -q --allow-empty -m "$0"',
                message,
            ]
        )
        if init.exit_code != 0:
            raise SandboxError(
                f"task {task.id}: creating the git repository failed: {init.output.strip()[-500:]}"
            )
        initial_state = record_initial_state(sandbox, REPO_DIR)
        self._start_shell(sandbox, task, workdir=REPO_DIR)
        status = sandbox.exec("git log --oneline -n 5 && git status --short", workdir=REPO_DIR)
        return ResetResult(
            observation=Observation(text=status.output.rstrip("\n")),
            initial_state=initial_state,
            action_space=self.space,
            info={"image": sandbox.image, "limits": sandbox.limits.to_json()},
        )

    def step(self, action: Action) -> StepResult:
        if self.shell is None or self.sandbox is None:
            raise SandboxError("step() before reset(): call reset(task) first")
        if action.kind == ActionKind.COMMAND:  # a bare command line is a Bash call
            action = tool_call_action("Bash", {"command": action.text})
        if action.kind != ActionKind.TOOL_CALL:
            return StepResult(
                action=action,
                observation=Observation(
                    text="Error: SWE actions are tool calls (Read, Edit, Bash).", is_error=True
                ),
                info={"out_of_action_space": True},
            )
        checked = checked_tool_call(action, self.space)
        if isinstance(checked, StepResult):
            return checked
        name, arguments = checked
        action = tool_call_action(name, arguments)
        if name == "Bash":
            return self._bash(action, arguments["command"])
        request = {
            "op": name.lower(),
            "root": REPO_DIR,
            "default_limit": READ_DEFAULT_LIMIT,
            "cap": self.sandbox.limits.output_cap_bytes,
            "args": arguments,
        }
        reply = self._helper(request)
        fmt = ObservationFormat.DIFF if name == "Edit" and not reply["error"] else ObservationFormat.TEXT
        info: dict[str, Any] = {}
        if isinstance(reply.get("truncated"), dict):  # Read stopped at the output cap
            turn_facts.record(info, turn_facts.TRUNCATED, reply["truncated"])
        return StepResult(
            action=action,
            observation=Observation(text=reply["text"], format=fmt, is_error=bool(reply["error"])),
            info=info,
        )

    def _bash(self, action: Action, command: str) -> StepResult:
        assert self.shell is not None and self.sandbox is not None
        output = self.shell.run_command(command, timeout_s=self.sandbox.limits.step_timeout_s)
        return StepResult(
            action=action,
            observation=Observation(text=command_output(output.text, command), format=ObservationFormat.TEXT),
            exit_code=output.exit_code,
            info=self.shell_step_info(output),
        )

    def _helper(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.sandbox is not None
        payload = base64.b64encode(json.dumps(request).encode()).decode()
        if len(payload) <= _ARGV_LIMIT:
            argv = ["python3", "-c", HELPER, payload]
        else:
            self.sandbox.put_files({".worldline-request.json": json.dumps(request)}, base="/tmp")
            argv = ["python3", "-c", HELPER, "@", "/tmp/.worldline-request.json"]
        result = self.sandbox.exec(argv, workdir=REPO_DIR)
        try:
            reply: dict[str, Any] = json.loads(result.output)
        except json.JSONDecodeError:
            if result.timed_out:
                limit = self.sandbox.limits.helper_timeout_s
                return {
                    "text": f"Error: the tool did not finish within {limit:g} s and was stopped",
                    "error": True,
                }
            return {
                "text": f"Error: the tool failed (exit {result.exit_code}): {result.output.strip()[-500:]}",
                "error": True,
            }
        return reply


def command_output(terminal_text: str, command: str) -> str:
    """The output of a Bash call (a tool result, docs/observations.md): the terminal's rows without the
    row the command was typed on (prompt and echo of its first line) and the closing prompt. The
    prompts and echoes of a multi-line command's later lines stay: they are how the terminal
    interleaved them with the output."""
    lines = terminal_text.split("\n")
    first = command.split("\n")[0].strip()
    if lines and (
        lines[0].strip() == first
        or (first and lines[0].rstrip().endswith(first) and ("$ " in lines[0] or "# " in lines[0]))
    ):
        lines = lines[1:]
    body = lines
    if body and body[-1].rstrip().endswith(("$", "#")) and "@sandbox:" in body[-1]:
        body = body[:-1]
    return "\n".join(body).rstrip("\n")


ENVIRONMENT = SWEEnvironment
