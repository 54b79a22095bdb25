"""Output-only segmentation (recordings without keystrokes) on rendered screen lines: what joins a command,
what stays output."""

from __future__ import annotations

from curation_agents.segment import segment_output_only
from curation_agents.shell_prompts import split_after_no_echo

P = "dev@box:~$ "


def _pairs(lines: list[str]) -> list[tuple[str, str]]:
    return [(t["action"], t["observation"]) for t in segment_output_only(lines)]


def test_repl_and_shell_continuations_join_their_command() -> None:
    lines = [
        P + "python3 -q",
        ">>> for i in range(2):",
        "...     print(i)",
        "...",
        "0",
        "1",
        ">>> exit()",
        P + "echo one \\",
        "> two | tr a-z A-Z",
        "ONE TWO",
        P,
    ]
    assert [a for a, _ in _pairs(lines)] == [
        "python3 -q",
        "for i in range(2):\n    print(i)",
        "exit()",
        "echo one \\\n> two | tr a-z A-Z".replace("\n> ", "\n"),
    ]


def test_output_that_starts_like_a_continuation_stays_output() -> None:
    lines = [P + "cat mail.txt", "> quoted reply", "... and more", "signature", P + "ls", "a.txt", P]
    pairs = _pairs(lines)
    assert [a for a, _ in pairs] == ["cat mail.txt", "ls"]
    assert pairs[0][1].startswith(P + "cat mail.txt\n> quoted reply\n... and more")


def test_password_prompt_line_splits_only_before_a_prompt() -> None:
    assert split_after_no_echo("Password: dev@box:~$ ls -la") == ["Password:", "dev@box:~$ ls -la"]
    assert split_after_no_echo("[sudo] password for dev: root@box:/# id") == [
        "[sudo] password for dev:",
        "root@box:/# id",
    ]
    for line in ("Password: hunter2 $ 5", "token: abc # comment", "status: ok $ done", "Password: "):
        assert split_after_no_echo(line) == [line]
