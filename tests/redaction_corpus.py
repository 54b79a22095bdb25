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
    pii: frozenset[str] = frozenset({"email", "phone"})


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
