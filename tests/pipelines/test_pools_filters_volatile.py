"""Filters without false alarms: error screens, retry cycles, volatile screens, digits in results."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from curation_agents.turn_rules import skip_retry_cycles
from pipelines.config import PoolsConfig
from pipelines.filters import (
    drop_gui_no_change_turns,
    stable_screen,
)
from pipelines.minhash import exact_key
from pipelines.stages.dedup import trajectory_text
from schemas.gui_failure import error_state_marker
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
