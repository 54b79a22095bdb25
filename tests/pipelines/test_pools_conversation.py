"""Train as you evaluate: conversation shape, canonical actions, chat-template token counts and caps."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.actions import canonical_action, canonicalise_actions
from pipelines.config import PoolsConfig
from pipelines.render import Lineage, rl_row, sft_rows
from schemas.agentworldbench import read_samples, sample_to_trajectory
from schemas.templates import load_template_set
from schemas.trajectory import Action, ActionKind, Domain, Observation, Source, SourceKind, Trajectory, Turn
from schemas.worldmodel import PREDICTION_CLOSE as OBSERVATION_CLOSE
from schemas.worldmodel import PREDICTION_OPEN as OBSERVATION_OPEN
from worldline.chat_template import QWEN_CHAT_TEMPLATE, count_chat_tokens, render_chat
from worldline.samples import __file__ as samples_init
from worldline.tokenizer import get_token_counter

SAMPLES = sorted(Path(samples_init).parent.glob("*_test.jsonl"))
LINEAGE = Lineage("g", "inhouse", "c")


def _eval_dir() -> Path | None:
    here = Path(__file__).resolve().parents[2]
    for root in (here.parent / "shared", here.parent.parent / "shared", Path("/work/shared")):
        folder = root / "fixtures" / "reference-only" / "agentworldbench-eval" / "eval"
        if (folder / "eval.py").is_file():
            return folder
    return None


class RecordingClient:
    """Stands in for the OpenAI client eval.py calls: records the messages, answers nothing."""

    def __init__(self) -> None:
        self.sent: list[list[dict[str, Any]]] = []
        self.chat = self
        self.completions = self

    def create(self, *, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        self.sent.append(messages)
        raise RuntimeError("no model here")


def what_eval_py_sends(job: dict[str, Any]) -> list[dict[str, Any]]:
    folder = _eval_dir()
    if folder is None:
        pytest.skip("AgentWorldBench's eval.py (shared/fixtures/reference-only) is not on this machine")
    sys.path.insert(0, str(folder))
    try:
        import eval as awb_eval  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(folder))
    client = RecordingClient()
    awb_eval.run_inference([dict(job)], client, "world-model")
    return client.sent[0]


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.stem)
def test_pool_rows_carry_the_conversation_eval_py_builds(path: Path) -> None:
    cfg = PoolsConfig()
    templates = load_template_set(None)
    counter = get_token_counter(None)
    samples = list(read_samples(path))
    by_id: dict[Any, list[Any]] = {}
    for s in samples:
        by_id.setdefault(s.id, []).append(s)
    for group in by_id.values():
        traj = sample_to_trajectory(group[0])
        canonicalise_actions(traj)
        rows, skipped = sft_rows(traj, LINEAGE, cfg, templates, counter)
        assert not skipped and len(rows) == len(traj.turns)
        for sample in group:
            row = rows[sample.turn_idx - 1]
            job = {**sample.to_json(), "system_str": row["messages"][0]["content"]}
            assert row["messages"][:-1] == what_eval_py_sends(job)
            assert row["messages"][-1]["content"].startswith(OBSERVATION_OPEN)
        rl, _ = rl_row(traj, LINEAGE, cfg, templates, counter)
        assert rl is not None
        sample = next(s for s in group if s.turn_idx == rl["turn_index"])
        assert rl["messages"] == what_eval_py_sends(
            {**sample.to_json(), "system_str": rl["messages"][0]["content"]}
        )


messages_strategy = st.lists(
    st.fixed_dictionaries(
        {
            "role": st.sampled_from(["system", "user", "assistant"]),
            "content": st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
            | st.builds(
                lambda r, c: f"<think>\n{r}\n</think>\n\n{c}", st.text(max_size=10), st.text(max_size=10)
            ),
        }
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=60, deadline=None)
@given(messages_strategy, st.booleans())
def test_chat_template_twin_renders_and_counts_like_jinja(messages: list[dict[str, str]], gen: bool) -> None:
    import jinja2

    rendered = (
        jinja2.Environment()
        .from_string(QWEN_CHAT_TEMPLATE)
        .render(messages=messages, add_generation_prompt=gen)
    )
    assert render_chat(messages, gen) == rendered
    counter = get_token_counter(None)
    if any("<|" in m["content"] for m in messages):
        return
    # The Qwen vocabulary with its special tokens: the rendered text encodes to exactly our count.
    ids = counter._enc.encode(rendered, allowed_special="all")  # type: ignore[attr-defined]
    assert count_chat_tokens(counter, messages, gen) == len(ids)


def _turn(
    domain: Domain, text: str, kind: ActionKind = ActionKind.COMMAND, **kw: Any
) -> tuple[Trajectory, Turn]:
    turn = Turn(Action(kind, text, kw.get("tool")), Observation("ok"), duration_s=kw.get("duration"))
    traj = Trajectory(
        id="t", domain=domain, source=Source(kind=SourceKind.PUBLIC, name="s"), task="x", turns=[turn]
    )
    return traj, turn


def test_terminal_actions_become_keystroke_arrays() -> None:
    cases = [
        (_turn(Domain.TERMINAL, "ls -la"), [{"keystrokes": "ls -la\n", "duration": 1.0}]),
        (_turn(Domain.TERMINAL, "make\n", duration=2.345), [{"keystrokes": "make\n", "duration": 2.3}]),
        (
            _turn(
                Domain.TERMINAL,
                '{"name": "run_command", "arguments": {"command": "pwd"}}',
                ActionKind.TOOL_CALL,
            ),
            [{"keystrokes": "pwd\n", "duration": 1.0}],
        ),
        (
            _turn(
                Domain.TERMINAL,
                '{"name": "send_keystrokes", "arguments": {"keystrokes": [{"keystrokes": "C-c"}]}}',
                ActionKind.TOOL_CALL,
            ),
            [{"keystrokes": "C-c", "duration": 1.0}],
        ),
        (
            _turn(Domain.TERMINAL, '[{"keystrokes": "q", "duration": 0.5}]', ActionKind.KEYSTROKES),
            [{"keystrokes": "q", "duration": 0.5}],
        ),
    ]
    for (traj, turn), expected in cases:
        kind, text, tool = canonical_action(traj, turn)
        assert kind is ActionKind.KEYSTROKES and tool is None and json.loads(text) == expected


def test_swe_agent_commands_become_json_tool_calls() -> None:
    from curation_agents.formats import swe_agent

    raw = json.loads(Path("tests/fixtures/public/swe-agent_marshmallow-1867.traj").read_text())
    parsed = swe_agent.parse(raw)
    calls = []
    for t in parsed["turns"]:
        traj, turn = _turn(Domain.SWE, t["action"], tool=t["tool_name"])
        kind, text, tool = canonical_action(traj, turn)
        call = json.loads(text)
        assert kind is ActionKind.TOOL_CALL and set(call) == {"name", "arguments"} and call["name"] == tool
        calls.append(call)
    names = {c["name"] for c in calls}
    assert {"create", "open", "bash", "find_file"} <= names
    opened = next(c for c in calls if c["name"] == "open")
    assert (
        opened["arguments"]["path"] == "src/marshmallow/fields.py"
        and opened["arguments"]["line_number"] == 1474
    )
    edit = swe_agent_edit = json.loads(
        canonical_action(*_turn(Domain.SWE, "edit 3:5\n    x = 1\nend_of_edit"))[1]
    )
    assert swe_agent_edit == {
        "name": "edit",
        "arguments": {"start_line": 3, "end_line": 5, "text": "    x = 1"},
    }
    assert edit["name"] == "edit"
    tool = '{"tool": "Read", "arguments": "{\\"path\\": \\"a.py\\"}"}'
    assert json.loads(canonical_action(*_turn(Domain.SWE, tool, ActionKind.TOOL_CALL))[1]) == {
        "name": "Read",
        "arguments": {"path": "a.py"},
    }


@settings(max_examples=80, deadline=None)
@given(
    st.sampled_from([Domain.TERMINAL, Domain.SWE]), st.text(max_size=60), st.sampled_from(list(ActionKind))
)
def test_canonical_form_is_a_fixed_point(domain: Domain, text: str, kind: ActionKind) -> None:
    if kind is ActionKind.EMPTY and domain is Domain.SWE:
        kind = ActionKind.COMMAND  # empty SWE turns are stripped by the filters before this step
    traj, turn = _turn(domain, text, kind)
    canonicalise_actions(traj)
    once = (turn.action.kind, turn.action.text, turn.action.tool_name)
    assert canonicalise_actions(traj) == 0
    assert (turn.action.kind, turn.action.text, turn.action.tool_name) == once
    json.loads(turn.action.text)  # both canonical forms are JSON


def _long_trajectory() -> Trajectory:
    from tests.helpers.pools_data import prose, terminal

    traj = terminal("cap", "g", SourceKind.INHOUSE, 7, turns=4)
    traj.turns[-1].observation.text = prose(99, 200)
    canonicalise_actions(traj)
    return traj


def _sft(cap: int) -> tuple[list[dict[str, Any]], list[int]]:
    cfg = PoolsConfig()
    cfg.sft.max_tokens = cap
    return sft_rows(_long_trajectory(), LINEAGE, cfg, load_template_set(None), get_token_counter(None))


def test_sft_cap_boundaries() -> None:
    counter = get_token_counter(None)
    full, _ = _sft(10**9)
    last = full[-1]
    assert not last["truncated"] and last["tokens"] == count_chat_tokens(counter, last["messages"])
    at, _ = _sft(last["tokens"])
    assert at[-1]["messages"] == last["messages"] and not at[-1]["truncated"]
    below, _ = _sft(last["tokens"] - 1)
    assert below[-1]["dropped_history_turns"] == 1 and below[-1]["tokens"] <= last["tokens"] - 1
    # history gone: system + action + target only; one token less cuts the target, closing tag kept
    alone = last["tokens"] - sum(
        count_chat_tokens(counter, last["messages"][i : i + 2])
        for i in range(1, len(last["messages"]) - 2, 2)
    )
    cut, _ = _sft(alone - 1)
    row = cut[-1]
    assert row["target_truncated"] and row["dropped_history_turns"] == 3 and row["tokens"] <= alone - 1
    target = row["messages"][-1]["content"]
    assert target.endswith(OBSERVATION_CLOSE) and target.startswith(OBSERVATION_OPEN)
    assert target[len(OBSERVATION_OPEN) : -len(OBSERVATION_CLOSE)].strip()
    assert row["tokens"] == count_chat_tokens(counter, row["messages"])


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 1400))
def test_sft_rows_never_exceed_the_cap_nor_have_empty_targets(cap: int) -> None:
    counter = get_token_counter(None)
    rows, skipped = _sft(cap)
    assert sorted([r["turn_index"] for r in rows] + skipped) == [1, 2, 3, 4]
    for r in rows:
        n = count_chat_tokens(counter, r["messages"])
        assert n == r["tokens"] <= cap
        target = r["messages"][-1]["content"]
        assert target.startswith(OBSERVATION_OPEN) and target.endswith(OBSERVATION_CLOSE)
        assert target[len(OBSERVATION_OPEN) : -len(OBSERVATION_CLOSE)].strip()


def test_rl_prompt_cap_boundary() -> None:
    cfg = PoolsConfig()
    args = (_long_trajectory(), LINEAGE, cfg, load_template_set(None), get_token_counter(None))
    row, tokens = rl_row(*args)
    assert row is not None and row["messages"][-1]["role"] == "user"
    assert tokens == count_chat_tokens(get_token_counter(None), row["messages"], add_generation_prompt=True)
    cfg.rl.max_prompt_tokens = tokens
    assert rl_row(*args)[0] is not None
    cfg.rl.max_prompt_tokens = tokens - 1
    assert rl_row(*args) == (None, tokens)


def test_reasoning_precedes_the_prediction_and_is_dropped_first_when_over_cap() -> None:
    traj = _long_trajectory()
    traj.turns[0].metadata["world_model_reasoning"] = "The file exists, so cat prints it."
    cfg = PoolsConfig()
    counter = get_token_counter(None)
    rows, _ = sft_rows(traj, LINEAGE, cfg, load_template_set(None), counter)
    target = rows[0]["messages"][-1]["content"]
    assert target.startswith("<think>\nThe file exists") and target.index("</think>") < target.index(
        OBSERVATION_OPEN
    )
    cfg.sft.max_tokens = rows[0]["tokens"] - 1
    rows, _ = sft_rows(traj, LINEAGE, cfg, load_template_set(None), counter)
    assert rows[0]["messages"][-1]["content"].startswith(OBSERVATION_OPEN)


def test_a_blank_observation_is_never_a_target_but_stays_in_the_history() -> None:
    traj = _long_trajectory()
    traj.turns[1].observation.text = " \n"  # e.g. a keystroke that changed nothing on screen
    rows, skipped = sft_rows(traj, LINEAGE, PoolsConfig(), load_template_set(None), get_token_counter(None))
    assert skipped == [2]
    assert [r["turn_index"] for r in rows] == [t for t in range(1, len(traj.turns) + 1) if t != 2]
    later = next(r for r in rows if r["turn_index"] == 3)
    assert len(later["messages"]) == 1 + 2 * 2 + 1 + 1  # system, turns 1 and 2 as history, action, target
