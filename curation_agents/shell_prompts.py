"""Shell prompts in terminal transcripts: the prompt a turn ends at, the no-echo prompts (passwords)
after which typed keys are secret, and the line a no-echo read leaves the next prompt on.

Cleaning (`curation_agents.denoise`, which masks keys typed at a no-echo prompt) and segmentation
(`curation_agents.segment`, which cuts turns at prompts) both read them from here.
"""

from __future__ import annotations

import re

# A shell or REPL prompt at the start of a line: user@host:dir$, [user@host dir]#, (venv) ..., >>>, mysql>.
PROMPT = re.compile(
    r"^(?:\([^)\n]{1,60}\) )?(?:\[[^\]\n]{1,80}\]|[\w.\-]{1,64}@[\w.\-]{1,64})(?::[^\n#$%]{0,200})?\s?[#$%] ?"
    r"|^(?:>>> |\.\.\. |In \[\d+\]: |\(Pdb\) |mysql> |sqlite> |postgres=# |irb\(main\):\d+:\d+> )"
)

# Prompts after which the terminal does not echo what is typed (sudo, ssh, read -s, gpg, vault login).
NO_ECHO_PROMPT = re.compile(
    r"(?i)(?:password|passphrase|passcode|\bpin\b|token|secret|api key|otp|verification code)[^\n:]{0,60}:\s*$"
)

# The start of a no-echo prompt up to its colon: what follows on the same line was not typed there.
_NO_ECHO_LEAD = re.compile(NO_ECHO_PROMPT.pattern.removesuffix(r"\s*$"))


def split_after_no_echo(line: str) -> list[str]:
    """LINE as the lines a person saw: a no-echo prompt, then the next prompt where that starts on it.

    After a no-echo read (`read -s`, sudo, ssh) the Enter is not echoed, so the next prompt is printed
    on the password prompt's line (`Password: dev@box:~$ ls`). Read as one line, the prompt and
    command would pass for the typed password; split, the password prompt keeps nothing after it.
    """
    if ": " not in line or not ("$ " in line or "# " in line or "% " in line or "> " in line):
        return [line]
    lead = _NO_ECHO_LEAD.search(line)
    if lead is None:
        return [line]
    rest = line[lead.end() :].lstrip(" ")
    if not rest or PROMPT.match(rest) is None:
        return [line]
    return [line[: lead.end()], rest]
