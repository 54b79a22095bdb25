"""A labelled redaction corpus: real-looking terminal sessions and agent logs with planted secrets of every
class the cleaner redacts, and look-alikes that must survive untouched.

Secrets are drawn from a seeded generator, so each seed gives a different corpus of the same classes;
`benchmarks/redaction_eval.py` measures precision and recall on it and tests assert on it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import string
import uuid
from dataclasses import dataclass, field

ALNUM = string.ascii_letters + string.digits
B64 = ALNUM + "/+"


@dataclass
class Sample:
    """One text with the secrets planted in it (by class) and the look-alikes it also holds."""

    name: str
    text: str
    secrets: list[tuple[str, str]] = field(default_factory=list)  # (class, secret value)
    lookalikes: list[str] = field(default_factory=list)
    is_json: bool = False
    # The PII classes the sample is cleaned with (`--redact-pii`); secrets are redacted regardless.
    pii: frozenset[str] = frozenset({"email", "phone", "card", "iban"})
    # The damage table's row for this sample's look-alikes; empty: `redaction_eval.lookalike_kind` decides.
    lookalike_kind: str = ""


def _rand(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _mixed(rng: random.Random, alphabet: str, n: int) -> str:
    """Random text that has upper, lower and digit characters (as real keys do)."""
    while True:
        s = _rand(rng, alphabet, n)
        if any(c.isupper() for c in s) and any(c.islower() for c in s) and any(c.isdigit() for c in s):
            return s


def _pem(rng: random.Random, kind: str, newline: str) -> str:
    body = base64.b64encode(rng.randbytes(600)).decode()
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    return newline.join([f"-----BEGIN {kind}PRIVATE KEY-----", *lines, f"-----END {kind}PRIVATE KEY-----"])


def _password(rng: random.Random) -> str:
    return _mixed(rng, ALNUM, rng.randint(10, 18)) + rng.choice("!#%^*_")


def lookalikes(rng: random.Random) -> list[str]:
    """Strings that resemble secrets and must be kept."""
    sha = hashlib.sha1(rng.randbytes(8)).hexdigest()
    return [
        f"git@github.com:{rng.choice(['acme', 'openai', 'torvalds'])}/{rng.choice(['repo', 'linux', 'api'])}.git",
        sha,
        sha[:7],
        str(uuid.UUID(int=rng.getrandbits(128))),
        "sha256:" + hashlib.sha256(rng.randbytes(8)).hexdigest(),
        "sha512-" + base64.b64encode(hashlib.sha512(rng.randbytes(8)).digest()).decode(),
        'password = request.form["password"]',
        "def login(username, password):",
        "token = tokenizer.encode(prompt)",
        'secret_key = os.environ["SECRET_KEY"]',
        "if not token:",
        "self.password = password",
        "max_tokens=300",
        "--password-stdin",
        "PASSWORD_MIN_LENGTH = 12",
        "ssh -T git@github.com",
        "pip install requests==2.31.0",
        "Python 3.11.4 (main, Jun  7 2023, 00:00:00)",
        "2024-03-15 10:42:17,512 INFO started",
        "total 48",
    ]


def build_corpus(seed: int = 0) -> list[Sample]:
    """Terminal sessions and agent logs with secrets of every class and look-alikes."""
    rng = random.Random(seed)
    out: list[Sample] = []
    prompt = f"{rng.choice(['dev', 'alice', 'root'])}@{rng.choice(['box', 'ci-7', 'web01'])}:~/app$ "

    key_id = "AKIA" + _rand(rng, string.ascii_uppercase + string.digits, 16)
    secret = _mixed(rng, B64, 40)
    out.append(
        Sample(
            "aws credentials file",
            f"{prompt}cat ~/.aws/credentials\r\n[default]\r\naws_access_key_id = {key_id}\r\n"
            f"aws_secret_access_key = {secret}\r\nregion = us-east-1\r\n{prompt}",
            [("aws_access_key", key_id), ("aws_secret_key", secret)],
        )
    )
    sts_id = "ASIA" + _rand(rng, string.ascii_uppercase + string.digits, 16)
    sts_secret = _mixed(rng, B64, 40)
    session = "IQoJb3JpZ2luX2VjE" + _rand(rng, B64, 300)
    sts = {
        "Credentials": {
            "AccessKeyId": sts_id,
            "SecretAccessKey": sts_secret,
            "SessionToken": session,
            "Expiration": "2025-01-01T00:00:00Z",
        },
        "AssumedRoleUser": {"Arn": "arn:aws:sts::123456789012:assumed-role/ci/session"},
    }
    out.append(
        Sample(
            "aws sts json",
            json.dumps(sts, indent=2),
            [("aws_access_key", sts_id), ("aws_secret_key", sts_secret), ("aws_session_token", session)],
            is_json=True,
        )
    )
    # The same credentials as a tool result whose key names are non-standard.
    loose_secret = _mixed(rng, B64, 40)
    loose_id = "AKIA" + _rand(rng, string.ascii_uppercase + string.digits, 16)
    out.append(
        Sample(
            "aws key pair in prose",
            f"Use key id {loose_id} with {loose_secret} for the upload bucket.",
            [("aws_access_key", loose_id), ("aws_secret_key", loose_secret)],
        )
    )
    pw = _password(rng)
    call = {
        "name": "db_connect",
        "arguments": {"host": "db.internal", "user": "app", "password": pw, "port": 5432},
    }
    out.append(
        Sample("tool call password", json.dumps(call, sort_keys=True), [("password", pw)], is_json=True)
    )
    api_pw = _password(rng)
    openai_msg = {
        "role": "assistant",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {
                    "name": "login",
                    "arguments": json.dumps({"username": "ops", "passwd": api_pw}),
                },
            }
        ],
    }
    out.append(
        Sample("openai arguments string", json.dumps(openai_msg), [("password", api_pw)], is_json=True)
    )
    docker_pw = _password(rng)
    out.append(
        Sample(
            "docker login",
            f"{prompt}docker login -u deploy -p {docker_pw} registry.example.io\r\n"
            "WARNING! Using --password via the CLI is insecure. Use --password-stdin.\r\nLogin Succeeded\r\n",
            [("password", docker_pw)],
            ["--password-stdin"],
        )
    )
    curl_pw = _password(rng).replace("!", "x")
    out.append(
        Sample(
            "curl user",
            f'{prompt}curl -s -u admin:{curl_pw} https://api.example.com/v1/status\r\n{{"status": "ok"}}\r\n',
            [("password", curl_pw)],
        )
    )
    basic = base64.b64encode(f"svc:{_password(rng)}".encode()).decode()
    bearer = _mixed(rng, ALNUM, 32)
    out.append(
        Sample(
            "http headers",
            f"> GET /v1/items HTTP/1.1\r\n> Host: api.example.com\r\n> Authorization: Basic {basic}\r\n"
            f"> User-Agent: curl/8.5.0\r\n{prompt}curl -H 'Authorization: Bearer {bearer}' https://x.io\r\n",
            [("basic_auth", basic), ("bearer_token", bearer)],
        )
    )
    stripe = "sk_live_" + _mixed(rng, ALNUM, 24)
    restricted = "rk_live_" + _mixed(rng, ALNUM, 24)
    out.append(
        Sample(
            "stripe keys",
            f"STRIPE_KEY is {stripe}\nrestricted: {restricted}",
            [("api_key", stripe), ("api_key", restricted)],
        )
    )
    heroku_uuid = str(uuid.UUID(int=rng.getrandbits(128)))
    heroku_new = "HRKU-" + _mixed(rng, ALNUM + "_-", 60)
    out.append(
        Sample(
            "heroku keys",
            f"{prompt}export HEROKU_API_KEY={heroku_uuid}\r\n{prompt}heroku auth:token\r\n{heroku_new}\r\n",
            [("password", heroku_uuid), ("api_key", heroku_new)],
        )
    )
    for kind, nl in (("RSA ", "\n"), ("OPENSSH ", "\r\n"), ("", "\r\n"), ("EC ", "\n")):
        pem = _pem(rng, kind, nl)
        body_line = pem.split(nl)[3]
        out.append(
            Sample(
                f"pem {kind.strip() or 'pkcs8'} {'crlf' if nl == chr(13) + chr(10) else 'lf'}",
                f"{prompt}cat ~/.ssh/id_key{nl}{pem}{nl}{prompt}",
                [("private_key", body_line), ("private_key", pem.split(nl)[0])],
            )
        )
    pem_json = _pem(rng, "RSA ", "\n")
    out.append(
        Sample(
            "pem in json",
            json.dumps({"name": "write_file", "arguments": {"path": "k.pem", "content": pem_json}}),
            [("private_key", pem_json.split("\n")[2])],
            is_json=True,
        )
    )
    gh = "ghp_" + _mixed(rng, ALNUM, 36)
    gl = "glpat-" + _mixed(rng, ALNUM, 20)
    slack = f"xoxb-{rng.randint(10**10, 10**11)}-{rng.randint(10**10, 10**11)}-{_mixed(rng, ALNUM, 24)}"
    oa = "sk-proj-" + _mixed(rng, ALNUM + "_-", 48)
    ant = "sk-ant-api03-" + _mixed(rng, ALNUM + "_-", 60)
    hf = "hf_" + _mixed(rng, ALNUM, 34)
    goog = "AIza" + _mixed(rng, ALNUM + "_-", 35)
    sg = "SG." + _mixed(rng, ALNUM, 22) + "." + _mixed(rng, ALNUM, 43)
    npm = "npm_" + _mixed(rng, ALNUM, 36)
    out.append(
        Sample(
            "vendor tokens in env dump",
            f"{prompt}env | sort\r\nGH_TOKEN_VALUE={gh}\r\nGITLAB={gl}\r\nHOME=/home/dev\r\nSLACK={slack}\r\n"
            f"OPENAI={oa}\r\nANTHROPIC={ant}\r\nHF={hf}\r\nGOOGLE={goog}\r\nSENDGRID={sg}\r\n"
            f"//registry.npmjs.org/:_authToken={npm}\r\n",
            [
                ("github_token", gh),
                ("api_key", gl),
                ("api_key", slack),
                ("api_key", oa),
                ("api_key", ant),
                ("api_key", hf),
                ("api_key", goog),
                ("api_key", sg),
                ("api_key", npm),
            ],
        )
    )
    header = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').decode().rstrip("=")
    payload = (
        base64.urlsafe_b64encode(json.dumps({"sub": rng.randint(1, 10**6)}).encode()).decode().rstrip("=")
    )
    jwt = f"{header}.{payload}.{_rand(rng, ALNUM + '_-', 43)}"
    out.append(Sample("jwt cookie", f"Set-Cookie: session={jwt}; Path=/; HttpOnly", [("jwt", jwt)]))
    db_pw = _password(rng).replace("!", "x").replace("#", "x").replace("%", "x")
    out.append(
        Sample(
            "database url",
            f"DATABASE_URL=postgres://app:{db_pw}@db.internal:5432/shop",
            [("url_credentials", db_pw)],
        )
    )
    env_pw, env_tok = _password(rng), _mixed(rng, ALNUM, 30)
    out.append(
        Sample(
            "dotenv",
            f"{prompt}cat .env\r\nDEBUG=false\r\nDB_PASSWORD={env_pw}\r\nSERVICE_TOKEN={env_tok}\r\n"
            f"PASSWORD_MIN_LENGTH=12\r\n",
            [("password", env_pw), ("password", env_tok)],
            ["PASSWORD_MIN_LENGTH=12", "DEBUG=false"],
        )
    )
    yaml_pw = _password(rng)
    out.append(
        Sample(
            "yaml config",
            f"database:\n  host: localhost\n  username: app\n  password: {yaml_pw}\n  pool: 5\n",
            [("password", yaml_pw)],
        )
    )
    my_pw, ssh_pw = _password(rng).replace("!", "x"), _password(rng).replace("!", "x")
    out.append(
        Sample(
            "mysql and sshpass",
            f"{prompt}mysql -u root -p{my_pw} shop -e 'select 1'\r\n{prompt}sshpass -p '{ssh_pw}' ssh ops@10.0.0.5\r\n",
            [("password", my_pw), ("password", ssh_pw)],
        )
    )
    flag_tok = _mixed(rng, ALNUM, 28)
    out.append(
        Sample(
            "cli token flag",
            f"{prompt}gh-release upload --token {flag_tok} --repo acme/app dist/*.whl",
            [("password", flag_tok)],
        )
    )
    user = rng.choice(["jane.doe", "bob", "m.smith"])
    email = f"{user}@{rng.choice(['example.org', 'corp.example.com'])}"
    out.append(
        Sample(
            "git log email",
            f"{prompt}git log -1\r\ncommit {hashlib.sha1(b'x').hexdigest()}\r\nAuthor: Jane <{email}>\r\n"
            f"{prompt}git remote -v\r\norigin\tgit@github.com:acme/app.git (fetch)\r\n",
            [("email", email)],
            ["git@github.com:acme/app.git", hashlib.sha1(b"x").hexdigest()],
        )
    )
    phone = rng.choice(["+1 415-555-0132", "(212) 555-0147", "+44 20 7946 0958", "415.555.0199"])
    out.append(
        Sample("phone in ticket", f"Customer callback number: {phone}, ticket 48213", [("phone", phone)])
    )
    netrc_pw, redis_pw, ossl_pw, az_pw = (_password(rng).replace("!", "x") for _ in range(4))
    query_key = _mixed(rng, ALNUM, 24)
    google = "ya29.a0" + _mixed(rng, ALNUM + "_-", 80)
    letters_token = "FwoGZXIvYXdzE" + "".join(rng.choice(string.ascii_letters) for _ in range(120))
    out.append(
        Sample(
            "credentials as arguments",
            f"{prompt}cat ~/.netrc\r\nmachine api.example.com login deploy password {netrc_pw}\r\n"
            f'{prompt}curl "https://api.example.com/v2/items?api_key={query_key}&page=2"\r\n'
            f"{prompt}redis-cli -h cache -a {redis_pw} ping\r\nPONG\r\n"
            f"{prompt}openssl rsa -in key.pem -passin pass:{ossl_pw} -noout\r\n"
            f"{prompt}az login -u ops@example.com -p {az_pw}\r\n"
            f"{prompt}gcloud auth print-access-token\r\n{google}\r\n"
            f"aws_session_token = {letters_token}\r\n",
            [
                ("password", netrc_pw),
                ("password", query_key),
                ("password", redis_pw),
                ("password", ossl_pw),
                ("password", az_pw),
                ("api_key", google),
                ("aws_session_token", letters_token),
            ],
            ["&page=2", "redis-cli -h cache -a", "PONG"],
        )
    )
    # Look-alike-only samples: code and listings that name credentials without holding any.
    code = (
        "def authenticate(username: str, password: str) -> bool:\n"
        "    token = tokenizer.encode(prompt)\n    if not token:\n        return False\n"
        '    secret_key = os.environ["SECRET_KEY"]\n    self.password = password\n'
        "    return check(password=password, token=token)\n"
    )
    out.append(
        Sample(
            "code that names credentials",
            code,
            [],
            [
                "password: str",
                "token = tokenizer.encode(prompt)",
                'secret_key = os.environ["SECRET_KEY"]',
                "self.password = password",
                "check(password=password, token=token)",
            ],
        )
    )
    ids = lookalikes(rng)
    out.append(Sample("identifiers and hashes", "\n".join(ids), [], ids))
    sha = hashlib.sha1(rng.randbytes(8)).hexdigest()
    out.append(
        Sample(
            "agent log with hashes",
            json.dumps(
                {
                    "name": "bash",
                    "arguments": {"command": f"git checkout {sha} && docker pull app@sha256:{'a' * 64}"},
                    "call_id": str(uuid.UUID(int=rng.getrandbits(128))),
                }
            ),
            [],
            [sha, "sha256:" + "a" * 64],
            is_json=True,
        )
    )
    out += _ip_samples(rng, prompt)
    return out


def _ipv6(rng: random.Random, compressed: bool) -> str:
    """A global unicast address (documentation prefix 2001:db8::/32), written full or compressed."""
    groups = ["2001", "db8", *(f"{rng.getrandbits(16):x}" for _ in range(2)), "0", "0"]
    groups += [f"{rng.getrandbits(16):x}" for _ in range(2)]
    if not compressed:
        return ":".join(g.zfill(4) for g in groups)
    return ":".join(groups[:4]) + "::" + ":".join(groups[6:])


def _ip_samples(rng: random.Random, prompt: str) -> list[Sample]:
    """Addresses in every textual form, cleaned with `--redact-pii ip`, beside code and ids that look alike."""
    v4 = f"203.0.113.{rng.randint(1, 254)}"
    full, short = _ipv6(rng, False), _ipv6(rng, True)
    mapped = f"::ffff:198.51.100.{rng.randint(1, 254)}"
    nat64 = f"64:ff9b::192.0.2.{rng.randint(1, 254)}"
    link = f"fe80::{rng.getrandbits(12) | 0x200:x}:{rng.getrandbits(16):x}:fe{rng.getrandbits(8):02x}:{rng.getrandbits(16):x}"
    zoned = f"fe80::{rng.getrandbits(16) | 0x1000:x}%eth0"
    bracketed = _ipv6(rng, True).upper()
    mac = ":".join(f"{rng.getrandbits(8):02x}" for _ in range(6))
    when = f"{rng.randint(10, 23)}:{rng.randint(10, 59)}:{rng.randint(10, 59)}"
    sha = hashlib.sha1(rng.randbytes(8)).hexdigest()
    ip_pii = frozenset({"email", "phone", "ip"})
    return [
        Sample(
            "ip addresses in a session",
            f"{prompt}ip addr show eth0\r\n2: eth0: <BROADCAST,MULTICAST,UP> mtu 1500\r\n"
            f"    link/ether {mac} brd ff:ff:ff:ff:ff:ff\r\n    inet {v4}/24 brd 203.0.113.255 scope global\r\n"
            f"    inet6 {short}/64 scope global dynamic\r\n    inet6 {link}/64 scope link\r\n"
            f"    inet6 ::1/128 scope host\r\n{prompt}ping6 -c1 {zoned}\r\n"
            f"{prompt}ss -tn\r\nESTAB 0 0 [{mapped}]:443 [{nat64}]:51234\r\n"
            f"{prompt}curl -s http://[{bracketed}]:8080/health\r\nok at {when}\r\n"
            f"{prompt}grep {full} /var/log/auth.log\r\n",
            [("ip", a) for a in (v4, short, link, zoned, mapped, nat64, bracketed, full)],
            [f"link/ether {mac}", "::1/128", when, "ff:ff:ff:ff:ff:ff"],
            pii=ip_pii,
        ),
        Sample(
            "code and ids that look like ipv6",
            "#include <vector>\nstd::vector<int> xs; auto it = std::find(xs.begin(), xs.end(), 3);\n"
            "Add::Bad::Face(); using ns::Cafe;\n"
            "evens = a[0::2]; rev = b[::-1]; mid = c[10::20]; d = e[::5]\n"
            f"git checkout {sha}  # at {when}, MAC {mac}\n"
            "listening on [::]:8080 and [::1]:9090\n",
            [],
            [
                "std::vector<int>",
                "std::find(xs.begin(), xs.end(), 3)",
                "Add::Bad::Face()",
                "ns::Cafe",
                "a[0::2]",
                "b[::-1]",
                "c[10::20]",
                "e[::5]",
                sha,
                when,
                mac,
                "[::]:8080",
                "[::1]:9090",
            ],
            pii=ip_pii,
        ),
        Sample(
            "ip addresses in tool arguments",
            json.dumps(
                {
                    "name": "bash",
                    "arguments": {"command": f"ssh -6 ops@{short} 'nc -zv {v4} 22' && ping -c1 {zoned}"},
                    "output": f"Connection to {v4} 22 port [tcp/ssh] succeeded! ({when})",
                }
            ),
            [("ip", short), ("ip", v4), ("ip", zoned)],
            [when, "[tcp/ssh]"],
            is_json=True,
            pii=ip_pii,
        ),
    ]


def all_lookalikes(samples: list[Sample]) -> list[tuple[str, str]]:
    return [(s.name, la) for s in samples for la in s.lookalikes]


# -- The generated corpus -----------------------------------------------------------------------------
# Secret classes as generators of values, each planted in several contexts (an env var, a config file
# in some format, JSON, a URL, a command-line flag, a log line, a terminal session), beside look-alikes
# that must survive. `benchmarks/redaction_eval.py` reports recall and damage per class on it.

HEX = "0123456789abcdef"
UPPER_DIGITS = string.ascii_uppercase + string.digits
URLSAFE = ALNUM + "-_"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _jwt(rng: random.Random) -> str:
    header = _b64url(json.dumps({"alg": rng.choice(["HS256", "RS256", "ES256"]), "typ": "JWT"}).encode())
    claims = {
        "sub": str(rng.randint(1, 10**9)),
        "iat": rng.randint(1_600_000_000, 1_800_000_000),
        "scope": "read write",
    }
    return f"{header}.{_b64url(json.dumps(claims).encode())}.{_rand(rng, URLSAFE, 43)}"


def _pem_block(rng: random.Random, label: str, newline: str = "\n", encrypted: bool = False) -> str:
    body = base64.b64encode(rng.randbytes(rng.randint(300, 900))).decode()
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    head = [f"-----BEGIN {label}-----"]
    if encrypted:
        head += ["Proc-Type: 4,ENCRYPTED", f"DEK-Info: AES-128-CBC,{_rand(rng, HEX.upper(), 32)}", ""]
    return newline.join([*head, *lines, f"-----END {label}-----"])


def _luhn_complete(prefix: str, length: int, rng: random.Random) -> str:
    digits = prefix + "".join(rng.choice(string.digits) for _ in range(length - len(prefix) - 1))
    for check in string.digits:
        candidate = digits + check
        total = 0
        for i, ch in enumerate(reversed(candidate)):
            d = int(ch)
            if i % 2:
                d = d * 2 - 9 if d > 4 else d * 2
            total += d
        if total % 10 == 0:
            return candidate
    raise AssertionError("unreachable")


def _card(rng: random.Random) -> str:
    prefix, length = rng.choice(
        [
            ("4", 16),
            ("51", 16),
            ("55", 16),
            ("2221", 16),
            ("34", 15),
            ("37", 15),
            ("6011", 16),
            ("65", 16),
            ("3530", 16),
            ("36", 14),
            ("62", 16),
            ("4", 19),
        ]
    )
    number = _luhn_complete(prefix, length, rng)
    style = rng.choice(["compact", "space", "dash"])
    if style == "compact":
        return number
    sep = " " if style == "space" else "-"
    if length == 15:
        return sep.join([number[:4], number[4:10], number[10:]])
    return sep.join(number[i : i + 4] for i in range(0, length, 4))


# Country, BBAN layout (n: digits, a: upper-case letters, c: letters or digits), as the IBAN registry has it.
_IBAN_FORMATS = [
    ("DE", "18n"),
    ("GB", "4a14n"),
    ("FR", "10n11c2n"),
    ("ES", "20n"),
    ("IT", "1a10n12c"),
    ("NL", "4a10n"),
    ("CH", "5n12c"),
    ("AT", "16n"),
    ("BE", "12n"),
    ("PL", "24n"),
    ("SE", "20n"),
    ("NO", "11n"),
    ("DK", "14n"),
    ("FI", "14n"),
    ("PT", "21n"),
    ("IE", "4a14n"),
    ("LU", "3n13c"),
    ("CZ", "20n"),
]


def _iban(rng: random.Random) -> str:
    import re as _re

    country, layout = rng.choice(_IBAN_FORMATS)
    bban = ""
    for count, kind in _re.findall(r"(\d+)([nac])", layout):
        alphabet = {"n": string.digits, "a": string.ascii_uppercase, "c": UPPER_DIGITS}[kind]
        bban += _rand(rng, alphabet, int(count))
    numeric = "".join(str(int(ch, 36)) for ch in bban + country + "00")
    iban = f"{country}{98 - int(numeric) % 97:02d}{bban}"
    if rng.random() < 0.5:
        return " ".join(iban[i : i + 4] for i in range(0, len(iban), 4))
    return iban


def _phone(rng: random.Random) -> str:
    return rng.choice(
        [
            f"+49 30 {rng.randint(1000000, 99999999)}",
            f"+49 151 {rng.randint(10000000, 99999999)}",
            f"+33 {rng.randint(1, 7)} {' '.join(f'{rng.randint(10, 99)}' for _ in range(4))}",
            f"+44 20 {rng.randint(7000, 8999)} {rng.randint(1000, 9999)}",
            f"+44 7{rng.randint(100, 999)} {rng.randint(100000, 999999)}",
            f"+81 3-{rng.randint(1000, 9999)}-{rng.randint(1000, 9999)}",
            f"+81 90-{rng.randint(1000, 9999)}-{rng.randint(1000, 9999)}",
            f"+7 (495) {rng.randint(100, 999)}-{rng.randint(10, 99)}-{rng.randint(10, 99)}",
            f"+86 13{rng.randint(0, 9)} {rng.randint(1000, 9999)} {rng.randint(1000, 9999)}",
            f"+91 9{rng.randint(1000, 9999)} {rng.randint(10000, 99999)}",
            f"+55 11 9{rng.randint(1000, 9999)}-{rng.randint(1000, 9999)}",
            f"+34 6{rng.randint(10, 99)} {rng.randint(100, 999)} {rng.randint(100, 999)}",
            f"+39 06 {rng.randint(1000, 9999)} {rng.randint(1000, 9999)}",
            f"+61 4{rng.randint(10, 99)} {rng.randint(100, 999)} {rng.randint(100, 999)}",
            f"+1 {rng.randint(201, 989)}-{rng.randint(200, 999)}-{rng.randint(1000, 9999)}",
            f"+1 ({rng.randint(201, 989)}) {rng.randint(200, 999)}-{rng.randint(1000, 9999)}",
            f"({rng.randint(201, 989)}) {rng.randint(200, 999)}-{rng.randint(1000, 9999)}",
            f"0044 20 {rng.randint(7000, 8999)} {rng.randint(1000, 9999)}",
            f"+4930{rng.randint(1000000, 9999999)}",
            f"+1{rng.randint(201, 989)}{rng.randint(200, 999)}{rng.randint(1000, 9999)}",
        ]
    )


def _email(rng: random.Random) -> str:
    local = rng.choice(["jane.doe", "m.schmidt", "ops+alerts", "li_wei", "a.b-c", "kim2024", "noreply"])
    domain = rng.choice(["example.org", "mail.example.co.uk", "corp.example.de", "uni-example.fr", "x.io"])
    return f"{local}@{domain}"


def _password_value(rng: random.Random) -> str:
    return _mixed(rng, ALNUM, rng.randint(10, 20)) + rng.choice("!#%^*_@$")


# A class: (name, the kind the detector should say, a variable name for it, generator). Names double as
# the benchmark's rows; contexts are chosen per class (a card number is not a CLI flag).
SecretGen = tuple[str, str, list[str]]


def _vendor_tokens(rng: random.Random) -> list[tuple[str, str, str]]:
    """(class, env var name, value) for every vendor token format."""

    def slack_n() -> int:
        return rng.randint(10**10, 10**12 - 1)

    return [
        ("slack", "SLACK_BOT_TOKEN", f"xoxb-{slack_n()}-{slack_n()}-{_mixed(rng, ALNUM, 24)}"),
        ("slack", "SLACK_USER_TOKEN", f"xoxp-{slack_n()}-{slack_n()}-{slack_n()}-{_rand(rng, HEX, 32)}"),
        (
            "slack",
            "SLACK_APP_TOKEN",
            f"xapp-1-A{_rand(rng, UPPER_DIGITS, 10)}-{slack_n()}-{_rand(rng, HEX, 64)}",
        ),
        ("stripe", "STRIPE_SECRET_KEY", "sk_live_" + _mixed(rng, ALNUM, 99)),
        ("stripe", "STRIPE_RESTRICTED", "rk_live_" + _mixed(rng, ALNUM, 24)),
        ("stripe", "STRIPE_WEBHOOK_SECRET", "whsec_" + _mixed(rng, ALNUM, 32)),
        ("twilio", "TWILIO_API_KEY", "SK" + _rand(rng, HEX, 32)),
        ("sendgrid", "SENDGRID_API_KEY", "SG." + _mixed(rng, URLSAFE, 22) + "." + _mixed(rng, URLSAFE, 43)),
        ("npm", "NPM_TOKEN", "npm_" + _mixed(rng, ALNUM, 36)),
        ("pypi", "PYPI_TOKEN", "pypi-AgEIcHlwaS5vcmc" + _mixed(rng, URLSAFE, 70)),
        ("dockerhub", "DOCKERHUB_TOKEN", "dckr_pat_" + _mixed(rng, URLSAFE, 27)),
        ("huggingface", "HF_TOKEN", "hf_" + _mixed(rng, ALNUM, 34)),
        ("openai", "OPENAI_API_KEY", "sk-proj-" + _mixed(rng, URLSAFE, 120)),
        ("openai", "OPENAI_KEY_LEGACY", "sk-" + _mixed(rng, ALNUM, 48)),
        ("anthropic", "ANTHROPIC_API_KEY", "sk-ant-api03-" + _mixed(rng, URLSAFE, 93) + "AA"),
        ("gitlab", "GITLAB_TOKEN", "glpat-" + _mixed(rng, URLSAFE, 20)),
        ("github", "GITHUB_TOKEN", "ghp_" + _mixed(rng, ALNUM, 36)),
        ("github", "GH_FINE_GRAINED", "github_pat_" + _mixed(rng, ALNUM, 22) + "_" + _mixed(rng, ALNUM, 59)),
        ("digitalocean", "DIGITALOCEAN_TOKEN", "dop_v1_" + _rand(rng, HEX, 64)),
        ("shopify", "SHOPIFY_ACCESS_TOKEN", "shpat_" + _rand(rng, HEX, 32)),
        ("mailgun", "MAILGUN_API_KEY", "key-" + _rand(rng, HEX, 32)),
        ("square", "SQUARE_ACCESS_TOKEN", "EAAA" + _mixed(rng, URLSAFE, 60)),
        ("square", "SQUARE_OAUTH_SECRET", "sq0csp-" + _mixed(rng, URLSAFE, 43)),
        ("heroku", "HEROKU_API_KEY", "HRKU-" + _mixed(rng, URLSAFE, 60)),
        ("telegram", "TELEGRAM_BOT_TOKEN", f"{rng.randint(10**8, 10**10 - 1)}:AA{_mixed(rng, URLSAFE, 33)}"),
        ("google", "GOOGLE_API_KEY", "AIza" + _mixed(rng, URLSAFE, 35)),
        ("jwt", "SESSION_JWT", _jwt(rng)),
        ("aws_access_key", "AWS_ACCESS_KEY_ID", "AKIA" + _rand(rng, UPPER_DIGITS, 16)),
        ("aws_secret_key", "AWS_SECRET_ACCESS_KEY", _mixed(rng, B64, 40)),
        ("aws_session_token", "AWS_SESSION_TOKEN", "IQoJb3JpZ2luX2Vj" + _mixed(rng, B64, 300)),
        # A vendor we name nowhere: a prefix and a random body, the shape most vendors use now.
        (
            "unnamed_vendor",
            rng.choice(["ACME_TOKEN", "VENDOR_KEY", "SERVICE_CREDENTIAL"]),
            rng.choice(["acme", "zq", "orb", "nimbus"])
            + rng.choice(["_live_", "_", "-", "_pat_"])
            + _mixed(rng, ALNUM, rng.randint(24, 48)),
        ),
    ]


def _contexts(rng: random.Random, name: str, value: str, prompt: str) -> list[tuple[str, str, bool]]:
    """Texts that hold VALUE as the value of a variable called NAME: (context, text, is_json)."""
    lower = name.lower()
    return [
        ("env", f"{prompt}env | grep {name.split('_')[0]}\r\n{name}={value}\r\n{prompt}", False),
        ("export", f"{prompt}export {name}='{value}'\r\n{prompt}", False),
        ("dotenv", f'# service settings\nLOG_LEVEL=info\n{name}="{value}"\nPORT=8080\n', False),
        ("yaml", f"service:\n  name: api\n  {lower}: {value}\n  replicas: 3\n", False),
        ("toml", f'[service]\nname = "api"\n{lower} = "{value}"\ntimeout = 30\n', False),
        ("ini", f"[default]\nregion = eu-west-1\n{lower} = {value}\n", False),
        ("json", json.dumps({"service": "api", lower: value, "retries": 3}, indent=2), True),
        ("tool_call", json.dumps({"name": "deploy", "arguments": json.dumps({"env": {name: value}})}), True),
        (
            "log",
            f"2024-05-02T11:04:{rng.randint(10, 59)}Z DEBUG client configured with {value} (attempt 1)",
            False,
        ),
        ("header", f"> GET /v1/me HTTP/1.1\r\n> Authorization: Bearer {value}\r\n> Accept: */*\r\n", False),
        ("cli", f"{prompt}deploy-tool push --token {value} --region eu-west-1\r\n", False),
        ("xml", f'<config>\n  <add key="{name}" value="{value}" />\n</config>\n', False),
        ("docker", f"{prompt}docker run -e {name}={value} -p 8080:80 app:1.4.2\r\n", False),
    ]


def _password_contexts(rng: random.Random, pw: str, prompt: str) -> list[tuple[str, str, bool]]:
    """A password in the ways configs, URLs and command lines write one."""
    key = rng.choice(["password", "passwd", "db_password", "DB_PASS", "secret", "adminPassword", "pwd"])
    foreign = rng.choice(
        [
            "passwort",
            "kennwort",
            "mot_de_passe",
            "contraseña",
            "senha",
            "wachtwoord",
            "пароль",
            "密码",
            "パスワード",
            "hasło",
            "parola",
        ]
    )
    user = rng.choice(["app", "admin", "deploy", "svc_ci"])
    host = rng.choice(["db.internal", "10.0.3.7", "cache.prod.example.com", "localhost"])
    return [
        ("ini", f"[database]\nhost = {host}\nuser = {user}\n{key} = {pw}\n", False),
        ("yaml", f'db:\n  host: {host}\n  {key}: "{pw}"\n  pool: 5\n', False),
        ("json", json.dumps({"host": host, "user": user, key: pw}), True),
        ("env", f"{key.upper()}={pw}\n", False),
        ("toml", f"[db]\nuser = \"{user}\"\n{key} = '{pw}'\n", False),
        ("xml", f"<datasource>\n  <user>{user}</user>\n  <{key}>{pw}</{key}>\n</datasource>\n", False),
        ("xml_attr", f'<property name="{key}" value="{pw}"/>', False),
        ("foreign_key", f"{foreign}: {pw}\n", False),
        ("cli_long", f"{prompt}backup-db --user {user} --password {pw} --host {host}\r\n", False),
        ("cli_equals", f"{prompt}psql-wrapper --db-password={pw} -h {host}\r\n", False),
        ("mysql_short", f"{prompt}mysql -u {user} -p'{pw}' -h {host} shop\r\n", False),
        (
            "mongo",
            f"{prompt}mongosh --host {host} -u {user} -p {pw} --authenticationDatabase admin\r\n",
            False,
        ),
        (
            "connection_string",
            f"Server={host};Database=shop;User Id={user};Password={pw};Encrypt=true;",
            False,
        ),
        ("stdin_pipe", f"{prompt}echo '{pw}' | sudo -S systemctl restart app\r\n", False),
        ("prose", f"Note for on-call: the admin password is {pw} until Friday.", False),
    ]


def _url_password(rng: random.Random) -> str:
    return _mixed(rng, ALNUM, rng.randint(10, 20)) + rng.choice(["", "_x", "-y", "~z"])


def generated_corpus(seed: int = 0) -> list[Sample]:
    """Secrets of every class in several contexts each, and look-alikes that must survive."""
    rng = random.Random(1_000_003 * seed + 17)
    prompt = f"{rng.choice(['dev', 'ubuntu', 'root'])}@{rng.choice(['box', 'ci-3', 'web02'])}:~$ "
    out: list[Sample] = []
    for cls, name, value in _vendor_tokens(rng):
        for ctx, text, is_json in rng.sample(_contexts(rng, name, value, prompt), 3):
            out.append(Sample(f"{cls} in {ctx}", text, [(cls, value)], is_json=is_json))
    # Vendor tokens alone on a line of output (no variable name to help): a token a command printed.
    for cls, _, value in _vendor_tokens(rng):
        if cls in ("aws_secret_key", "unnamed_vendor"):
            continue  # no format of their own: they need a name or context
        out.append(Sample(f"{cls} printed", f"{prompt}cat token.txt\r\n{value}\r\n{prompt}", [(cls, value)]))
    for _ in range(2):
        pw = _password_value(rng)
        for ctx, text, is_json in _password_contexts(rng, pw, prompt):
            out.append(Sample(f"password in {ctx}", text, [("password", pw)], is_json=is_json))
    # Passwords in URLs and .pgpass lines.
    for scheme, tmpl in [
        ("postgres", "postgres://{u}:{p}@db.internal:5432/shop"),
        ("postgresql", "postgresql://{u}:{p}@10.1.2.3/app?sslmode=require"),
        ("https", "https://{u}:{p}@git.example.com/org/repo.git"),
        ("redis", "redis://:{p}@cache:6379/0"),
        ("mongodb", "mongodb+srv://{u}:{p}@cluster0.abcde.mongodb.net/test"),
        ("amqp", "amqp://{u}:{p}@rabbit:5672/vhost"),
    ]:
        pw = _url_password(rng)
        url = tmpl.format(u=rng.choice(["app", "deploy", "u"]), p=pw)
        out.append(Sample(f"url password {scheme} env", f"DATABASE_URL={url}\n", [("url_password", pw)]))
        out.append(
            Sample(
                f"url password {scheme} cli", f"{prompt}client --url '{url}' ping\r\n", [("url_password", pw)]
            )
        )
        out.append(
            Sample(
                f"url password {scheme} json", json.dumps({"dsn": url}), [("url_password", pw)], is_json=True
            )
        )
    for _ in range(3):
        pw = _url_password(rng)
        line = f"{rng.choice(['db.internal', 'localhost', '*', 'pg-1.prod'])}:{rng.choice(['5432', '*'])}:{rng.choice(['shop', '*'])}:{rng.choice(['app', 'postgres'])}:{pw}"
        out.append(Sample("pgpass cat", f"{prompt}cat ~/.pgpass\r\n{line}\r\n{prompt}", [("pgpass", pw)]))
        out.append(Sample("pgpass echo", f"{prompt}echo '{line}' >> ~/.pgpass\r\n", [("pgpass", pw)]))
    # Private keys, plain and encrypted, raw and inside JSON (a GCP service-account key).
    for label, encrypted in [
        ("RSA PRIVATE KEY", False),
        ("RSA PRIVATE KEY", True),
        ("OPENSSH PRIVATE KEY", False),
        ("EC PRIVATE KEY", False),
        ("PRIVATE KEY", False),
        ("ENCRYPTED PRIVATE KEY", False),
        ("PGP PRIVATE KEY BLOCK", False),
        ("DSA PRIVATE KEY", True),
    ]:
        nl = rng.choice(["\n", "\r\n"])
        pem = _pem_block(rng, label, nl, encrypted)
        body = pem.split(nl)[-2]
        out.append(
            Sample(
                f"private key {label.lower()}",
                f"{prompt}cat key.pem{nl}{pem}{nl}{prompt}",
                [("private_key", body)],
            )
        )
    sa_pem = _pem_block(rng, "PRIVATE KEY") + "\n"
    sa_key_id = _rand(rng, HEX, 40)
    service_account = {
        "type": "service_account",
        "project_id": f"proj-{rng.randint(1000, 9999)}",
        "private_key_id": sa_key_id,
        "private_key": sa_pem,
        "client_email": f"ci@proj-{rng.randint(1000, 9999)}.iam.gserviceaccount.com",
        "client_id": str(rng.randint(10**20, 10**21)),
        "token_uri": "https://oauth2.googleapis.com/token",
    }
    sa_secrets = [("gcp_service_account", sa_pem.split("\n")[3]), ("gcp_service_account", sa_key_id)]
    out.append(
        Sample("gcp service account file", json.dumps(service_account, indent=2), sa_secrets, is_json=True)
    )
    out.append(
        Sample(
            "gcp service account cat",
            f"{prompt}cat sa.json\r\n{json.dumps(service_account, indent=2)}\r\n",
            sa_secrets,
        )
    )
    # kubeconfig: a client key as base64 PEM, a bearer token, a bootstrap token.
    key_data = base64.b64encode(_pem_block(rng, "RSA PRIVATE KEY").encode()).decode()
    cert_data = base64.b64encode(_pem_block(rng, "CERTIFICATE").replace("PRIVATE", "").encode()).decode()
    kube_token = _jwt(rng)
    boot = f"{_rand(rng, string.ascii_lowercase + string.digits, 6)}.{_rand(rng, string.ascii_lowercase + string.digits, 16)}"
    kubeconfig = (
        "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: " + cert_data + "\n"
        "    server: https://k8s.example.com:6443\n  name: prod\nusers:\n- name: admin\n  user:\n"
        f"    client-key-data: {key_data}\n    token: {kube_token}\n- name: boot\n  user:\n    token: {boot}\n"
    )
    out.append(
        Sample(
            "kubeconfig",
            kubeconfig,
            [("kubeconfig", key_data[40:120]), ("kubeconfig", kube_token), ("kubeconfig", boot)],
            ["certificate-authority-data: " + cert_data, "https://k8s.example.com:6443"],
        )
    )
    # Azure connection strings and SAS tokens.
    account_key = base64.b64encode(rng.randbytes(64)).decode()
    sb_key = base64.b64encode(rng.randbytes(32)).decode()
    sig = (
        base64.b64encode(rng.randbytes(32))
        .decode()
        .replace("+", "%2B")
        .replace("/", "%2F")
        .replace("=", "%3D")
    )
    out.append(
        Sample(
            "azure storage connection string",
            f"AZURE_STORAGE_CONNECTION_STRING=DefaultEndpointsProtocol=https;AccountName=acct{rng.randint(1, 99)};AccountKey={account_key};EndpointSuffix=core.windows.net\n",
            [("azure", account_key)],
        )
    )
    out.append(
        Sample(
            "azure service bus",
            json.dumps(
                {
                    "conn": f"Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey={sb_key}"
                }
            ),
            [("azure", sb_key)],
            is_json=True,
        )
    )
    out.append(
        Sample(
            "azure sas url",
            f"{prompt}azcopy copy big.tar 'https://acct.blob.core.windows.net/c/big.tar?sv=2022-11-02&ss=b&srt=o&sp=rw&se=2025-01-01T00:00:00Z&sig={sig}'\r\n",
            [("azure", sig)],
        )
    )
    # Webhook URLs: the URL is the credential.
    discord = f"https://discord.com/api/webhooks/{rng.randint(10**17, 10**18)}/{_mixed(rng, URLSAFE, 68)}"
    slack_hook = f"https://hooks.slack.com/services/T{_rand(rng, UPPER_DIGITS, 8)}/B{_rand(rng, UPPER_DIGITS, 8)}/{_mixed(rng, ALNUM, 24)}"
    for cls, hook in (("discord_webhook", discord), ("slack_webhook", slack_hook)):
        out.append(
            Sample(
                f"{cls} curl",
                f'{prompt}curl -X POST -d \'{{"content":"done"}}\' {hook}\r\n',
                [(cls, hook.rsplit("/", 1)[1])],
            )
        )
        out.append(
            Sample(
                f"{cls} json",
                json.dumps({"notify": {"url": hook}}),
                [(cls, hook.rsplit("/", 1)[1])],
                is_json=True,
            )
        )
    # Personal data with checksums and formats.
    for _ in range(4):
        card = _card(rng)
        out.append(
            Sample(
                "card in log",
                f"2024-05-02 11:04:12,512 INFO charge ok card={card} amount=42.00 EUR order=88123",
                [("card", card)],
            )
        )
        out.append(
            Sample(
                "card in json",
                json.dumps({"payment": {"card_number": card, "exp": "12/27", "amount": 4200}}),
                [("card", card)],
                is_json=True,
            )
        )
        out.append(Sample("card in prose", f"Please charge my card {card}, thanks!", [("card", card)]))
    for _ in range(4):
        iban = _iban(rng)
        out.append(
            Sample(
                "iban in prose",
                f"Überweisung bitte an IBAN {iban} (Kontoinhaber: Firma GmbH).",
                [("iban", iban)],
            )
        )
        out.append(
            Sample(
                "iban in json",
                json.dumps({"payee": {"iban": iban, "bic": "DEUTDEFF"}}),
                [("iban", iban)],
                is_json=True,
            )
        )
        out.append(
            Sample(
                "iban in csv",
                f"id,name,iban,amount\n{rng.randint(1, 999)},ACME,{iban},120.50\n",
                [("iban", iban)],
            )
        )
    for _ in range(6):
        phone = _phone(rng)
        out.append(
            Sample(
                "phone in ticket", f"Customer asked for a callback at {phone} after 5pm.", [("phone", phone)]
            )
        )
        out.append(
            Sample(
                "phone in json",
                json.dumps({"contact": {"phone": phone, "name": "K. Tanaka"}}),
                [("phone", phone)],
                is_json=True,
            )
        )
    for _ in range(4):
        email = _email(rng)
        out.append(
            Sample(
                "email in log",
                f"2024-05-02 11:04:12 INFO sent reset link to {email} (queue=mail)",
                [("email", email)],
            )
        )
        out.append(
            Sample(
                "email in git",
                f"{prompt}git log -1 --format='%an <%ae>'\r\nJane <{email}>\r\n",
                [("email", email)],
            )
        )
    out += _generated_lookalikes(rng, prompt)
    out += _program_message_samples(rng, prompt)
    return out


def generated_lookalikes(rng: random.Random) -> list[str]:
    """Strings that look like secrets or personal data and are neither."""
    sha = hashlib.sha1(rng.randbytes(8)).hexdigest()
    blob = base64.b64encode(rng.randbytes(rng.randint(48, 300))).decode()
    version = f"{rng.randint(1, 30)}.{rng.randint(0, 20)}.{rng.randint(0, 99)}"
    return [
        sha,
        sha[:7],
        sha[:12],
        hashlib.sha256(rng.randbytes(8)).hexdigest(),
        "sha256:" + hashlib.sha256(rng.randbytes(8)).hexdigest(),
        "sha512-" + base64.b64encode(hashlib.sha512(rng.randbytes(8)).digest()).decode(),
        hashlib.md5(rng.randbytes(8)).hexdigest(),
        str(uuid.UUID(int=rng.getrandbits(128))),
        str(uuid.UUID(int=rng.getrandbits(128))).upper(),
        blob,
        "data:image/png;base64," + blob,
        "2024-03-15T10:42:17.512Z",
        f"2024-03-15 10:42:{rng.randint(10, 59)},512",
        str(rng.randint(1_600_000_000, 1_800_000_000)),
        str(rng.randint(1_600_000_000_000, 1_800_000_000_000)),
        str(rng.randint(1_600_000_000_000_000_000, 1_800_000_000_000_000_000)),
        version,
        f"v{version}-rc.{rng.randint(1, 9)}",
        f"{rng.randint(1, 12)}.{rng.randint(0, 9)}.{rng.randint(0, 20000)}.{rng.randint(0, 9999)}",
        f"python{rng.randint(3, 3)}.{rng.randint(8, 13)}",
        f"localhost:{rng.randint(1024, 65535)}",
        f"0.0.0.0:{rng.choice([80, 443, 5432, 6379, 8080])}",
        f"took {rng.randint(100000, 99999999)} us",
        f"rows={rng.randint(1000, 99999999)}",
        f"pid {rng.randint(100, 4194304)}",
        f"{rng.randint(10**9, 10**12)} bytes",
        f"inode {rng.randint(10**12, 10**15)}",
        f"order #{rng.randint(10**11, 10**14)}",
        f"request_id={uuid.UUID(int=rng.getrandbits(128)).hex}",
        f"trace_id={_rand(rng, HEX, 32)}",
        f"app:build-{sha}",
        "TestTokenizerHandlesUnicode",
        "test_password_reset_sends_email",
        "PASSWORD_RESET_TIMEOUT = 3600",
        "password_hash = bcrypt.hashpw(password, salt)",
        "token_count = len(tokens)",
        "--password-stdin",
        "--password-file /run/secrets/db",
        "git@github.com:acme/app.git",
        "dev@box:~/src$ ",
        f"ssh -p 2222 deploy@{rng.choice(['bastion', 'jump'])}",
        f"image@sha256:{hashlib.sha256(rng.randbytes(4)).hexdigest()}",
        f'ETag: "{_rand(rng, HEX, 32)}"',
        f'resourceVersion: "{rng.randint(10**6, 10**9)}"',
        f"ISBN 978-{rng.randint(0, 9)}-{rng.randint(100, 999)}-{rng.randint(10000, 99999)}-{rng.randint(0, 9)}",
        f"lat={rng.uniform(-90, 90):.6f} lon={rng.uniform(-180, 180):.6f}",
        f"Processing chunk {rng.randint(1, 9)}/{rng.randint(10, 99)} at offset {rng.randint(10**6, 10**9)}",
    ]


def _generated_lookalikes(rng: random.Random, prompt: str) -> list[Sample]:
    items = generated_lookalikes(rng)
    out = [Sample("look-alikes in a log", "\n".join(items), [], items)]
    out.append(
        Sample(
            "look-alikes in json",
            json.dumps({"events": items[:20], "meta": {"build": items[0], "id": items[7]}}),
            [],
            items[:20],
            is_json=True,
        )
    )
    listing = (
        f"{prompt}git log --oneline -3\r\n{items[1]} fix: retry on 503\r\n{items[2][:7]} feat: add cache\r\n"
        f"{prompt}pip list | head -2\r\nrequests  2.31.0\r\nurllib3   {items[16]}\r\n"
        f"{prompt}docker images\r\napp  {items[17]}  {items[0][:12]}  2 days ago  {items[25]}\r\n"
    )
    out.append(
        Sample(
            "look-alikes in a session", listing, [], [items[1], "2.31.0", items[16], items[17], items[0][:12]]
        )
    )
    return out


def program_messages(rng: random.Random) -> list[str]:
    """What programs print about passwords, tokens and secrets, as they print it (English, German,
    French and Spanish where the program is translated): no line holds a credential."""
    user = rng.choice(["alice", "bob", "deploy", "www-data", "postgres", "ci"])
    host = rng.choice(["db.internal", "localhost", "10.0.3.7", "pg-1.prod"])
    registry = rng.choice(["registry.example.io", "ghcr.io", "quay.io", "index.docker.io"])
    n = rng.randint(2, 5)
    length = rng.choice([8, 10, 12])
    key = rng.choice(["id_ed25519", "id_rsa", "deploy_key"])
    return [
        # passwd / chpasswd / pwquality, English
        "passwd: password updated successfully",
        "passwd: password unchanged",
        "passwd: Authentication token manipulation error",
        "passwd: Have exhausted maximum number of retries for service",
        f"passwd: user '{user}' does not exist",
        f"BAD PASSWORD: The password is shorter than {length} characters",
        "BAD PASSWORD: it is based on a dictionary word",
        "BAD PASSWORD: The password fails the dictionary check - it is too simplistic/systematic",
        "Sorry, passwords do not match.",
        f"chpasswd: (user {user}) pam_chauthtok() failed, error:",
        "error: password: too short",
        "Password: incorrect",
        "password: too weak",
        # passwd / sudo / su, German
        "passwd: Passwort erfolgreich geändert",
        "passwd: Passwort nicht geändert",
        "passwd: Fehler beim Ändern des Authentifizierungs-Tokens",
        f"[sudo] Passwort für {user}: ",
        "sudo: Ein Passwort ist notwendig",
        f"sudo: {n} Fehlversuche bei der Passworteingabe",
        "su: Fehler bei der Authentifizierung",
        # passwd / sudo, French
        "passwd : mot de passe mis à jour avec succès",
        "passwd : mot de passe inchangé",
        "passwd : Erreur de manipulation du jeton d'authentification",
        f"[sudo] Mot de passe de {user} : ",
        f"sudo: {n} saisies de mots de passe incorrectes",
        # passwd, Spanish
        "passwd: contraseña actualizada correctamente",
        "passwd: la contraseña no ha cambiado",
        # sudo / su, English
        "sudo: a password is required",
        f"sudo: {n} incorrect password attempts",
        f"[sudo] password for {user}: ",
        "su: Authentication failure",
        # ssh / gpg
        f"{user}@{host.split('.')[0]}'s password: ",
        "Permission denied, please try again.",
        f"{user}@{host.split('.')[0]}: Permission denied (publickey,password).",
        f"Enter passphrase for key '/home/{user}/.ssh/{key}': ",
        f"Bad passphrase, try again for /home/{user}/.ssh/{key}: ",
        "gpg: signing failed: Bad passphrase",
        "gpg: public key decryption failed: Bad passphrase",
        "gpg: secret key not available",
        # git credential
        "remote: Invalid username or password.",
        "remote: Support for password authentication was removed on August 13, 2021.",
        "fatal: could not read Password for 'https://github.com': terminal prompts disabled",
        f"git: 'credential-{rng.choice(['osxkeychain', 'manager-core', 'libsecret'])}' is not a git command. See 'git --help'.",
        # npm / pip / twine
        "npm ERR! code E401",
        "npm ERR! Incorrect or missing password.",
        "npm error Unable to authenticate, your authentication token seems to be invalid.",
        "WARNING: 401 Error, Credentials not correct for https://pypi.example.com/simple/requests/",
        "Enter your API token: ",
        "ERROR    HTTPError: 403 Forbidden from https://upload.pypi.org/legacy/",
        # docker login
        f'Error response from daemon: Get "https://{registry}/v2/": unauthorized: incorrect username or password',
        f"WARNING! Your password will be stored unencrypted in /home/{user}/.docker/config.json.",
        "Error saving credentials: error storing credentials - err: exit status 1",
        # mysql / psql
        "mysql: [Warning] Using a password on the command line interface can be insecure.",
        f"ERROR 1045 (28000): Access denied for user '{user}'@'localhost' (using password: {rng.choice(['YES', 'NO'])})",
        f'psql: error: connection to server at "{host}", port 5432 failed: FATAL:  password authentication failed for user "{user}"',
        "psql: error: fe_sendauth: no password supplied",
        f"Password for user {user}: ",
        # files named after credentials
        f"/etc/passwd:{rng.randint(1, 40)}:{user}:x:{rng.randint(1000, 1999)}:{rng.randint(1000, 1999)}::/home/{user}:/bin/bash",
        "cat: /etc/shadow: Permission denied",
        "task start-etc-passwd: the start URL file:///etc/passwd is refused: scheme file is not allowed",
        "grep: /run/secrets/db_password: No such file or directory",
        "The token is re-issued every hour.",
    ]


def placeholders(rng: random.Random) -> list[str]:
    """Documentation snippets and templates that name a credential and hold a placeholder in its place."""
    name = rng.choice(["API_KEY", "DB_PASSWORD", "AUTH_TOKEN", "CLIENT_SECRET"])
    return [
        "password: <your password here>",
        f"export {name}=<your-{name.lower().replace('_', '-')}>",
        f"{name}=${{{name}}}",
        f'{name.lower()}: "{{{{ .Values.{name.lower()} }}}}"',
        "password = %s",
        "token: {token}",
        f"{name}=your_{name.lower()}_here",
        f"{name}=YOUR_{name}",
        "OPENAI_API_KEY=sk-...",
        "GITHUB_TOKEN=ghp_...",
        "password: ********",
        "SECRET_KEY=xxxxxxxxxxxxxxxx",
        f"--password <password> --token <{rng.choice(['token', 'api-token', 'TOKEN'])}>",
        "password: REPLACE_ME",
        "api_key: [your api key]",
    ]


def _program_message_samples(rng: random.Random, prompt: str) -> list[Sample]:
    """Program messages and placeholders on their own, in a terminal session, and in a tool result; plus
    the same syntax holding real credentials (a config line `passwd: X`, `PASSWORD=changeme`)."""
    messages = program_messages(rng)
    docs = placeholders(rng)
    result = rng.sample(messages, 10)
    session = "".join(
        f"{prompt}{cmd}\r\n{msg}\r\n"
        for cmd, msg in zip(
            [
                "passwd",
                "sudo -k true",
                "git push",
                "npm publish",
                "docker login",
                "mysql -u app -p",
                "psql -h db",
            ],
            rng.sample(messages, 7),
            strict=True,
        )
    )
    out = [
        Sample("program messages", "\n".join(messages), [], messages, lookalike_kind="program message"),
        Sample(
            "program messages in a session",
            session,
            [],
            [line for line in session.split("\r\n") if line and not line.startswith(prompt)],
            lookalike_kind="program message",
        ),
        Sample(
            "program messages in a tool result",
            json.dumps({"tool": "bash", "output": "\n".join(result), "exit_code": 1}, ensure_ascii=False),
            [],
            # As the JSON text holds them: lines with a quote or a backslash are escaped there.
            [line for line in result if '"' not in line and "\\" not in line],
            is_json=True,
            lookalike_kind="program message",
        ),
        Sample("placeholders in docs", "\n".join(docs), [], docs, lookalike_kind="placeholder"),
    ]
    # The same syntax with a credential in it still counts as one.
    pw = _password_value(rng)
    default = rng.choice(["changeme", "admin123", "letmein"])
    out.append(
        Sample(
            "credentials beside program messages",
            f"passwd: {pw}\nPASSWORD={default}\n{messages[0]}\nYour password is {pw[:-1]}!!\n",
            [("password", pw), ("password", default), ("password", pw[:-1])],
            [messages[0]],
            lookalike_kind="program message",
        )
    )
    return out
