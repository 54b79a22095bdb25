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

import base64
import functools
import ipaddress
import json
import re
import threading
from collections import Counter, OrderedDict
from typing import Any

import re2

from worldline.redaction.checksums import (
    card_number_valid,
    iban_valid,
    major_card_prefix,
    phone_number_possible,
    shannon_entropy,
)

# In the order they are redacted: card numbers and IBANs before phone numbers, whose 00 prefix and
# digit groups an IBAN's tail can look like.
PII_CLASSES = ("email", "card", "iban", "phone", "ip")
# Card numbers and IBANs are on by default: a checksum (Luhn, ISO 7064 mod 97) tells them from other
# numbers, and a payment card in a training pool is never wanted. IP addresses are opt-in.
DEFAULT_PII: frozenset[str] = frozenset({"email", "phone", "card", "iban"})


def parse_pii_classes(text: str) -> tuple[str, ...]:
    """The PII classes named in a comma-separated option value ('none' for none); ValueError on others."""
    classes = tuple(c.strip() for c in text.split(",") if c.strip() and c.strip() != "none")
    unknown = sorted(set(classes) - set(PII_CLASSES))
    if unknown:
        raise ValueError(f"unknown PII class(es) {', '.join(unknown)}; choose from {', '.join(PII_CLASSES)}")
    return classes


MARKER_PREFIX = "[REDACTED:"

# Credential words that end a key or variable name (`DB_PASSWORD`, `aws_secret_access_key`,
# `SessionToken`, `client_secret`). A name must END with one: `tokenizer`, `password_hint` and
# `secret_name` are not credentials.
_KEY_SUFFIX = (
    r"(?:password|passwd|passphrase|pwd|(?<![A-Za-z])pass|secret|token|api[-_]?key|apikey|access[-_]?key"
    r"|secret[-_]?key|private[-_]?key(?:[-_]?id)?|signing[-_]?key|encryption[-_]?key|master[-_]?key"
    r"|account[-_]?key|auth[-_]?key|shared[-_]?access[-_]?key|key[-_]?data|credentials?"
    r"|secret[-_]?access[-_]?key|session[-_]?token|client[-_]?secret"
    # The same word in other languages, as config keys and form fields name it.
    r"|(?<![A-Za-z])passe|mot[-_ ]?de[-_ ]?passe|passwort|kennwort|contrase(?:ñ|n)a|senha|wachtwoord|l(?:ö|o)senord|has(?:ł|l)o|parola|salasana"
    r"|adgangskode|heslo|jelsz(?:ó|o)|(?:ş|s)ifre|пароль|密码|密碼|口令|パスワード|비밀번호)"
)

