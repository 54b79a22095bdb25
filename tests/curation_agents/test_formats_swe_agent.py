"""SWE-agent's command docs as its own code writes them (sweagent/tools/utils.py
`generate_command_docs` and `get_signature`, transcribed here as the oracle) parse back into the
commands: names, docstrings, signatures, arguments with types and whether they are required."""

from __future__ import annotations

import string
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from curation_agents.formats.swe_agent import parse_command_docs


@dataclass
class Argument:
    name: str
    type: str
    description: str
    required: bool


@dataclass
class Command:
    name: str
    docstring: str | None
    arguments: list[Argument]
    end_name: str | None = None


def get_signature(cmd: Command) -> str:
    signature = cmd.name
    args = cmd.arguments if cmd.end_name is None else cmd.arguments[:-1]
    for a in args:
        signature += f" <{a.name}>" if a.required else f" [<{a.name}>]"
    if cmd.end_name is not None:
        signature += f"\n<{cmd.arguments[-1].name}>\n{cmd.end_name}"
    return signature


def generate_command_docs(commands: list[Command]) -> str:
    docs = ""
    for cmd in commands:
        docs += f"{cmd.name}:\n"
        if cmd.docstring is not None:
            docs += f"  docstring: {cmd.docstring}\n"
        docs += f"  signature: {get_signature(cmd)}\n"
        if cmd.arguments:
            docs += "  arguments:\n"
            for a in cmd.arguments:
                docs += f"    - {a.name} ({a.type}) [{'required' if a.required else 'optional'}]: {a.description}\n"
        docs += "\n"
    return docs


NAME = st.tuples(
    st.sampled_from(string.ascii_lowercase),
    st.text(string.ascii_lowercase + string.digits + "_", max_size=12),
).map("".join)
LINE = (
    st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")), min_size=1, max_size=40)
    .map(str.strip)
    .filter(bool)
)
ARGUMENT = st.builds(
    Argument, NAME, st.sampled_from(["string", "integer", "boolean", "number"]), LINE, st.booleans()
)


@st.composite
def commands(draw: st.DrawFn) -> list[Command]:
    names = draw(st.lists(NAME, min_size=1, max_size=6, unique=True))
    out = []
    for name in names:
        args = draw(st.lists(ARGUMENT, max_size=4, unique_by=lambda a: a.name))
        end = draw(st.sampled_from([None, "end_of_edit"])) if args else None
        out.append(Command(name, draw(st.none() | LINE), args, end))
    return out


@settings(max_examples=50, deadline=None)
@given(commands())
def test_command_docs_round_trip(cmds: list[Command]) -> None:
    text = (
        "COMMANDS:\n"
        + generate_command_docs(cmds)
        + "\nPlease note that THE EDIT COMMAND REQUIRES INDENTATION."
    )
    tools = parse_command_docs(text)
    assert [t["name"] for t in tools] == [c.name for c in cmds]
    for tool, cmd in zip(tools, cmds, strict=True):
        doc = f"{cmd.docstring}\n" if cmd.docstring else ""
        assert tool["description"] == f"{doc}signature: {get_signature(cmd)}"
        params = tool["parameters"]
        assert list(params["properties"]) == [a.name for a in cmd.arguments]
        assert params["required"] == [a.name for a in cmd.arguments if a.required]
        for a in cmd.arguments:
            assert params["properties"][a.name] == {"type": a.type, "description": a.description}
