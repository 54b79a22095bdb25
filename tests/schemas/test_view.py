"""Trajectory renderings: the Jupyter HTML card and the plain-text form."""

from __future__ import annotations

from schemas import (
    Action,
    ActionKind,
    ActionSpace,
    Domain,
    Observation,
    ObservationFormat,
    Source,
    SourceKind,
    ToolSpec,
    Trajectory,
    TrajectoryStatus,
    Turn,
)
from schemas.view import FOLD_CHARS, trajectory_html, trajectory_text


def _trajectory() -> Trajectory:
    long_listing = "\n".join(f"-rw-r--r-- 1 root root {i:>5} file{i}.txt" for i in range(200))
    return Trajectory(
        id="t-<script>alert(1)</script>",
        domain=Domain.TERMINAL,
        source=Source(
            SourceKind.INFRA, "terminal-collector", uri="run-7/part-0", licence="MIT", model="qwen3"
        ),
        task="List files & report <sizes>",
        action_space=ActionSpace(
            "Keystrokes as JSON.", [ToolSpec("send_keys", "Send keys", {"type": "object"})]
        ),
        initial_state="Debian 12",
        simulation_instruction="Return partial results",
        turns=[
            Turn(
                Action(ActionKind.COMMAND, "ls -l | head"),
                Observation("total 0\n<none>", ObservationFormat.TERMINAL),
                exit_code=0,
                metadata={"current_state": "$ "},
            ),
            Turn(
                Action(ActionKind.COMMAND, "ls -l"),
                Observation(long_listing, ObservationFormat.TERMINAL),
                exit_code=2,
            ),
            Turn(
                Action(ActionKind.TOOL_CALL, '{"name": "x"}', tool_name="x"),
                Observation("boom", is_error=True),
            ),
        ],
        status=TrajectoryStatus.TRUNCATED,
        status_reason="step budget",
    )


def test_html_escapes_everything_from_the_data() -> None:
    html = _trajectory()._repr_html_()
    assert "<script>alert(1)</script>" not in html
    assert "t-&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "List files &amp; report &lt;sizes&gt;" in html
    assert "total 0\n&lt;none&gt;" in html


def test_html_header_parts_and_turn_blocks() -> None:
    traj = _trajectory()
    html = trajectory_html(traj)
    for expected in (
        "terminal",
        "truncated (step budget)",
        "3 turns",
        "infra: terminal-collector",
        "run-7/part-0",
        "licence MIT",
        "Debian 12",
        "Return partial results",
        "send_keys",
        "Keystrokes as JSON.",
    ):
        assert expected in html, expected
    assert html.count('class="wl-turn"') == 3
    assert html.count('class="wl-act"') == 3 and html.count('class="wl-obs') == 3
    assert "exit 0" in html and "exit 2" in html and "tool: x" in html and "observation: terminal" in html
    assert 'class="wl-obs wl-err"' in html  # the error turn is marked
    assert "state before the action" in html


def test_html_folds_long_observations_only() -> None:
    traj = _trajectory()
    assert len(traj.turns[1].observation.text) > FOLD_CHARS
    html = trajectory_html(traj)
    turn2 = html.split('<div class="wl-turn">')[2]
    turn1 = html.split('<div class="wl-turn">')[1]
    assert "<details><summary>observation (" in turn2 and "200 lines" in turn2
    assert "<details><summary>observation" not in turn1


def test_html_of_a_trajectory_without_turns() -> None:
    traj = Trajectory(id="empty", domain=Domain.WEB, source=Source(SourceKind.PUBLIC, "x"), task="t")
    assert "no turns" in trajectory_html(traj)


def test_plain_text_rendering_clips_long_texts() -> None:
    text = trajectory_text(_trajectory(), clip=100)
    assert text.splitlines()[0].startswith("t-<script>alert(1)</script>  [terminal]  truncated (step budget)")
    assert "--- turn 2 (action: command, observation: terminal, exit 2) ---" in text
    assert "more characters]" in text
    assert "[state before]\n$ " in text
    assert "file199.txt" not in text and "file199.txt" in trajectory_text(_trajectory(), clip=0)
