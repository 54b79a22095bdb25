"""The `explore` policy: seeded exploration that needs no LLM, for every local domain.

Each turn it picks among the actions the latest observation affords, grounded in what earlier
observations showed: terminal and swe commands over the paths, files, programs and error messages
seen so far (with typos, interrupts, pipes, pagers and REPLs at set rates); MCP calls whose arguments
are generated from each tool's JSON Schema (valid ones, and a set share of invalid ones); search
queries from the task and from earlier results, `web_extractor` on returned URLs, `dict_memory`;
web elements by ref from the ARIA snapshot, forms filled with typed values, navigation and tabs; os
AT-SPI nodes, menus, typing and shortcuts.

Determinism: the episode's generator is seeded by (seed, task id, rollout), and every choice depends
only on it and on the observations, so the same seed and the same observations give the same actions.
The behaviour mix (`Mix`) comes from the defaults, then `WORLDLINE_EXPLORE` (a JSON object with
`seed` and `mix`), then the task's `metadata.explore`; the first turn's `policy` metadata records the
mix, the seed and the turn budget, and every turn records the behaviour it drew.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import random
import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, TypeVar

from collectors.environment import Task
from collectors.generators import vocab
from collectors.policy_base import Decision, Policy, PolicyError
from schemas import Action, ActionKind, ActionSpace, Domain, Observation, ToolSpec
from schemas.domains import domain_spec, is_registered, registered_domains

ENV_VAR = "WORLDLINE_EXPLORE"
T = TypeVar("T")


@dataclass(frozen=True)
class Mix:
    """Rates of each behaviour (probabilities per turn) and the turn budget of an episode."""

    min_turns: int = 8
    max_turns: int = 20
    typo: float = 0.06  # a mistyped program name or argument
    interrupt: float = 0.06  # a long-running command stopped with Ctrl-C
    pipe: float = 0.25  # the command's output piped through a filter
    repl: float = 0.05  # a python3 REPL session of a few turns
    pager: float = 0.03  # less on a file, paged, quit
    mutate: float = 0.15  # commands and calls that change state (write, move, delete, edit)
    invalid: float = 0.12  # tool calls with arguments that break the schema, unknown targets
    navigate: float = 0.15  # web/os: back, forward, goto, tabs, scrolling
    react: float = 0.6  # after an error observation: follow up on what the error named

    @classmethod
    def from_json(cls, obj: Any, where: str) -> Mix:
        if not isinstance(obj, dict):
            raise PolicyError(f"{where}: the explore mix must be a JSON object, got {type(obj).__name__}")
        known = {f.name: f.type for f in fields(cls)}
        unknown = sorted(set(obj) - set(known))
        if unknown:
            raise PolicyError(
                f"{where}: unknown explore mix field(s) {', '.join(unknown)}; known: {', '.join(known)}"
            )
        mix = replace(cls(), **obj)
        for name, value in asdict(mix).items():
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise PolicyError(f"{where}: explore mix field {name!r} must be a number >= 0, got {value!r}")
        if mix.min_turns > mix.max_turns or mix.max_turns < 1:
            raise PolicyError(f"{where}: explore mix needs 1 <= min_turns <= max_turns")
        return mix


def episode_rng(seed: int, task_id: str, rollout: int) -> random.Random:
    key = f"worldline-explore/{seed}/{task_id}/{rollout}"
    return random.Random(int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big"))


class OrderedSet:
    """Insertion-ordered distinct strings, capped (oldest dropped), so choices are reproducible."""

    def __init__(self, cap: int = 200) -> None:
        self.items: list[str] = []
        self.cap = cap

    def add(self, item: str) -> None:
        if item and item not in self.items:
            self.items.append(item)
            if len(self.items) > self.cap:
                self.items.pop(0)

    def __bool__(self) -> bool:
        return bool(self.items)

    def pick(self, rng: random.Random, default: str = "") -> str:
        return rng.choice(self.items) if self.items else default


_FILE = re.compile(
    r"(?<![\w/.~-])((?:\.{1,2}/|/)?(?:[\w.-]+/)*[\w-][\w.-]*\.[A-Za-z][A-Za-z0-9]{0,5})(?![\w/])"
)
_DIR = re.compile(r"(?<![\w/.~-])((?:[\w.-]+/)+)(?=\s|$)")
_WORD = re.compile(r"\b[A-Za-z][a-z]{3,14}\b")
_URL = re.compile(r"https?://[^\s\"'<>)\]]+")
_QUOTED = re.compile(r'"([^"\\]{1,60})"')


def _weighted(rng: random.Random, options: dict[str, float]) -> str:
    names = [k for k in options if options[k] > 0]
    return rng.choices(names, weights=[options[k] for k in names], k=1)[0]


class Explorer(ABC):
    """One domain's exploration state: what observations showed, and how to act on it. Each domain's
    subclass draws its next action in `act`."""

    def __init__(self, rng: random.Random, mix: Mix, task: Task, space: ActionSpace) -> None:
        self.rng = rng
        self.mix = mix
        self.task = task
        self.space = space
        self.words = OrderedSet(400)
        self.last = ""
        self.last_error = False
        for word in _WORD.findall(task.instruction):
            self.words.add(word.lower())

    def observe(self, observation: Observation) -> None:
        self.last = observation.text
        self.last_error = bool(observation.is_error)
        for word in _WORD.findall(observation.text[:20000])[:300]:
            self.words.add(word.lower())

    @abstractmethod
    def act(self) -> tuple[Action, str]:
        """The next action and the behaviour it was drawn from (recorded per turn)."""


# -- terminal and swe: a command grammar over what the shell showed ------------------------------------

_ERRORS = (
    ("not_found", re.compile(r"(\S+): (?:command )?not found")),
    (
        "no_such_file",
        re.compile(
            r"(?:cannot access|cannot open|can't open file|No such file or directory)[^\n]*?'?([\w./-]+)'?"
        ),
    ),
    ("traceback", re.compile(r'File "([^"]+)", line (\d+)')),
    ("permission", re.compile(r"([\w./-]+): Permission denied")),
    ("git", re.compile(r"fatal: (.+)")),
)
PROGRAMS = (
    "ls",
    "cat",
    "head",
    "tail",
    "wc",
    "grep",
    "find",
    "sort",
    "awk",
    "sed",
    "cut",
    "python3",
    "git",
    "du",
    "stat",
    "file",
)
LONG_RUNNING = (
    "sleep 30",
    "tail -f {file}",
    "python3 -c 'while True: pass'",
    "cat",
    "read line",
    "yes > /dev/null",
)
PIPES = (
    "head -n {n}",
    "tail -n {n}",
    "wc -l",
    "sort",
    "sort | uniq -c | sort -rn | head",
    "grep -i {word}",
    "cut -c1-80",
    "nl | head -n {n}",
)


class ShellKnowledge:
    """Paths, directories, programs and errors learned from shell output."""

    def __init__(self) -> None:
        self.files = OrderedSet()
        self.dirs = OrderedSet()
        self.programs = OrderedSet(50)
        self.git_dirs = OrderedSet(10)
        self.errors: list[tuple[str, tuple[str, ...]]] = []
        self.variables = OrderedSet(20)
        for program in PROGRAMS:
            self.programs.add(program)

    def learn(self, text: str) -> None:
        text = text[:30000]
        for path in _FILE.findall(text)[:200]:
            if not path.startswith("/proc"):
                self.files.add(path)
                if "/" in path.strip("/"):
                    self.dirs.add(path.rsplit("/", 1)[0])
        for folder in _DIR.findall(text)[:100]:
            self.dirs.add(folder.rstrip("/"))
        if "On branch" in text or "commit " in text and "Author:" in text:
            self.git_dirs.add(".")
        self.errors = []  # only what the latest observation reported is followed up
        for kind, pattern in _ERRORS:
            for match in pattern.finditer(text):
                self.errors.append((kind, match.groups()))
        self.errors = self.errors[-5:]


class ShellGrammar:
    """Command lines drawn from a grammar whose terminals are what the shell showed."""

    def __init__(self, rng: random.Random, mix: Mix, known: ShellKnowledge, words: OrderedSet) -> None:
        self.rng = rng
        self.mix = mix
        self.known = known
        self.words = words

    def file(self) -> str:
        return self.known.files.pick(self.rng, "")

    def dir(self) -> str:
        return self.known.dirs.pick(self.rng, ".")

    def word(self) -> str:
        return self.words.pick(self.rng, "error")

    def command(self, react: bool) -> tuple[str, str]:
        """(command line, behaviour)."""
        rng = self.rng
        if react and self.known.errors and rng.random() < self.mix.react:
            kind, groups = self.known.errors.pop()
            return self.react(kind, groups), f"react:{kind}"
        options = {
            "look": 1.0 if self.known.files else 3.0,
            "inspect": 2.5 if self.known.files else 0.0,
            "search": 1.0 if self.known.files else 0.2,
            "run": 1.0 if any(f.endswith((".py", ".sh")) for f in self.known.files.items) else 0.1,
            "git": 1.2 if self.known.git_dirs or self.known.dirs.items.count("repo") else 0.15,
            "mutate": self.mix.mutate * 6,
            "state": 0.6,
            "system": 0.4,
        }
        kind = _weighted(rng, options)
        return getattr(self, f"_{kind}")(), kind

    def react(self, kind: str, groups: tuple[str, ...]) -> str:
        subject = groups[0] if groups else ""
        if kind == "not_found":
            return rng_choice(
                self.rng,
                (
                    f"command -v {subject}",
                    f"type {subject}",
                    "ls /usr/bin | grep -i " + subject[:3],
                    "echo $PATH",
                ),
            )
        if kind == "no_such_file":
            parent = subject.rsplit("/", 1)[0] if "/" in subject else "."
            return rng_choice(
                self.rng, (f"ls -la {parent}", f"find . -name '{subject.rsplit('/', 1)[-1]}'", "pwd; ls")
            )
        if kind == "traceback" and len(groups) == 2:
            line = int(groups[1])
            return f"sed -n '{max(1, line - 3)},{line + 3}p' {subject}"
        if kind == "permission":
            return rng_choice(self.rng, (f"ls -l {subject}", f"stat {subject}", "id"))
        return rng_choice(self.rng, ("ls -la", "find . -maxdepth 2 -name .git", "git init -q && git status"))

    def _look(self) -> str:
        folder = self.dir()
        return rng_choice(
            self.rng,
            (
                "ls",
                "ls -la",
                f"ls -F {folder}",
                f"find {folder} -maxdepth 3 -type f",
                "pwd",
                f"tree -L 2 {folder}",
                f"du -a {folder} | sort -rn | head",
                "ls -R | head -n 60",
            ),
        )

    def _inspect(self) -> str:
        path = self.file() or "README.md"
        n = self.rng.randint(3, 30)
        ext = path.rsplit(".", 1)[-1].lower()
        by_kind = {
            "csv": (
                f"head -n {n} {path}",
                f"cut -d, -f{self.rng.randint(1, 4)} {path} | sort | uniq -c",
                f"awk -F, 'NR > 1 {{s += ${self.rng.randint(2, 4)}}} END {{print s}}' {path}",
                f"wc -l {path}",
            ),
            "json": (
                f"python3 -m json.tool {path} | head -n {n}",
                f"python3 -c 'import json; d = json.load(open(\"{path}\")); print(type(d).__name__, len(d))'",
                f"grep -o '\"[a-z_]*\":' {path} | sort | uniq -c",
            ),
            "log": (
                f"tail -n {n} {path}",
                f"grep -c ERROR {path}",
                f"awk '{{print $2}}' {path} | sort | uniq -c",
                f"grep -n WARN {path} | head",
            ),
            "py": (
                f"cat -n {path}",
                f"grep -n 'def ' {path}",
                f"python3 -m py_compile {path} && echo compiled",
                f"wc -l {path}",
            ),
            "sh": (f"cat {path}", f"bash -n {path} && echo syntax ok", f"ls -l {path}"),
        }
        generic = (
            f"cat {path}",
            f"head -n {n} {path}",
            f"wc -c {path}",
            f"file {path}",
            f"stat -c '%s %n' {path}",
        )
        return rng_choice(self.rng, by_kind.get(ext, ()) + generic)

    def _search(self) -> str:
        word = self.word()
        return rng_choice(
            self.rng,
            (
                f"grep -rn {word} . | head",
                f"grep -ril {word} {self.dir()}",
                f"find . -name '*{word[:3]}*'",
                f"grep -c {word} {self.file() or '*'}",
            ),
        )

    def _run(self) -> str:
        scripts = [f for f in self.known.files.items if f.endswith((".py", ".sh"))]
        path = rng_choice(self.rng, scripts) if scripts else "main.py"
        if path.endswith(".sh"):
            return rng_choice(self.rng, (f"bash {path}", f"./{path}", f"chmod +x {path} && ./{path}"))
        module = path.rsplit("/", 1)[-1].removesuffix(".py")
        tests = "test" in module
        return rng_choice(
            self.rng,
            (
                f"python3 {path}",
                f"python3 -m unittest {'-q ' if tests else ''}{module if tests else ''}".strip(),
                "python3 -m unittest -q",
                f"python3 -c 'import {module}'",
            ),
        )

    def _git(self) -> str:
        where = self.known.git_dirs.pick(self.rng, "repo" if "repo" in self.known.dirs.items else ".")
        git = "git" if where == "." else f"git -C {where}"
        return rng_choice(
            self.rng,
            (
                f"{git} status",
                f"{git} log --oneline --all --graph | head -n 20",
                f"{git} branch -a",
                f"{git} diff --stat",
                f"{git} show --stat HEAD",
                f"{git} log -p -1",
                f"{git} shortlog -s",
                f"{git} diff HEAD~1 --name-only",
                f"{git} checkout -q -b explore-{self.rng.randint(1, 99)}",
                f"{git} tag v0.{self.rng.randint(1, 9)}",
            ),
        )

    def _mutate(self) -> str:
        path = self.file() or "notes.txt"
        word = self.word()
        return rng_choice(
            self.rng,
            (
                f"echo {word} >> {path}",
                f"mkdir -p {word}/{self.word()}",
                f"cp {path} {path}.bak",
                f"touch {word}.txt",
                f"sed -i 's/{word}/{word.upper()}/' {path}",
                f"mv {path} {path}.old",
                f"rm -f {path}",
                f"printf '%s\\n' {word} {self.word()} > {word}.list",
            ),
        )

    def _state(self) -> str:
        name = self.word().upper()[:8] or "X"
        self.known.variables.add(name)
        return rng_choice(
            self.rng,
            (
                f"export {name}={self.word()}",
                f"echo ${self.known.variables.pick(self.rng, 'HOME')}",
                f"cd {self.dir()}",
                "cd -",
                "cd /work",
                f'{name.lower()}() {{ ls -1 "$@" | wc -l; }}; {name.lower()} .',
                "sleep 20 & jobs",
                "jobs -l",
                "history | tail -n 5",
                "alias ll='ls -la'; ll",
            ),
        )

    def _system(self) -> str:
        return rng_choice(
            self.rng,
            (
                "ps aux | head",
                "df -h /work",
                "free -m",
                "uname -a",
                "env | sort | head",
                "id",
                "date",
                "ulimit -a",
                "cat /etc/os-release",
            ),
        )

    def decorate(self, command: str) -> tuple[str, list[str]]:
        """The command with a pipe or a typo added at their rates; the decorations drawn."""
        drawn = []
        if (
            self.rng.random() < self.mix.pipe
            and "|" not in command
            and not command.startswith(("cd", "export", "echo $"))
        ):
            pipe = rng_choice(self.rng, PIPES).format(n=self.rng.randint(2, 20), word=self.word())
            command = f"{command} | {pipe}"
            drawn.append("pipe")
        if self.rng.random() < self.mix.typo:
            command = typo(self.rng, command)
            drawn.append("typo")
        return command, drawn


def rng_choice(rng: random.Random, options: Sequence[T]) -> T:
    return options[rng.randrange(len(options))]


def typo(rng: random.Random, command: str) -> str:
    """One slip: a swapped, dropped or doubled letter in a word of the command."""
    words = command.split(" ")
    candidates = [i for i, w in enumerate(words) if len(w) >= 3 and w.isalnum()]
    if not candidates:
        return command + rng.choice(("l", "'", " -"))
    i = rng.choice(candidates)
    w = words[i]
    k = rng.randrange(len(w) - 1)
    slip = rng.choice(("swap", "drop", "double"))
    if slip == "swap":
        w = w[:k] + w[k + 1] + w[k] + w[k + 2 :]
    elif slip == "drop":
        w = w[:k] + w[k + 1 :]
    else:
        w = w[:k] + w[k] + w[k:]
    words[i] = w
    return " ".join(words)


def _keys(*items: tuple[str, float]) -> Action:
    return Action(
        kind=ActionKind.KEYSTROKES, text=json.dumps([{"keystrokes": k, "duration": d} for k, d in items])
    )


def _tool(name: str, arguments: Any) -> Action:
    return Action(
        kind=ActionKind.TOOL_CALL,
        text=json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False),
        tool_name=name,
    )


class TerminalExplorer(Explorer):
    def __init__(self, rng: random.Random, mix: Mix, task: Task, space: ActionSpace) -> None:
        super().__init__(rng, mix, task, space)
        self.known = ShellKnowledge()
        self.known.learn(task.instruction)
        self.grammar = ShellGrammar(rng, mix, self.known, self.words)
        self.repl_turns = 0

    def observe(self, observation: Observation) -> None:
        super().observe(observation)
        self.known.learn(observation.text)

    def act(self) -> tuple[Action, str]:
        rng = self.rng
        if self.repl_turns > 0:
            self.repl_turns -= 1
            if self.repl_turns == 0:
                return _keys(("exit()\n", 0.5)), "repl:exit"
            path = self.grammar.file() or "README.md"
            line = rng_choice(
                rng,
                (
                    f"{rng.randint(2, 99)} ** {rng.randint(2, 40)}",
                    f"open({path!r}).read()[:300]",
                    "import os; sorted(os.listdir('.'))[:20]",
                    f"len(open({path!r}).readlines())",
                    "import json, csv, sys; sys.version",
                    f"[w for w in {self.grammar.word()!r}]",
                    "undefined_name",
                    "def f(x):\n    return x * 2\n\nf(21)",
                ),
            )
            return _keys((line + "\n", 0.5)), "repl:line"
        roll = rng.random()
        if roll < self.mix.interrupt:
            program = rng_choice(rng, LONG_RUNNING).format(file=self.grammar.file() or "/dev/null")
            return _keys((program + "\n", rng.choice((0.3, 0.6, 1.0))), ("C-c", 0.3)), "interrupt"
        roll -= self.mix.interrupt
        if roll < self.mix.repl:
            self.repl_turns = rng.randint(2, 5)
            return _keys(("python3\n", 1.0)), "repl:start"
        roll -= self.mix.repl
        if roll < self.mix.pager and self.known.files:
            path = self.grammar.file()
            return _keys(
                (f"less {path}\n", 0.5), (" ", 0.3), ("/" + self.grammar.word() + "\n", 0.3), ("q", 0.3)
            ), "pager"
        command, kind = self.grammar.command(react=self.last_error or bool(self.known.errors))
        command, drawn = self.grammar.decorate(command)
        return Action(kind=ActionKind.COMMAND, text=command), "+".join([kind, *drawn])


class SWEExplorer(Explorer):
    """Read / Edit / Bash over the repository's files (its listing is in the action space description)."""

    def __init__(self, rng: random.Random, mix: Mix, task: Task, space: ActionSpace) -> None:
        super().__init__(rng, mix, task, space)
        self.known = ShellKnowledge()
        self.known.learn(space.description or "")
        self.known.git_dirs.add(".")
        self.grammar = ShellGrammar(rng, mix, self.known, self.words)
        self.contents: dict[str, list[str]] = {}
        self.pending_read = ""

    def observe(self, observation: Observation) -> None:
        super().observe(observation)
        self.known.learn(observation.text)
        if self.pending_read and not observation.is_error:
            lines = [m.group(1) for m in re.finditer(r"^\s*\d+\t(.*)$", observation.text, re.M)]
            if lines:
                self.contents[self.pending_read] = lines
        self.pending_read = ""

    def act(self) -> tuple[Action, str]:
        rng = self.rng
        invalid = rng.random() < self.mix.invalid
        kind = _weighted(
            rng, {"Read": 2.0, "Edit": self.mix.mutate * 8 if self.contents else 0.0, "Bash": 2.5}
        )
        if kind == "Read":
            path = self.grammar.file() or "README.md"
            if invalid:
                choice = rng.randrange(3)
                arguments: dict[str, Any] = [
                    {"path": path + ".missing"},
                    {"path": path, "offset": "ten"},
                    {"file": path},
                ][choice]
                return _tool("Read", arguments), "Read:invalid"
            arguments = {"path": path}
            if rng.random() < 0.3:
                arguments.update(offset=rng.randint(1, 20), limit=rng.randint(1, 30))
            self.pending_read = path
            return _tool("Read", arguments), "Read"
        if kind == "Edit":
            path = rng_choice(rng, sorted(self.contents))
            lines = [line for line in self.contents[path] if line.strip()]
            line = rng_choice(rng, lines) if lines else ""
            if invalid or not line:
                return _tool(
                    "Edit",
                    {"path": path, "old_string": "no such text " + self.grammar.word(), "new_string": "x"},
                ), "Edit:invalid"
            new = _mutate_line(rng, line, self.grammar.word())
            self.contents.pop(path)  # re-read before editing it again
            return _tool("Edit", {"path": path, "old_string": line, "new_string": new}), "Edit"
        command, behaviour = self.grammar.command(react=self.last_error)
        command, drawn = self.grammar.decorate(command)
        if invalid:
            return _tool("Bash", {"cmd": command}), "Bash:invalid"
        return _tool("Bash", {"command": command}), "+".join(["Bash:" + behaviour, *drawn])


