"""Terminal-Bench and harbor task folders as terminal tasks.

A task folder holds its instruction (`task.yaml`'s `instruction`, Terminal-Bench 1; or
`instruction.md` beside `task.toml`, harbor / Terminal-Bench 2), a Dockerfile (at the top or in
`environment/`) and `tests/`. PATH is one task folder or a folder of them.

The task runs on `worldline/tbench`: worldline/debian with `/app` a link to `/work/app` (the
sandbox's root is read-only; `/work` is its writable tmpfs), built by `ensure_image`. The
Dockerfile's steps are applied where they work offline: `COPY`/`ADD` of text files from the task
folder become task `files`, `RUN` steps that need no network become `setup` commands (in the
`WORKDIR`), and every other step is listed with why it is not applied in
`metadata.dockerfile_not_applied` (package installs and downloads need the network our sandboxes
do not have; `FROM` is replaced by our base image; `ENV`, `USER`, `CMD` do not reach the shell).
The suite's tests stay out of the sandbox (the agent must not see them); their names are recorded.
"""

from __future__ import annotations

import io
import re
import shlex
import tomllib
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from collectors.task_import import Item, Skip, SuiteError, with_provenance

SUITE = "terminal-bench"
IMAGE = "worldline/tbench"
APP_DIR = "/app"
APP_LINK_TARGET = "/work/app"
# RUN steps that fetch from a network: package managers, downloaders, clones.
NEEDS_NETWORK_SUBCOMMANDS = re.compile(
    r"\b(apt-get|apt|apk|yum|dnf)\s+(-\S+\s+)*(install|update|upgrade)\b|\bpip3?\s+install\b|"
    r"\buv\s+(pip|sync|add|tool)\b|\b(npm|yarn|pnpm)\s+(install|i|add|ci)\b|\bcargo\s+(install|fetch)\b|"
    r"\bgo\s+(get|install|mod\s+download)\b|\bgem\s+install\b|\b(curl|wget)\b|\bgit\s+(clone|fetch|pull)\b|"
    r"\bconda\s+(install|create)\b|\bpoetry\s+install\b"
)


def task_folders(path: Path) -> list[Path]:
    """The task folders at `path`: itself when it is one, else its sub-folders that are."""
    if not path.is_dir():
        raise SuiteError(
            f"{path}: not a folder; give a Terminal-Bench / harbor task folder or a folder of them"
        )
    if _is_task(path):
        return [path]
    found = sorted(p for p in path.iterdir() if p.is_dir() and _is_task(p))
    if not found:
        raise SuiteError(f"{path}: no task folder (task.yaml, or task.toml with instruction.md) in it")
    return found


def _is_task(path: Path) -> bool:
    return (path / "task.yaml").is_file() or (path / "task.toml").is_file()


