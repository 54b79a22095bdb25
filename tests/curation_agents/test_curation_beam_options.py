"""The Beam job takes `worldline clean`'s redaction options, with the same meaning, on local files and on
a non-local filesystem; a `script` recording whose keystrokes are logged apart travels whole."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from curation_agents.clean_run import CleanRun
from curation_agents.model import CleanConfig
from pipelines.clean_beam import run

pytestmark = pytest.mark.slow

PHONE = "+1 415 555 0134"
IPV4 = "203.0.113.45"
IPV6 = "2001:db8:85a3::8a2e:370:7334"
EMAIL = "ada.lovelace@example.org"


def _session(i: int) -> str:
    messages = [
        {"role": "user", "content": f"task {i}: call {PHONE} or mail {EMAIL} about the server"},
        {"role": "assistant", "content": "```bash\nping -c1 web01\n```"},
        {"role": "user", "content": f"PING web01 ({IPV4}) 56 data bytes, v6 {IPV6}"},
        {"role": "assistant", "content": "```bash\nssh web01 uptime\n```"},
        {"role": "user", "content": "up 3 days, load average: 0.10 0.20 0.30"},
    ]
    return json.dumps({"messages": messages})


def _texts(rows: list[dict[str, Any]]) -> str:
    return json.dumps(rows, default=str)


def _local_rows(out: Path) -> str:
    return _texts(
        [r for p in sorted((out / "trajectories").rglob("*.parquet")) for r in pq.read_table(p).to_pylist()]
    )


@pytest.mark.parametrize(
    ("option", "gone", "kept"),
    [
        ("email,phone", [EMAIL, PHONE], [IPV4, IPV6]),  # the default, as `worldline clean`
        ("ip", [IPV4, IPV6], [EMAIL, PHONE]),
        ("phone,ip", [PHONE, IPV4, IPV6], [EMAIL]),
        ("none", [], [EMAIL, PHONE, IPV4, IPV6]),
    ],
)
def test_redact_pii_means_what_it_means_for_clean(
    tmp_path: Path, option: str, gone: list[str], kept: list[str]
) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "sessions.jsonl").write_text("\n".join(_session(i) for i in range(3)) + "\n")
    run(
        [
            str(inputs),
            "--out",
            str(tmp_path / "beam"),
            "--redact-pii",
            option,
            "--direct_running_mode=in_memory",
        ]
    )
    beam = _local_rows(tmp_path / "beam")
    pii = tuple(c for c in option.split(",") if c != "none")
    CleanRun([str(inputs)], tmp_path / "cli", CleanConfig(pii=pii)).run()
    cli = _local_rows(tmp_path / "cli")
    for blob in (beam, cli):
        assert "task 2" in blob
        assert not [s for s in gone if s in blob]
        assert all(s in blob for s in kept)
    assert json.loads((tmp_path / "beam" / "summary.json").read_text())["accepted"] == 3


def test_unknown_pii_class_is_refused_naming_the_choices(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        run(["in", "--out", "out", "--redact-pii", "email,passport"])
    err = capsys.readouterr().err
    assert "passport" in err and "email, card, iban, phone, ip" in err


def test_keystroke_log_travels_with_its_typescript_on_a_url_filesystem(tmp_path: Path) -> None:
    if shutil.which("script") is None or shutil.which("bash") is None:
        pytest.skip("needs script and bash")
    from tests.helpers.memfs import FILES, clear, upload_tree
    from tests.helpers.pty_recorder import record

    session = tmp_path / "session"
    session.mkdir()
    keys = ["echo hello\r", "read -s -p 'Password: ' pw\r", "Sup3rSecretValue\r", "echo ${#pw}\r", "exit\r"]
    flags = ["-T", "ts.timing", "-I", "ts.in", "-O", "ts"]
    record(["script", "-q", "-f", *flags, "-c", "bash --norc --noprofile -i"], keys, session / "pty.cast")
    (session / "pty.cast").unlink()
    clear("wltest://bucket/")
    upload_tree(session, "wltest://bucket/in/session")
    run(["wltest://bucket/in/session", "--out", "wltest://bucket/out", "--direct_running_mode=in_memory"])
    summary = json.loads(FILES["wltest://bucket/out/summary.json"])
    assert summary["records_in"] == summary["accepted"] == 1, summary
    parts = [v for k, v in FILES.items() if k.startswith("wltest://bucket/out/") and k.endswith(".parquet")]
    blob = _texts([r for data in parts for r in pq.read_table(io.BytesIO(data)).to_pylist()])
    assert "echo ${#pw}" in blob and "Sup3rSecretValue" not in blob