def _mutate_line(rng: random.Random, line: str, word: str) -> str:
    for a, b in (
        ("+", "-"),
        ("<=", "<"),
        ("==", "!="),
        (" 1", " 2"),
        ("True", "False"),
        ("return ", "return not "),
    ):
        if a in line and rng.random() < 0.5:
            return line.replace(a, b, 1)
    return line + f"  # {word}"


# -- tool calls from JSON Schema ----------------------------------------------------------------------

_SQL_TABLE = re.compile(r"'name': '(\w+)'")
_SQL_COLUMN = re.compile(r"'name': '(\w+)', 'type'")


class SchemaValues:
    """Argument values for a tool's JSON Schema, from what observations named (paths, names, tables)."""

    def __init__(self, rng: random.Random, words: OrderedSet) -> None:
        self.rng = rng
        self.words = words
        self.strings = OrderedSet(300)  # quoted strings seen in results (entity names, file names)
        self.paths = OrderedSet(200)
        self.tables = OrderedSet(20)
        self.columns = OrderedSet(60)
        self.paths.add(".")

    def learn(self, text: str) -> None:
        text = text[:30000]
        for s in _QUOTED.findall(text)[:300]:
            if not s.startswith(("http", "{")) and len(s) > 1:
                self.strings.add(s)
        for path in _FILE.findall(text)[:200]:
            self.paths.add(path.lstrip("/") if path.startswith("/work/") else path)
        for match in re.finditer(r"\[(?:FILE|DIR)\] ([^\s\"\\]+)", text):
            self.paths.add(match.group(1))
        if "'type'" in text:
            for column in _SQL_COLUMN.findall(text):
                self.columns.add(column)
        elif "'name'" in text:
            for table in _SQL_TABLE.findall(text):
                self.tables.add(table)

    def string(self, prop: str, tool: str, schema: dict[str, Any]) -> str:
        rng = self.rng
        name = prop.lower()
        if "enum" in schema:
            return str(rng.choice(schema["enum"]))
        if name in ("repo_path",):
            return "."
        if any(k in name for k in ("path", "source", "destination", "file", "directory", "dir")):
            base = self.paths.pick(rng, ".")
            return (
                base
                if rng.random() < 0.7
                else f"{base.rstrip('/')}/{rng.choice(vocab.WORDS)}.txt".lstrip("./")
            )
        if name == "query" and "query" in tool:
            return self.sql(tool)
        if "pattern" in name:
            return rng.choice(("*.txt", "*.csv", "*.md", "**/*", f"*{rng.choice(vocab.WORDS)[:3]}*"))
        if name in ("timezone", "source_timezone", "target_timezone"):
            return rng.choice(vocab.TIMEZONES)
        if name == "time":
            return f"{rng.randint(0, 23):02d}:{rng.choice((0, 15, 30, 45)):02d}"
        if any(k in name for k in ("name", "from", "to", "entity", "branch", "target", "revision", "key")):
            if self.strings and rng.random() < 0.7:
                return self.strings.pick(rng)
            return rng.choice(vocab.WORDS).title() + (
                "" if "branch" not in name else f"-{rng.randint(1, 99)}"
            )
        if any(
            k in name
            for k in ("message", "content", "text", "insight", "observation", "description", "value")
        ):
            return vocab.sentence(rng, rng.randint(2, 8))
        if name in ("query", "q", "search"):
            return self.words.pick(rng, "") or rng.choice(vocab.WORDS)
        return self.strings.pick(rng) if self.strings and rng.random() < 0.5 else rng.choice(vocab.WORDS)

    def sql(self, tool: str) -> str:
        rng = self.rng
        table = self.tables.pick(rng, "sqlite_master")
        column = self.columns.pick(rng, "*")
        if "write" in tool:
            return rng_choice(
                rng,
                (
                    f"DELETE FROM {table} WHERE rowid = {rng.randint(1, 20)}",
                    f"UPDATE {table} SET {column if column != '*' else 'rowid'} = {column if column != '*' else 'rowid'} WHERE rowid = {rng.randint(1, 9)}",
                    f"INSERT INTO {table} DEFAULT VALUES",
                ),
            )
        if "create" in tool:
            return f"CREATE TABLE {rng.choice(vocab.WORDS)}_{rng.randint(1, 99)} (id INTEGER PRIMARY KEY, note TEXT)"
        return rng_choice(
            rng,
            (
                f"SELECT * FROM {table} LIMIT {rng.randint(1, 10)}",
                f"SELECT COUNT(*) FROM {table}",
                f"SELECT {column}, COUNT(*) FROM {table} GROUP BY {column}",
                f"SELECT * FROM {table} ORDER BY {column} DESC LIMIT 3",
                f"SELECT MAX({column}) FROM {table}",
                "SELECT name FROM sqlite_master WHERE type = 'table'",
            ),
        )

    def value(self, schema: dict[str, Any], prop: str, tool: str, depth: int = 0) -> Any:
        rng = self.rng
        kind = schema.get("type")
        if isinstance(kind, list):
            kind = rng.choice([k for k in kind if k != "null"] or ["string"])
        if "enum" in schema:
            return rng.choice(schema["enum"])
        if "anyOf" in schema or "oneOf" in schema:
            return self.value(rng.choice(schema.get("anyOf") or schema["oneOf"]), prop, tool, depth)
        if kind == "integer" or kind == "number":
            lo = int(schema.get("minimum", 0 if kind == "integer" else 0))
            hi = int(schema.get("maximum", lo + 20))
            n = rng.randint(lo, max(lo, hi))
            return n if kind == "integer" else n + rng.choice((0, 0.5, 0.25))
        if kind == "boolean":
            return rng.random() < 0.5
        if kind == "array":
            items = schema.get("items") or {"type": "string"}
            singular = prop[:-1] if prop.endswith("s") else prop
            return [self.value(items, singular, tool, depth + 1) for _ in range(rng.randint(1, 3))]
        if kind == "object" or "properties" in schema:
            return self.object(schema, tool, depth + 1)
        return self.string(prop, tool, schema)

    def object(self, schema: dict[str, Any], tool: str, depth: int = 0) -> dict[str, Any]:
        props: dict[str, Any] = schema.get("properties") or {}
        required = [p for p in schema.get("required", []) if p in props]
        optional = [p for p in props if p not in required]
        chosen = required + [p for p in optional if self.rng.random() < (0.4 if depth < 3 else 0.0)]
        return {p: self.value(props[p] if isinstance(props[p], dict) else {}, p, tool, depth) for p in chosen}

    def broken(self, schema: dict[str, Any], tool: str) -> tuple[Any, str]:
        """Arguments that break the schema in one drawn way, and which way: a required field missing,
        a field of the wrong type, a field the schema forbids, or arguments that are not an object."""
        args: Any = self.object(schema, tool)
        props: dict[str, Any] = schema.get("properties") or {}
        required = [p for p in schema.get("required", []) if p in args]
        typed = [p for p in sorted(args) if isinstance(props.get(p), dict) and props[p].get("type")]
        ways = (["missing_required"] if required else []) + (["wrong_type"] if typed else [])
        ways += ["unknown_field"] if schema.get("additionalProperties") is False else []
        way = self.rng.choice(ways or ["not_object"])
        if way == "missing_required":
            args.pop(self.rng.choice(required))
        elif way == "wrong_type":
            prop = self.rng.choice(typed)
            args[prop] = 12345 if props[prop]["type"] != "integer" else "not-a-number"
            if props[prop]["type"] in ("number",):
                args[prop] = "not-a-number"
        elif way == "unknown_field":
            args[f"{self.rng.choice(vocab.WORDS)}_extra"] = True
        else:
            args = [args]
        return args, way


