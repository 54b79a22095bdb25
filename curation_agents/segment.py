"""Segment: split sessions into turns and long sessions into episodes.

For terminal transcripts, an action is the command line as finally submitted (after the user's own
edits, history recall and tab completion, read back from the rendered line), and its observation is
what the terminal showed from the row the action was typed on (the prompt and the echo) to the next
prompt, as screen rows of the recording's width (docs/observations.md). REPL prompts nest inside shell
sessions, continuation prompts join lines into one command (also when the lines were sent as one
input event), lines typed into a running program that reads them (`cat > file`) are turns of their
own, and Ctrl-C either discards the line being typed or marks the running command as interrupted.
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import datetime, timedelta
from typing import Any

from wcwidth import wcwidth

from curation_agents.formats.common import source_time
from curation_agents.formats.common import turn as make_turn
from curation_agents.model import CleanConfig, ParsedRecord, RawTurn
from curation_agents.shell_prompts import NO_ECHO_PROMPT, PROMPT
from worldline.redaction.detect import marker, redact

LOOSE_PROMPT = re.compile(r"^[#$%] ")
CONTINUATION_PROMPTS = frozenset({">", "...", "->"})
HARNESS_SUFFIX = re.compile(r"\s*;\s*tmux wait -S \S+\s*$")
SESSION_END = re.compile(r"^(?:exit|logout|\^D)(?:\s+\d+)?$")
_INPUT_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|O.|.)?")


# Readline's incremental search replaces the prompt while it runs: (reverse-i-search)`query': command
SEARCH_PROMPT = re.compile(r"^\((?:failed )?(?:reverse-|bck-)?i-search\)`[^'\n]*': ")


def _split_prompt(line: str, prompt: str | None) -> tuple[str, str]:
    """(prompt, rest) of LINE: a shell, REPL, search or continuation prompt at its start; ("", LINE)
    when none is there."""
    rest = _strip_prompt(line, prompt)
    if len(rest) == len(line):
        for cont in CONTINUATION_PROMPTS:
            if line.startswith(cont + " "):
                return line[: len(cont) + 1], line[len(cont) + 1 :]
            if line == cont:  # an empty line at a continuation prompt (its space stripped)
                return line, ""
    return line[: len(line) - len(rest)], rest


def _strip_prompt(line: str, prompt: str | None) -> str:
    search = SEARCH_PROMPT.match(line)
    if search:
        return line[search.end() :]
    if prompt and line.startswith(prompt):
        return line[len(prompt) :]
    if prompt and prompt.rstrip() and line.startswith(prompt.rstrip()):
        return line[len(prompt.rstrip()) :].lstrip()
    m = PROMPT.match(line)
    return line[m.end() :] if m else line


def _echo_row(rows: list[str], start: int, action: str) -> tuple[int, str] | None:
    """Where a line typed into a running program shows in its output: the first row from `start` that
    is the line (the tty's echo on an empty row) or ends with it (typed at a prompt the program printed
    itself, `Name? `), with the text before it on that row. Output the recorder had not read yet when
    the key was sent can stand before the echo, so the row can be later than where the input was typed.
    An empty line is only found where it was typed: an empty row is too common to look further."""
    wanted = action.strip()
    if not wanted:
        return (start, "") if start < len(rows) and not rows[start].strip() else None
    for j in range(start, len(rows)):
        row = rows[j].rstrip()
        if row.strip() == wanted:
            return j, ""
        if row.endswith(wanted):
            return j, row[: len(row) - len(wanted)]
    return None


class _Session:
    """Walks a transcript, building turns.

    Commands typed ahead (several lines sent before the shell has answered the first) wait in `ahead`
    until their echo shows up in the output; each then takes the output that follows its echo.
    """

    def __init__(self, start: datetime | None, counts: Counter[str]) -> None:
        self.start = start
        self.counts = counts
        self.turns: list[RawTurn] = []
        self.open: RawTurn | None = None
        self.open_echo: list[str] = []  # the rows the open turn's action was typed on (prompt and echo)
        self.open_lines: list[str] = []
        self.open_t = 0.0
        self.prompt: str | None = None
        self.typing = False
        self.buffer: list[str] = []
        self.echo_of: str | None = None  # the command whose echo is expected in the next output lines
        self.echoes_skipped = 0
        self.ahead: list[RawTurn] = []
        # Per line typed while a program runs (keyed by id of its turn): the turn it was typed into,
        # the index in that turn's output where the tty's echo of it lands, its time, and whether it
        # is an end of file (^D, which the tty does not echo).
        self.typed_into: dict[int, tuple[RawTurn, int, float, bool]] = {}
        self.typing_ahead = False

    def finished_lines(self, lines: list[str]) -> None:
        for index, line in enumerate(lines):
            if self.echo_of is None and not self.ahead:
                # No echo awaited: this line and every one after it are the open turn's output, as
                # finished_line would add them one at a time.
                if self.open is not None:
                    self.open_lines.extend(lines[index:])
                return
            self.finished_line(line)

    def finished_line(self, line: str) -> None:
        if self.echo_of is not None:
            if self._is_echo(line, self.echo_of):
                self.echoes_skipped += 1
                if self.echoes_skipped >= 2:  # the tty's echo and readline's redraw, at most
                    self.echo_of = None
                if self.open is not None:
                    self.open_echo.append(HARNESS_SUFFIX.sub("", line))  # shown by the harness, not typed
                return
            self.echo_of = None
        if self.ahead:
            prompt, command = _split_prompt(line, self.prompt)
            wanted = self.ahead[0]["action"]
            if prompt and (self._is_echo(command, wanted) or not (command.strip() or wanted.strip())):
                # The program's own echo at its prompt of a line typed ahead: the open turn's output
                # ends here. (A bare echo is the tty's, shown while the program ran: output.)
                nxt = self.ahead.pop(0)
                self.typed_into.pop(id(nxt), None)
                if self.open is not None and prompt.strip() in CONTINUATION_PROMPTS and not self.open_lines:
                    if command.strip():  # a block continued: indentation kept (an empty line ends it)
                        self.open["action"] += "\n" + command.rstrip()
                    self.open_echo.append(line)
                    return
                if self.open is not None:
                    self.close(self.open_t, trailing_prompt=prompt)
                nxt["metadata"]["prompt"] = prompt
                self.open, self.open_echo, self.open_lines = nxt, [line], []
                return
        if self.open is not None:
            self.open_lines.append(line)

    def _is_echo(self, line: str, command: str) -> bool:
        wanted = command.strip()
        if not wanted:
            return False
        if line.strip() == wanted:
            return True
        echoed = _strip_prompt(line, self.prompt)
        return echoed.strip() == wanted or HARNESS_SUFFIX.sub("", echoed).strip() == wanted

    def start_typing(self, current_line: str, t: float) -> None:
        self.typing = True
        self.buffer = []
        new_prompt = current_line
        if self.open is not None and not current_line.strip():
            # Typing on an empty row while a program runs: typed ahead for the shell, or input the
            # program reads itself; which one, the next prompt tells (close_with_program_input).
            self.typing_ahead = True
            return
        self.typing_ahead = False
        if self.open is not None:
            continuation = new_prompt.strip() in CONTINUATION_PROMPTS and not self.open_lines
            if continuation:
                self.open["metadata"]["continuation_prompt"] = new_prompt
                self.prompt = new_prompt
                return
            self.close_with_program_input(t, trailing_prompt=new_prompt)
        self.flush_ahead(t)
        self.prompt = new_prompt

    def close_with_program_input(self, t: float, trailing_prompt: str | None) -> None:
        """Close the open turn at a fresh prompt. Lines typed while it ran that no prompt echoed (and
        ^D) were read by the program itself (`cat > file`, `read`, `input()`): each is a turn of its
        own, cut where its echo stands in the output, in the order they were typed."""
        assert self.open is not None
        owner = self.open
        # (row of its echo, text the program printed on that row before it, time typed, eof, turn)
        inputs: list[tuple[int, str, float, bool, RawTurn]] = []
        after = 0  # the rows before this belong to earlier inputs
        for turn in self.ahead:
            into = self.typed_into.get(id(turn))
            if into is None or into[0] is not owner:
                continue
            _, at, t_typed, eof = into
            if eof:
                inputs.append((max(at, after), "", t_typed, eof, turn))
                after = max(at, after)
                continue
            found = _echo_row(self.open_lines, max(at, after), turn["action"])
            if found is not None:
                inputs.append((found[0], found[1], t_typed, eof, turn))
                after = found[0] + 1
        if not inputs:
            self.close(t, trailing_prompt)
            return
        lines = self.open_lines
        for turn in [i[4] for i in inputs]:
            self.ahead.remove(turn)
            self.typed_into.pop(id(turn), None)
        # The program's turn ends at the row its first input was typed on, as the terminal showed it
        # when the input was sent: empty, or the program's own prompt (`? ` of `input("? ")`).
        self.open_lines = lines[: inputs[0][0]]
        self.close(inputs[0][2], trailing_prompt=inputs[0][1])
        for k, (at, _, t_typed, eof, turn) in enumerate(inputs):
            end = inputs[k + 1][0] if k + 1 < len(inputs) else len(lines)
            self.open, self.open_t = turn, t_typed
            self.open_echo = [] if eof else [lines[at]]
            self.open_lines = lines[at if eof else at + 1 : max(end, at if eof else at + 1)]
            last = k + 1 == len(inputs)
            self.close(t if last else inputs[k + 1][2], trailing_prompt if last else inputs[k + 1][1])

    def flush_ahead(self, t: float) -> None:
        """Commands typed ahead whose echo never came: they ran, but their output cannot be told apart."""
        for turn in self.ahead:
            turn["metadata"]["typed_ahead_without_echo"] = True
            self.open, self.open_echo, self.open_lines = turn, [], []
            self.close(t, trailing_prompt=None)
        self.ahead = []
        self.typed_into.clear()

    def submit(self, current_line: str, t: float, typed_ahead: bool = False) -> None:
        echoed = _strip_prompt(current_line, self.prompt)
        typed = "".join(self.buffer)
        command = typed if typed_ahead or not echoed.strip() else echoed
        if self.prompt is not None and NO_ECHO_PROMPT.search(self.prompt):
            command = marker("password")
            self.counts["password"] += 1
        raw = HARNESS_SUFFIX.sub("", command).rstrip()
        command = raw.strip()
        self.typing = False
        self.buffer = []
        if self.open is not None and self.open["metadata"].get("continuation_prompt") and not self.open_lines:
            # A continuation line (a REPL block, a shell line ending in a backslash): indentation kept.
            if raw.strip():
                self.open["action"] += "\n" + raw
            self.open["metadata"].pop("continuation_prompt", None)
            self.echo_of, self.echoes_skipped = raw, 0
            return
        prompt = self.prompt or ""
        turn = make_turn(
            command,
            "command" if command.strip() else "empty",
            "",
            observation_format="terminal",
            started_at=(self.start + timedelta(seconds=t)).isoformat() if self.start else None,
            metadata={
                "prompt": prompt,
                **({"repl": prompt.strip()} if prompt.startswith((">>>", "In [")) else {}),
            },
        )
        if typed_ahead:
            if self.open is not None:
                # Where its tty echo will stand in the running program's output: after the lines
                # already there and the echoes of the lines typed before it that have not landed yet.
                at = len(self.open_lines)
                at += sum(1 for into in self.typed_into.values() if into[0] is self.open and into[1] >= at)
                self.typed_into[id(turn)] = (self.open, at, t, False)
            self.ahead.append(turn)
            return
        # At a no-echo prompt nothing typed is shown: the line to pass over is the prompt alone.
        secret = self.prompt is not None and NO_ECHO_PROMPT.search(self.prompt) is not None
        self.echo_of, self.echoes_skipped = (self.prompt.strip() if secret and self.prompt else command), 0
        self.open = turn
        self.open_echo = []
        self.open_lines = []
        self.open_t = t

    def close(self, t: float, trailing_prompt: str | None) -> None:
        assert self.open is not None
        lines = [*self.open_echo, *self.open_lines]
        if trailing_prompt is not None:
            # The row the next action is typed on, up to where typing begins (a prompt's space kept).
            lines.append(trailing_prompt)
        else:
            self.open["metadata"]["ended_without_prompt"] = True
        self.open["observation"] = "\n".join(lines)
        self.open["duration_s"] = round(max(0.0, t - self.open_t), 6)
        self.turns.append(self.open)
        self.open, self.open_echo, self.open_lines = None, [], []

    def feed_input(self, data: str, current_line: str, t: float) -> None:
        if data.isprintable() and data:
            # Printable keys only (most items): what feed_keys does with them, at once.
            if not self.typing:
                self.start_typing(current_line, t)
            self.buffer.extend(data)
            return
        self.feed_keys(data, current_line, t)

    def feed_keys(self, data: str, current_line: str, t: float) -> None:
        if "\x1b" in data:
            data = _INPUT_ESCAPE.sub("\x00", data)  # arrows and function keys: the echo will tell
        submitted = False  # a line was submitted earlier in this event: what follows is typed ahead
        for ch in data:
            if ch in "\r\n":
                if not self.typing:
                    self.start_typing(current_line, t)
                self.submit(current_line, t, typed_ahead=submitted or self.typing_ahead)
                submitted = True
                current_line = self.prompt or ""  # later chars in this event are typed on a fresh line
            elif ch == "\x03":
                if self.typing:
                    self.typing, self.buffer = False, []
                elif self.open is not None:
                    self.open["metadata"]["interrupted"] = True
            elif ch == "\x04" and not self.buffer and self.open is not None and not current_line.strip():
                # End of file for the running program (`cat > file`): an input of its own, at the
                # point of its output where it was typed; the tty does not echo it.
                eof = make_turn(
                    "^D",
                    "keystrokes",
                    "",
                    observation_format="terminal",
                    started_at=(self.start + timedelta(seconds=t)).isoformat() if self.start else None,
                    metadata={"prompt": "", "control": "EOF"},
                )
                at = len(self.open_lines)
                at += sum(1 for into in self.typed_into.values() if into[0] is self.open and into[1] >= at)
                self.typed_into[id(eof)] = (self.open, at, t, True)
                self.ahead.append(eof)
                self.typing, self.buffer = False, []
                submitted = True
            elif ch == "\x04" and not self.buffer:
                if not self.typing:
                    self.start_typing(current_line, t)
                self.buffer = []
                self.submit(self.prompt or "", t)
                if self.open is not None:
                    self.open["action"] = "^D"
                    self.open["action_kind"] = "keystrokes"
                    self.open["metadata"]["control"] = "EOF"
            elif ch in "\x7f\b":
                if self.buffer:
                    self.buffer.pop()
            elif ch == "\x15":
                self.buffer = []
            elif ch == "\x17":
                text = "".join(self.buffer).rstrip()
                self.buffer = list(text[: text.rfind(" ") + 1]) if " " in text else []
            elif ch >= " " or ch == "\t":
                if not self.typing and not submitted:
                    self.start_typing(current_line, t)
                elif not self.typing:
                    self.typing = True  # typed ahead: the prompt is the one of the line before
                self.buffer.append(ch)
            elif not self.typing and not submitted:
                # An arrow key, Ctrl-R, Tab completion ...: editing starts; the rendered line will tell.
                self.start_typing(current_line, t)


_KEY_NAMES = {
    "\r": "<CR>",
    "\n": "<NL>",
    "\t": "<Tab>",
    "\x1b": "<Esc>",
    "\x7f": "<BS>",
    "\b": "<BS>",
    "\x1b[A": "<Up>",
    "\x1b[B": "<Down>",
    "\x1b[C": "<Right>",
    "\x1b[D": "<Left>",
    "\x1bOA": "<Up>",
    "\x1bOB": "<Down>",
    "\x1bOC": "<Right>",
    "\x1bOD": "<Left>",
    "\x1b[H": "<Home>",
    "\x1b[F": "<End>",
    "\x1b[5~": "<PageUp>",
    "\x1b[6~": "<PageDown>",
    "\x1b[3~": "<Del>",
}
_KEY_TOKEN = re.compile(r"\x1b\[[0-9;]*[A-Za-z~]|\x1bO[A-Z]|[\x00-\x1f\x7f]|[^\x00-\x1f\x7f]+")


def readable_keys(data: str) -> str:
    """Keystrokes as vim writes them: printable text as is, special keys as <Esc>, <CR>, <C-x>, ..."""
    out = []
    for m in _KEY_TOKEN.finditer(data):
        token = m.group(0)
        if token in _KEY_NAMES:
            out.append(_KEY_NAMES[token])
        elif len(token) == 1 and token < " ":
            out.append(f"<C-{chr(ord(token) + 96)}>")
        elif token.startswith("\x1b"):
            out.append("<Esc>" + token[1:])
        else:
            out.append(token)
    return "".join(out)


def screen_rows(text: str, width: int) -> str:
    """TEXT's logical lines as a terminal WIDTH columns wide shows them: each line in rows of at most
    WIDTH columns (wide characters take two), rows right-stripped except the last (the row under the
    cursor, kept up to the cursor, as a prompt ends with its space)."""
    lines = text.split("\n")
    if text.isascii() and all(len(line) <= width for line in lines):
        return text
    rows: list[str] = []
    for index, line in enumerate(lines):
        if len(line) <= width and (line.isascii() or _columns(line) <= width):
            rows.append(line)
            continue
        if line.isascii():
            rows += [line[i : i + width].rstrip() for i in range(0, len(line), width)]
            if index == len(lines) - 1:
                rows[-1] = line[len(line) - (len(line) - 1) % width - 1 :]
            continue
        row: list[str] = []
        used = 0
        for ch in line:
            w = 1 if ch.isascii() else max(0, wcwidth(ch))
            if used + w > width:
                rows.append("".join(row).rstrip())
                row, used = [], 0
            row.append(ch)
            used += w
        rows.append("".join(row))
        if index < len(lines) - 1:
            rows[-1] = rows[-1].rstrip()
    return "\n".join(rows)


def _columns(line: str) -> int:
    return sum(1 if ch.isascii() else max(0, wcwidth(ch)) for ch in line)


def segment_transcript(
    items: list[list[Any]], collected_at: str | None, counts: Counter[str], width: int | None = None
) -> list[RawTurn]:
    """Turns of a terminal transcript; output-only recordings are split at prompt lines. With WIDTH
    (the recording's), observations are screen rows of that width; without it, logical lines."""
    turns = _segment_transcript(items, collected_at, counts)
    if width:
        for turn in turns:
            turn["observation"] = screen_rows(turn["observation"], width)
    return turns


def _segment_transcript(
    items: list[list[Any]], collected_at: str | None, counts: Counter[str]
) -> list[RawTurn]:
    start = datetime.fromisoformat(collected_at) if collected_at else None
    if not any(item[0] == "i" for item in items):
        lines: list[str] = []
        for item in items:
            lines.extend(item[4])
        if items and items[-1][3]:
            lines.append(items[-1][3])
        return segment_output_only(lines)
    session = _Session(start, counts)
    for kind, t, data, current, finished, fullscreen in items:
        if finished:  # most keystrokes finish no line
            session.finished_lines(finished)
        if kind == "i":
            if fullscreen:
                if session.open is not None:
                    # Keys pressed in a full-screen program (vim, less) are part of the action.
                    meta = session.open["metadata"]
                    meta["fullscreen_keys"] = meta.get("fullscreen_keys", "") + readable_keys(data)
                continue
            session.feed_input(data, current, t)
        elif kind == "end":
            ends_at_prompt = bool(PROMPT.match(current)) and not _strip_prompt(current, None).strip()
            if session.open is not None and session.ahead:
                session.close_with_program_input(t, trailing_prompt=current if ends_at_prompt else None)
                ends_at_prompt = False
            session.flush_ahead(t)
            if session.open is not None:
                if current and not session.typing:
                    # The last row: kept up to the cursor as a prompt is, else right-stripped.
                    session.open_lines.append(current if ends_at_prompt else current.rstrip())
                    session.close(t, None)
                    if ends_at_prompt:
                        session.turns[-1]["metadata"].pop("ended_without_prompt", None)
                else:
                    session.close(t, current if session.typing else None)
    turns = session.turns
    for t in turns:
        keys = t["metadata"].get("fullscreen_keys")
        if keys:
            t["action"] = f"{t['action']}\n{keys}"
    # The `exit` that ends the recorded shell is how the recording stops, not a turn of the task.
    if (
        turns
        and SESSION_END.match(turns[-1]["action"].strip())
        and turns[-1]["metadata"].get("ended_without_prompt")
    ):
        turns.pop()
    return turns


def segment_output_only(lines: list[str]) -> list[RawTurn]:
    """Split rendered output at prompt lines (recordings made without input capture).

    A line at a continuation prompt (`... `, `> `) right after a command that printed nothing yet is
    more of that command (a REPL block, a shell line ending in a backslash): it joins the action with
    its indentation kept.
    """
    pattern = PROMPT if any(PROMPT.match(line) for line in lines) else LOOSE_PROMPT
    turns: list[RawTurn] = []
    current: RawTurn | None = None
    echo: list[str] = []  # the rows the current command was typed on
    body: list[str] = []
    for line in lines:
        m = pattern.match(line)
        if m and current is not None and line[m.end() :].strip() and line.strip() in current["action"]:
            m = None  # the command printed this prompt-like line itself (echo, printf, cat of a log)
        continued = _continuation(line, current) if current is not None and not body else None
        if continued is not None and current is not None:
            if continued.strip():
                current["action"] += "\n" + continued
                echo.append(line)
            else:
                body.append(line.rstrip())  # the empty line that ends a REPL block
            continue
        if m and line[: m.end()].strip() in CONTINUATION_PROMPTS:
            m = None  # a continuation prompt never starts a command: where none can go on, it is output
        if m:
            command = HARNESS_SUFFIX.sub("", line[m.end() :]).rstrip()
            if command.endswith("^C"):
                command = ""  # a line abandoned with Ctrl-C never ran
            if current is not None:
                for edge in (-1, 0):
                    if command.strip() and body and body[edge].strip() == command.strip():
                        # The tty's echo of this line, typed ahead while the last command still ran:
                        # before that command printed anything, or after it finished.
                        body.pop(edge)
                        break
                body.append(line[: m.end()])
                current["observation"] = "\n".join(echo + body)
                turns.append(current)
                current = None
            if command.strip():
                current = make_turn(
                    command,
                    "command",
                    "",
                    observation_format="terminal",
                    metadata={"prompt": line[: m.end()]},
                )
                echo, body = [line], []
            continue
        if current is not None:
            body.append(line)
    if current is not None:
        current["observation"] = "\n".join(echo + body)
        current["metadata"]["ended_without_prompt"] = True
        turns.append(current)
    if turns and SESSION_END.match(turns[-1]["action"].strip()):
        turns.pop()
    return turns


# How a shell line asks for more: a trailing backslash, pipe or operator, an opened block or quote.
_SHELL_UNFINISHED = re.compile(r"(?:\\|\||&&|\|\||\{|\(|\bdo|\bthen|\belse)\s*$")


def _continuation(line: str, current: RawTurn) -> str | None:
    """What follows a continuation prompt at the start of LINE (indentation kept), or None.

    Only where the open command can go on: `... ` in a Python REPL, `-> ` after a SQL statement without
    its `;`, `> ` after a shell line left unfinished. Output that merely starts with `> ` (a quoted
    mail, Markdown) stays output.
    """
    for prompt in CONTINUATION_PROMPTS:
        if line.startswith(prompt + " ") or line.rstrip() == prompt:
            break
    else:
        return None
    opened_at = current["metadata"].get("prompt", "")
    last = current["action"].rsplit("\n", 1)[-1]
    if prompt == "...":
        plausible = opened_at.startswith((">>>", "..."))
    elif prompt == "->":
        plausible = not last.rstrip().endswith(";")
    else:
        plausible = (
            bool(_SHELL_UNFINISHED.search(last)) or last.count("'") % 2 == 1 or last.count('"') % 2 == 1
        )
    return line[len(prompt) + 1 :].rstrip() if plausible else None


def split_episodes(turns: list[RawTurn], config: CleanConfig) -> list[list[RawTurn]]:
    """Split a long session into episodes at long idle gaps and at `max_episode_turns`."""
    episodes: list[list[RawTurn]] = [[]]
    last_end: datetime | None = None
    for t in turns:
        started = source_time(t.get("started_at"))
        gap = (started - last_end).total_seconds() if started and last_end else 0.0
        if episodes[-1] and (len(episodes[-1]) >= config.max_episode_turns or gap > config.episode_gap_s):
            episodes.append([])
        episodes[-1].append(t)
        if started is not None:
            last_end = started + timedelta(seconds=t.get("duration_s") or 0.0)
    return [e for e in episodes if e]


def segment_record(parsed: ParsedRecord, config: CleanConfig, counts: Counter[str]) -> list[list[RawTurn]]:
    """Episodes of turns for any parsed record."""
    if parsed.get("transcript") is not None:
        turns = segment_transcript(
            parsed["transcript"], parsed.get("collected_at"), counts, width=parsed.get("width")
        )
        parsed["transcript"] = []
        pii = frozenset(config.pii)
        for turn in turns:
            # A command typed a key at a time stands whole only here: each key alone was too short to
            # redact. Uncounted, as typed keys are: the secret is counted where the screen shows it.
            turn["action"] = redact(turn["action"], None, pii)
    else:
        turns = parsed.get("turns", [])
    return split_episodes(turns, config)
