"""Filters without false alarms: error screens, retry cycles, volatile screens, digits in results."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from curation_agents.turn_rules import skip_retry_cycles
from pipelines.config import PoolsConfig
from pipelines.filters import drop_gui_no_change_turns
from pipelines.minhash import exact_key
from pipelines.stages.dedup import trajectory_text
from schemas.gui_failure import error_state_marker
from schemas.screen_state import stable_screen
from schemas.trajectory import (
    Action,
    ActionKind,
    Domain,
    Observation,
    ObservationFormat,
    Source,
    SourceKind,
    Trajectory,
    Turn,
)
from tests.helpers.pools_data import prose

MARKERS = PoolsConfig().filters.gui_failure_markers


def long_page(title: str, extra: str = "") -> str:
    body = "\n".join(f"  StaticText '{prose(i, 12)}'" for i in range(30))
    return f"RootWebArea '{title}' focused: True\n  heading '{title}'\n{body}\n{extra}"


def test_error_screens_count_and_mentions_do_not() -> None:
    footer = long_page(
        "Contact us", "  StaticText 'This site is protected by reCAPTCHA and the Google Privacy Policy'"
    )
    article = long_page(
        "What does 503 Service Unavailable mean? - MDN Web Docs",
        "  StaticText 'A 503 service unavailable response...'",
    )
    assert error_state_marker(footer, MARKERS, 150) is None
    assert error_state_marker(article, MARKERS, 150) is None
    wall = "RootWebArea 'Just a moment...'\n  heading 'Verify you are human'\n  StaticText 'Complete the CAPTCHA'"
    assert error_state_marker(wall, MARKERS, 150) == "captcha"
    assert error_state_marker(long_page("503 Service Unavailable"), MARKERS, 150) == "503 service unavailable"
    assert error_state_marker(long_page("Shop"), MARKERS, 150) is None


def _traj(turns: list[Turn], domain: Domain = Domain.MCP) -> Trajectory:
    return Trajectory(
        id="r", domain=domain, source=Source(kind=SourceKind.INHOUSE, name="s"), task="t", turns=turns
    )


def ok(name: str = "read_file", kind: ActionKind = ActionKind.TOOL_CALL) -> Turn:
    return Turn(Action(kind, f'{{"name": "{name}", "arguments": {{}}}}', name), Observation("contents"))


def garbage() -> Turn:
    return Turn(
        Action(ActionKind.TOOL_CALL, '{"name": "read_file", "arguments": {"path": '),
        Observation("malformed JSON in tool call", ObservationFormat.TEXT, is_error=True),
    )


def test_retry_cycles_are_skipped_only_when_a_retry_follows() -> None:
    traj, n = skip_retry_cycles(_traj([ok(), garbage(), garbage(), ok()]), mode="retried_only")
    assert n == 2 and len(traj.turns) == 2 and traj.turns[1].metadata["retries_skipped"] == 2
    traj, n = skip_retry_cycles(_traj([ok(), ok(), garbage()]), mode="retried_only")
    assert n == 0 and len(traj.turns) == 3  # nothing retried: the rejection is real history
    traj, n = skip_retry_cycles(_traj([ok(), garbage(), ok(kind=ActionKind.MESSAGE)]), mode="retried_only")
    assert n == 0 and len(traj.turns) == 3  # the agent moved on to something else


def screen(clock: str, cart: int) -> Turn:
    text = f"RootWebArea 'Shop'\n  StaticText '{clock}'\n  link 'Cart ({cart})'\n  StaticText 'updated 3 minutes ago'"
    return Turn(Action(ActionKind.GUI, "click('12')"), Observation(text, ObservationFormat.AXTREE))


def test_no_change_ignores_clocks_but_not_state() -> None:
    traj, n = drop_gui_no_change_turns(_traj([screen("10:41", 1), screen("10:42 PM", 1)], Domain.WEB))
    assert n == 1 and len(traj.turns) == 1
    traj, n = drop_gui_no_change_turns(_traj([screen("10:41", 1), screen("10:41", 2)], Domain.WEB))
    assert n == 0 and len(traj.turns) == 2


@given(st.integers(0, 23), st.integers(0, 59), st.integers(0, 23), st.integers(0, 59), st.integers(1, 59))
def test_any_clock_or_relative_time_is_volatile(h1: int, m1: int, h2: int, m2: int, ago: int) -> None:
    a = f"Status bar {h1}:{m1:02d} - synced {ago} minutes ago - 2024-01-0{ago % 9 + 1}"
    b = f"Status bar {h2}:{m2:02d} - synced {ago + 1} minutes ago - 2025-12-31"
    assert stable_screen(a) == stable_screen(b)


def _terminal(cmd: str, out: str) -> Trajectory:
    turns = [Turn(Action(ActionKind.COMMAND, cmd), Observation(out, ObservationFormat.TERMINAL))] * 2
    return _traj(turns, Domain.TERMINAL)


def test_exact_dedup_keeps_digits_that_carry_results() -> None:
    cfg = PoolsConfig()
    key = lambda t: exact_key(trajectory_text(t, cfg))  # noqa: E731
    assert key(_terminal("python sum.py", "sum = 4")) != key(_terminal("python sum.py", "sum = 5"))
    assert key(_terminal("kill 4242", "done")) == key(_terminal("kill 4343", "done"))
    cfg.dedup.fold_digits_observations = True
    assert key(_terminal("python sum.py", "sum = 4")) == key(_terminal("python sum.py", "sum = 5"))


# -- GUI screens: countdowns, timer nodes, re-created refs ------------------------------------------

MINIWOB = """URL: http://127.0.0.1:8001/miniwob/login-user.html
Title: Login User Task
Tabs: [0] Login User Task (current)
Focused: generic [ref=e1]