class ToolExplorer(Explorer):
    """Any domain whose actions are tool calls with JSON Schemas (MCP servers first): every tool is
    tried, the least used ones more often, with valid and, at `mix.invalid`, broken arguments."""

    def __init__(self, rng: random.Random, mix: Mix, task: Task, space: ActionSpace) -> None:
        super().__init__(rng, mix, task, space)
        self.values = SchemaValues(rng, self.words)
        self.uses: dict[str, int] = {t.name: 0 for t in space.tools}
        self.tools: dict[str, ToolSpec] = {t.name: t for t in space.tools}
        self.values.learn(space.description or "")

    def observe(self, observation: Observation) -> None:
        super().observe(observation)
        self.values.learn(observation.text)

    def act(self) -> tuple[Action, str]:
        rng = self.rng
        if not self.tools:
            return _tool("no_such_tool", {}), "unknown_tool"
        if rng.random() < self.mix.invalid / 6:
            return _tool(f"{rng.choice(vocab.WORDS)}_tool", {}), "unknown_tool"
        name = _weighted(rng, {n: 1.0 / (1 + u) ** 2 for n, u in sorted(self.uses.items())})
        self.uses[name] += 1
        schema = self.tools[name].parameters or {"type": "object", "properties": {}}
        if rng.random() < self.mix.invalid:
            args, way = self.values.broken(schema, name)
            return _tool(name, args), f"{name}:invalid:{way}"
        return _tool(name, self.values.object(schema, name)), name


