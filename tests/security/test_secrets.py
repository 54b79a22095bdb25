"""Secrets planted on every path into a pool must reach none of what the pipeline writes or sends.

Paths: a terminal trajectory collected on the real engine (its shard and its asciicast), a recording
cleaned by `worldline clean` (shards, quarantine, summary, checkpoints, the LLM curator's requests),
the AgentWorldBench import, a direct LLM request; then pools built from all of them and an
AgentWorldBench export. Passwords typed at prompts in other languages (and at a PEM pass-phrase
prompt) are read with echo off, so only the PTY's echo can give them away.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from collectors.collection import CollectConfig, collect
from collectors.recording import AsciicastWriter, remove_unpublished, take_redactions
from curation_agents import clean_run as clean_run_module
from curation_agents.agentworldbench_import import import_agentworldbench
from curation_agents.clean_run import CleanRun
from curation_agents.llm_stages import LLMCurator
from curation_agents.model import CleanConfig
from pipelines.build import resolve_inputs, run_build
from pipelines.config import PoolsConfig
from schemas import iter_trajectories
from schemas.agentworldbench import export_agentworldbench
from tests.helpers.redaction_corpus import (
    _card,
    _iban,
    _jwt,
    _pem_block,
    _phone,
    _url_password,
    _vendor_tokens,
)
from worldline.llm import SyncLLMClient

PROMPT_PASSWORDS = {
    "[sudo] Passwort für dev: ": "Geheim-Passwort-42",
    "[sudo] mot de passe de dev : ": "motdepasse-Secret-7",
    "パスワード: ": "kagi-Himitsu-993",
    "Enter PEM pass phrase:": "pem-Phrase-Zebra-5",
    "Пароль: ": "parol-Sekret-2024",
}


def _planted(seed: int) -> tuple[str, list[str]]:
    """A text holding one secret of most held-out-style classes, and the values that must vanish."""
    rng = random.Random(seed)
    values: list[str] = []
    lines = []
    for cls, name, value in _vendor_tokens(rng):
        if cls in (
            "slack",
            "stripe",
            "twilio",
            "telegram",
            "sendgrid",
            "dockerhub",
            "square",
            "mailgun",
            "unnamed_vendor",
        ):
            lines.append(f"{name}={value}")
            values.append(value)
    sa_pem = _pem_block(rng, "PRIVATE KEY") + "\n"
    lines.append(json.dumps({"type": "service_account", "private_key_id": "ab" * 20, "private_key": sa_pem}))
    values += ["ab" * 20, sa_pem.split("\n")[2]]
    kube_token = _jwt(rng)
    lines.append(f"users:\n- name: admin\n  user:\n    token: {kube_token}")
    values.append(kube_token)
    pgpass_pw, url_pw, redis_pw = (_url_password(rng) for _ in range(3))
    lines += [
        f"db.internal:5432:shop:app:{pgpass_pw}",
        f"DSN=postgres://app:{url_pw}@db:5432/x",
        f"redis://:{redis_pw}@cache:6379",
    ]
    values += [pgpass_pw, url_pw, redis_pw]
    card, iban, phone = _card(rng), _iban(rng), _phone(rng)
    lines += [f"card={card}", f"IBAN: {iban}", f"Rückruf unter {phone}"]
    values += [card, iban, phone]
    return "\n".join(lines) + "\n", values


def _blob(root: Path) -> str:
    parts: list[str] = []
    for f in sorted(root.rglob("*")):
        if not f.is_file():
            continue
        if f.suffix == ".parquet":
            parts.append(json.dumps(pq.read_table(f).to_pylist(), default=str, ensure_ascii=False))
        else:
            parts.append(f.read_bytes().decode("utf-8", "replace"))
    return "\n".join(parts)


def _cast_with_prompts(path: Path, secrets_text: str) -> None:
    """An asciicast of a session that types passwords at no-echo prompts and prints secrets."""
    events: list[list[Any]] = [[0.0, "o", "dev@box:~$ "]]
    t = 0.1

    def typed(text: str, echo: bool) -> None:
        nonlocal t
        for ch in text:
            events.append([round(t, 3), "i", ch])
            if echo:
                events.append([round(t + 0.01, 3), "o", ch])
            t += 0.05

    for prompt, password in PROMPT_PASSWORDS.items():
        typed("sudo -k true", echo=True)
        events.append([round(t, 3), "i", "\r"])
        events.append([round(t + 0.01, 3), "o", f"\r\n{prompt}"])
        t += 0.1
        typed(password, echo=False)
        events.append([round(t, 3), "i", "\r"])
        events.append([round(t + 0.01, 3), "o", "\r\ndev@box:~$ "])
        t += 0.1
    typed("cat secrets.txt", echo=True)
    events.append([round(t, 3), "i", "\r"])
    events.append([round(t + 0.01, 3), "o", "\r\n" + secrets_text.replace("\n", "\r\n") + "dev@box:~$ "])
    header = {"version": 2, "width": 120, "height": 30, "timestamp": 1700000000}
    path.write_text("\n".join(json.dumps(x, ensure_ascii=False) for x in [header, *events]) + "\n")


def _awb_sample(secrets_text: str) -> dict[str, Any]:
    first = "**Action:**\n```bash\ncat secrets.txt\n```"
    return {
        "task": "terminal",
        "id": 7,
        "turn_idx": 1,
        "total_turns": 1,
        "system_str": "You simulate a Linux terminal.",
        "prompt": [first],
        "response": ["**Environment Observation:**\n" + secrets_text],
        "current_prompt": first,
    }


def _leaks(values: list[str], roots: list[Path], requests: list[Any]) -> list[str]:
    blob = "\n".join(
        [*(_blob(p) for p in roots), *(json.dumps(r.body, ensure_ascii=False) for r in requests)]
    )
    return [v for v in values if v in blob]


@pytest.mark.engine
def test_a_collected_terminal_trajectory_and_its_cast_hold_no_planted_secret(tmp_path: Path) -> None:
    secrets_text, values = _planted(5)
    values += list(PROMPT_PASSWORDS.values())
    # Passwords typed at no-echo prompts in five languages, then a file of secrets printed.
    actions: list[Any] = []
    for i, (prompt, password) in enumerate(PROMPT_PASSWORDS.items()):
        read = f"read -rs -p '{prompt}' P{i}; echo; echo got ${{#P{i}}}\n"
        actions += [{"keystrokes": read, "duration": 2}, {"keystrokes": password + "\n", "duration": 2}]
    actions.append("cat secrets.txt")
    task = {
        "id": "plant",
        "instruction": "show the settings",
        "files": {"secrets.txt": secrets_text},
        "actions": actions,
    }
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps(task, ensure_ascii=False) + "\n")
    collected = tmp_path / "collected"
    summary = collect(CollectConfig(env="terminal", tasks_path=tasks, policy="scripted", out=collected))
    [trajectory] = list(iter_trajectories(collected))
    assert trajectory.status.value == "complete", trajectory.status_reason
    assert summary.redactions["unechoed_input"] == len(PROMPT_PASSWORDS), summary.redactions
    assert list((collected / "casts").glob("*.cast")), "the session was recorded"
    # The passwords were typed: the terminal really read them (the shell reports their lengths).
    shown = "\n".join(t.observation.text for t in trajectory.turns)
    assert all(f"got {len(pw)}" in shown for pw in PROMPT_PASSWORDS.values()), shown
    exported = tmp_path / "exported"
    export_agentworldbench([trajectory], exported)
    leaked = _leaks(values, [collected, exported], [])
    assert not leaked, f"{len(leaked)} of {len(values)} planted values leaked, e.g. {leaked[:3]}"
    kinds = Counter(trajectory.metadata.get("redaction_kinds") or {})
    assert {"card", "iban", "phone", "password", "unechoed_input"} <= set(kinds), kinds


def test_cleaned_traces_the_awb_import_llm_requests_pools_and_exports_hold_no_planted_secret(
    tmp_path: Path, fake_llm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    secrets_text, values = _planted(6)
    values += list(PROMPT_PASSWORDS.values())

    # A recording cleaned by the cleaner, with its LLM curator on the fake server.
    raw = tmp_path / "raw"
    raw.mkdir()
    _cast_with_prompts(raw / "session.cast", secrets_text)
    fake_llm.set_default(
        lambda req: '{"domain": "terminal", "score": 0.9, "why": "shell", "reasons": ["ok"]}'
    )
    monkeypatch.setattr(
        clean_run_module,
        "_make_curator",
        lambda budget=None: LLMCurator(SyncLLMClient(fake_llm.config(cache_path=None))),
    )
    cleaned = tmp_path / "cleaned"
    clean_summary = CleanRun(
        [str(raw)], cleaned, CleanConfig(use_llm=True, unsure_band=1.0), checkpoint="always"
    ).run()
    assert clean_summary["accepted"] == 1, clean_summary
    assert clean_summary["redactions"]["unechoed_input"] == len(PROMPT_PASSWORDS), clean_summary

    # The AgentWorldBench import.
    awb_in = tmp_path / "awb" / "terminal_test.jsonl"
    awb_in.parent.mkdir()
    awb_in.write_text(json.dumps(_awb_sample(secrets_text), ensure_ascii=False) + "\n")
    imported = tmp_path / "imported"
    report = import_agentworldbench([awb_in], imported)
    assert report.trajectories_written == 1 and report.redactions, report.to_json()

    # A direct LLM request (a judge's or a policy's) with secrets in its messages.
    with SyncLLMClient(fake_llm.config(cache_path=None)) as client:
        fake_llm.set_default(lambda req: "ok")
        client.chat("judge", [{"role": "user", "content": "Rate this session:\n" + secrets_text}])
        assert client.client.redactions["card"] >= 1

    # Pools built from what was written, and an export of it.
    cfg = PoolsConfig.load(None)
    pools = tmp_path / "pools"
    run_build(resolve_inputs([str(cleaned), str(imported)], [], [], cfg), str(pools), cfg, [])
    exported = tmp_path / "exported"
    export_agentworldbench([t for r in (cleaned, imported) for t in iter_trajectories(r)], exported)

    assert fake_llm.all_requests and any(pools.rglob("*.parquet"))
    leaked = _leaks(values, [cleaned, imported, pools, exported], fake_llm.all_requests)
    assert not leaked, f"{len(leaked)} of {len(values)} planted values leaked, e.g. {leaked[:3]}"


def test_a_recording_is_redacted_before_it_is_published(tmp_path: Path) -> None:
    """The collector's AsciicastWriter: what reaches OUT/casts is redacted; the unechoed text is handed
    to the runner in memory; a killed run's half-written recording is removed, never published."""
    secrets_text, values = _planted(7)
    path = tmp_path / "casts" / "t.cast"
    writer = AsciicastWriter(path, cols=80, rows=24)
    writer.output(b"dev@box:~$ ")
    for ch in "sudo -v\r":
        writer.input(ch)
        writer.output(ch.encode().replace(b"\r", b"\r\n"))
    writer.output("[sudo] Passwort für dev: ".encode())
    for ch in "Geheim-Passwort-42\r":
        writer.input(ch)
    writer.output(b"\r\ndev@box:~$ ")
    half = len(secrets_text) // 2  # a secret printed in two writes is still one secret
    writer.output(secrets_text[:half].encode())
    writer.output(secrets_text[half:].encode())
    writer.close()
    text = path.read_text(encoding="utf-8")
    leaked = [v for v in [*values, "Geheim-Passwort-42"] if v in text]
    assert not leaked, leaked
    typed, counts = take_redactions(path)
    assert typed == ["Geheim-Passwort-42"] and counts["unechoed_input"] == 1, (typed, counts)
    assert take_redactions(path) == ([], Counter())  # handed out once, then forgotten

    stale = tmp_path / "casts" / ".killed.cast.tmp"
    stale.write_text('{"version": 2}\n[0.1, "o", "' + values[0] + '"]\n')
    assert remove_unpublished(tmp_path / "casts") == 1 and not stale.exists() and path.exists()
