"""Redact secrets and personal data before anything is written: cloud keys, tokens, private keys,
passwords on command lines, credentials in URLs, and email addresses.

Each match becomes `[REDACTED:<kind>]`; counts per kind go into the trajectory's metadata so a reader
knows a record was touched and how. One combined pattern keeps this a single pass over the text.
"""

from __future__ import annotations

import re
from collections import Counter

# (kind, pattern). A pattern may have a group named `keep` (a prefix such as `--password=`) that stays.
# Earlier entries win where patterns overlap, so the specific kinds come first.
_PATTERNS: list[tuple[str, str]] = [
    (
        "private_key",
        r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----[\s\S]{0,20000}?"
        r"(?:-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----|\Z)",
    ),
    ("aws_access_key", r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}\b"),
    ("github_token", r"\b(?:gh[pousr]_[A-Za-z0-9]{30,255}|github_pat_[A-Za-z0-9_]{22,255})"),
    (
        "api_key",
        r"\b(?:sk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_\-]{20,}|AIza[0-9A-Za-z_\-]{35}"
        r"|xox[abposr]-[A-Za-z0-9\-]{10,}|glpat-[A-Za-z0-9_\-]{20,}|hf_[A-Za-z0-9]{30,})",
    ),
    ("jwt", r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
    ("bearer_token", r"(?P<keep>(?i:authorization:\s{0,4}bearer\s{1,4}))[A-Za-z0-9._~+/=\-]{8,}"),
    ("url_credentials", r"(?P<keep>[a-z][a-z0-9+.\-]{1,20}://[^\s:/@'\"]{1,128}:)[^\s@/'\"]{1,256}(?=@)"),
    (
        # Passwords handed to programs on the command line (flags and environment assignments).
        "password",
        r"(?P<keep>(?i:(?<![\w-])--?(?:password|passwd|pass|pwd|token|secret|api[-_]?key)(?:=|\s{1,4}))"
        r"|(?i:\b[A-Z0-9_]{0,40}(?:PASSWORD|PASSWD|SECRET|TOKEN|API_?KEY|ACCESS_KEY)\s{0,2}[=:]\s{0,2})"
        r"|(?:\bsshpass\s{1,4}-p\s{0,4})|(?:\bmysql(?:dump|admin)?\b[^\n|;&]{0,200}?\s-p(?=\S)))"
        r"(?:\"[^\"\n]{1,256}\"|'[^'\n]{1,256}'|[^\s\"'][^\s]{0,255})",
    ),
    (
        "email",
        r"\b[A-Za-z0-9][A-Za-z0-9._%+\-]{0,63}@[A-Za-z0-9\-]{1,63}(?:\.[A-Za-z0-9\-]{1,63})*\.[A-Za-z]{2,24}\b",
    ),
]

_GROUP = {f"k{i}": kind for i, (kind, _) in enumerate(_PATTERNS)}
_COMBINED = re.compile(
    "|".join(f"(?P<k{i}>{pat.replace('(?P<keep>', f'(?P<keep{i}>')})" for i, (_, pat) in enumerate(_PATTERNS))
)
# Cheap pre-check: every pattern needs one of these characters or prefixes, so most text skips the regex.
_HINT = re.compile(
    r"@|-----BEGIN|AKIA|ASIA|AGPA|AIDA|AROA|gh[pousr]_|github_pat_|sk-|AIza|xox|glpat-|hf_|eyJ|(?i:bearer|pass|pwd|secret|token|key|sshpass|mysql)"
)


# Stricter pre-checks in front of that one, exact because each is a necessary condition for a match of
# `_COMBINED` (text it rules out would come back unchanged anyway): no pattern matches fewer than
# _SHORTEST_MATCH characters, and on ASCII text every pattern needs one of these lower-cased literals, or
# an "@" with a "." after it (emails) or "://" (credentials in URLs). Non-ASCII text skips the literal
# check: case-insensitive matching also folds characters such as U+212A (Kelvin) into "k".
_SHORTEST_MATCH = 6
_ASCII_NEEDLES = (
    "-----begin",
    "akia",
    "asia",
    "agpa",
    "aida",
    "aroa",
    "gh",
    "github_pat_",
    "sk-",
    "aiza",
    "xox",
    "glpat-",
    "hf_",
    "eyj",
    "authorization",
    "pass",
    "pwd",
    "token",
    "secret",
    "key",
    "mysql",
)

_ASCII_NEEDLE = re.compile("|".join(re.escape(needle) for needle in _ASCII_NEEDLES))


def may_contain_secret(text: str) -> bool:
    """False only when no redaction pattern can match TEXT; a fast filter in front of the regexes."""
    if len(text) < _SHORTEST_MATCH:
        return False
    if not text.isascii():
        return True
    at = text.find("@")
    if at >= 0 and (text.find(".", at) >= 0 or "://" in text):
        return True
    return _ASCII_NEEDLE.search(text.lower()) is not None


def marker(kind: str) -> str:
    return f"[REDACTED:{kind}]"


def redact(text: str, counts: Counter[str] | None = None) -> str:
    """`text` with secrets and emails replaced by markers; `counts` (if given) gains one per match."""
    if not may_contain_secret(text) or _HINT.search(text) is None:
        return text

    def substitute(m: re.Match[str]) -> str:
        name = m.lastgroup or ""
        # lastgroup is the outermost alternative that matched; keep groups sit inside it.
        index = int(name[1:]) if name.startswith("k") else -1
        kind = _GROUP.get(name, "secret")
        if counts is not None:
            counts[kind] += 1
        keep = m.groupdict().get(f"keep{index}") if index >= 0 else None
        return (keep or "") + marker(kind)

    return _COMBINED.sub(substitute, text)