class SearchExplorer(ToolExplorer):
    """web_search from the task's words and earlier results, web_extractor on returned URLs, dict_memory."""

    def __init__(self, rng: random.Random, mix: Mix, task: Task, space: ActionSpace) -> None:
        super().__init__(rng, mix, task, space)
        self.urls = OrderedSet(200)
        self.titles = OrderedSet(200)
        self.keys = OrderedSet(30)
        self.paged = False

    def observe(self, observation: Observation) -> None:
        super().observe(observation)
        for url in re.findall(r"URL: (\S+)", observation.text):
            self.urls.add(url)
        for title in re.findall(r"Title: (.+)", observation.text):
            self.titles.add(title.split(" — ")[0][:80])
        self.paged = '"page"' in observation.text or "page" in observation.text.lower()[-200:]

    def _query(self) -> str:
        rng = self.rng
        source = rng.random()
        if source < 0.4 or not self.titles:
            words = [w for w in self.words.items[:40] if len(w) > 3]
            return " ".join(rng.sample(words, min(len(words), rng.randint(2, 4)))) or rng.choice(vocab.WORDS)
        if source < 0.8:
            return self.titles.pick(rng)
        return self.words.pick(rng) + " " + self.titles.pick(rng).split("(")[0]

    def act(self) -> tuple[Action, str]:
        rng = self.rng
        if rng.random() < self.mix.invalid:
            return rng_choice(
                rng,
                (
                    (_tool("web_search", {}), "web_search:invalid"),
                    (
                        _tool(
                            "web_extractor",
                            {"url": f"https://docs.python.org/3.11/{rng.choice(vocab.WORDS)}.html"},
                        ),
                        "web_extractor:unknown_url",
                    ),
                    (
                        _tool("dict_memory", {"action": "retrieve", "key": rng.choice(vocab.WORDS)}),
                        "dict_memory:missing_key",
                    ),
                    (_tool("web_search", {"query": 7}), "web_search:invalid"),
                ),
            )
        kind = _weighted(rng, {"search": 3.0, "extract": 2.0 if self.urls else 0.0, "memory": 1.0})
        if kind == "search":
            if self.paged and rng.random() < 0.3:
                return _tool(
                    "web_search", {"query": self._query(), "page": rng.randint(2, 3)}
                ), "web_search:page"
            if rng.random() < 0.25:
                return _tool(
                    "web_search", {"queries": [self._query() for _ in range(rng.randint(2, 3))]}
                ), "web_search:queries"
            return _tool("web_search", {"query": self._query()}), "web_search"
        if kind == "extract":
            return _tool("web_extractor", {"url": self.urls.pick(rng)}), "web_extractor"
        op = rng.choice(
            ("add", "add", "update", "retrieve", "retrieve_all", "remove")
            if self.keys
            else ("add", "retrieve_all")
        )
        key = self.keys.pick(rng) if op != "add" else self.words.pick(rng, "note")
        self.keys.add(key)
        args: dict[str, Any] = {"action": op}
        if op != "retrieve_all":
            args["key"] = key
        if op in ("add", "update"):
            args["value"] = self.titles.pick(rng, "") or vocab.sentence(rng, 5)
        return _tool("dict_memory", args), f"dict_memory:{op}"