def dockerfile_lines(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) per Dockerfile step, continuation lines joined, comments dropped."""
    steps: list[tuple[str, str]] = []
    current = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not current and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            current += line[:-1].strip() + " "
            continue
        current += line
        word, _, rest = current.strip().partition(" ")
        steps.append((word.upper(), rest.strip()))
        current = ""
    if current.strip():
        word, _, rest = current.strip().partition(" ")
        steps.append((word.upper(), rest.strip()))
    return steps


def _copy_sources(args: str) -> tuple[list[str], str] | None:
    if args.startswith("["):
        import json

        try:
            parts = [str(p) for p in json.loads(args)]
        except ValueError:
            return None
    else:
        parts = [p for p in shlex.split(args) if not p.startswith("--")]
    if len(parts) < 2:
        return None
    return parts[:-1], parts[-1]


def _in_app(dest: str, workdir: str) -> str | None:
    """The path under /work for a destination in /app (relative ones against the WORKDIR)."""
    full = PurePosixPath(dest if dest.startswith("/") else f"{workdir}/{dest}")
    parts = full.parts
    if len(parts) >= 2 and "/" + parts[1] == APP_DIR and ".." not in parts:
        return str(PurePosixPath("app", *parts[2:]))
    return None


def _copy_files(folder: Path, sources: list[str], dest: str, workdir: str) -> tuple[dict[str, str], str]:
    """Task files for one COPY step, or ({}, why not)."""
    target = _in_app(dest, workdir)
    if target is None:
        return (
            {},
            f"destination {dest} is outside {APP_DIR} (only {APP_DIR} is writable here, as {APP_LINK_TARGET})",
        )
    files: dict[str, str] = {}
    for src in sources:
        base = (folder / "environment" / src) if (folder / "environment").is_dir() else folder / src
        if not base.exists():
            base = folder / src
        if not base.exists() or not base.resolve().is_relative_to(folder.resolve()):
            return {}, f"source {src} is not in the task folder"
        many = base.is_dir() or dest.endswith("/") or len(sources) > 1
        for item in sorted(base.rglob("*")) if base.is_dir() else [base]:
            if not item.is_file():
                continue
            try:
                text = item.read_text("utf-8")
            except UnicodeDecodeError:
                return {}, f"{item.relative_to(folder)} is binary (task files are text)"
            rel = item.relative_to(base) if base.is_dir() else PurePosixPath(item.name)
            files[str(PurePosixPath(target, rel)) if many else target] = text
    return files, ""


def apply_dockerfile(folder: Path, text: str) -> dict[str, Any]:
    """What of a Dockerfile runs here: `files`, `setup`, and the steps not applied with why."""
    workdir = "/"
    files: dict[str, str] = {}
    setup: list[str] = []
    applied: list[str] = []
    not_applied: list[dict[str, str]] = []
    for word, args in dockerfile_lines(text):
        step = f"{word} {args}"
        if word == "FROM":
            not_applied.append(
                {"step": step, "why": f"the base image is replaced by {IMAGE} (worldline/debian)"}
            )
        elif word == "WORKDIR":
            workdir = args if args.startswith("/") else f"{workdir.rstrip('/')}/{args}"
            if _in_app(workdir, "/") is None:
                not_applied.append({"step": step, "why": f"only {APP_DIR} is writable here"})
            else:
                setup.append(f"mkdir -p {shlex.quote(workdir)}")
                applied.append(step)
        elif word in ("COPY", "ADD"):
            parsed = _copy_sources(args)
            if parsed is None or any(s.startswith(("http://", "https://")) for s in parsed[0]):
                not_applied.append({"step": step, "why": "not a copy of files from the task folder"})
                continue
            got, why = _copy_files(folder, parsed[0], parsed[1], workdir)
            if why:
                not_applied.append({"step": step, "why": why})
            else:
                files.update(got)
                applied.append(step)
        elif word == "RUN":
            command = args
            if NEEDS_NETWORK_SUBCOMMANDS.search(command):
                not_applied.append({"step": step, "why": "needs the network (our sandboxes have none)"})
            else:
                cwd = workdir if _in_app(workdir, "/") is not None else "/work"
                setup.append(f"cd {shlex.quote(cwd)} && {command}")
                applied.append(step)
        else:
            not_applied.append({"step": step, "why": f"{word} does not reach the task's shell"})
    return {"files": files, "setup": setup, "applied": applied, "not_applied": not_applied}


def read_folder(folder: Path) -> Item:
    """One task folder as a terminal task, or a Skip with the reason."""
    suite_id = folder.name
    config: dict[str, Any] = {}
    instruction = ""
    if (folder / "task.yaml").is_file():
        config = yaml.safe_load((folder / "task.yaml").read_text("utf-8")) or {}
        instruction = str(config.get("instruction") or "")
        layout = "task.yaml"
    else:
        config = tomllib.loads((folder / "task.toml").read_text("utf-8"))
        md = folder / "instruction.md"
        instruction = md.read_text("utf-8") if md.is_file() else ""
        layout = "task.toml"
    if not instruction.strip():
        return Skip(suite_id, "no instruction")
    dockerfile = next(
        (p for p in (folder / "Dockerfile", folder / "environment" / "Dockerfile") if p.is_file()), None
    )
    if dockerfile is None:
        built: dict[str, Any] = {"files": {}, "setup": [], "applied": [], "not_applied": []}
        docker_note = f"no Dockerfile: {IMAGE} as it is"
    else:
        built = apply_dockerfile(folder, dockerfile.read_text("utf-8"))
        docker_note = str(dockerfile.relative_to(folder))
    tests_dir = folder / "tests"
    tests = (
        sorted(str(p.relative_to(folder)) for p in tests_dir.rglob("*") if p.is_file())
        if tests_dir.is_dir()
        else []
    )
    found = config.get("metadata")
    meta: dict[str, Any] = found if isinstance(found, dict) else config
    timeout = (
        (config.get("agent") or {}).get("timeout_sec")
        if layout == "task.toml"
        else config.get("max_agent_timeout_sec")
    )
    task: dict[str, Any] = {
        "id": f"tbench-{suite_id}",
        "instruction": instruction.strip(),
        "image": IMAGE,
        "files": built["files"],
        "setup": [f"mkdir -p {APP_LINK_TARGET}", *built["setup"]],
        "metadata": {
            "suite_layout": layout,
            "dockerfile": docker_note,
            "dockerfile_applied": built["applied"],
            "dockerfile_not_applied": built["not_applied"],
            "suite_tests": tests,
            "difficulty": meta.get("difficulty"),
            "category": meta.get("category"),
            "tags": meta.get("tags"),
        },
    }
    plan = solution_plan(folder)
    if plan:
        task["actions"] = plan
        task["metadata"]["actions_from"] = "solution.sh"
    if isinstance(timeout, (int, float)) and timeout > 0:
        task["deadline_s"] = float(timeout)
    return with_provenance("terminal", SUITE, suite_id, str(folder), task)


def solution_plan(folder: Path) -> list[str]:
    """The reference solution's command lines as a scripted plan, when it is a plain list of commands
    (no continuation lines, here-documents or blocks); else none."""
    script = folder / "solution.sh"
    if not script.is_file():
        return []
    lines = [ln.strip() for ln in script.read_text("utf-8").splitlines()]
    commands = [ln for ln in lines if ln and not ln.startswith("#")]
    plain = all(
        not ln.endswith(("\\", "{", "(", "then", "do", "|", "&&"))
        and "<<" not in ln
        and ln not in ("}", ")", "fi", "done")
        for ln in commands
    )
    return commands if plain else []


def read(path: str | Path, **_: Any) -> Iterator[Item]:
    for folder in task_folders(Path(path)):
        yield read_folder(folder)


def image_dockerfile(base_ref: str) -> str:
    return f"FROM {base_ref}\nRUN ln -s {APP_LINK_TARGET} {APP_DIR}\nLABEL worldline.image={IMAGE}\n"


def ensure_image(client: Any) -> str:
    """Build `worldline/tbench` on the engine when it is missing (offline: FROM worldline/debian plus a
    link); returns its reference."""
    import docker

    from collectors import engine

    try:
        return engine.image_reference(client, IMAGE)
    except docker.errors.ImageNotFound:
        pass
    base = engine.image_reference(client, engine.DEBIAN_IMAGE)
    client.images.build(fileobj=io.BytesIO(image_dockerfile(base).encode()), tag=IMAGE, rm=True, pull=False)
    return engine.image_reference(client, IMAGE)
