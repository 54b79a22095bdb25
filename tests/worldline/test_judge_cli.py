"""`worldline judge` and `worldline sft rejection-sample` against the scripted server."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from schemas.agentworldbench import write_samples
from tests.helpers.fakellm import FakeLLMServer, FakeReply, last_user_message
from tests.helpers.judge_data import awb_sample, comparing_judge, prediction
from worldline.cli import app

runner = CliRunner()


@pytest.fixture
def env(fake_llm: FakeLLMServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeLLMServer:
    monkeypatch.setenv("WORLDLINE_LLM_BASE_URL", fake_llm.base_url)
    monkeypatch.setenv("WORLDLINE_LLM_API_KEY", "test")
    monkeypatch.setenv("WORLDLINE_LLM_MODEL", "fake-model")
    monkeypatch.setenv("WORLDLINE_LLM_CACHE", str(tmp_path / "cache.sqlite"))
    monkeypatch.setenv("WORLDLINE_LLM_CONCURRENCY", "4")
    return fake_llm


def write_predictions(tmp_path: Path) -> tuple[Path, Path]:
    """eval.py infer lines (full samples + gen), short lines resolved by the reference, one bad line."""
    reference = tmp_path / "ref"
    reference.mkdir()
    samples = [awb_sample(i, "terminal") for i in range(3)] + [awb_sample(i, "mcp") for i in range(3, 5)]
    write_samples(reference / "terminal_test.jsonl", samples[:3])
    write_samples(reference / "mcp_test.jsonl", samples[3:])
    lines = [json.dumps({**samples[0].to_json(), "gen": prediction("content 0 2")})]
    lines.append(json.dumps({**samples[1].to_json(), "gen": "forgot the block"}))
    lines.append(json.dumps({"task": "terminal", "id": 2, "turn_idx": 2, "gen": prediction("wrong")}))
    lines += [
        json.dumps({"task": "mcp", "id": i, "turn_idx": 2, "gen": prediction(f"content {i} 2")})
        for i in (3, 4)
    ]
    lines += ["not json", json.dumps({"task": "os", "id": 99, "turn_idx": 1, "gen": "x"})]
    path = tmp_path / "predictions.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path, reference


def test_judge_writes_results_and_both_reports_and_reruns_for_free(
    env: FakeLLMServer, tmp_path: Path
) -> None:
    env.set_default(comparing_judge)
    predictions, reference = write_predictions(tmp_path)
    out = tmp_path / "out"
    args = ["judge", str(predictions), "--reference", str(reference), "--out", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(results) == 5 and len(env.requests) == 4  # the missing block costs no call
    by_id = {r["sample_id"]: r for r in results}
    assert by_id["terminal/1/2"]["failure"] == "no_prediction:no_block"
    assert by_id["terminal/0/2"]["normalised"] == 100.0 and by_id["terminal/2/2"]["normalised"] == 25.0
    report = json.loads((out / "report.json").read_text())
    terminal = report["report"]["terminal"]
    assert terminal["failed"] == 1 and terminal["valid_only"]["total"] == pytest.approx(62.5)
    assert terminal["failures_as_zero"]["total"] == pytest.approx(125 / 3)
    assert report["rejected_lines"] == 2 and len((out / "rejected_lines.jsonl").read_text().splitlines()) == 2
    assert "| terminal | 3 | 1 (33.3%) |" in (out / "report.md").read_text()

    again = runner.invoke(app, args)
    assert again.exit_code == 0, again.output
    assert len(env.requests) == 4 and "LLM calls=0" in again.output
    assert json.loads((out / "report.json").read_text())["report"] == report["report"]


def test_judge_budget_stops_and_a_rerun_finishes(env: FakeLLMServer, tmp_path: Path) -> None:
    env.set_default(comparing_judge)
    predictions, reference = write_predictions(tmp_path)
    out = tmp_path / "out"
    args = ["judge", str(predictions), "--reference", str(reference), "--out", str(out), "--concurrency", "1"]
    stopped = runner.invoke(app, [*args, "--budget", "2"])
    assert stopped.exit_code == 3 and "stopped early" in stopped.output
    finished = (out / "results.jsonl").read_text().splitlines()
    assert len(env.requests) == 2 and len(finished) >= 2
    done = runner.invoke(app, args)
    assert done.exit_code == 0, done.output
    assert len(env.requests) == 4 and len((out / "results.jsonl").read_text().splitlines()) == 5


def test_judge_probe_writes_shifts(env: FakeLLMServer, tmp_path: Path) -> None:
    env.set_default(comparing_judge)
    predictions, reference = write_predictions(tmp_path)
    out = tmp_path / "out"
    result = runner.invoke(
        app, ["judge", str(predictions), "--reference", str(reference), "--out", str(out), "--probe", "2"]
    )
    assert result.exit_code == 0, result.output
    probe = json.loads((out / "probe.json").read_text())
    assert probe["probed"] == 2 and set(probe["shifts"]) == {"padded", "reordered", "verbose"}
    assert "probe padded" in result.output


def test_commands_without_an_endpoint_name_the_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WORLDLINE_LLM_BASE_URL", raising=False)
    predictions, reference = write_predictions(tmp_path)
    judged = runner.invoke(app, ["judge", str(predictions), "--out", str(tmp_path / "o")])
    assert judged.exit_code == 2 and "WORLDLINE_LLM_BASE_URL" in judged.output
    assert "WORLDLINE_LLM_MODEL_JUDGE" in judged.output
    sft = runner.invoke(app, ["sft", "rejection-sample", str(predictions), "--out", str(tmp_path / "s")])
    assert sft.exit_code == 2 and "WORLDLINE_LLM_BASE_URL" in sft.output


# --- SFT rejection sampling --------------------------------------------------------------------------

_SIM = re.compile(r"\*\*Simulated Output ([AB]):\*\*\n(`{3,})\n(.*?)\n\2", re.DOTALL)
_TRUTH = re.compile(r"\*\*Ground Truth \(Real Output\):\*\*\n(`{3,})\n(.*?)\n\1", re.DOTALL)


def sft_rows(tmp_path: Path) -> Path:
    rows = []
    for i, domain in enumerate(["terminal", "terminal", "mcp", "mcp"]):
        hard = "HARD " if i == 3 else ""
        user = f"### Turn 1\n**Action:**\n```text\n{hard}cat f{i}\n```\n"
        rows.append(
            {
                "messages": [
                    {"role": "system", "content": "You simulate the environment."},
                    {"role": "user", "content": user},
                    {
                        "role": "assistant",
                        "content": f"<predicted_observation>\ntruth {i}\n</predicted_observation>",
                    },
                ],
                "trajectory_id": f"t{i}",
                "turn_index": 1,
                "template_version": 2,
                "domain": domain,
            }
        )
    path = tmp_path / "sft.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def scripted_models() -> Any:
    """Rollout model: per prompt, the 1st answer is right, the 2nd padded, the 3rd wrong (all wrong when
    the action says HARD). Judge: comparing_judge. Pairwise: the output equal to the truth wins."""
    seen: Counter[str] = Counter()

    def respond(request: dict[str, Any]) -> FakeReply:
        user = last_user_message(request)
        system = request["messages"][0]["content"]
        if "**Simulated Output A:**" in user:
            truth = _TRUTH.search(user)
            outputs = {m.group(1): m.group(3) for m in _SIM.finditer(user)}
            winner = "B" if truth and outputs.get("B") == truth.group(2) else "A"
            return FakeReply(
                text=f'<final_evaluation>```json\n{{"winner": "{winner}"}}\n```</final_evaluation>'
            )
        if "reference-grounded judge" in system:
            return comparing_judge(request)
        number = re.search(r"cat f(\d)", user)
        assert number is not None
        i = int(number.group(1))
        seen[user] += 1
        k = seen[user]
        right = f"truth {i}"
        text = {1: right, 2: f"{right}\n{right}", 3: "nonsense"}.get(k, "nonsense")
        if "HARD" in user:
            text = "nonsense"
        return FakeReply(text=prediction(text), reasoning_content=f"thinking about f{i} (rollout {k})")

    return respond


def test_rejection_sampling_keeps_the_best_above_the_threshold_and_resumes(
    env: FakeLLMServer, tmp_path: Path
) -> None:
    env.set_default(scripted_models())
    pool, out = sft_rows(tmp_path), tmp_path / "rs"
    args = ["sft", "rejection-sample", str(pool), "--out", str(out), "--rollouts", "3", "--threshold", "60"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "judge and the rollout model are both 'fake-model'" in result.output
    kept = [json.loads(line) for line in (out / "sft_rejection_sampled.jsonl").read_text().splitlines()]
    assert [k["trajectory_id"] for k in kept] == ["t0", "t1", "t2"]
    answer = kept[0]["messages"][-1]
    assert answer["role"] == "assistant" and answer["content"].startswith("<think>\nthinking about f0")
    assert answer["content"].endswith("<predicted_observation>\ntruth 0\n</predicted_observation>")
    assert kept[0]["judge_normalised"] == 100.0
    decisions = {d["key"]: d for d in map(json.loads, (out / "decisions.jsonl").read_text().splitlines())}
    assert (
        decisions["sft:t3:1"]["reason"] == "below_threshold" and decisions["sft:t0:1"]["pairwise"]["winner"]
    )
    card = json.loads((out / "card.json").read_text())
    assert card["retain"]["terminal"] == {"candidates": 2, "kept": 2, "retain_rate": 1.0}
    assert card["retain"]["mcp"]["retain_rate"] == 0.5 and card["retain"]["total"]["kept"] == 3
    assert "| mcp | 2 | 1 | 50.0% |" in (out / "README.md").read_text()
    # judged text is the prediction only: no reasoning reaches the judge
    judge_users = [
        r.messages[1]["content"] for r in env.requests if "reference-grounded" in r.messages[0]["content"]
    ]
    assert judge_users and not any("thinking about" in u for u in judge_users)

    calls = len(env.requests)
    (out / "decisions.jsonl").write_text(
        "\n".join((out / "decisions.jsonl").read_text().splitlines()[:2]) + "\n"
    )
    rerun = runner.invoke(app, args)
    assert rerun.exit_code == 0, rerun.output
    assert len(env.requests) == calls  # undecided queries are answered by the cache
    assert (out / "sft_rejection_sampled.jsonl").read_text().count("\n") == 3


def test_rejection_sampling_reads_pool_parts(tmp_path: Path) -> None:
    """Queries come from SFT pool parts as the pool build writes them (the target is the truth)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pipelines.config import PoolsConfig
    from pipelines.render import Lineage, sft_rows
    from pipelines.rows import SFT_SCHEMA
    from schemas.templates import load_template_set
    from schemas.trajectory import SourceKind
    from tests.helpers.pools_data import terminal
    from worldline.sft_rejection import read_queries
    from worldline.tokenizer import get_token_counter

    cfg = PoolsConfig.load(None)
    traj = terminal("t-sft", "g", SourceKind.INHOUSE, 5, turns=3)
    rows, _ = sft_rows(
        traj,
        Lineage("g", "inhouse", "c"),
        cfg,
        load_template_set(cfg.templates_dir),
        get_token_counter(cfg.tokenizer),
    )
    (tmp_path / "sft").mkdir()
    pq.write_table(pa.Table.from_pylist(rows, schema=SFT_SCHEMA), tmp_path / "sft" / "part-00000.parquet")
    queries = list(read_queries(tmp_path))
    assert [q.key for q in queries] == [r["sample_id"] for r in rows]
    assert [q.ground_truth for q in queries] == [t.observation.text for t in traj.turns]
    for q in queries:  # the evaluator's conversation up to the current action, without the target
        turn = int(q.row["turn_index"])
        assert [m["role"] for m in q.messages] == ["system"] + ["user", "assistant"] * (turn - 1) + ["user"]
    assert queries[0].domain == "terminal" and queries[2].row["turn_index"] == 3