# -- GUI: the web's ARIA snapshot and the desktop's AT-SPI tree ----------------------------------------

_ARIA = re.compile(r'^([ \t]*)- (\w+)(?: "((?:[^"\\]|\\.)*)")?[^\n]*?\[ref=([a-z0-9]+)\]', re.M)
_URL_LINE = re.compile(r"^URL: (\S+)", re.M)
_FILLABLE = ("textbox", "searchbox", "spinbutton")
_CLICKABLE = ("link", "button", "checkbox", "radio", "tab", "menuitem", "switch", "option", "treeitem")


def typed_value(rng: random.Random, role: str, name: str) -> str:
    """A value of the kind a field asks for (email, name, number, date, search words, free text)."""
    label = name.lower()
    if role == "spinbutton" or any(
        k in label for k in ("quantity", "number", "grams", "amount", "age", "count")
    ):
        return str(rng.choice((rng.randint(0, 12), rng.randint(1, 2000), -1)))
    if "mail" in label:
        first, last = vocab.person(rng)
        return rng.choice((f"{first}.{last}@example.org", f"{first}@", "not an email"))
    if "name" in label:
        return rng.choice((vocab.full_name(rng), "", vocab.person(rng)[0]))
    if "date" in label:
        return f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    if "search" in label or role == "searchbox":
        return rng.choice(vocab.WORDS)
    return vocab.sentence(rng, rng.randint(1, 6)).rstrip(".")