# Values that are not secrets wherever they appear: markers, placeholders, variable references.
_NOT_A_VALUE = re.compile(
    r"^(?:\[REDACTED:|\*+$|x{3,}$|<[^>]*>$|\$|%\(|\{\{|\{[A-Za-z_]\w*\}$|null$|none$|nil$|true$|false$"
    r"|undefined$|\d{1,9}$|\.\.\.$|\?+$"
    # Documentation placeholders: printf / format slots, a value cut off after a vendor prefix
    # (`sk-...`), and names that describe what to put there (YOUR_API_KEY, token_goes_here, REPLACE_ME).
    r"|%[sdr]$|[A-Za-z]{0,6}[-_]?(?:\.\.\.|\u2026)$|your[-_.]?[A-Za-z_\-]*$|[A-Za-z_\-]*[-_](?:here|goes[-_]here)$"
    r"|replace[-_]?(?:me|with\w*)$|placeholder$|redacted$|\[[A-Za-z _\-]{1,40}\]$)",
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

# (kind, pattern). The secret is the group `val` when a pattern has one (the text around it, such as
# `--password=` or a JSON key, stays), else the whole match. A group `sep` marks an assignment operator
# and `kw` a credential word that ends a key name; the value filter reads both. Every pattern starts at
# a literal or a rare character, so the combined pattern stays fast on long text; earlier entries win
# where patterns overlap, so the specific kinds come first.
_PATTERNS: list[tuple[str, str]] = [
    (
        # Whole blocks, LF or CRLF. A block cut off before its END line runs to the end of the text, or
        # to the closing quote of the JSON string it sits in (a key body never holds a quote).
        "private_key",
        r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----[^\"]*?"
        r"(?:-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----|(?=\")|\Z)",
    ),
    ("private_key", r"PuTTY-User-Key-File-\d: [^\"]*?(?:Private-MAC: [0-9a-f]+|(?=\")|\Z)"),
    # ssh.com / SECSH keys have their own armour (four dashes and spaces).
    (
        "private_key",
        r"---- BEGIN SSH2 (?:ENCRYPTED )?PRIVATE KEY ----[^\"]*?(?:---- END SSH2 [A-Z ]{0,20}----|(?=\")|\Z)",
    ),
    # A PEM block in base64 (kubeconfig client-key-data, Kubernetes secrets): checked to hold a
    # private key when decoded (a certificate stays).
    ("private_key", r"LS0tLS1CRUdJTi[A-Za-z0-9+/]{20,}={0,2}"),
    ("aws_access_key", r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ABIA|ACCA|ANPA|ANVA|APKA|A3T[A-Z0-9])[0-9A-Z]{16}\b"),
    ("aws_session_token", r"\b(?:FwoGZXIvYXdz|FQoGZXIvYXdz|IQoJb3JpZ2lu|AgoJb3JpZ2lu)[A-Za-z0-9/+=]{40,}"),
    ("github_token", r"\b(?:gh[pousr]_[A-Za-z0-9_]{30,255}|github_pat_[A-Za-z0-9_]{22,255})"),
    (
        # Vendor formats with a fixed prefix (the prefixes come from the vendors' documentation and
        # the rules of detect-secrets and gitleaks).
        "api_key",
        r"\b(?:sk-(?:ant-|proj-|live-|test-|svcacct-|or-)?[A-Za-z0-9_\-]{20,}|AIza[0-9A-Za-z_\-]{35}"
        r"|xox[abposre]-[A-Za-z0-9\-]{10,}|xapp-[A-Za-z0-9\-]{20,}|xoxe\.xox[bp]-[A-Za-z0-9\-]{20,}"
        r"|(?:glpat|gldt|glrt|glptt|glsoat|gloas|glcbt|glimt|glagent|glft|glrtr|glwt)-[A-Za-z0-9_\-]{20,}"
        r"|hf_[A-Za-z0-9]{30,}|api_org_[A-Za-z0-9]{30,}"
        r"|[rsp]k_(?:live|test)_[0-9A-Za-z]{16,}|whsec_[A-Za-z0-9]{24,}|HRKU-[A-Za-z0-9_\-]{20,}"
        r"|npm_[A-Za-z0-9]{36}|pypi-AgE[A-Za-z0-9_\-]{50,}|dckr_(?:pat|oat)_[A-Za-z0-9_\-]{20,}"
        r"|SG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}|sq0(?:csp|atp|idp)-[0-9A-Za-z_\-]{22,}"
        r"|EAAA[A-Za-z0-9_\-]{60,}|do[opr]_v1_[a-f0-9]{64}|shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}"
        r"|key-[0-9a-f]{32}|dapi[0-9a-f]{32}|AGE-SECRET-KEY-1[0-9A-Z]{58}|PMAK-[0-9a-f]{24}-[0-9a-f]{34}"
        r"|hv[sbr]\.[A-Za-z0-9_\-]{24,}|dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,}"
        r"|(?:glsa|glc)_[A-Za-z0-9_\-]{30,}|ATATT3[A-Za-z0-9_\-=]{50,}|NRAK-[A-Z0-9]{27}"
        r"|sntry[us]_[A-Za-z0-9_\-=]{30,}|lin_(?:api|oauth)_[A-Za-z0-9]{30,}|figd_[A-Za-z0-9_\-]{30,}"
        r"|pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_\-.]{30,}|sbp_[a-f0-9]{40}|r8_[A-Za-z0-9]{30,}"
        r"|gsk_[A-Za-z0-9]{40,}|pplx-[A-Za-z0-9]{40,}|tskey-[A-Za-z0-9\-]{20,}|xkeysib-[a-f0-9\-]{60,}"
        r"|sk\.eyJ[A-Za-z0-9_\-.]{20,}|ntn_[A-Za-z0-9]{30,}|glc_[A-Za-z0-9+/=]{30,}"
        r"|GOCSPX-[A-Za-z0-9_\-]{24,}|pul-[a-f0-9]{40})",
    ),
    (
        # Azure storage and Service Bus keys in connection strings, and the signature of a SAS token.
        "api_key",
        r"(?:AccountKey|SharedAccessKey|SharedSecret|(?<=[?&;])sig)=(?P<val>[A-Za-z0-9+/%]{20,}(?:={1,2}|%3[Dd]){0,2})",
    ),
    ("api_key", r"-us\d{1,2}\b"),  # Mailchimp: 32 hex digits then -usNN (the hex part is checked below)
    (
        "webhook",
        r"https://(?:hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/]{20,}"
        r"|(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/\d+/[A-Za-z0-9_\-]{20,}"
        r"|[a-z0-9\-]+\.webhook\.office\.com/[^\s\"'<>]{20,}|chat\.googleapis\.com/v1/spaces/[^\s\"'<>]{20,})",
    ),
    # A JWT (header and claims are JSON, so both start with eyJ); an unsigned one has no signature.
    ("jwt", r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.(?:[A-Za-z0-9_\-]{8,})?"),
    (
        "bearer_token",
        r"(?i:authorization[\"']?\s{0,3}[:=]\s{0,3}[\"']?bearer\s{1,4})(?P<val>[A-Za-z0-9._~+/=\-]{8,})",
    ),
    (
        "basic_auth",
        r"(?i:authorization[\"']?\s{0,3}[:=]\s{0,3}[\"']?(?:basic|token|digest)\s{1,4})"
        r"(?P<val>[A-Za-z0-9._~+/=\-]{6,})",
    ),
    (
        "api_key",
        r"(?i:\bx-(?:api-key|auth-token|access-token|api-token)[\"']?\s{0,3}[:=]\s{0,3}[\"']?)"
        r"(?P<val>[A-Za-z0-9._~+/=\-]{8,})",
    ),
    # user:password@ in URLs; the scheme and the user stay.
    # (`redis://:pw@host` has no user.)
    ("url_credentials", r"://[^\s:/@'\"\\]{0,128}:(?P<val>[^\s@/'\"\\]{1,256})(?=@)"),
    (
        # curl -u user:pw / --user user:pw: the user stays, the password goes.
        "password",
        r"\b(?:curl|wget)\b[^\n|;&]{0,300}?(?:\s-u\s{0,4}|\s--user[= ]\s{0,4})['\"]?[^\s:'\"\\]{1,128}:"
        r"(?P<val>[^\s'\"\\]{1,256})",
    ),
    (
        # docker / podman / helm login -p SECRET (the short flag names the password there).
        "password",
        r"\b(?:docker|podman|helm|buildah|skopeo|oras|az|cf)\s+(?:registry\s+|acr\s+)?login\b[^\n|;&]{0,200}?\s-p"
        r"(?:\s{1,4}|=)(?P<val>\"[^\"\n\\]{1,256}\"|'[^'\n]{1,256}'|[^\s\"'\\]{1,256})",
    ),
    (
        # Credentials handed to programs on the command line.
        "password",
        # (`--db-password X` too: words before the credential word are part of the flag's name.)
        r"(?:(?<![\w-])--?(?:[A-Za-z0-9]{1,20}[-_]){0,3}(?i:password|passwd|pass|pwd|passphrase|token|secret"
        r"|api[-_]?key|access[-_]?token|auth[-_]?token|client[-_]?secret|secret[-_]?key)(?:=|\s{1,4})"
        r"|\bsshpass\s{1,4}-p\s{0,4}"
        r"|\b(?:mysql(?:dump|admin|sh|check|import|slap)?|mariadb(?:-dump|-admin)?)\b[^\n|;&]{0,200}?\s-p(?=[^\s-])"
        r"|\b(?:mongo(?:sh|dump|restore|import|export|stat|top)?)\b[^\n|;&]{0,200}?\s-p\s{0,4}"
        r"|\b(?:7z|7za|7zz|rar|unrar)\b[^\n|;&]{0,200}?\s-p(?=[^\s-])"
        r"|\b(?:zip|unzip|sqlcmd|bcp|mosquitto_(?:pub|sub))\b[^\n|;&]{0,200}?\s-P\s{0,4}"
        r"|\bldap(?:search|add|modify|delete|passwd|whoami)\b[^\n|;&]{0,200}?\s-w\s{1,4}"
        r"|\bsmbclient\b[^\n|;&]{0,200}?\s-U\s{0,4}['\"]?[^\s%'\"]{1,64}%"
        r"|\bhtpasswd\b[^\n|;&]{0,80}?\s-[a-zA-Z]*b[a-zA-Z]*\s+(?:-\S+\s+)*\S+\s+\S+\s+)"
        r"(?P<val>\"[^\"\n\\]{1,256}\"|'[^'\n]{1,256}'|[^\s\"'\\][^\s\"'\\]{0,255})",
    ),
    (
        # Passwords as arguments: .netrc `password X`, redis-cli -a X, openssl -pass pass:X.
        "password",
        r"(?:\bmachine\s+\S+\s+(?:login\s+\S+\s+)?password\s+|\bredis-cli\b[^\n|;&]{0,200}?\s-a\s{1,4}"
        r"|\s-pass(?:in|out)?\s{1,4}pass:)(?P<val>[^\s\"'\\]{1,256})",
    ),
    ("api_key", r"\bya29\.[0-9A-Za-z_\-]{20,}"),  # Google OAuth access tokens
    (
        # A password piped into a program that reads it from stdin: echo pw | sudo -S, ... --password-stdin.
        "password",
        r"\b(?:echo(?:\s+-[ne]{1,2})?|printf(?:\s+['\"]%s\\n['\"])?)\s+(?P<val>\"[^\"\n\\]{1,256}\"|'[^'\n]{1,256}'|[^\s\"'|;&]{1,256})"
        r"\s*\|\s*(?=(?:sudo\b[^\n|;&]{0,40}?\s-S\b|[^\n|;&]{0,200}?--password-stdin\b|chpasswd\b|passwd\s+--stdin\b))",
    ),
    (
        # XML: <password>X</password>, <db.secret>X</db.secret>; the tags stay.
        "password",
        r"<[\w.:\-]{0,40}?(?P<kw>(?i:" + _KEY_SUFFIX + r"))>(?P<val>[^<>\s][^<>]{0,511})</",
    ),
    (
        # XML attributes: <add key="DbPassword" value="X"/>, <property name="secret" value="X"/>.
        "password",
        r"(?i:key|name)=\"[\w.:\-]{0,40}?(?P<kw>(?i:"
        + _KEY_SUFFIX
        + r"))\"\s{1,4}(?i:value)=\"(?P<val>[^\"<>]{1,512})\"",
    ),
    (
        # <entry key="password">X</entry>
        "password",
        r"(?i:key|name)=\"[\w.:\-]{0,40}?(?P<kw>(?i:" + _KEY_SUFFIX + r"))\">(?P<val>[^<>\s][^<>]{0,511})</",
    ),
    (
        # Docker's config.json: {"auths": {"registry": {"auth": "base64(user:password)"}}}.
        "password",
        r"\"auth\\{0,3}\"\s{0,3}:\s{0,3}\\{0,3}\"(?P<val>[A-Za-z0-9+/]{8,}={0,2})(?=\\{0,3}\")",
    ),
    (
        # "password": "..." in JSON or a Python dict, also inside a JSON string (\"password\": \"...\");
        # the quotes and the key stay, so JSON stays valid.
        "password",
        r"(?P<kw>(?i:" + _KEY_SUFFIX + r"))\\{0,3}[\"']\s{0,3}[:=]>?\s{0,3}\\{0,3}[\"']"
        r"(?P<val>(?:[^\"'\\\s]|\\u[0-9a-fA-F]{4}|\\/){3,4096})(?=\\{0,3}[\"'])",
    ),
    (
        # Assignments in shells, env files, config files and code: DB_PASSWORD=..., password: ..., token = "...".
        # The value is on the key's line: what follows `Password:` on the next line is what a program
        # printed after its prompt.
        "password",
        r"(?P<kw>(?i:" + _KEY_SUFFIX + r"))(?P<sep>\s{0,3}(?::=|:(?![:=])|(?<![=!<>])=(?![=>~]))[ \t]{0,3})"
        r"(?P<val>\"[^\"\n\\]{1,512}\"|'[^'\n\\]{1,512}'|[^\s\"'\\,;)}\]&][^\s\"'\\,;)}\]&]{0,511})",
    ),
]

_IPV4 = r"(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"

# Personal data, each class on its own so a run switches it on or off and text without its hint skips it.
_PII_PATTERNS: dict[str, str] = {
    # Anchored at "@"; the local part is found by scanning back (a regex that starts at every letter is
    # slow). An scp-style remote (git@host:org/repo) is not an email.
    "email": r"@[A-Za-z0-9\-]{1,63}(?:\.[A-Za-z0-9\-]{1,63})*\.[A-Za-z]{2,24}\b(?!:(?:[\w~/.\-]|\[REDACTED:))(?!\.\w)",
    # International (+CC or 00CC, then groups as each country writes them: checked against the
    # lengths the country code allows) and North American national forms.
    "phone": r"(?<![\w+./:#=-])(?:(?P<intl>(?:\+|00(?=[1-9]))\d{1,3}(?:[ .\-]?\(\d{1,5}\))?[ .\-]?\d{1,8}(?:[ .\-]\d{1,8}){0,5})"
    # A number may end a sentence or a clause: a "." or ":" after it counts only when a word character
    # follows (a version, a file name, a port), as for emails.
    r"|\(\d{3}\)\s?\d{3}[\-.]\d{4}|\d{3}[\-.]\d{3}[\-.]\d{4})(?![\w/-]|[.:]\w)",
    # Payment card numbers: 12-19 digits, in groups of 4 (Amex 4-6-5) or none; Luhn-checked.
    "card": r"(?<![\w.+/-])\d{4}(?:(?P<sep>[ \-])\d{4}(?P=sep)\d{4}(?P=sep)\d{1,7}(?:(?P=sep)\d{1,3})?|(?P<amex>[ \-])\d{6}(?P=amex)\d{4,5}"
    r"|\d{8,15})(?![\w+/-]|[.:]\w)",
    # IBANs, compact or in groups of four; checked with mod 97 and the country's format.
    "iban": r"(?<![\w-])[A-Z]{2}\d{2}(?:[A-Z0-9]{11,30}|(?: [A-Z0-9]{4}){2,7}(?: [A-Z0-9]{1,3})?)(?![\w-])",
    # IPv4, then IPv6 in any textual form (RFC 4291/5952): full, compressed with "::", an IPv4 tail
    # (::ffff:192.0.2.1), a zone id (fe80::1%eth0). The IPv6 branch finds candidates, which
    # _is_ipv6_address then checks, so times (12:30:45), MACs, C++ `ns::name` and slices stay.
    "ip": r"(?<![\w.:])" + _IPV4 + r"(?![\w.]|\.\d)"
    r"|(?<![\w.:%])(?<![\w)\]]\[)(?P<v6>(?:[0-9a-fA-F]{1,4}|(?=::))(?::[0-9a-fA-F]{0,4}){2,7}"
    r"(?:(?<=:)" + _IPV4 + r")?)(?:%(?:25)?[\w.\-]{1,32})?(?!\w|:[\w:]|\.\d)",
}


def _numbered(index: int, pattern: str) -> str:
    for group in ("val", "sep", "kw"):
        pattern = pattern.replace(f"(?P<{group}>", f"(?P<{group}{index}>")
    return pattern


_KIND = [kind for kind, _ in _PATTERNS]
_COMBINED = re.compile("|".join(f"(?P<k{i}>{_numbered(i, pat)})" for i, (_, pat) in enumerate(_PATTERNS)))
_PII = {kind: re.compile(pattern) for kind, pattern in _PII_PATTERNS.items()}
_CARD_CONTEXT = re.compile(
    r"(?i)card|\bcc|credit|debit|\bpan\b|visa|master|maestro|amex|payment|karte|carte|tarjeta|cart(?:ã|a)o|karta|卡|カード"
)
_EMAIL_LOCAL = re.compile(r"[A-Za-z0-9._%+\-]{1,64}$")
_NAME_BEFORE = re.compile(r"[A-Za-z0-9_.\-]{0,60}$")
_MAILCHIMP_HEX = re.compile(r"(?<![0-9a-z])[0-9a-f]{32}$")

# AWS secret access keys have no prefix: 40 characters of base64 with mixed case. They are redacted when
# an access key id or the words "aws" + "secret" are near, so git SHAs (lower-case hex) and unrelated
# base64 stay.
_AWS_SECRET = re.compile(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")
_AWS_CONTEXT = re.compile(r"(?i)(?:AKIA|ASIA)[0-9A-Z]{16}|aws.{0,40}secret|secret.{0,20}access")

# Secrets whose formats start at a digit or letter class rather than a literal, each found by its own
# pattern and checked by a validator; one RE2 scan (_STRUCTURED_GATE) says whether any can be there.
_GENERIC_TOKEN = re.compile(
    r"(?<![\w.+/\-])(?P<prefix>[A-Za-z][A-Za-z0-9]{1,11}(?:[_.\-][A-Za-z0-9]{1,11}){0,2}[_.\-])"
    r"(?P<body>[A-Za-z0-9]{20,200}(?:[_\-][A-Za-z0-9]{1,200}){0,3})(?![\w.+/=\-])"
)
# Prefixes of content hashes and encodings: what follows them is a digest or data, not a credential.
_NOT_TOKEN_PREFIXES = frozenset(
    {"sha1", "sha224", "sha256", "sha384", "sha512", "md5", "blake2b", "base64", "b64", "data", "hash", "id"}
)
_STRUCTURED: list[tuple[str, re.Pattern[str]]] = [
    ("api_key", _GENERIC_TOKEN),
    # .pgpass lines: host:port:database:user:password.
    (
        "password",
        re.compile(
            r"(?m)(?:^|(?<=[\s\"'=]))(?P<host>[A-Za-z0-9.\-_*]{1,253}|\[[0-9A-Fa-f:]{2,45}\]):(?:\d{1,5}|\*)"
            r":[^:\s\"']{1,128}:[^:\s\"']{1,128}:(?P<val>(?:[^\s:\\\"']|\\.){1,256})(?=[\s\"']|$)"
        ),
    ),
    ("api_key", re.compile(r"(?<![\w:])\d{8,10}:AA[A-Za-z0-9_\-]{33}(?![\w\-])")),  # Telegram bot tokens
    ("api_key", re.compile(r"(?<!\w)SK[0-9a-fA-F]{32}(?!\w)")),  # Twilio API keys
    (
        "api_key",
        re.compile(r"(?<![\w-])[0-9a-f]{32}-[0-9a-f]{8}-[0-9a-f]{8}(?![\w-])"),
    ),  # Mailgun private keys
    (
        "api_key",
        re.compile(r"(?<![\w~.\-])[A-Za-z0-9_~.\-]{3}\dQ~[A-Za-z0-9_~.\-]{31,34}(?![\w~.\-])"),
    ),  # Entra ID
    (
        # Discord bot tokens: base64 of the bot's numeric id, a timestamp, an HMAC.
        "api_key",
        re.compile(
            r"(?<![\w.\-])(?P<id>[MNO][A-Za-z0-9_\-]{23,27})\.[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27,40}(?![\w.\-])"
        ),
    ),
]
# Prose: "the password is X", "API key was X", "das Passwort ist X".
_PROSE_CREDENTIAL = re.compile(
    r"(?i:\b(?:password|passwd|passphrase|passcode|pass\s?word|api[ _-]?key|access[ _-]?key|secret(?:[ _-]?key)?"
    r"|token|passwort|kennwort|mot de passe|contraseña|senha|пароль)\b)\s+(?i:is|was|ist|war|est|es|é|:)\s*:?\s+"
    r"[\"'`]?(?P<val>[^\s\"'`,;]{6,128})"
)
_STRUCTURED.append(("password", _PROSE_CREDENTIAL))
_STRUCTURED_GATE = re2.compile(
    r"(?i:(?:word|wort|wd|phrase|code|key|secret|token|passe|seña|senha|роль)\s+(?:is|was|ist|war|est|es|é)[\s:])|"
    r"[_.\-][A-Za-z0-9]{20}|:(?:\d{1,5}|\*):[^:\s]+:[^:\s]+:|:AA|SK[0-9a-fA-F]{32}|\dQ~|[0-9a-f]{32}-[0-9a-f]{8}-"
    r"|[MNO][A-Za-z0-9_\-]{23,27}\.[A-Za-z0-9_\-]{6}\."
)


def _structured_valid(index: int, m: re.Match[str]) -> bool:
    if index == 0:
        prefix, body = m.group("prefix"), m.group("body")
        if prefix[:-1].lower() in _NOT_TOKEN_PREFIXES:
            return False
        core = body.replace("_", "").replace("-", "")
        upper = sum(c.isupper() for c in core)
        lower = sum(c.islower() for c in core)
        digits = sum(c.isdigit() for c in core)
        return upper >= 2 and lower >= 2 and digits >= 2 and shannon_entropy(core) >= 3.6
    if index == 1:
        host = m.group("host")
        return host == "*" or any(c.isalpha() and c.lower() not in "abcdef" for c in host) or "." in host
    if index == 7:
        if m.start() > 0 and m.string[m.start() - 1] in "/.\\":
            return False  # `/etc/passwd is refused`: a path names a file, not a credential
        value = m.group("val").rstrip(".!?):")
        has_letter = any(c.isalpha() for c in value)
        # A word with a hyphen or an apostrophe (`re-issued`, `user's`) is prose; a secret has a digit
        # or another symbol.
        has_other = any(c.isdigit() or not (c.isalnum() or c in "-'\u2019") for c in value)
        return has_letter and has_other and not value.startswith(MARKER_PREFIX) and len(value) >= 6
    if index == 6:
        try:
            user_id = base64.b64decode(m.group("id") + "=" * (-len(m.group("id")) % 4), altchars=b"-_")
        except ValueError:
            return False
        return user_id.isdigit()
    return True


def _structured_spans(text: str) -> list[Replacement]:
    spans: list[Replacement] = []
    for index, (kind, pattern) in enumerate(_STRUCTURED):
        for m in pattern.finditer(text):
            if not _structured_valid(index, m):
                continue
            start, end = m.span("val") if "val" in pattern.groupindex else m.span()
            if text.startswith(MARKER_PREFIX, start) or MARKER_PREFIX in text[start:end]:
                continue
            spans.append((start, end, kind))
    spans.sort()
    return spans


def _b64_private_key(text: str) -> bool:
    """Whether TEXT, base64 that starts with `-----BEGIN`, encodes a private key (not a certificate)."""
    head = text[:96]
    try:
        decoded = base64.b64decode(head[: len(head) - len(head) % 4])
    except ValueError:
        return False
    return (
        b"PRIVATE KEY" in decoded
        or b"PRIVATE KEY" in base64.b64decode(text[: len(text) - len(text) % 4] or "")[:80]
    )


# Cheap pre-check: text that cannot match any secret pattern skips the regex. Exact (a necessary
# condition): no pattern matches fewer than _SHORTEST_MATCH characters, and every pattern needs one of
# the literals of _NEEDLE in the lower-cased text (a literal matched case-sensitively appears there in
# lower case too), or "SG." (SendGrid; "sg." alone is too common), or "://" and "@" (credentials in
# URLs). One regex over the lower-cased text is cheaper than a case-sensitive and a folded one. Non-ASCII
# text skips the check: case-insensitive matching folds characters such as U+212A (Kelvin) into "k".
# PII classes have their own hints.
_SHORTEST_MATCH = 6
_NEEDLE = re.compile(
    r"-----begin|putty-user-key|a(?:kia|sia|gpa|ida|roa|bia|cca|npa|nva|pka|3t|iza|ccountkey=)|fwogzxivyxdz"
    r"|fqogzxivyxdz|iqojb3jpz2lu|agojb3jpz2lu|ls0tls1crudjti|gh[pousr]_|github_pat_|sk-|k_(?:live|test)_|xox"
    r"|xapp-|gl(?:pat|dt|rt|ptt|soat|oas|cbt|imt|agent|ft|rtr|wt)-|hf_|api_org_|whsec_|hrku-|npm_|pypi-"
    r"|dckr_|sq0|eaaa|do[opr]_v1_|shp|dapi|pmak-|hv[sbr]\.|dp\.|gl(?:sa|c)_|atatt3|nrak-|sntry|lin_|figd_"
    r"|pscale_|sbp_|r8_|gsk_|pplx-|ntn_|gocspx-|pul-|sig=|discord|webhook\.office|chat\.googleapis"
    r"|-us\d|hooks\.slack|eyj|curl|wget|mysql|mariadb|mongo|7z|\brar\b|unrar|\bzip\b|unzip|sqlcmd|\bbcp\b"
    r"|mosquitto|ldap|smbclient|login|ya29\.|redis-cli|\"auth|sudo"
    r"|authorization|x-a(?:pi|uth|ccess)|pass|pwd|token|secret|key|credential"
    r"|kennwort|contrasen|senha|wachtwoord|losenord|haslo|parola|salasana|adgangskode|heslo|jelszo|sifre"
)
# The same needles as a DFA (RE2): one pass over the text whatever the number of needles, about ten
# times faster than `re`'s alternation over a JSONL record, but slower per call on a short line.
_NEEDLE_DFA = re2.compile(_NEEDLE.pattern)
_NEEDLE_DFA_FROM = 512
_PII_HINT: dict[str, tuple[re.Pattern[str], ...]] = {
    # Every address has a dot after the first label of its domain: `dev@box:~$`, the prompt on
    # every line of a terminal session, has none.
    "email": (re.compile(r"@[A-Za-z0-9\-]+\."),),
    # Several patterns, each starting at a literal: the regex engine scans for a literal prefix quickly,
    # while a pattern (or an alternation) starting at a digit class is tried at every digit.
    "phone": (
        re.compile(r"\+\d"),
        re.compile(r"\(\d{3}\)"),
        re.compile(r"-\d{3}[\-.]\d{4}"),
        re.compile(r"\.\d{3}[\-.]\d{4}"),
    ),
    "ip": (re.compile(r"\.\d{1,3}\.\d"), re.compile(r":[0-9a-fA-F]{0,4}:")),
}
# Hints of the classes whose patterns start at a digit or letter class, each starting where the
# pattern's lookbehind lets a match start ({E}: the start or a character the lookbehind allows), so
# the digits of a float or a hash do not count. In JSON text an escape (\n, \t) stands for the white
# space the decoded string has there, so there it counts as an edge too.
_EDGE_HINTS = {
    "card": (r"[^\w.+/\-]", r"{E}\d{4}[ \-]?\d{4}[ \-]?\d{4}|{E}\d{4}[ \-]\d{6}[ \-]\d{4}"),
    "iban": (r"[^\w\-]", r"{E}[A-Z]{2}\d{2} ?[A-Z0-9]{4} ?[A-Z0-9]{4}"),
    # Phone numbers with a 00 international prefix (the other phone hints need "+" or a separator).
    "phone": (r"[^\w+./:#=\-]", r"{E}00[1-9]\d{0,2}[ .\-(]?\d"),
}


def _edge_hint(kind: str, json_text: bool) -> str:
    allowed, template = _EDGE_HINTS[kind]
    edge = f"(?:^|{allowed}|\\\\[nrtbf])" if json_text else f"(?:^|{allowed})"
    return template.replace("{E}", edge)


# One RE2 scan each: a digit class is tried at every digit by `re`, and logs are full of digits.
_DIGIT_HINTS = {kind: re2.compile(_edge_hint(kind, False)) for kind in _EDGE_HINTS}
_SLOW_GATE = re2.compile(
    "|".join([_STRUCTURED_GATE.pattern, *(_edge_hint(kind, False) for kind in _EDGE_HINTS)])
)


# Every gate above as one RE2 scan over the bytes of an ASCII text: the needles (case-insensitive, as
# may_contain_secret searches them in the lower-cased text), SendGrid's prefix, and the slow gate. A
# text it finds nothing in (most lines of a log) skips the secret patterns and the slow PII classes
# after one call, instead of one per gate.
_ANY_GATE = re2.compile(f"(?i:{_NEEDLE.pattern})|SG\\.|{_SLOW_GATE.pattern}".encode())


def _nothing_but_pii_hints(text: str) -> bool:
    """True only when no secret pattern and no slow PII class can match TEXT (one RE2 scan)."""
    if not text.isascii() or ("://" in text and "@" in text):
        return False
    return _ANY_GATE.search(text.encode("ascii")) is None


def may_contain_secret(text: str) -> bool:
    """False only when no secret pattern can match TEXT; a fast filter in front of the regex."""
    if len(text) < _SHORTEST_MATCH:
        return False
    if not text.isascii() or "SG." in text or ("://" in text and "@" in text):
        return True
    needle = _NEEDLE_DFA if len(text) >= _NEEDLE_DFA_FROM else _NEEDLE
    return needle.search(text.lower()) is not None


def json_text_is_clean(source: bytes, pii: frozenset[str] = DEFAULT_PII) -> bool:
    """True only when no string decoded from the JSON text SOURCE can need redaction.

    Decoding JSON only removes quotes and backslash escapes; with no `\\u` or `\\/` escape in the
    text, every decoded string's characters appear literally in it, so a text the pre-checks rule out
    holds no secret in any of its strings, keys or nested JSON.
    """
    if not source.isascii():
        return False
    if len(source) < _SHORTEST_MATCH:
        text = source.decode("ascii")  # too short for a secret; a PII hint may still be there
        return (
            b"\\u" not in source
            and b"\\/" not in source
            and not any(kind in pii and _pii_possible(text, kind) for kind in PII_CLASSES)
        )
    if b"://" in source and b"@" in source:
        return False
    return _json_prechecks(pii).search(source) is None


@functools.lru_cache(maxsize=16)
def _json_prechecks(pii: frozenset[str]) -> Any:
    """Every pre-check json_text_is_clean makes, as one RE2 pattern over the raw bytes: one pass
    instead of one per check (log records are kilobytes of JSON): the escapes, `SG.`, the secret
    needles (case-insensitive: on ASCII text, that is the needles over the lower-cased text, as
    may_contain_secret searches) and the hints of the PII classes in PII."""
    parts = [r"\\u", r"\\/", r"SG\.", f"(?i:{_NEEDLE.pattern})"]
    parts += [hint.pattern for kind in PII_CLASSES if kind in pii for hint in _PII_HINT.get(kind, ())]
    parts += [_edge_hint(kind, True) for kind in _EDGE_HINTS if kind in pii]
    parts += [_STRUCTURED_GATE.pattern]
    return re2.compile("|".join(parts).encode("utf-8"))


def _pii_possible(text: str, kind: str, slow: bool = True) -> bool:
    """False only when the PII pattern of KIND cannot match TEXT (substring tests first: they are cheap).

    SLOW=False says the slow gate found nothing in TEXT, so the RE2 hints need not run."""
    if kind == "email":
        return "@" in text and _PII_HINT["email"][0].search(text) is not None
    plus, paren, dash, dot = _PII_HINT["phone"]
    if kind == "phone":
        return (
            ("+" in text and plus.search(text) is not None)
            or ("(" in text and paren.search(text) is not None)
            or ("-" in text and dash.search(text) is not None)
            or ("." in text and dot.search(text) is not None)
            or (slow and "00" in text and _DIGIT_HINTS["phone"].search(text) is not None)
        )
    if kind in _DIGIT_HINTS:
        return slow and _DIGIT_HINTS[kind].search(text) is not None
    ipv4, ipv6 = _PII_HINT["ip"]
    return ("." in text and ipv4.search(text) is not None) or (":" in text and ipv6.search(text) is not None)


def marker(kind: str) -> str:
    return f"{MARKER_PREFIX}{kind}]"


def _is_secret_value(value: str, sep: str | None, name: str) -> bool:
    """Whether the value of a credential-named key or flag is a secret rather than code or a placeholder.

    `sep` is the assignment operator with its spaces (None for a flag or a quoted key), `name` the key.
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
    op = sep.strip()
    if inner.lower() in _TYPE_WORDS or inner.lower() == name.lower():
        return False  # password: str, password=password: an annotation, a variable passed on
    if _BOOTSTRAP_TOKEN.match(inner) and any(c.isdigit() for c in inner):
        return True  # a Kubernetes bootstrap token (abcdef.0123456789abcdef), not an attribute
    if _EXPRESSION.search(inner):
        return False  # get_token(), settings.SECRET_KEY, os.environ["X"], tokens[0]
    if _PLAIN_WORD.match(inner) and op != ":" and not name.isupper():
        return False  # token = tok, f(secret=value): a variable in code
    if op == "=" and sep != "=" and _PLAIN_WORD.match(inner):
        return False
    return True


_BOOTSTRAP_TOKEN = re.compile(r"^[a-z0-9]{6}\.[a-z0-9]{16}$")
_EXPRESSION = re.compile(r"[(\[]|^[A-Za-z_]\w*\.[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*$")
_PLAIN_WORD = re.compile(r"^[A-Za-z_]+$")


def _assignment_in_context(text: str, match_start: int, value_start: int) -> bool:
    """Whether `name: value` / `name=value` at VALUE_START is a credential rather than a message.

    Refused: a name that is the last component of a path (`/etc/passwd: Permission denied`, grep's
    `/etc/passwd:1:root:x:0:0`), a placeholder in angle brackets (`password: <your password here>`),
    a template slot
    (`token: {token}`, `{{ .Values.password }}`, `[your api key]`), and a value that starts a message (`_reads_as_message`): a program's diagnostic
    (`passwd: password updated successfully`, `error: password: too short`, `(using password: YES)`).
    """
    before = match_start - 1
    while before >= 0 and (text[before].isalnum() or text[before] in "_.-"):
        before -= 1
    if before >= 0 and text[before] in "/\\":
        return False
    line_end = text.find("\n", value_start)
    rest = text[value_start : line_end if line_end >= 0 else len(text)].rstrip("\r")
    if rest[:1] in "<{[" and _PLACEHOLDER.match(rest):
        return False
    return not _reads_as_message(rest)


_PLACEHOLDER = re.compile(r"<[^<>\n]{1,80}>|\{\{?[^{}\n]{1,80}\}|\[[^\[\]\n]{1,40}\]")
_WORD = re.compile(r"[^\W\d_]+(?:['\u2019\-][^\W\d_]+)*")
_PUNCT = ".,:;!?()[]{}\"'`\u00ab\u00bb\u201c\u201d"
# Words a program message is made of, in the languages passwd, sudo and their kin are translated into:
# a value of two or more words with one of these among them is a sentence, not a secret.
_PROSE_WORDS = frozenset(
    """a an the is are was were be been not no to of for in on at by with and or but this that it its
    your you has have had can cannot could will would must should does do did than too very please try
    again updated successfully successful unchanged changed set reset expired expires invalid incorrect
    wrong missing required refused denied rejected failed failure error supplied provided given accepted
    ok yes empty weak short long match mismatch allowed authentication manipulation characters
    contains based dictionary new current retype enter unable user service saved stored unencrypted
    der die das ist nicht kein keine ein eine und oder zu von für mit bei des dem den erfolgreich
    geändert unverändert ungültig falsch abgelaufen erforderlich fehler beim ändern stimmen überein
    le la les de du est pas un une et ou pour avec à au mis jour succès inchangé invalide expiré requis
    erreur modifié ne el los las del es una para con actualizada actualizado correctamente cambiado ha
    incorrecta inválida caducado requerida""".split()
)
# Words that are a whole status on their own: `password: incorrect`, `token: expired`, `(using
# password: YES)`. A credential's value is never one of these alone.
_STATUS_WORDS = frozenset(
    """incorrect invalid expired missing required refused denied rejected failed unchanged changed
    updated accepted ok yes no empty wrong weak mismatch supplied provided unset hidden masked revoked
    disabled enabled falsch ungültig abgelaufen erforderlich geändert unverändert ja nein invalide
    expiré requis inchangé modifié oui non incorrecta inválida caducado requerida sí""".split()
)


def _reads_as_message(rest: str) -> bool:
    """Whether REST, the text after a credential word's `:` or `=` to the end of its line, is prose.

    It is when its first word is a status (`incorrect`, `expired`, `YES`), or when it is two or more
    words with a word of `_PROSE_WORDS` among its first six (`password updated successfully`,
    `Authentication token manipulation error`, `too short`, `Passwort erfolgreich geändert`). A value
    with a digit or a symbol (`hunter2`, `S3cr3t-Pa55`) is never a word, and a passphrase of words
    outside the list (`correct horse battery staple`) stays a secret.
    """
    tokens = rest.split(None, 6)[:6]
    if not tokens:
        return False
    words = [t.strip(_PUNCT) for t in tokens]
    if not _WORD.fullmatch(words[0]):
        return False
    if words[0].lower() in _STATUS_WORDS:
        return True
    if len(words) < 2 or not _WORD.fullmatch(words[1]):
        return False
    return any(w.lower() in _PROSE_WORDS for w in words if _WORD.fullmatch(w))


Replacement = tuple[int, int, str]  # (start, end, kind) of a secret in the text


def _secret_spans(text: str) -> list[Replacement]:
    spans: list[Replacement] = []
    last = 0
    pos = 0
    while True:
        m = _COMBINED.search(text, pos)
        if m is None:
            break
        # A candidate the filters reject must not hide a secret inside it: search again just after its
        # start. An accepted one continues after its end.
        pos = m.start() + 1
        index = int((m.lastgroup or "k0")[1:])
        kind = _KIND[index]
        value = m.group(f"val{index}") if f"val{index}" in m.re.groupindex else None
        if value is None:
            start, end = m.span()
            if kind == "private_key" and text.startswith("LS0tLS1CRUdJTi", start):
                if not _b64_private_key(m.group(0)):
                    continue
            elif kind == "api_key" and text.startswith("-us", start):
                hexpart = _MAILCHIMP_HEX.search(text, max(0, start - 32), start)
                if hexpart is None:
                    continue
                start = hexpart.start()
        else:
            start, end = m.span(f"val{index}")
            kw = m.group(f"kw{index}") if f"kw{index}" in m.re.groupindex else None
            name = kw or ""
            if kw is not None:
                before = _NAME_BEFORE.search(text, max(0, m.start() - 60), m.start())
                name = (before.group(0) if before else "") + kw
            sep = m.group(f"sep{index}") if f"sep{index}" in m.re.groupindex else None
            if value.startswith(MARKER_PREFIX) or not _is_secret_value(value, sep, name):
                continue
            if sep is not None and not _assignment_in_context(text, m.start(), start):
                continue
            if len(value) >= 2 and value[0] in "\"'" and value[-1] == value[0]:
                start, end = start + 1, end - 1  # keep the quotes: shell, JSON and code stay well-formed
        if start < last or text.startswith(MARKER_PREFIX, start):
            continue
        spans.append((start, end, kind))
        last = end
        pos = max(pos, m.end())
    return spans


def _pii_spans(text: str, kind: str) -> list[Replacement]:
    spans: list[Replacement] = []
    for m in _PII[kind].finditer(text):
        start, end = m.span()
        if kind == "email":
            # The local part starts after the previous address (`a@b.cc-x@y.dd` is two): scanning into
            # it would give overlapping spans, one of them dropped now and redacted on a second pass.
            floor = spans[-1][1] if spans else 0
            local = _EMAIL_LOCAL.search(text, max(floor, start - 64), start)
            if local is None:
                continue
            part = local.group(0).lstrip("._%+-")
            if not part or part.lower() in ("git", "hg", "ssh", "svn"):
                continue
            start = start - len(part)
        elif kind == "phone" and (
            not 8 <= sum(c.isdigit() for c in m.group(0)) <= 15
            or (m.group("intl") is not None and not phone_number_possible(m.group(0)))
        ):
            continue
        elif kind == "card" and (
            not card_number_valid(m.group(0))
            or (
                # A bare run of digits is a card only with a major brand's prefix and length, or a
                # word for a card before it: logs are full of long numbers, a tenth of which pass Luhn.
                m.group(0).isdigit()
                and not major_card_prefix(m.group(0))
                and _CARD_CONTEXT.search(text, max(0, start - 48), start) is None
            )
        ):
            continue
        elif kind == "iban" and not iban_valid(m.group(0)):
            continue
        elif kind == "ip" and (
            m.group(0).startswith(("127.", "0.", "255."))
            if m.group("v6") is None
            else not _is_ipv6_address(m.group("v6"))
        ):
            continue
        spans.append((start, end, kind))
    return spans


def _is_ipv6_address(text: str) -> bool:
    """Whether TEXT is an IPv6 address that names a host, as written in logs (not code that looks like one).

    Loopback and unspecified (::1, ::) are not personal, as 127.x is not. Refused as look-alikes:
    mixed-case groups (`Add::Bad` in C++), compressed forms whose groups are all one or two digits
    (`1::2`, a slice), and full forms of two-digit groups only (EUI-64 / MAC-style hardware ids).
    """
    try:
        address = ipaddress.IPv6Address(text)
    except ValueError:
        return False
    if address.is_loopback or address.is_unspecified:
        return False
    groups = [g for g in text.split(":") if g]
    if any(g != g.lower() and g != g.upper() for g in groups):
        return False
    if "::" in text:
        return any(len(g) >= 3 for g in groups)
    return not all(len(g) == 2 for g in groups)


def _apply(text: str, spans: list[Replacement], counts: Counter[str] | None) -> str:
    if not spans:
        return text
    pieces: list[str] = []
    last = 0
    for start, end, kind in spans:
        if start < last:
            continue
        pieces.append(text[last:start])
        pieces.append(marker(kind))
        if counts is not None:
            counts[kind] += 1
        last = end
    pieces.append(text[last:])
    return "".join(pieces)


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


# Passes after the first, when the first changed the text (see `redact`).
_EXTRA_PASSES = 3


_MEMO_MIN_CHARS = 4096
_MEMO_MAX_CHARS = 16 * 2**20
_memo: OrderedDict[tuple[str, frozenset[str]], tuple[str, tuple[tuple[str, int], ...]]] = OrderedDict()
_memo_chars = 0
_memo_lock = threading.Lock()


def redact(text: str, counts: Counter[str] | None = None, pii: frozenset[str] = DEFAULT_PII) -> str:
    """`text` with secrets and the PII classes in `pii` replaced by markers; `counts` gains one per secret.

    Redacting the result again changes nothing: a marker can complete a pattern that the secret it
    replaced did not (`-----BEGIN ... KEY----- -p@` has no key body until the `-p` password becomes
    a marker), so a text the first pass changed is redacted again until it stays the same.

    Texts of 4,096 characters or more are remembered with their result and counts (at most 16 Mi
    characters of texts and results together, least recently used first out): a collection shows the
    same pages again and again (a search corpus's documents, a repository's files), and the result
    depends on the text alone.
    """
    if len(text) < _SHORTEST_MATCH:
        return text  # shorter than any secret or PII match (a key typed in a terminal)
    if len(text) < _MEMO_MIN_CHARS:
        return _redact_to_fixpoint(text, counts, pii)
    global _memo_chars
    key = (text, frozenset(pii))
    with _memo_lock:
        hit = _memo.get(key)
        if hit is not None:
            _memo.move_to_end(key)
    if hit is None:
        found: Counter[str] = Counter()
        out = _redact_to_fixpoint(text, found, key[1])
        hit = (out, tuple(sorted(found.items())))
        with _memo_lock:
            if key not in _memo:
                _memo[key] = hit
                _memo_chars += len(text) + len(out)
                while _memo_chars > _MEMO_MAX_CHARS and _memo:
                    (old_text, _), (old_out, _) = _memo.popitem(last=False)
                    _memo_chars -= len(old_text) + len(old_out)
    if counts is not None:
        counts.update(dict(hit[1]))
    return hit[0]


def _redact_to_fixpoint(text: str, counts: Counter[str] | None, pii: frozenset[str]) -> str:
    out = _redact_once(text, counts, pii)
    passes = 0
    while out != text and passes < _EXTRA_PASSES:
        text, out = out, _redact_once(out, counts, pii)
        passes += 1
    return out


def _redact_once(text: str, counts: Counter[str] | None, pii: frozenset[str]) -> str:
    if len(text) < _SHORTEST_MATCH:
        return text  # shorter than any secret or PII match
    if _nothing_but_pii_hints(text):
        slow = False  # no needle, no slow class: only the PII classes' substring hints remain
    else:
        if may_contain_secret(text):
            aws = _AWS_CONTEXT.search(text) is not None
            text = _apply(text, _secret_spans(text), counts)
            if aws:
                text = _redact_aws_secrets(text, counts)
        # Whether any class that starts at a character class can be there at all.
        slow = _SLOW_GATE.search(text) is not None
    if slow and _STRUCTURED_GATE.search(text) is not None:
        text = _apply(text, _structured_spans(text), counts)
    for kind in PII_CLASSES:
        if kind in pii and _pii_possible(text, kind, slow):
            text = _apply(text, _pii_spans(text, kind), counts)
    return text


def redact_lines(
    lines: list[str], counts: Counter[str] | None = None, pii: frozenset[str] = DEFAULT_PII
) -> list[str]:
    """`[redact(line, counts, pii) for line in lines]`, with the pre-checks run once over all the lines.

    The pre-checks test for literals and short hint patterns without anchors or lookarounds, so one
    absent from the joined text is absent from each line: a secret needle missing there rules out the
    secret patterns for every line, a PII hint missing there rules out that class for every line not
    already changed by another class. Rendered terminal output arrives as many short lines at once.
    """
    if not lines:
        return []
    joined = "\n".join(lines)
    if may_contain_secret(joined) or _STRUCTURED_GATE.search(joined) is not None:
        return [redact(line, counts, pii) for line in lines]
    possible = [kind for kind in PII_CLASSES if kind in pii and _pii_possible(joined, kind)]
    if not possible:
        return list(lines)
    out = []
    for line in lines:
        if len(line) >= _SHORTEST_MATCH:
            original = line
            for kind in PII_CLASSES:
                if kind in pii and (kind in possible or line is not original) and _pii_possible(line, kind):
                    line = _apply(line, _pii_spans(line, kind), counts)
            if line != original:
                line = redact(line, counts, pii)  # to the fixed point, as `redact` leaves a text
        out.append(line)
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
            if (
                "card" in pii
                and isinstance(item, str)
                and isinstance(key, str)
                and _CARD_CONTEXT.search(key)
                and card_number_valid(item.strip())
            ):
                # The key names a card: the number needs no brand prefix to count as one.
                if counts is not None:
                    counts["card"] += 1
                out[key] = marker("card")
                continue
            if isinstance(item, str) and isinstance(key, str) and _CREDENTIAL_KEY.search(key):
                if (
                    item
                    and not _NOT_A_VALUE.match(item)
                    and not (" " in item.strip() and len(item.split()) >= 3)
                    and not _reads_as_message(item)
                ):
                    if counts is not None:
                        counts["password"] += 1
                    out[key] = marker("password")
                    continue
            out[key] = redact_json(item, counts, pii)
        return out
    return value


# Keys that name a credential; `auth` alone is Docker's and npm's base64 of user:password.
_CREDENTIAL_KEY = re.compile(r"(?i)(?:" + _KEY_SUFFIX + r"|(?:^|_)auth)$")
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
        if not self.inside and "-----BEGIN" not in text:
            return redact(text, counts, pii)
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

    def lines(
        self, lines: list[str], counts: Counter[str] | None, pii: frozenset[str] = DEFAULT_PII
    ) -> list[str]:
        """`[self.line(text, counts, pii) for text in lines]`, checked at once when no key block is open."""
        # One search of the joined lines: the marker holds no newline, so it is in the join only
        # where it is in a line.
        if not self.inside and "-----BEGIN" not in "\n".join(lines):
            return redact_lines(lines, counts, pii)
        return [self.line(text, counts, pii) for text in lines]

    def peek(self, text: str, pii: frozenset[str] = DEFAULT_PII) -> str:
        """TEXT as it would be redacted, without counting or changing state (a line still being drawn)."""
        if not self.inside and "-----BEGIN" not in text:
            return redact(text, None, pii)
        if self.inside:
            return "" if _PEM_END.search(text) is None else redact(text, None, pii)
        begin = _PEM_BEGIN.search(text)
        if begin is not None and _PEM_END.search(text, begin.end()) is None:
            return redact(text[: begin.start()], None, pii) + marker("private_key")
        return redact(text, None, pii)