- generic [active] [ref=e1]:
  - generic [ref=e2]:
    - generic [ref=e3]: Enter the username "rex" and the password "6P0B" into the text fields and press login.
  - generic [ref=e12]:
    - generic [ref=e13]: "Last reward: -"
    - generic [ref=e16]: "Time left: {left} / 10sec"
    - generic [ref=e17]: "Episodes done: {done}\""""

DESKTOP = """Windows: clock: frame "Kitchen timer" (active)
Focused application: clock

[1] frame "Kitchen timer" (active, showing) @0,0 400x300
  [2] timer "Countdown" (showing) value="{left}" @10,10 100x20
    [3] label "{left} left" (showing)
  [4] label "Alarms set: {done}" (showing)
  [5] push button "Start" (focusable, showing)"""


@given(
    st.sampled_from([MINIWOB, DESKTOP]),
    st.integers(0, 600),
    st.integers(0, 600),
    st.sampled_from(["{n}", "{n}s", "{n} sec", "00:{n:02d}", "{n} seconds", "1d 02h 13m {n:02d}s", "-{n}"]),
)
def test_countdowns_on_gui_screens_are_volatile(template: str, a: int, b: int, form: str) -> None:
    first = template.format(left=form.format(n=a % 60), done=3)
    second = template.format(left=form.format(n=b % 60), done=3)
    if template is MINIWOB and not form.endswith(("s", "sec", "seconds")):
        first, second = (t.replace(" / 10sec", "") for t in (first, second))
    traj, n = drop_gui_no_change_turns(_traj([_gui(first), _gui(second)], Domain.WEB))
    assert n == 1 and len(traj.turns) == 1
    # The count beside it is state: one more episode / alarm is a change.
    changed = template.format(left=form.format(n=b % 60), done=4)
    traj, n = drop_gui_no_change_turns(_traj([_gui(first), _gui(changed)], Domain.WEB))
    assert n == 0


def _gui(text: str, changed: bool | None = None) -> Turn:
    return Turn(
        Action(ActionKind.GUI, "noop(1000)"),
        Observation(text, ObservationFormat.AXTREE),
        state_changed=changed,
    )


def test_a_stale_change_flag_does_not_outvote_a_ticking_clock() -> None:
    """A collector whose older rule missed the countdown flagged the turn as a change: the texts differ
    only in volatile content, so the turn is no-change; an identical text with the flag set is kept."""
    a, b = MINIWOB.format(left=9, done=0), MINIWOB.format(left=8, done=0)
    traj, n = drop_gui_no_change_turns(_traj([_gui(a, True), _gui(b, True)], Domain.WEB))
    assert n == 1
    traj, n = drop_gui_no_change_turns(_traj([_gui(a, True), _gui(a, True)], Domain.WEB))
    assert n == 0  # the collector saw something the text does not show


def test_refs_of_recreated_nodes_and_the_error_line_are_not_state() -> None:
    a = '- list [ref=e4]:\n  - listitem [ref=e5]: "Buy coffee"'
    b = 'Last action error: no element with ref e9\n- list [ref=e4]:\n  - listitem [ref=e31]: "Buy coffee"'
    assert stable_screen(a) == stable_screen(b)
    assert stable_screen(a) != stable_screen(a.replace("coffee", "tea"))