class WebExplorer(Explorer):
    def __init__(self, rng: random.Random, mix: Mix, task: Task, space: ActionSpace) -> None:
        super().__init__(rng, mix, task, space)
        self.elements: list[tuple[str, str, str, list[str]]] = []  # (role, name, ref, options)
        self.visited = OrderedSet(50)
        self.clicked: dict[tuple[str, str], int] = {}
        self.tabs = 1
        start = str(task.domain_config("web").get("start_url", "{sites}/"))
        # The start page's site ({sites}/shop/): a goto of its own stays on the task's site.
        match = re.match(r"^(\{sites\}/[^/?#]*/?|https?://[^/]+/)", start)
        self.site = match.group(1) if match else start

    def observe(self, observation: Observation) -> None:
        super().observe(observation)
        text = observation.text
        match = _URL_LINE.search(text)
        if match and match.group(1).startswith("http"):
            self.visited.add(match.group(1))
        tabs = re.search(r"^Tabs: (.*)$", text, re.M)
        self.tabs = max(1, tabs.group(1).count("[") if tabs else 1)
        self.elements = []
        lines = text.splitlines()
        for i, line in enumerate(lines):
            m = _ARIA.match(line)
            if not m:
                continue
            indent, role, name, ref = len(m.group(1)), m.group(2), (m.group(3) or ""), m.group(4)
            options: list[str] = []
            if role in ("combobox", "listbox"):
                for follow in lines[i + 1 : i + 30]:
                    if len(follow) - len(follow.lstrip()) <= indent:
                        break
                    o = re.match(r'\s*- option "((?:[^"\\]|\\.)*)"', follow)
                    if o:
                        options.append(o.group(1))
            self.elements.append((role, name, ref, options))

    def act(self) -> tuple[Action, str]:
        rng = self.rng
        if rng.random() < self.mix.invalid / 3:
            return Action(
                kind=ActionKind.COMMAND,
                text=rng_choice(
                    rng,
                    (
                        'click("e9999")',
                        'fill("e9999", "x")',
                        "clik(",
                        'select_option("e1", "no such option")',
                    ),
                ),
            ), "invalid"
        if not self.elements or rng.random() < self.mix.navigate:
            return self._navigate(), "navigate"
        fillable = [e for e in self.elements if e[0] in _FILLABLE]
        selectable = [e for e in self.elements if e[0] == "combobox"]
        clickable = [e for e in self.elements if e[0] in _CLICKABLE]
        kind = _weighted(
            rng,
            {
                "fill": 2.0 * bool(fillable),
                "select": 1.0 * bool(selectable),
                "click": 3.0 * bool(clickable),
                "other": 0.5,
            },
        )
        if kind == "fill":
            role, name, ref, _ = rng.choice(fillable)
            if rng.random() < 0.2:
                return Action(kind=ActionKind.COMMAND, text=f'press("{ref}", "Enter")'), "press"
            return Action(
                kind=ActionKind.COMMAND,
                text=f"fill({json.dumps(ref)}, {json.dumps(typed_value(rng, role, name))})",
            ), f"fill:{role}"
        if kind == "select":
            role, name, ref, options = rng.choice(selectable)
            option = rng.choice(options) if options else "1"
            return Action(
                kind=ActionKind.COMMAND, text=f"select_option({json.dumps(ref)}, {json.dumps(option)})"
            ), "select_option"
        if kind == "click":
            weights = {i: 1.0 / (1 + self.clicked.get((e[0], e[1]), 0)) for i, e in enumerate(clickable)}
            index = int(_weighted(rng, {str(i): w for i, w in weights.items()}))
            role, name, ref, _ = clickable[index]
            self.clicked[(role, name)] = self.clicked.get((role, name), 0) + 1
            verb = "dblclick" if rng.random() < 0.05 else "hover" if rng.random() < 0.05 else "click"
            return Action(kind=ActionKind.COMMAND, text=f"{verb}({json.dumps(ref)})"), f"{verb}:{role}"
        ref = rng.choice(self.elements)[2]
        return Action(
            kind=ActionKind.COMMAND,
            text=rng_choice(
                rng, (f'focus("{ref}")', 'keyboard_press("Tab")', f'clear("{ref}")', "noop(200)")
            ),
        ), "other"

    def _navigate(self) -> Action:
        rng = self.rng
        options = ["go_back()", "go_forward()", f"scroll(0, {rng.choice((200, 400, -300))})", "noop(300)"]
        if self.visited:
            options.append(f"goto({json.dumps(self.visited.pick(rng))})")
        options.append(f"goto({json.dumps(self.site)})")
        if self.tabs > 1:
            options += [f"tab_focus({rng.randrange(self.tabs)})", "tab_close()"]
        return Action(kind=ActionKind.COMMAND, text=rng_choice(rng, options))


