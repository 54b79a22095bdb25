"""Each stage on small synthetic inputs: formats, rendering, redaction, segmentation, turn rules."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest

from curation_agents.clean_run import CleanRun
from curation_agents.denoise import denoise_record
from curation_agents.formats.terminal import parse_asciicast, parse_typescript
from curation_agents.model import CleanConfig, Limits, RawTurn
from curation_agents.reader import iter_records
from curation_agents.segment import segment_record, split_episodes
from curation_agents.terminal_screen import screen_text
from curation_agents.turn_rules import skip_retry_cycles, strip_empty_actions
from schemas import Action, ActionKind, Domain, Observation, Source, Trajectory, Turn, iter_trajectories
from worldline.redaction.detect import redact


def _cast(path: Path, events: list[list], version: int = 2) -> Path:
    header = (
        {"version": 2, "width": 80, "height": 24, "timestamp": 1700000000}
        if version == 2
        else {"version": 3, "term": {"cols": 80, "rows": 24}, "timestamp": 1700000000}
    )
    path.write_text("\n".join([json.dumps(header), *(json.dumps(e) for e in events)]) + "\n")
    return path


def _typed(t0: float, prompt_after: str, line: str) -> list[list]:
    """Events of a user typing `line` char by char with echo, then Enter."""
    events = []
    for i, ch in enumerate(line):
        events += [[t0 + i * 0.01, "i", ch], [t0 + i * 0.01 + 0.001, "o", ch]]
    return events + [[t0 + 1, "i", "\r"], [t0 + 1.001, "o", "\r\n" + prompt_after]]


def _commands(path: Path) -> list[RawTurn]:
    parsed = parse_asciicast(str(path), Limits())
    counts: Counter[str] = Counter()
    denoise_record(parsed, counts)
    return [t for ep in segment_record(parsed, CleanConfig(), counts) for t in ep]


# -- rendering ---------------------------------------------------------------------------------------


def test_progress_bars_backspaces_and_erases_render_as_seen() -> None:
    assert (
        screen_text("Downloading 10%\rDownloading 55%\rDownloading 100%\r\ndone\r\n")
        == "Downloading 100%\ndone"
    )
    assert screen_text("spinner |\b/\b-\b\\\bok\r\n") == "spinner ok"
    assert screen_text("\x1b[31mred\x1b[0m plain\x1b[K\r\n") == "red plain"
    assert screen_text("abcdef\x1b[3D\x1b[KXY\r\n") == "abcXY"
    assert screen_text("old screen\r\n\x1b[H\x1b[2Jnew\r\n") == "new"


def test_full_screen_programs_leave_their_last_screen() -> None:
    out = screen_text("before\r\n\x1b[?1049h\x1b[H\x1b[2J~ vim buffer\x1b[5;1Hline five\x1b[?1049lafter\r\n")
    assert out.splitlines() == ["before", "~ vim buffer", "line five", "after"]


# -- redaction ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("export AWS_SECRET_ACCESS_KEY=abc/DEF+ghi", "password"),
        ("key AKIAIOSFODNN7EXAMPLE in config", "aws_access_key"),
        (
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n-----END OPENSSH PRIVATE KEY-----",
            "private_key",
        ),
        ("git clone https://bob:hunter22@example.com/r.git", "url_credentials"),
        ("mysql -u root -phunter2 shop", "password"),
        ("psql --password=s3cr3t", "password"),
        ("curl -H 'Authorization: Bearer abcdef123456'", "bearer_token"),
        ("token ghp_abcdefghijklmnopqrstuvwxyz0123456789", "github_token"),
        ("write to jane.doe@example.org", "email"),
    ],
)
def test_secrets_are_redacted_with_a_marker_and_counted(text: str, kind: str) -> None:
    counts: Counter[str] = Counter()
    cleaned = redact(text, counts)
    assert f"[REDACTED:{kind}]" in cleaned and counts[kind] == 1


def test_redaction_leaves_ordinary_shell_text_alone() -> None:
    for text in ("mkdir -p build && ls -la", "dev@box:~# echo hi", "pip install pkg==1.2"):
        assert redact(text) == text


# -- terminal segmentation ---------------------------------------------------------------------------


def test_user_edits_tab_completion_and_ctrl_c(tmp_path: Path) -> None:
    p = "me@host:~$ "
    events = [[0.0, "o", p]]
    # Typo fixed with backspace: the echo shows the final line.
    events += [
        [1.0, "i", "l"],
        [1.001, "o", "l"],
        [1.01, "i", "x"],
        [1.011, "o", "x"],
        [1.02, "i", "\x7f"],
        [1.021, "o", "\b\x1b[K"],
        [1.03, "i", "s"],
        [1.031, "o", "s"],
        [1.04, "i", "\r"],
        [1.041, "o", "\r\nfile.txt\r\n" + p],
    ]
    # Tab completion: keys say "cat fi\t", the echo says the completed name.
    events += [
        [2.0, "i", "cat fi"],
        [2.001, "o", "cat fi"],
        [2.01, "i", "\t"],
        [2.011, "o", "le.txt "],
        [2.02, "i", "\r"],
        [2.021, "o", "\r\nhello\r\n" + p],
    ]
    # A line abandoned with Ctrl-C is not a command.
    events += [
        [3.0, "i", "rm -rf /"],
        [3.001, "o", "rm -rf /"],
        [3.01, "i", "\x03"],
        [3.011, "o", "^C\r\n" + p],
    ]
    # A running command interrupted with Ctrl-C.
    events += _typed(4.0, "", "sleep 100")
    events += [[6.0, "i", "\x03"], [6.001, "o", "^C\r\n" + p]]
    # A continuation line joins the command.
    events += [
        [7.0, "i", "echo 'a"],
        [7.001, "o", "echo 'a"],
        [7.01, "i", "\r"],
        [7.011, "o", "\r\n> "],
        [7.02, "i", "b'"],
        [7.021, "o", "b'"],
        [7.03, "i", "\r"],
        [7.031, "o", "\r\na\r\nb\r\n" + p],
    ]
    turns = _commands(_cast(tmp_path / "s.cast", events))
    assert [t["action"] for t in turns] == ["ls", "cat file.txt", "sleep 100", "echo 'a\nb'"]
    assert turns[0]["observation"] == "me@host:~$ ls\nfile.txt\nme@host:~$ "
    assert turns[2]["metadata"]["interrupted"] is True
    assert turns[3]["observation"] == "me@host:~$ echo 'a\n> b'\na\nb\nme@host:~$ "


def test_terminal_bench_harness_suffix_is_stripped(tmp_path: Path) -> None:
    p = "root@c0ffee:/app# "
    events = [
        [0.0, "o", "\x1b[?2004h" + p],
        [0.5, "i", "ls -la; tmux wait -S done\r"],
        [0.6, "o", "ls -la; tmux wait -S done\r\n\x1b[?2004l\rtotal 0\r\n\x1b[?2004h" + p],
        [1.0, "i", "cat /etc/hostname; tmux wait -S done\r"],
        [1.1, "o", "cat /etc/hostname; tmux wait -S done\r\n\x1b[?2004l\rc0ffee\r\n\x1b[?2004h" + p],
    ]
    turns = _commands(_cast(tmp_path / "tb.cast", events))
    assert [t["action"] for t in turns] == ["ls -la", "cat /etc/hostname"]
    assert turns[0]["observation"] == p + "ls -la\ntotal 0\n" + p


def test_password_typed_at_a_password_prompt_never_survives(tmp_path: Path) -> None:
    p = "me@host:~$ "
    events = _typed(0.0, "[sudo] password for me: ", "sudo true")
    events = [[0.0, "o", p], *[[t + 0.1, c, d] for t, c, d in events]]
    events += [[2.0, "i", "hunter2"], [2.1, "i", "\r"], [2.2, "o", "\r\n" + p]]
    events += [[3.0 + e[0], e[1], e[2]] for e in _typed(0.0, p, "id")]
    turns = _commands(_cast(tmp_path / "pw.cast", events))
    assert [t["action"] for t in turns] == ["sudo true", "[REDACTED:password]", "id"]
    assert "hunter2" not in json.dumps(turns)


def test_asciicast_v3_intervals_and_output_only_recordings(tmp_path: Path) -> None:
    # v3 times are intervals; no input events: commands come from prompt lines in the output.
    events = [
        [0.1, "o", "u@h:~$ "],
        [0.5, "o", "echo hi\r\nhi\r\nu@h:~$ "],
        [0.5, "o", "pwd\r\n/home/u\r\nu@h:~$ "],
    ]
    path = _cast(tmp_path / "v3.cast", events, version=3)
    parsed = parse_asciicast(str(path), Limits())
    assert [e[0] for e in parsed["events"]] == [0.1, 0.6, 1.1]
    assert [t["action"] for t in _commands(path)] == ["echo hi", "pwd"]


def test_script_typescript_with_advanced_timing(tmp_path: Path) -> None:
    body = b"u@h:~$ " + b"ls\r" + b"ls\r\nfile\r\nu@h:~$ "
    script = tmp_path / "session.log"
    script.write_bytes(
        b'Script started on 2024-05-01 10:00:00+00:00 [COMMAND="bash" TERM="xterm" COLUMNS="80" LINES="24"]\n'
        + body
        + b'\nScript done on 2024-05-01 10:01:00+00:00 [COMMAND_EXIT_CODE="0"]\n'
    )
    (tmp_path / "session.timing").write_text("O 0.1 7\nI 1.0 3\nO 0.01 19\n")
    parsed = parse_typescript(str(script), Limits())
    assert [e[1] for e in parsed["events"]] == ["o", "i", "o"]
    counts: Counter[str] = Counter()
    denoise_record(parsed, counts)
    turns = [t for ep in segment_record(parsed, CleanConfig(), counts) for t in ep]
    assert [t["action"] for t in turns] == ["ls"] and turns[0]["observation"] == "u@h:~$ ls\nfile\nu@h:~$ "
    # The timing file is the typescript's companion, not a record.
    assert list(iter_records(tmp_path / "session.timing", Limits())) == []


def test_long_sessions_split_into_episodes() -> None:
    turns: list[RawTurn] = [
        {
            "action": f"c{i}",
            "observation": "x",
            "started_at": f"2024-01-01T00:{i:02d}:00+00:00",
            "duration_s": 1.0,
            "metadata": {},
        }
        for i in range(10)
    ]
    turns[6]["started_at"] = "2024-01-01T05:00:00+00:00"  # a five-hour gap
    episodes = split_episodes(turns, CleanConfig(max_episode_turns=4, episode_gap_s=1800))
    assert [len(e) for e in episodes] == [4, 2, 4]


# -- tool-log formats --------------------------------------------------------------------------------


def _clean_one(path: Path, out: Path) -> tuple[dict, list[Trajectory]]:
    summary = CleanRun([str(path)], out, CleanConfig()).run()
    return summary, list(iter_trajectories(out))


def test_mcp_jsonrpc_log(tmp_path: Path) -> None:
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}},
        {"jsonrpc": "2.0", "id": 1, "result": {"serverInfo": {"name": "time"}}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "result": {"tools": [{"name": "get_time", "inputSchema": {"type": "object"}}]},
        },
        {
            "direction": "send",
            "message": {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "tools/call",
                "params": {"name": "get_time", "arguments": {"tz": "UTC"}},
            },
        },
        {
            "direction": "recv",
            "message": {
                "jsonrpc": "2.0",
                "id": 3,
                "result": {"content": [{"type": "text", "text": "12:00"}]},
            },
        },
        {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "tools/call",
            "params": {"name": "get_time", "arguments": {"tz": "X"}},
        },
        {
            "jsonrpc": "2.0",
            "id": 4,
            "result": {"content": [{"type": "text", "text": "bad tz"}], "isError": True},
        },
    ]
    path = tmp_path / "mcp.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines))
    summary, (traj,) = _clean_one(path, tmp_path / "out")
    assert traj.domain == Domain.MCP and traj.action_space.tool_names() == {"get_time"}
    # The MCP observation convention (schemas.mcp_observation): the content blocks as sent.
    assert [t.observation.text for t in traj.turns] == [
        '{"type":"text","text":"12:00"}',
        '{"type":"text","text":"bad tz"}',
    ]
    assert traj.turns[1].observation.is_error is True


def test_mcp_call_to_an_undeclared_tool_is_quarantined(tmp_path: Path) -> None:
    lines = [
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 2, "result": {"tools": [{"name": "get_time"}]}},
        *[
            x
            for i in (3, 4)
            for x in (
                {
                    "jsonrpc": "2.0",
                    "id": i,
                    "method": "tools/call",
                    "params": {"name": "rm_all", "arguments": {}},
                },
                {"jsonrpc": "2.0", "id": i, "result": {"content": [{"type": "text", "text": "ok"}]}},
            )
        ],
    ]
    path = tmp_path / "mcp.jsonl.gz"
    path.write_bytes(gzip.compress("\n".join(json.dumps(x) for x in lines).encode()))
    summary, trajs = _clean_one(path, tmp_path / "out")
    assert trajs == [] and summary["per_reason"] == {"unknown_tool": 1}


def test_atif_mini_swe_agent_and_agentworldbench(tmp_path: Path) -> None:
    atif = {
        "schema_version": "ATIF-v1.4",
        "session_id": "s1",
        "agent": {"name": "terminus", "model_name": "m"},
        "steps": [
            {"step_id": 1, "source": "user", "message": "list files"},
            *[
                {
                    "step_id": i,
                    "source": "agent",
                    "message": "",
                    "tool_calls": [
                        {"tool_call_id": f"c{i}", "function_name": "bash", "arguments": {"cmd": c}}
                    ],
                    "observation": {"results": [{"source_call_id": f"c{i}", "content": out}]},
                }
                for i, (c, out) in enumerate([("ls", "a b"), ("wc -l a", "3 a")], start=2)
            ],
        ],
    }
    mini = {
        "trajectory_format": "mini-swe-agent-1.1",
        "info": {"exit_status": "Submitted"},
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "fix it"},
            *[
                m
                for c in ("ls", "cat x")
                for m in (
                    {"role": "assistant", "content": f"THOUGHT\n```bash\n{c}\n```"},
                    {"role": "user", "content": f"<returncode>0</returncode>\n<output>\n{c} out\n</output>"},
                )
            ],
        ],
    }
    awb = [
        {
            "task": "mcp",
            "id": "t1",
            "turn_idx": k,
            "total_turns": 2,
            "system_str": "sys",
            "current_prompt": "q",
            "prompt": [
                f'### Turn {i}\n**Action:**\n```json\n{{"name": "search", "arguments": {{"q": "{i}"}}}}\n```'
                for i in range(1, k + 1)
            ],
            "response": [f"**Environment Observation:**\nresult {i}" for i in range(1, k + 1)],
        }
        for k in (1, 2)
    ]
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.json").write_text(json.dumps(atif))
    (tmp_path / "in" / "m.traj.json").write_text(json.dumps(mini))
    (tmp_path / "in" / "awb.jsonl").write_text("\n".join(json.dumps(x) for x in awb))
    summary = CleanRun([str(tmp_path / "in")], tmp_path / "out", CleanConfig()).run()
    by_format = {t.metadata["format"]: t for t in iter_trajectories(tmp_path / "out")}
    assert summary == {**summary, "records_in": 4, "accepted": 3, "per_reason": {"superseded_prefix": 1}}
    assert [t.action.tool_name for t in by_format["atif"].turns] == ["bash", "bash"]
    assert by_format["atif"].turns[1].observation.text == "3 a"
    assert [t.action.text for t in by_format["mini-swe-agent"].turns] == ["ls", "cat x"]
    assert by_format["mini-swe-agent"].turns[1].observation.text == "cat x out"
    awb_traj = by_format["agentworldbench"]
    assert awb_traj.domain == Domain.MCP and [t.observation.text for t in awb_traj.turns] == [
        "result 1",
        "result 2",
    ]


# -- turn rules --------------------------------------------------------------------------------------


def _traj(turns: list[Turn]) -> Trajectory:
    return Trajectory(
        id="t", domain=Domain.SWE, source=Source(kind="public", name="x"), task="t", turns=turns
    )


def _t(kind: str, action: str, obs: str, is_error: bool | None = None) -> Turn:
    return Turn(Action(ActionKind(kind), action), Observation(obs, is_error=is_error))


def test_strip_empty_actions_keeps_output_seen_during_a_pause() -> None:
    traj = _traj(
        [
            _t("command", "make", "building"),
            _t("keystrokes", '[{"keystrokes": "", "duration": 5}]', "done"),
            _t("empty", "Let me think.", ""),
            _t("command", "ls", "a"),
        ]
    )
    out, removed = strip_empty_actions(traj)
    assert removed == 2 and [t.action.text for t in out.turns] == ["make", "ls"]
    assert out.turns[0].observation.text == "building\ndone"


def test_skip_retry_cycles_skips_rejected_pairs_and_keeps_real_errors() -> None:
    traj = _traj(
        [
            _t("command", "ls nope", "ls: cannot access 'nope': No such file or directory", is_error=True),
            _t(
                "command",
                "I will now look",
                "Your output was not formatted correctly. Provide exactly one bash code block.",
            ),
            _t("tool_call", '{"name": "edit", "arguments": {"raw": "{broken"}}', "error", is_error=True),
            _t("command", "cat a.py", "print(1)"),
        ]
    )
    out, skipped = skip_retry_cycles(traj)
    assert skipped == 2
    assert [t.action.text for t in out.turns] == ["ls nope", "cat a.py"]
    assert out.turns[1].metadata["retries_skipped"] == 2
