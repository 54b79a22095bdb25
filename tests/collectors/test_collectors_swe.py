"""SWE environment: Read / Edit (with diffs) / Bash in a real git repository inside a container."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from docker import DockerClient

from collectors import engine
from collectors.environment import EnvironmentOptions, Task, tool_call_action
from collectors.swe import SWEEnvironment
from schemas import ObservationFormat

pytestmark = pytest.mark.engine

REPO = {
    "files": {"pkg/mod.py": "def f():\n    return 1\n\n\ndef g():\n    return 1\n", "README.md": "hi\n"},
    "commit_message": "start",
}


@pytest.fixture(scope="session")
def engine_client() -> DockerClient:
    return engine.connect()


@pytest.fixture
def swe(engine_client: DockerClient) -> Iterator[SWEEnvironment]:
    env = SWEEnvironment(EnvironmentOptions(client=engine_client))
    reset = env.reset(Task(id="swe", instruction="fix", repo=REPO))
    assert "start" in reset.observation.text  # git log of the initial commit
    assert "./pkg/mod.py" in reset.initial_state
    yield env
    env.close()


def call(env: SWEEnvironment, name: str, **arguments: object):  # type: ignore[no-untyped-def]
    return env.step(tool_call_action(name, dict(arguments)))


def test_read_with_line_numbers_and_range(swe: SWEEnvironment) -> None:
    assert call(swe, "Read", path="pkg/mod.py").observation.text.startswith(
        "     1\tdef f():\n     2\t    return 1"
    )
    ranged = call(swe, "Read", path="pkg/mod.py", offset=5, limit=1).observation.text
    assert ranged == "     5\tdef g():"
    missing = call(swe, "Read", path="nope.py").observation
    assert missing.is_error and "file not found" in missing.text


def test_edit_returns_diff_and_changes_file(swe: SWEEnvironment) -> None:
    ambiguous = call(swe, "Edit", path="pkg/mod.py", old_string="return 1", new_string="return 2").observation
    assert ambiguous.is_error and "occurs 2 times" in ambiguous.text
    edit = call(
        swe,
        "Edit",
        path="pkg/mod.py",
        old_string="def g():\n    return 1",
        new_string="def g():\n    return 2",
    )
    assert edit.observation.format == ObservationFormat.DIFF
    assert "--- a/pkg/mod.py\n+++ b/pkg/mod.py\n" in edit.observation.text
    assert "-    return 1\n+    return 2\n" in edit.observation.text
    created = call(swe, "Edit", path="new/file.txt", old_string="", new_string="x\n").observation.text
    assert created.startswith("--- /dev/null\n+++ b/new/file.txt\n") and "+x\n" in created
    bash = call(swe, "Bash", command="git status --short")
    assert bash.observation.text == " M pkg/mod.py\n?? new/"
    assert bash.exit_code == 0


def test_bash_is_a_persistent_shell(swe: SWEEnvironment) -> None:
    call(swe, "Bash", command="cd pkg && export MARK=42")
    result = call(swe, "Bash", command="pwd; echo $MARK; python3 -c 'import mod; print(mod.f())'")
    assert result.observation.text == "/work/repo/pkg\n42\n1"
    failing = call(swe, "Bash", command="exit_code_test() { return 3; }; exit_code_test")
    assert failing.exit_code == 3


def test_unknown_tool_is_recorded_as_out_of_action_space(swe: SWEEnvironment) -> None:
    result = call(swe, "Grep", pattern="def")
    assert result.info == {"out_of_action_space": True}
    assert result.observation.is_error
    assert json.loads(result.action.text)["name"] == "Grep" and result.action.tool_name == "Grep"
    assert {t.name for t in swe.space.tools} == {"Read", "Edit", "Bash"}