_NODE = re.compile(
    r'^\s*\[(\d+)\] ([a-z][a-z ]*?)(?: "((?:[^"\\]|\\.)*)")?(?: \(([^)]*)\))?(?: value=|\s@|$)', re.M
)
_OS_ACTIONABLE = (
    "push button",
    "toggle button",
    "menu item",
    "check box",
    "radio button",
    "combo box",
    "page tab",
    "check menu item",
    "radio menu item",
    "link",
    "list item",
    "table cell",
    "spin button",
)
_OS_EDITABLE = ("text", "entry", "editbar", "password text", "spin button", "terminal")
_KEYS = (
    "enter",
    "tab",
    "escape",
    "backspace",
    "up",
    "down",
    "left",
    "right",
    "home",
    "end",
    "delete",
    "pageup",
    "pagedown",
    "f10",
)
_HOTKEYS = (
    ("ctrl", "a"),
    ("ctrl", "z"),
    ("ctrl", "s"),
    ("ctrl", "f"),
    ("ctrl", "c"),
    ("ctrl", "v"),
    ("ctrl", "n"),
    ("ctrl", "shift", "z"),
    ("ctrl", "h"),
    ("ctrl", "w"),
    ("alt", "f4"),
    ("ctrl", "home"),
    ("shift", "end"),
)


