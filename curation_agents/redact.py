"""Redact secrets and personal data before anything leaves the cleaner: cloud keys and their secrets,
vendor tokens, private key blocks, credentials in headers, URLs, command lines, config and JSON, and the
PII classes a run asks for (emails and phone numbers by default, IP addresses on request).

Each match becomes `[REDACTED:<kind>]`; counts per kind go into the trajectory's metadata so a reader
knows a record was touched and how. A marker never matches again, so redacting twice changes nothing
and counts each secret once.

Three entry points:
- `redact(text)`: free text (terminal lines, tool output, prose). One combined pattern, one pass.
- `redact_json(value)`: a decoded JSON value. Keys that name a credential (`password`, `SecretAccessKey`,
  `SessionToken`, ...) have their string values replaced; every other string goes through `redact`;
  strings that hold JSON themselves (tool-call arguments) are redacted as JSON. The result is still
  valid JSON of the same shape, which text substitution cannot promise.
- `PemBlockFilter`: line-at-a-time redaction of private key blocks for rendered terminal output, where a
  block arrives one line at a time.

Look-alikes are kept on purpose: `git@github.com:org/repo` (an scp-style remote, not an email),
identifiers named `password` / `token` / `secret` in code, git SHAs, UUIDs and content hashes. The
vendor token rules adopted from detect-secrets (measured on the labelled corpus, see docs/curation.md)
run in the same pass.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from functools import lru_cache
from typing import Any

PII_CLASSES = ("email", "phone", "ip")
DEFAULT_PII: frozenset[str] = frozenset({"email", "phone"})
MARKER_PREFIX = "[REDACTED:"

# Credential words that end a key or variable name (`DB_PASSWORD`, `aws_secret_access_key`,
# `SessionToken`, `client_secret`). A name must END with one: `tokenizer`, `password_hint` and
# `secret_name` are not credentials.
_KEY_SUFFIX = (
    r"(?:password|passwd|passphrase|pwd|secret|token|api[-_]?key|apikey|access[-_]?key|secret[-_]?key"
    r"|private[-_]?key|signing[-_]?key|encryption[-_]?key|master[-_]?key|account[-_]?key|auth[-_]?key"
    r"|credentials?|secret[-_]?access[-_]?key|session[-_]?token|client[-_]?secret)"
)

# Values that are not secrets wherever they appear: markers, placeholders, variable references.
_NOT_A_VALUE = re.compile(
    r"^(?:\[REDACTED:|\*+$|x{3,}$|<[^>]*>$|\$|%\(|\{\{|\{[A-Za-z_]\w*\}$|null$|none$|nil$|true$|false$"
    r"|undefined$|\d{1,9}$|\.\.\.$|\?+$)",
    re.IGNORECASE,
)
# Type names and keywords after `password:` are annotations or schemas, not values.
_TYPE_WORDS = frozenset(
    {
        "str",
        "string",
        "bytes",
        "int",
        "integer",
        "bool",
        "boolean",
        "any",
        "object",
        "optional",
        "secretstr",
        "text",
        "varchar",
        "char",
        "required",
        "type",
    }
)

# (kind, pattern). A pattern may have a group named `keep` (a prefix such as `--password=`) that stays,
# and a group named `val` (the secret itself) that a value filter inspects. Earlier entries win where
# patterns overlap, so the specific kinds come first.
_PATTERNS: list[tuple[str, str]] = [
    (
        # Whole blocks, LF or CRLF. A block cut off before its END line runs to the end of the text, or
        # to the closing quote of the JSON string it sits in (a key body never holds a quote).
        "private_key",
        r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----[^\"]*?"
        r"(?:-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----|(?=\")|\Z)",
    ),
    ("private_key", r"PuTTY-User-Key-File-\d: [^\"]*?(?:Private-MAC: [0-9a-f]+|(?=\")|\Z)"),
    ("aws_access_key", r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ABIA|ACCA|A3T[A-Z0-9])[0-9A-Z]{16}\b"),
    ("aws_session_token", r"\b(?:FwoGZXIvYXdz|IQoJb3JpZ2lu)[A-Za-z0-9/+=]{40,}"),
    (
        "github_token",
        r"\b(?:gh[pousr]_[A-Za-z0-9_]{30,255}|github_pat_[A-Za-z0-9_]{22,255})",
    ),
    (
        "api_key",
        r"\b(?:sk-(?:ant-|proj-|live-|test-|svcacct-)?[A-Za-z0-9_\-]{20,}|AIza[0-9A-Za-z_\-]{35}"
        r"|xox[abposre]-[A-Za-z0-9\-]{10,}|(?:glpat|gldt|glrt|glptt)-[A-Za-z0-9_\-]{20,}|hf_[A-Za-z0-9]{30,}"
        r"|[rs]k_(?:live|test)_[0-9A-Za-z]{16,}|HRKU-[A-Za-z0-9_\-]{20,}|npm_[A-Za-z0-9]{36}"
        r"|pypi-AgE[A-Za-z0-9_\-]{50,}|SG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}|sq0csp-[0-9A-Za-z_\-]{43}"
        r"|dop_v1_[a-f0-9]{64}|shpat_[a-fA-F0-9]{32}|AccountKey=[A-Za-z0-9+/=]{86,88}|\b[0-9a-f]{32}-us\d{1,2}\b)",
    ),
    ("slack_webhook", r"https://hooks\.slack\.com/services/T[A-Za-z0-9_]+/B[A-Za-z0-9_]+/[A-Za-z0-9_]+"),
    ("jwt", r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
    (
        "bearer_token",
        r"(?P<keep>(?i:(?:authorization|proxy-authorization)[\"']?\s{0,3}[:=]\s{0,3}[\"']?bearer\s{1,4}))"
        r"[A-Za-z0-9._~+/=\-]{8,}",
    ),
    (
        "basic_auth",
        r"(?P<keep>(?i:(?:authorization|proxy-authorization)[\"']?\s{0,3}[:=]\s{0,3}[\"']?(?:basic|token|digest)"
        r"\s{1,4}))[A-Za-z0-9._~+/=\-]{6,}",
    ),
    (
        "api_key",
        r"(?P<keep>(?i:\bx-(?:api-key|auth-token|access-token|api-token)[\"']?\s{0,3}[:=]\s{0,3}[\"']?))"
        r"[A-Za-z0-9._~+/=\-]{8,}",
    ),
    (
        "url_credentials",
        r"(?P<keep>[a-z][a-z0-9+.\-]{1,20}://[^\s:/@'\"\\]{1,128}:)[^\s@/'\"\\]{1,256}(?=@)",
    ),
    (
        # curl -u user:pw / --user user:pw: the user stays, the password goes.
        "password",
        r"(?P<keep>\b(?:curl|wget|http)\b[^\n|;&]{0,300}?(?:\s-u\s{0,4}|\s--user[= ]\s{0,4}|\s--http-user=\S+"
        r"\s--http-password=)['\"]?[^\s:'\"\\]{1,128}:)(?P<val>[^\s'\"\\]{1,256})",
    ),
    (
        # docker / podman / helm login -p SECRET (the short flag names the password there).
        "password",
        r"(?P<keep>\b(?:docker|podman|helm|buildah|skopeo|oras)\s+(?:registry\s+)?login\b[^\n|;&]{0,200}?\s-p"
        r"(?:\s{1,4}|=))(?P<val>\"[^\"\n\\]{1,256}\"|'[^'\n]{1,256}'|[^\s\"'\\]{1,256})",
    ),
    (
        # Credentials handed to programs on the command line.
        "password",
        r"(?P<keep>(?i:(?<![\w-])--?(?:password|passwd|pass|pwd|token|secret|api[-_]?key|access[-_]?token"
        r"|auth[-_]?token|client[-_]?secret)(?:=|\s{1,4}))|(?:\bsshpass\s{1,4}-p\s{0,4})"
        r"|(?:\bmysql(?:dump|admin)?\b[^\n|;&]{0,200}?\s-p(?=[^\s-])))"
        r"(?P<val>\"[^\"\n\\]{1,256}\"|'[^'\n]{1,256}'|[^\s\"'\\][^\s\"'\\]{0,255})",
    ),
    (
        # "password": "..." in JSON or a Python dict, also inside a JSON string (\"password\": \"...\");
        # the quotes and the key stay, so JSON stays valid.
        "password",
        r"(?P<keep>\\{0,3}[\"'][\w\-]{0,40}(?i:"
        + _KEY_SUFFIX
        + r")\\{0,3}[\"']\s{0,3}[:=]>?\s{0,3}\\{0,3}[\"'])"
        r"(?P<val>(?:[^\"'\\\s]|\\u[0-9a-fA-F]{4}|\\/){3,4096})(?=\\{0,3}[\"'])",
    ),
    (
        # Assignments in shells, env files, config files and code: DB_PASSWORD=..., password: ..., token = "...".
        "password",
        r"(?P<keep>(?<![\w\-\"'])[A-Za-z0-9_.\-]{0,60}(?i:"
        + _KEY_SUFFIX
        + r")(?P<sep>\s{0,3}(?::=|:(?![:=])|(?<![=!<>])=(?![=>~]))\s{0,3}))"
        r"(?P<val>\"[^\"\n\\]{1,512}\"|'[^'\n\\]{1,512}'|[^\s\"'\\,;)}\]][^\s\"'\\,;)}\]]{0,511})",
    ),
    (
        "email",
        r"\b(?!(?:git|hg|ssh|svn)@)[A-Za-z0-9][A-Za-z0-9._%+\-]{0,63}@[A-Za-z0-9\-]{1,63}(?:\.[A-Za-z0-9\-]{1,63})*"
        r"\.[A-Za-z]{2,24}\b(?!:[\w~/.\-])(?!\.\w)",
    ),
]

# PII classes that a run may switch on or off; email is in the table above (always compiled, filtered).
_PII_PATTERNS: list[tuple[str, str]] = [
    (
        "phone",
        r"(?<![\w+./:#=-])(?:\+\d{1,3}[ .\-]?(?:\(\d{1,4}\)[ .\-]?)?\d{1,4}(?:[ .\-]\d{2,4}){1,4}"
        r"|\(\d{3}\)\s?\d{3}[\-.]\d{4}|\d{3}[\-.]\d{3}[\-.]\d{4})(?![\w./:-])",
    ),
    (
        "ip",
        r"(?<![\w.:])(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?![\w.]|\.\d)"
        r"|(?<![\w:])(?:[0-9a-fA-F]{1,4}:){7}[0-9a-fA-F]{1,4}(?![\w:])",
    ),
]

_ALL = _PATTERNS + _PII_PATTERNS
_KIND = [kind for kind, _ in _ALL]
_COMBINED = re.compile(
    "|".join(
        f"(?P<k{i}>{pat.replace('(?P<keep>', f'(?P<keep{i}>').replace('(?P<val>', f'(?P<val{i}>').replace('(?P<sep>', f'(?P<sep{i}>')})"
        for i, (_, pat) in enumerate(_ALL)
    )
)

# AWS secret access keys have no prefix: 40 characters of base64 with mixed case. They are redacted when
# an access key id or the words "aws" + "secret" are near, so git SHAs (lower-case hex) and unrelated
# base64 stay.
_AWS_SECRET = re.compile(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")
_AWS_CONTEXT = re.compile(r"(?i)(?:AKIA|ASIA)[0-9A-Z]{16}|aws.{0,40}secret|secret.{0,20}access")

# Cheap pre-check: text that cannot match any pattern skips the regex. Exact (a necessary condition): no
# pattern matches fewer than _SHORTEST_MATCH characters, and on ASCII text every non-PII pattern needs one
# of these lower-cased literals, or an "@" with a "." after it (emails) or "://" (credentials in URLs).
# Non-ASCII text skips the literal check: case-insensitive matching folds characters such as U+212A
# (Kelvin) into "k". PII patterns have their own digit checks.
_SHORTEST_MATCH = 6
_ASCII_NEEDLES = (
    "-----begin",
    "putty-user-key",
    "akia",
    "asia",
    "agpa",
    "aida",
    "aroa",
    "abia",
    "acca",
    "a3t",
    "fwogzxivyxdz",
    "iqojb3jpz2lu",
    "gh",
    "sk-",
    "sk_",
    "rk_",
    "aiza",
    "xox",
    "gl",
    "hf_",
    "hrku-",
    "npm_",
    "pypi-",
    "sg.",
    "sq0csp-",
    "dop_v1_",
    "shpat_",
    "accountkey=",
    "-us",
    "hooks.slack",
    "eyj",
    "authorization",
    "x-a",
    "curl",
    "wget",
    "http",
    "login",
    "pass",
    "pwd",
    "token",
    "secret",
    "key",
    "mysql",
    "credential",
)
_ASCII_NEEDLE = re.compile("|".join(re.escape(needle) for needle in _ASCII_NEEDLES))
_PHONE_HINT = re.compile(r"\d{3}[ .\-)]|\+\d")
_IP_HINT = re.compile(r"\d\.\d|[0-9a-fA-F]:[0-9a-fA-F]")


def may_contain_secret(text: str) -> bool:
    """False only when no non-PII redaction pattern can match TEXT; a fast filter in front of the regex."""
    if len(text) < _SHORTEST_MATCH:
        return False
    if not text.isascii():
        return True
    at = text.find("@")
    if at >= 0 and (text.find(".", at) >= 0 or "://" in text):
        return True
    return _ASCII_NEEDLE.search(text.lower()) is not None


def marker(kind: str) -> str:
    return f"{MARKER_PREFIX}{kind}]"


def _is_secret_value(value: str, sep: str | None, keep: str) -> bool:
    """Whether the value of a credential-named key or flag is a secret rather than code or a placeholder.

    `sep` is the assignment operator with its spaces (None for a command-line flag), `keep` the text
    before the value (it ends with the key name and `sep`).
    """
    quoted = len(value) >= 2 and value[0] in "\"'" and value[-1] == value[0]
    inner = value[1:-1] if quoted else value
    if not inner or _NOT_A_VALUE.match(inner):
        return False
    if quoted:
        # A string literal: a secret unless it reads as prose ("Enter your password").
        return len(inner.split()) < 3
    if sep is None:
        return True  # a command-line flag's argument
    name = re.split(r"[^\w\-]", keep[: len(keep) - len(sep)])[-1]
    op = sep.strip()
    if inner.lower() in _TYPE_WORDS or inner.lower() == name.lower():
        return False  # password: str, password=password: an annotation, a variable passed on
    if _EXPRESSION.search(inner):
        return False  # get_token(), settings.SECRET_KEY, os.environ["X"], tokens[0]
    if _PLAIN_WORD.match(inner) and op != ":" and not name.isupper():
        return False  # token = tok, f(secret=value): a variable in code
    if op == "=" and sep != "=" and _PLAIN_WORD.match(inner):
        return False
    return True


_EXPRESSION = re.compile(r"[(\[]|^[A-Za-z_]\w*\.[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*$")
_PLAIN_WORD = re.compile(r"^[A-Za-z_]+$")


@lru_cache(maxsize=16)
def _substituter(pii: frozenset[str]) -> Callable[[re.Match[str], Counter[str] | None], str]:
    def substitute(m: re.Match[str], counts: Counter[str] | None) -> str:
        name = m.lastgroup or ""
        index = int(name[1:])
        kind = _KIND[index]
        if kind in PII_CLASSES and kind not in pii:
            return m.group(0)
        groups = m.groupdict()
        keep = groups.get(f"keep{index}") or ""
        if m.group(0).startswith(MARKER_PREFIX, len(keep)):
            return m.group(0)  # already redacted: a marker is never a secret, nor counted twice
        value = groups.get(f"val{index}")
        if value is not None:
            if not _is_secret_value(value, groups.get(f"sep{index}"), keep):
                return m.group(0)
            if kind == "password" and keep and value[:1] in "\"'" and value[-1:] == value[:1]:
                # Keep the quotes: the text around stays well-formed (shell, JSON, code).
                if counts is not None:
                    counts[kind] += 1
                return keep + value[0] + marker(kind) + value[0]
        elif kind == "phone" and not 9 <= sum(c.isdigit() for c in m.group(0)) <= 15:
            return m.group(0)
        elif kind == "ip" and m.group(0).startswith(("127.", "0.", "255.")):
            return m.group(0)
        if counts is not None:
            counts[kind] += 1
        return keep + marker(kind)

    return substitute


def _redact_aws_secrets(text: str, counts: Counter[str] | None) -> str:
    def sub(m: re.Match[str]) -> str:
        token = m.group(0)
        mixed = any(c.isupper() for c in token) and any(c.islower() for c in token)
        if not mixed or not any(c.isdigit() or c in "/+" for c in token):
            return token
        if counts is not None:
            counts["aws_secret_key"] += 1
        return marker("aws_secret_key")

    return _AWS_SECRET.sub(sub, text)


def redact(text: str, counts: Counter[str] | None = None, pii: frozenset[str] = DEFAULT_PII) -> str:
    """`text` with secrets and the PII classes in `pii` replaced by markers; `counts` gains one per secret."""
    secret_possible = may_contain_secret(text)
    pii_possible = bool(pii) and (
        ("email" in pii and "@" in text)
        or ("phone" in pii and _PHONE_HINT.search(text) is not None)
        or ("ip" in pii and _IP_HINT.search(text) is not None)
    )
    if not (secret_possible or pii_possible):
        return text
    aws = secret_possible and _AWS_CONTEXT.search(text) is not None
    substitute = _substituter(pii)
    out = _COMBINED.sub(lambda m: substitute(m, counts), text)
    if aws:
        out = _redact_aws_secrets(out, counts)
    return out


def redact_json(value: Any, counts: Counter[str] | None = None, pii: frozenset[str] = DEFAULT_PII) -> Any:
    """A decoded JSON value with its secrets redacted; same shape, so it serialises to valid JSON."""
    if isinstance(value, str):
        return _redact_json_string(value, counts, pii)
    if isinstance(value, list):
        return [redact_json(v, counts, pii) for v in value]
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            if isinstance(item, str) and isinstance(key, str) and _CREDENTIAL_KEY.search(key):
                if (
                    item
                    and not _NOT_A_VALUE.match(item)
                    and not (" " in item.strip() and len(item.split()) >= 3)
                ):
                    if counts is not None:
                        counts["password"] += 1
                    out[key] = marker("password")
                    continue
            out[key] = redact_json(item, counts, pii)
        return out
    return value


_CREDENTIAL_KEY = re.compile(r"(?i)" + _KEY_SUFFIX + r"$")
_JSON_START = re.compile(r"\s*[\[{]")


def _redact_json_string(text: str, counts: Counter[str] | None, pii: frozenset[str]) -> str:
    if _JSON_START.match(text) and len(text) < 4_000_000:
        try:
            inner = json.loads(text)
        except (ValueError, RecursionError):
            inner = None
        if isinstance(inner, dict | list):
            local: Counter[str] = Counter()
            cleaned = redact_json(inner, local, pii)
            if not local:
                return text
            if counts is not None:
                counts.update(local)
            return json.dumps(cleaned, ensure_ascii=False)
    return redact(text, counts, pii)


def redact_text_or_json(
    text: str, counts: Counter[str] | None = None, pii: frozenset[str] = DEFAULT_PII
) -> str:
    """Redact TEXT, treating it as JSON (structure kept valid) when it is a JSON object or array."""
    return _redact_json_string(text, counts, pii)


_PEM_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_PEM_END = re.compile(r"-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")


class PemBlockFilter:
    """Redacts private key blocks that arrive one rendered line at a time (a `cat id_rsa` in a terminal).

    The BEGIN line becomes the marker (counted once); every line up to and including END is dropped to
    an empty marker-free line so that the line structure of the output survives.
    """

    def __init__(self) -> None:
        self.inside = False

    def line(self, text: str, counts: Counter[str] | None, pii: frozenset[str] = DEFAULT_PII) -> str:
        if self.inside:
            end = _PEM_END.search(text)
            if end is None:
                return ""
            self.inside = False
            return redact(text[end.end() :], counts, pii)
        begin = _PEM_BEGIN.search(text)
        if begin is not None and _PEM_END.search(text, begin.end()) is None:
            self.inside = True
            if counts is not None:
                counts["private_key"] += 1
            return redact(text[: begin.start()], counts, pii) + marker("private_key")
        return redact(text, counts, pii)

    def peek(self, text: str, pii: frozenset[str] = DEFAULT_PII) -> str:
        """TEXT as it would be redacted, without counting or changing state (a line still being drawn)."""
        if self.inside:
            return "" if _PEM_END.search(text) is None else redact(text, None, pii)
        begin = _PEM_BEGIN.search(text)
        if begin is not None and _PEM_END.search(text, begin.end()) is None:
            return redact(text[: begin.start()], None, pii) + marker("private_key")
        return redact(text, None, pii)