def test_rejection_sampling_retries_queries_the_endpoint_never_answered(
    env: FakeLLMServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORLDLINE_LLM_MAX_RETRIES", "0")
    env.set_default(lambda _request: FakeReply.server_error(503))
    pool, out = sft_rows(tmp_path), tmp_path / "rs"
    args = ["sft", "rejection-sample", str(pool), "--out", str(out), "--threshold", "60", "--limit", "1"]
    assert runner.invoke(app, args).exit_code == 0
    first = json.loads((out / "decisions.jsonl").read_text().splitlines()[0])
    assert first["reason"] == "no_valid_rollout" and {r["failure"] for r in first["rollouts"]} == {
        "rollout_failed"
    }
    env.set_default(scripted_models())
    assert runner.invoke(app, args).exit_code == 0
    card = json.loads((out / "card.json").read_text())
    assert card["decided"] == 1 and card["retain"]["total"]["kept"] == 1


def test_span_labels_option_checks_deterministic_spans_of_exported_samples(
    env: FakeLLMServer, tmp_path: Path
) -> None:
    """`--span-labels`: a sample of an AgentWorldBench export (its id is the trajectory's id) gets the
    exact check of its deterministic spans: a prediction that differs only in the PID is exact, one
    that differs in the file content is not; without labels no sample gets the check."""
    from dataclasses import replace

    from schemas.span_labels import TurnLabels, label_observation, write_span_labels

    original, replay = "48213\nalpha beta\ngamma 42\n", "51877\nalpha beta\ngamma 42\n"
    env.set_default(comparing_judge)
    base = awb_sample(0, "terminal")
    responses = list(base.response)
    responses[1] = f"**Environment Observation:**\n{original}"
    sample = replace(base, id="traj-1", response=responses)
    reference = tmp_path / "ref"
    reference.mkdir()
    write_samples(reference / "terminal_test.jsonl", [sample])
    labels = tmp_path / "labels" / "span_labels.parquet"
    spans = tuple(label_observation(original, [replay]))
    write_span_labels(labels, [TurnLabels("traj-1", 1, spans, 1, False, None)])
    tiers = {}
    for name, text in (
        ("runtime", "90412\nalpha beta\ngamma 42\n"),
        ("content", "48213\nalpha beta\ngamma 43\n"),
    ):
        predictions = tmp_path / f"{name}.jsonl"
        predictions.write_text(json.dumps({**sample.to_json(), "gen": prediction(text)}) + "\n")
        for with_labels in (True, False):
            out = tmp_path / f"out-{name}-{with_labels}"
            args = ["judge", str(predictions), "--out", str(out)]
            args += ["--span-labels", str(labels.parent)] if with_labels else []
            result = runner.invoke(app, args)
            assert result.exit_code == 0, result.output
            [row] = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
            tiers[name, with_labels] = row.get("meta", {}).get("content_tiers")
    assert tiers["runtime", True]["exact"] is True and tiers["runtime", True]["source"] == "labels"
    assert tiers["content", True]["exact"] is False
    assert tiers["runtime", False] is None and tiers["content", False] is None
    bad = runner.invoke(
        app, ["judge", str(predictions), "--out", str(tmp_path / "x"), "--span-labels", str(tmp_path)]
    )
    assert bad.exit_code == 2 and "--span-labels" in bad.output
