"""SWE tools: line endings survive Edit (the diff equals git's), Read is capped and never dumps binary
or blocks on special files, and arguments must match each tool's schema."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from docker import DockerClient

from collectors import engine
from collectors.environment import EnvironmentOptions, Task, tool_call_action
from collectors.sandbox import SandboxLimits
from collectors.swe import REPO_DIR, SWEEnvironment
from schemas import Action, ActionKind, ObservationFormat, turn_facts

pytestmark = pytest.mark.engine

REPO = {
    "files": {
        "crlf.txt": "one\r\ntwo\r\nthree\r\n",
        "mixed.txt": "unix\nwindows\r\nold-mac\rlast",
        "big.txt": "".join(f"line {i}\n" for i in range(20000)),
    }
}


@pytest.fixture(scope="module")
def engine_client() -> DockerClient:
    return engine.connect()


@pytest.fixture
def swe(engine_client: DockerClient) -> Iterator[SWEEnvironment]:
    env = SWEEnvironment(
        EnvironmentOptions(client=engine_client, limits=SandboxLimits(output_cap_bytes=4096))
    )
    env.reset(Task(id="tools", instruction="x", repo=REPO))
    yield env
    env.close()


def call(env: SWEEnvironment, name: str, **arguments: object):  # type: ignore[no-untyped-def]
    return env.step(tool_call_action(name, dict(arguments)))


def file_bytes(env: SWEEnvironment, path: str) -> bytes:
    assert env.sandbox is not None
    out = env.sandbox.exec(
        ["python3", "-c", f"import sys; sys.stdout.write(open({path!r},'rb').read().hex())"]
    )
    return bytes.fromhex(out.output)


def git_diff_hunks(env: SWEEnvironment) -> str:
    assert env.sandbox is not None
    text = env.sandbox.exec(["git", "diff", "--no-color"], workdir=REPO_DIR).output
    return text[text.index("@@") :]


@pytest.mark.parametrize(
    ("path", "old", "new", "expected"),
    [
        ("crlf.txt", "two", "TWO", b"one\r\nTWO\r\nthree\r\n"),
        ("crlf.txt", "one\ntwo", "uno\ndos", b"uno\r\ndos\r\nthree\r\n"),  # LF from the agent, CRLF file
        ("mixed.txt", "windows", "WIN", b"unix\nWIN\r\nold-mac\rlast"),
    ],
)
def test_edit_keeps_line_endings_and_diff_equals_git(
    swe: SWEEnvironment, path: str, old: str, new: str, expected: bytes
) -> None:
    result = call(swe, "Edit", path=path, old_string=old, new_string=new)
    assert not result.observation.is_error, result.observation.text
    assert result.observation.format == ObservationFormat.DIFF
    assert file_bytes(swe, f"{REPO_DIR}/{path}") == expected
    ours = result.observation.text
    assert ours[ours.index("@@") :] == git_diff_hunks(swe)


def test_read_caps_output_and_says_how_to_go_on(swe: SWEEnvironment) -> None:
    result = call(swe, "Read", path="big.txt")
    text = result.observation.text
    assert len(text.encode()) <= 4096
    assert text.startswith("     1\tline 0\n") and "[worldline:" not in text
    # The cut is a harness fact, on a line boundary; the last line number shown is where to go on.
    last = int(text.rsplit("\n", 1)[1].split("\t")[0])
    assert text.endswith(f"{last:6d}\tline {last - 1}")
    whole = "\n".join(f"{n:6d}\tline {n - 1}" for n in range(1, 2001))  # Read's default 2000 lines
    assert turn_facts.facts(result.info) == {
        turn_facts.TRUNCATED: {"bytes_total": len(whole.encode()), "bytes_kept": len(text.encode())}
    }
    follow = call(swe, "Read", path="big.txt", offset=last + 1, limit=2)
    assert follow.observation.text == f"{last + 1:6d}\tline {last}\n{last + 2:6d}\tline {last + 1}"
    assert turn_facts.facts(follow.info) == {}


def test_read_describes_binary_and_special_files(swe: SWEEnvironment) -> None:
    call(swe, "Bash", command="printf '\\x89PNG\\r\\n\\x1a\\n\\0\\0\\0' > img.png && mkfifo pipe")
    png = call(swe, "Read", path="img.png").observation
    assert "binary file (PNG image, 11 bytes)" in png.text and "\x00" not in png.text
    fifo = call(swe, "Read", path="pipe").observation  # would block forever if opened
    assert fifo.is_error and "named pipe (FIFO)" in fifo.text
    device = call(swe, "Read", path="/dev/zero").observation
    assert device.is_error and "character device" in device.text
    assert call(swe, "Edit", path="pipe", old_string="a", new_string="b").observation.is_error


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        ("Read", {"path": "crlf.txt", "root": "/"}, "Additional properties are not allowed ('root'"),
        ("Read", {"path": 3}, "path: 3 is not of type 'string'"),
        ("Read", {"path": "crlf.txt", "limit": 0}, "limit: 0 is less than the minimum of 1"),
        ("Edit", {"path": "crlf.txt", "old_string": "one"}, "'new_string' is a required property"),
        ("Bash", {"command": None}, "command: None is not of type 'string'"),
    ],
)
def test_arguments_are_validated_against_the_tool_schema(
    swe: SWEEnvironment, name: str, arguments: dict[str, object], message: str
) -> None:
    result = call(swe, name, **arguments)
    assert result.observation.is_error and result.info["invalid_tool_call"] is True
    assert message in result.observation.text
    assert file_bytes(swe, f"{REPO_DIR}/crlf.txt") == b"one\r\ntwo\r\nthree\r\n"


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "Read", "arguments": "{not json"}',
        '{"name": "Read", "arguments": ["crlf.txt"]}',
        "[1, 2]",
        "not json at all",
    ],
)
def test_malformed_tool_calls_are_error_observations(swe: SWEEnvironment, text: str) -> None:
    result = swe.step(Action(kind=ActionKind.TOOL_CALL, text=text, tool_name="Read"))
    assert result.observation.is_error and result.info["invalid_tool_call"] is True
    assert result.action.text == text  # recorded as the agent sent it
    assert "ok" in call(swe, "Bash", command="echo ok").observation.text


def test_bash_commands_that_page_print_their_whole_output(swe: SWEEnvironment) -> None:
    """SWE's Bash is tool output read as text: `git log -p` and `git show` (which open a pager on a
    terminal) print everything and return, as in the SWE harnesses (PAGER=cat), where a pager used to
    wait for keys until the step timed out and the episode lost its terminal synchronisation."""
    for command in ("git log -p -1", "git show --stat HEAD", "git diff HEAD~0 --stat; git log"):
        result = call(swe, "Bash", command=command)
        assert result.info.get("prompt_returned") is True, (command, result.observation.text[-300:])
        assert result.exit_code == 0, command
        assert not turn_facts.has(result.info, turn_facts.TIMED_OUT), command
        assert not result.observation.text.rstrip().endswith(":"), result.observation.text[-200:]
    env = call(swe, "Bash", command="echo $PAGER $MANPAGER $TQDM_DISABLE").observation.text
    assert "cat cat 1" in env
