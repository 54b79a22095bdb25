"""The pool filters of paper 3.1.2 on single trajectories: each fires on its target and, as much to the
point, stays quiet on the look-alikes next to it (false positives cost real training data)."""

from __future__ import annotations

import json

import pytest

from pipelines.config import FilterConfig
from pipelines.filters import FilterOutcome, apply_filters
from schemas.reasons import ReasonCode
from schemas.trajectory import (
    Action,
    ActionKind,
    Observation,
    ObservationFormat,
    SourceKind,
    Trajectory,
    TrajectoryStatus,
    Turn,
)
from tests.helpers.pools_data import mcp, prose, terminal, web

CFG = FilterConfig()


def run(traj: Trajectory) -> FilterOutcome:
    return apply_filters(traj, CFG)


def assert_untouched(traj: Trajectory) -> None:
    """The filters keep the trajectory and every one of its turns."""
    n = len(traj.turns)
    outcome = run(traj)
    assert outcome.drop_reason is None, outcome.detail
    assert not outcome.removed_turns
    assert outcome.trajectory is not None and len(outcome.trajectory.turns) == n


def call(name: str, path: str = "/f") -> Action:
    return Action(
        ActionKind.TOOL_CALL, json.dumps({"name": name, "arguments": {"path": path}}), tool_name=name
    )


# -- too few turns --------------------------------------------------------------------------------


def test_too_few_turns_fires_below_the_minimum_only() -> None:
    assert (
        run(terminal("t1", "g", SourceKind.INFRA, 1, turns=CFG.min_turns - 1)).drop_reason
        == ReasonCode.TOO_FEW_TURNS
    )
    assert_untouched(terminal("t2", "g", SourceKind.INFRA, 1, turns=CFG.min_turns))


# -- undeclared tools -----------------------------------------------------------------------------


def test_undeclared_tool_fires_on_a_call_outside_the_action_space() -> None:
    outcome = run(mcp("m1", "g", SourceKind.INHOUSE, 1, tool="delete_everything"))
    assert outcome.drop_reason == ReasonCode.UNDECLARED_TOOL and "delete_everything" in outcome.detail


def test_declared_tools_in_every_call_form_are_kept() -> None:
    traj = mcp("m2", "g", SourceKind.INHOUSE, 2)
    # The name only in the JSON text (no tool_name), in the OpenAI "function" form, and a command
    # action that merely mentions an undeclared tool: none of them calls one.
    traj.turns.append(
        Turn(
            Action(ActionKind.TOOL_CALL, json.dumps({"name": "list_dir", "arguments": {}})), Observation("a")
        )
    )
    traj.turns.append(
        Turn(
            Action(ActionKind.TOOL_CALL, json.dumps({"function": {"name": "read_file", "arguments": "{}"}})),
            Observation("b"),
        )
    )
    traj.turns.append(Turn(Action(ActionKind.COMMAND, "delete_everything --help"), Observation("c")))
    assert_untouched(traj)


def test_tool_calls_outside_tool_domains_are_not_checked() -> None:
    traj = terminal("t3", "g", SourceKind.INFRA, 3)
    traj.turns[0] = Turn(call("delete_everything"), traj.turns[0].observation)
    assert_untouched(traj)


# -- GUI environment failures ---------------------------------------------------------------------


def test_gui_env_failure_fires_on_a_captcha_page_and_the_collectors_verdict() -> None:
    assert run(web("w1", "g", SourceKind.INHOUSE, 1, captcha=True)).drop_reason == ReasonCode.GUI_ENV_FAILURE
    failed = web("w2", "g", SourceKind.INHOUSE, 2)
    failed.status, failed.status_reason = TrajectoryStatus.ENV_FAILURE, "state file missing"
    outcome = run(failed)
    assert outcome.drop_reason == ReasonCode.GUI_ENV_FAILURE and "state file missing" in outcome.detail


def test_gui_failure_markers_outside_gui_observations_do_not_fire() -> None:
    # A terminal session that greps for the words, and a web action (not page) that names them.
    traj = terminal("t4", "g", SourceKind.INFRA, 4)
    traj.turns[1] = Turn(
        Action(ActionKind.COMMAND, "grep -ri captcha /var/log/nginx"),
        Observation("access.log: GET /captcha 503 Service Unavailable", ObservationFormat.TERMINAL),
    )
    assert_untouched(traj)
    page = web("w3", "g", SourceKind.INHOUSE, 3)
    page.turns[1] = Turn(
        Action(ActionKind.GUI, "fill('search', 'captcha solver')"), page.turns[1].observation
    )
    assert_untouched(page)


@pytest.mark.parametrize(
    "page",
    [
        "RootWebArea 'Contact us' textbox 'Email' button 'Send' "
        "StaticText 'This site is protected by reCAPTCHA and the Google Privacy Policy applies.'",
        "RootWebArea 'Understanding HTTP status codes' heading 'What does 503 Service Unavailable mean?' "
        "StaticText 'A server answers 503 Service Unavailable when it is overloaded.'",
    ],
    ids=["recaptcha-footer", "article-about-503"],
)
def test_pages_that_only_mention_a_failure_are_kept(page: str) -> None:
    traj = web("w4", "g", SourceKind.INHOUSE, 4)
    traj.turns[2] = Turn(
        traj.turns[2].action, Observation(page, ObservationFormat.AXTREE), state_changed=True
    )
    assert_untouched(traj)