class OSExplorer(Explorer):
    def __init__(self, rng: random.Random, mix: Mix, task: Task, space: ActionSpace) -> None:
        super().__init__(rng, mix, task, space)
        self.nodes: list[tuple[str, str, str, str]] = []  # (id, role, name, states)
        self.used: dict[tuple[str, str], int] = {}
        self.calculator = False

    def observe(self, observation: Observation) -> None:
        super().observe(observation)
        self.nodes = [
            (m.group(1), m.group(2), m.group(3) or "", m.group(4) or "")
            for m in _NODE.finditer(observation.text)
        ]
        self.calculator = "alculator" in observation.text[:400]

    def _typed(self) -> str:
        rng = self.rng
        if self.calculator:
            expression = str(rng.randint(0, 999))
            for _ in range(rng.randint(0, 3)):
                expression += rng.choice("+-*/") + str(rng.randint(0, 99))
            return expression + rng.choice(("", "=", "\n"))
        return rng.choice(
            (
                vocab.sentence(rng, rng.randint(1, 8)),
                self.words.pick(rng, "hello"),
                f"{rng.randint(1, 99)}. {vocab.full_name(rng)}",
            )
        )

    def act(self) -> tuple[Action, str]:
        rng = self.rng
        if rng.random() < self.mix.invalid / 3:
            return Action(
                kind=ActionKind.COMMAND,
                text=rng_choice(
                    rng, ("click('99999')", "click(5000, 5000)", "press('nosuchkey')", "hotkey()")
                ),
            ), "invalid"
        actionable = [n for n in self.nodes if n[1] in _OS_ACTIONABLE and "insensitive" not in n[3]]
        editable = [n for n in self.nodes if n[1] in _OS_EDITABLE]
        kind = _weighted(
            rng,
            {
                "click": 3.0 * bool(actionable),
                "type": 2.0 + 2.0 * bool(editable) + 2.0 * self.calculator,
                "press": 1.2,
                "hotkey": 0.8,
                "menu": 0.6,
                "pointer": self.mix.navigate * 3,
                "wait": 0.2,
            },
        )
        if kind == "click":
            weights = {
                str(i): 1.0 / (1 + self.used.get((n[1], n[2]), 0)) ** 2 for i, n in enumerate(actionable)
            }
            node = actionable[int(_weighted(rng, weights))]
            self.used[(node[1], node[2])] = self.used.get((node[1], node[2]), 0) + 1
            verb = "rightClick" if rng.random() < 0.05 else "doubleClick" if rng.random() < 0.05 else "click"
            return Action(kind=ActionKind.COMMAND, text=f"{verb}({node[0]!r})"), f"{verb}:{node[1]}"
        if kind == "type":
            if editable and rng.random() < 0.3:
                return Action(
                    kind=ActionKind.COMMAND, text=f"click({rng.choice(editable)[0]!r})"
                ), "focus:editable"
            return Action(kind=ActionKind.COMMAND, text=f"typewrite({self._typed()!r})"), "typewrite"
        if kind == "press":
            return Action(kind=ActionKind.COMMAND, text=f"press({rng.choice(_KEYS)!r})"), "press"
        if kind == "hotkey":
            keys = rng.choice(_HOTKEYS)
            return Action(
                kind=ActionKind.COMMAND, text=f"hotkey({', '.join(repr(k) for k in keys)})"
            ), "hotkey"
        if kind == "menu":
            menus = [
                n
                for n in self.nodes
                if n[1] in ("toggle button", "menu", "menu item") or "menu" in n[2].lower()
            ]
            if menus:
                return Action(kind=ActionKind.COMMAND, text=f"click({rng.choice(menus)[0]!r})"), "menu"
            return Action(kind=ActionKind.COMMAND, text="press('f10')"), "menu"
        if kind == "pointer":
            x, y = rng.randint(0, 1000), rng.randint(0, 700)
            return Action(
                kind=ActionKind.COMMAND,
                text=rng_choice(
                    rng, (f"moveTo({x}, {y})", f"scroll({rng.choice((-3, 3))})", f"click({x}, {y})")
                ),
            ), "pointer"
        return Action(kind=ActionKind.COMMAND, text=f"wait({rng.choice((0.2, 0.5))})"), "wait"


def explorer_domain(task: Task, space: ActionSpace) -> str:
    """The domain an episode runs in when the collector does not say: the registered domain whose
    configuration object the task holds, else what the action space's tools show."""
    for spec in registered_domains():
        if spec.value in task.config:
            return spec.value
    names = set(space.tool_names())
    if {"Read", "Edit", "Bash"} <= names:
        return Domain.SWE.value
    if {"web_search", "web_extractor"} <= names:
        return Domain.SEARCH.value
    if "run_command" in names or not names:
        return Domain.TERMINAL.value
    return Domain.MCP.value


def explorer_class(domain: str) -> type[Explorer] | None:
    """The explorer of a registered domain (`DomainSpec.explorer`, `module:Class`), or None."""
    target = domain_spec(domain).explorer if is_registered(domain) else ""
    if not target:
        return None
    module_name, _, name = target.partition(":")
    cls: type[Explorer] = getattr(importlib.import_module(module_name), name)
    return cls


class ExplorePolicy(Policy):
    """Seeded exploration over what each observation affords; stops after its drawn turn budget."""

    name = "explore"

    def __init__(
        self, *, max_turns: int = 30, sample_index: int = 0, seed: int | None = None, mix: Mix | None = None
    ) -> None:
        self.max_turns = max_turns
        self.sample_index = sample_index
        self.seed = seed
        self.mix = mix
        self.explorer: Explorer | None = None
        self.budget = 0
        self.turns = 0
        self.settings: dict[str, Any] = {}

    def begin(
        self, task: Task, action_space: ActionSpace, first_observation: Observation, domain: str | None = None
    ) -> None:
        env_cfg: dict[str, Any] = {}
        if os.environ.get(ENV_VAR):
            try:
                env_cfg = json.loads(os.environ[ENV_VAR])
            except json.JSONDecodeError as exc:
                raise PolicyError(
                    f'{ENV_VAR} must be a JSON object such as {{"seed": 1, "mix": {{"typo": 0.1}}}}: {exc.msg}'
                ) from exc
            if not isinstance(env_cfg, dict):
                raise PolicyError(f"{ENV_VAR} must be a JSON object, got {type(env_cfg).__name__}")
        task_cfg = task.metadata.get("explore") or {}
        if not isinstance(task_cfg, dict):
            raise PolicyError(
                f"task {task.id}: field 'metadata.explore' must be an object with 'seed' and/or 'mix'"
            )
        mix_fields = {
            **asdict(self.mix or Mix()),
            **(env_cfg.get("mix") or {}),
            **(task_cfg.get("mix") or {}),
        }
        mix = Mix.from_json(mix_fields, f"task {task.id}")
        seed = task_cfg.get("seed", env_cfg.get("seed", self.seed if self.seed is not None else 0))
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise PolicyError(f"task {task.id}: the explore seed must be an integer, got {seed!r}")
        rng = episode_rng(seed, task.id, self.sample_index)
        limit = min(self.max_turns, task.max_turns or self.max_turns, int(mix.max_turns))
        self.budget = rng.randint(min(int(mix.min_turns), limit), limit)
        domain = domain or explorer_domain(task, action_space)
        explorer = explorer_class(domain)
        if explorer is None:
            raise PolicyError(
                f"task {task.id}: the explore policy has no explorer for the {domain} domain; use scripted or openai"
            )
        self.explorer = explorer(rng, mix, task, action_space)
        self.explorer.observe(first_observation)
        self.turns = 0
        self.settings = {
            "domain": domain,
            "seed": seed,
            "rollout": self.sample_index,
            "budget": self.budget,
            "mix": asdict(mix),
        }

    def next_action(self, observation: Observation | None) -> Decision:
        if self.explorer is None:
            raise PolicyError("explore: next_action() before begin()")
        if observation is not None:
            self.explorer.observe(observation)
        if self.turns >= self.budget:
            return Decision(None, f"explore budget of {self.budget} turns spent")
        action, behaviour = self.explorer.act()
        info: dict[str, Any] = {"behaviour": behaviour}
        if self.turns == 0:
            info["explore"] = self.settings
        self.turns += 1
        return Decision(action, info=info)