# -- empty actions --------------------------------------------------------------------------------


def test_empty_actions_are_stripped_but_silent_commands_are_kept() -> None:
    traj = terminal("t5", "g", SourceKind.INFRA, 5)
    traj.turns.insert(1, Turn(Action(ActionKind.EMPTY, "let me think"), Observation("")))
    traj.turns.insert(2, Turn(Action(ActionKind.COMMAND, "   "), Observation("")))
    outcome = run(traj)
    assert outcome.removed_turns == {ReasonCode.EMPTY_ACTION_TURNS: 2}
    # Commands that print nothing (cd, mkdir, a keystroke wait with keys) changed the environment.
    quiet = terminal("t6", "g", SourceKind.INFRA, 6)
    quiet.turns.insert(1, Turn(Action(ActionKind.COMMAND, "cd src"), Observation("")))
    quiet.turns.insert(2, Turn(Action(ActionKind.COMMAND, "mkdir -p build"), Observation("")))
    keys = json.dumps([{"keystrokes": "q", "duration": 0.1}])
    quiet.turns.insert(3, Turn(Action(ActionKind.KEYSTROKES, keys), Observation("")))
    assert_untouched(quiet)


# -- retry cycles ---------------------------------------------------------------------------------


def test_rejected_pairs_are_skipped_but_real_errors_are_kept() -> None:
    traj = mcp("m3", "g", SourceKind.INHOUSE, 3)
    traj.turns.insert(
        1,
        Turn(
            Action(ActionKind.TOOL_CALL, '{"name": "read_file", "arguments": {"path": '),
            Observation("malformed JSON in tool call", ObservationFormat.TEXT, is_error=True),
        ),
    )
    assert run(traj).removed_turns == {ReasonCode.RETRY_CYCLE_TURNS: 1}
    # Well-formed actions the environment answered with an error are the long tail to learn.
    errors = terminal("t7", "g", SourceKind.INFRA, 7)
    errors.turns.insert(
        1,
        Turn(
            Action(ActionKind.COMMAND, "ls nope"),
            Observation("ls: cannot access 'nope': No such file or directory", is_error=True),
        ),
    )
    errors.turns.insert(
        2,
        Turn(
            Action(ActionKind.COMMAND, "python3 -c 'import json; json.loads(\"{\")'"),
            Observation("json.decoder.JSONDecodeError: Expecting property name", is_error=True),
        ),
    )
    assert_untouched(errors)
    tool_error = mcp("m4", "g", SourceKind.INHOUSE, 4)
    tool_error.turns[1] = Turn(call("read_file", "/missing"), Observation("ENOENT: /missing", is_error=True))
    assert_untouched(tool_error)


def test_a_rejection_not_followed_by_a_retry_is_kept() -> None:
    traj = terminal("t8", "g", SourceKind.INFRA, 8)
    traj.turns.append(
        Turn(
            Action(ActionKind.COMMAND, "deploy --region"),
            Observation("Error: invalid arguments: --region needs a value", is_error=True),
        )
    )
    assert_untouched(traj)


# -- GUI no-change turns --------------------------------------------------------------------------


def test_no_change_turns_are_dropped_by_flag_or_identical_screen() -> None:
    assert run(web("w5", "g", SourceKind.INHOUSE, 5, no_change=True)).removed_turns == {
        ReasonCode.GUI_NO_CHANGE_TURNS: 1
    }
    traj = web("w6", "g", SourceKind.INHOUSE, 6)
    same = traj.turns[1].observation.text
    traj.turns.insert(2, Turn(Action(ActionKind.GUI, "hover('x')"), Observation(f"  {same}\n")))
    assert run(traj).removed_turns == {ReasonCode.GUI_NO_CHANGE_TURNS: 1}


def test_changed_screens_and_the_first_turn_are_kept() -> None:
    traj = web("w7", "g", SourceKind.INHOUSE, 7)
    # The first turn has no "before" screen, even when flagged unchanged.
    traj.turns[0] = Turn(traj.turns[0].action, traj.turns[0].observation, state_changed=False)
    # The collector saw a change although the text is the same (e.g. a focus or a form value).
    same = traj.turns[1].observation.text
    traj.turns.insert(2, Turn(Action(ActionKind.GUI, "click('a')"), Observation(same), state_changed=True))
    # No flag and a different screen.
    traj.turns.insert(3, Turn(Action(ActionKind.GUI, "click('b')"), Observation(prose(77))))
    assert_untouched(traj)
    # The same screen twice is a no-change turn only on GUI domains.
    term = terminal("t9", "g", SourceKind.INFRA, 9)
    term.turns.insert(2, Turn(Action(ActionKind.COMMAND, "cat notes"), term.turns[1].observation))
    assert_untouched(term)
