"""The shared LLM client against the scripted fake server, always through the real openai package."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any, TypeVar

import openai
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.helpers.fakellm import FakeLLMServer, FakeReply, FakeToolCall
from worldline.llm import (
    BudgetExceeded,
    ChatRequest,
    ChatResult,
    LLMClient,
    LLMConfig,
    LLMNotConfigured,
    ModelPrice,
    RequestRejected,
    RetriesExhausted,
    Role,
    SyncLLMClient,
    endpoint_configured,
    extract_predicted_observation,
    parse_json_lenient,
    parse_json_object,
    parse_predicted_observation,
    split_reasoning,
    strip_think,
)
from worldline.llm.parsing import parse_tool_arguments
from worldline.llm.retry import backoff_delay, retry_after_seconds

T = TypeVar("T")
USER = [{"role": "user", "content": "What does `ls /tmp` print?"}]


def run(coroutine: Awaitable[T]) -> T:
    async def _main() -> T:
        return await coroutine

    return asyncio.run(_main())


def chat_once(client: LLMClient, role: Role = Role.WORLD_MODEL, **kwargs: Any) -> ChatResult:
    async def _main() -> ChatResult:
        try:
            return await client.chat(role, kwargs.pop("messages", USER), **kwargs)
        finally:
            await client.aclose()

    return asyncio.run(_main())


def recording_sleep(delays: list[float]) -> Callable[[float], Awaitable[None]]:
    async def _sleep(seconds: float) -> None:
        delays.append(seconds)

    return _sleep


# --- retries ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fault",
    [
        FakeReply.rate_limited(retry_after=0),
        FakeReply.server_error(500),
        FakeReply.server_error(503),
        FakeReply.slow(delay_s=1.5),
        FakeReply.malformed_body(),
        FakeReply.dropped_connection(),
        FakeReply.malformed_body(b'{"object": "chat.completion", "choices": []}'),
        FakeReply.malformed_body(b"<html>502 Bad Gateway</html>"),
    ],
    ids=["429", "500", "503", "timeout", "malformed", "drop", "no-choices", "html"],
)
def test_retryable_fault_is_retried_then_succeeds(fake_llm: FakeLLMServer, fault: FakeReply) -> None:
    fake_llm.script(fault, fault, "the real answer")
    client = LLMClient(fake_llm.config(timeout_s=0.3))

    result = chat_once(client)

    assert result.text == "the real answer"
    assert result.attempts == 3
    assert len(fake_llm.requests) == 3
    assert client.usage["totals"]["retries"] == 2
    assert client.usage["totals"]["calls"] == 1
    assert client.usage["totals"]["failures"] == 0
    # every request is counted (and charged to the budget) before it is sent, retries included
    assert client.usage["totals"]["requests"] == 3


@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_other_4xx_is_not_retried(fake_llm: FakeLLMServer, status: int) -> None:
    fake_llm.script(FakeReply(status=status, error_message="model 'nope' does not exist"), "unused")
    client = LLMClient(fake_llm.config())

    with pytest.raises(RequestRejected) as raised:
        chat_once(client)

    assert raised.value.status_code == status
    assert isinstance(raised.value.last_cause, openai.APIStatusError)
    assert "does not exist" in str(raised.value)
    assert len(fake_llm.requests) == 1
    assert fake_llm.pending_script == 1
    assert client.usage["totals"]["failures"] == 1


def test_exhausted_retries_raise_with_last_cause(fake_llm: FakeLLMServer) -> None:
    fake_llm.script(
        FakeReply.server_error(502), FakeReply.rate_limited(0), FakeReply.server_error(500), "late"
    )
    client = LLMClient(fake_llm.config(max_retries=2))

    with pytest.raises(RetriesExhausted) as raised:
        chat_once(client, role=Role.JUDGE)

    failure = raised.value
    assert failure.attempts == 3
    assert failure.role == "judge"
    assert isinstance(failure.last_cause, openai.InternalServerError)
    assert failure.last_cause.status_code == 500
    assert [request.reply_kind for request in fake_llm.requests] == ["http_502", "http_429", "http_500"]
    usage = client.usage["totals"]
    assert (usage["calls"], usage["failures"], usage["retries"], usage["requests"]) == (1, 1, 2, 3)
    assert client.usage["budget"]["calls_in_flight"] == 0


def test_retry_after_header_is_honoured_and_capped(fake_llm: FakeLLMServer) -> None:
    fake_llm.script(FakeReply.rate_limited(retry_after=0.25), FakeReply.rate_limited(retry_after=30), "ok")
    client = LLMClient(fake_llm.config(retry_after_max_s=0.5, backoff_base_s=5.0, backoff_max_s=5.0))
    delays: list[float] = []
    client.sleep = recording_sleep(delays)

    assert chat_once(client).text == "ok"
    assert delays == [0.25, 0.5]


def test_retry_after_parsing_and_backoff_bounds() -> None:
    assert retry_after_seconds({"Retry-After": "7"}) == 7.0
    assert retry_after_seconds({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert retry_after_seconds({"Retry-After": "soon"}) is None
    assert retry_after_seconds({}) is None
    future = datetime(2030, 1, 1, tzinfo=UTC)
    now = (future - timedelta(seconds=42)).timestamp()
    assert retry_after_seconds({"Retry-After": format_datetime(future, usegmt=True)}, now=now) == 42.0
    for attempt in range(1, 10):
        step = min(8.0, 0.5 * 2 ** (attempt - 1))
        delay = backoff_delay(attempt, base_s=0.5, max_s=8.0)
        assert step / 2 <= delay <= step
    assert backoff_delay(3, base_s=1, max_s=10, retry_after_s=400, retry_after_max_s=60) == 60


# --- cache -----------------------------------------------------------------------------------------


def test_rerun_is_a_cache_hit_and_sends_nothing(fake_llm: FakeLLMServer) -> None:
    client = LLMClient(fake_llm.config())

    async def _main() -> tuple[ChatResult, ChatResult]:
        first = await client.chat(Role.WORLD_MODEL, USER, temperature=0.7, max_tokens=64)
        second = await client.chat(Role.WORLD_MODEL, USER, temperature=0.7, max_tokens=64)
        await client.aclose()
        return first, second

    first, second = run(_main())
    assert len(fake_llm.requests) == 1
    assert (first.cached, second.cached) == (False, True)
    assert second.text == first.text and second.cache_key == first.cache_key
    assert (second.prompt_tokens, second.completion_tokens) == (first.prompt_tokens, first.completion_tokens)
    totals = client.usage["totals"]
    assert (totals["calls"], totals["cache_hits"]) == (1, 1)
    assert totals["prompt_tokens"] == first.prompt_tokens


@pytest.mark.parametrize(
    "change",
    [
        {"sample_index": 1},
        {"temperature": 0.8},
        {"top_p": 0.9},
        {"max_tokens": 65},
        {"model": "another-model"},
        {"tools": [{"type": "function", "function": {"name": "ls", "parameters": {}}}]},
        {"top_k": 20},
        {"messages": [{"role": "user", "content": "What does `ls /` print?"}]},
    ],
    ids=lambda change: next(iter(change)),
)
def test_any_request_change_is_a_cache_miss(fake_llm: FakeLLMServer, change: dict[str, Any]) -> None:
    client = LLMClient(fake_llm.config())
    base: dict[str, Any] = {"temperature": 0.7, "max_tokens": 64}

    async def _main() -> None:
        await client.chat(Role.ROLLOUT, USER, **base)
        await client.chat(Role.ROLLOUT, **{"messages": USER, **base, **change})
        await client.aclose()

    run(_main())
    assert len(fake_llm.requests) == 2
    assert client.usage["totals"]["cache_hits"] == 0


def test_cache_survives_new_client_and_ignores_base_url(fake_llm: FakeLLMServer, tmp_path: Path) -> None:
    cache_path = tmp_path / "shared.sqlite"
    first = chat_once(LLMClient(fake_llm.config(cache_path=cache_path)), temperature=1.0, sample_index=2)

    with FakeLLMServer() as replica:
        again = chat_once(LLMClient(replica.config(cache_path=cache_path)), temperature=1.0, sample_index=2)
        assert replica.requests == []
    assert again.cached and again.text == first.text
    assert len(fake_llm.requests) == 1


def test_cache_can_be_disabled(fake_llm: FakeLLMServer) -> None:
    chat_once(LLMClient(fake_llm.config(cache_path=None)))
    chat_once(LLMClient(fake_llm.config(cache_path=None)))
    client = LLMClient(fake_llm.config())
    chat_once(client)
    chat_once(LLMClient(fake_llm.config()), use_cache=False)
    assert len(fake_llm.requests) == 4


def test_chat_samples_are_distinct_cache_entries(fake_llm: FakeLLMServer) -> None:
    client = LLMClient(fake_llm.config())
    fake_llm.script("rollout A", "rollout B", "rollout C")

    async def _main() -> tuple[list[ChatResult], list[ChatResult]]:
        first = await client.chat_samples(Role.ROLLOUT, USER, 3, temperature=1.0)
        second = await client.chat_samples(Role.ROLLOUT, USER, 3, temperature=1.0)
        await client.aclose()
        return first, second

    first, second = run(_main())
    assert sorted(result.text for result in first) == ["rollout A", "rollout B", "rollout C"]
    assert [result.sample_index for result in first] == [0, 1, 2]
    assert len({result.cache_key for result in first}) == 3
    assert [result.text for result in second] == [result.text for result in first]
    assert all(result.cached for result in second)
    assert len(fake_llm.requests) == 3


# --- budget ----------------------------------------------------------------------------------------


def test_call_budget_stops_before_sending(fake_llm: FakeLLMServer) -> None:
    client = LLMClient(fake_llm.config(max_calls=2))

    async def _main() -> None:
        await client.chat(Role.JUDGE, [{"role": "user", "content": "one"}])
        await client.chat(Role.JUDGE, [{"role": "user", "content": "two"}])
        with pytest.raises(BudgetExceeded) as raised:
            await client.chat(Role.JUDGE, [{"role": "user", "content": "three"}])
        assert raised.value.limit_name == "max_calls"
        assert "WORLDLINE_LLM_MAX_CALLS" in str(raised.value)
        # A cached request costs nothing and is still served once the budget is spent.
        cached = await client.chat(Role.JUDGE, [{"role": "user", "content": "one"}])
        assert cached.cached
        await client.aclose()

    run(_main())
    assert [request.last_user_message for request in fake_llm.requests] == ["one", "two"]
    assert client.usage["totals"]["calls"] == 2
    assert client.usage["budget"]["calls_in_flight"] == 0


def test_budget_in_a_concurrent_batch_sends_exactly_the_limit(fake_llm: FakeLLMServer) -> None:
    fake_llm.set_default(lambda request: FakeReply(text="ok", delay_s=0.05))
    client = LLMClient(fake_llm.config(max_calls=3, concurrency=4))
    batch = [ChatRequest(Role.ROLLOUT, [{"role": "user", "content": f"q{index}"}]) for index in range(6)]

    async def _main() -> list[ChatResult | BaseException]:
        try:
            return await client.chat_many(batch, return_exceptions=True)
        finally:
            await client.aclose()

    outcomes = run(_main())
    assert sum(isinstance(outcome, ChatResult) for outcome in outcomes) == 3
    assert sum(isinstance(outcome, BudgetExceeded) for outcome in outcomes) == 3
    assert len(fake_llm.requests) == 3
    assert client.usage["totals"]["calls"] == 3

    strict = LLMClient(fake_llm.config(max_calls=1, cache_path=None))

    async def _strict() -> None:
        try:
            await strict.chat_many(batch[:2])
        finally:
            await strict.aclose()

    with pytest.raises(BudgetExceeded):
        run(_strict())
    assert len(fake_llm.requests) == 4


def test_token_budget_stops_before_sending(fake_llm: FakeLLMServer) -> None:
    fake_llm.set_default(lambda request: FakeReply(text="x", prompt_tokens=400, completion_tokens=100))
    client = LLMClient(fake_llm.config(max_total_tokens=1000))

    async def _main() -> None:
        await client.chat(Role.CLEANER, [{"role": "user", "content": "a"}])
        await client.chat(Role.CLEANER, [{"role": "user", "content": "b"}])
        with pytest.raises(BudgetExceeded) as raised:
            await client.chat(Role.CLEANER, [{"role": "user", "content": "c"}])
        assert raised.value.limit_name == "max_total_tokens"
        await client.aclose()

    run(_main())
    assert len(fake_llm.requests) == 2
    assert client.usage["totals"]["total_tokens"] == 1000

    # max_tokens is reserved up front: a call that could overrun the budget is never sent.
    reserved = LLMClient(fake_llm.config(max_total_tokens=1000, cache_path=None))
    with pytest.raises(BudgetExceeded):
        chat_once(reserved, max_tokens=2000)
    assert len(fake_llm.requests) == 2


def test_budget_warning_when_plan_exceeds_budget(fake_llm: FakeLLMServer) -> None:
    client = LLMClient(fake_llm.config(max_calls=10, max_total_tokens=5000))
    assert client.budget_warning(5, tokens_per_call=500) is None
    calls_warning = client.budget_warning(20)
    assert calls_warning is not None and "20 calls planned" in calls_warning
    tokens_warning = client.budget_warning(8, tokens_per_call=1000)
    assert tokens_warning is not None and "max_total_tokens" in tokens_warning
    assert LLMClient(fake_llm.config()).budget_warning(10_000, tokens_per_call=10_000) is None


# --- concurrency -----------------------------------------------------------------------------------


def held_at_the_bound(
    bound: int, reply: Callable[[dict[str, Any]], FakeReply]
) -> Callable[[dict[str, Any]], FakeReply]:
    """A responder that holds the first requests until `bound + 1` are in flight or 3 s have passed.

    A client that keeps its bound has exactly `bound` requests waiting when the wait gives up; one that
    exceeds it completes the group at once (bound + 1 in flight); one that sends fewer at a time never
    reaches `bound`. The server's in-flight maximum tells the three apart without timing anything.
    """
    group = threading.Barrier(bound + 1)

    def respond(request: dict[str, Any]) -> FakeReply:
        try:
            group.wait(timeout=3)
        except threading.BrokenBarrierError:
            pass  # broken for good: later requests pass straight through
        return reply(request)

    return respond


def test_concurrency_bound_is_respected(fake_llm: FakeLLMServer) -> None:
    fake_llm.set_default(held_at_the_bound(3, lambda request: FakeReply(text="slow answer")))
    client = LLMClient(fake_llm.config(concurrency=3, cache_path=None, timeout_s=30))
    batch = [ChatRequest(Role.WORLD_MODEL, [{"role": "user", "content": f"turn {i}"}]) for i in range(12)]

    async def _main() -> list[ChatResult | BaseException]:
        try:
            return await client.chat_many(batch)
        finally:
            await client.aclose()

    outcomes = run(_main())
    assert [o.text for o in outcomes if isinstance(o, ChatResult)] == ["slow answer"] * 12
    assert len(fake_llm.requests) == 12
    assert fake_llm.max_concurrency == 3  # reached, never exceeded


def test_sync_client_shares_one_bound_across_threads(fake_llm: FakeLLMServer) -> None:
    reply = held_at_the_bound(2, lambda request: FakeReply(text=request["messages"][-1]["content"]))
    fake_llm.set_default(reply)
    answers: list[str] = []
    with SyncLLMClient(fake_llm.config(concurrency=2, timeout_s=30)) as client:

        def worker(index: int) -> None:
            result = client.chat(Role.CLEANER, [{"role": "user", "content": f"thread {index}"}])
            answers.append(result.text)

        threads = [threading.Thread(target=worker, args=(index,)) for index in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        batch = client.chat_many([ChatRequest(Role.CLEANER, [{"role": "user", "content": "thread 3"}])])
        usage = client.usage
    assert sorted(answers) == sorted(f"thread {index}" for index in range(8))
    assert isinstance(batch[0], ChatResult) and batch[0].cached
    assert fake_llm.max_concurrency == 2  # the threads' calls overlap up to the bound, never beyond
    assert usage["totals"]["calls"] == 8 and usage["totals"]["cache_hits"] == 1


# --- parsing of answers ----------------------------------------------------------------------------


def test_tool_calls_and_reasoning_are_parsed(fake_llm: FakeLLMServer) -> None:
    tools = [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}]
    fake_llm.script(
        FakeReply(
            text=None,
            reasoning_content="I should read the file first.",
            tool_calls=[
                FakeToolCall("read_file", {"path": "/etc/hosts"}, id="call_a"),
                FakeToolCall("read_file", '{"path": "/etc/passwd", "lines": [1, 2', id="call_b"),
                FakeToolCall("list_dir", ""),
            ],
        )
    )
    result = chat_once(LLMClient(fake_llm.config()), role=Role.AGENT_POLICY, tools=tools, tool_choice="auto")

    assert fake_llm.requests[0].body is not None
    assert fake_llm.requests[0].body["tools"] == tools
    assert result.text == "" and result.finish_reason == "tool_calls"
    assert result.reasoning == "I should read the file first."
    first, second, third = result.tool_calls
    assert (first.id, first.name, first.arguments, first.arguments_repaired) == (
        "call_a",
        "read_file",
        {"path": "/etc/hosts"},
        False,
    )
    assert second.arguments == {"path": "/etc/passwd", "lines": [1, 2]} and second.arguments_repaired
    assert third.name == "list_dir" and third.arguments == {}


def test_think_block_in_content_is_separated(fake_llm: FakeLLMServer) -> None:
    answer = "<predicted_observation>\nfile1\nfile2\n</predicted_observation>"
    fake_llm.script(
        FakeReply(text=answer, think="The listing shows two files."),
        FakeReply(text="just text", reasoning_content="field", think="inline"),
        FakeReply(text="<think>cut off by max_tokens", finish_reason="length"),
    )
    client = LLMClient(fake_llm.config())
    first = chat_once(client, sample_index=0)
    both = chat_once(LLMClient(fake_llm.config()), sample_index=1)
    truncated = chat_once(LLMClient(fake_llm.config()), sample_index=2)

    assert first.text == answer and first.reasoning == "The listing shows two files."
    assert first.predicted_observation().observation == "file1\nfile2"
    assert first.raw_content.startswith("<think>")
    assert both.text == "just text" and both.reasoning == "field\n\ninline"
    assert truncated.text == "" and truncated.reasoning == "cut off by max_tokens"
    assert truncated.finish_reason == "length"
    assert truncated.predicted_observation().reason == "no_block"


# --- accounting and configuration ------------------------------------------------------------------


def test_accounting_per_role_and_model_with_prices(fake_llm: FakeLLMServer) -> None:
    fake_llm.set_default(lambda request: FakeReply(text="ok", prompt_tokens=1000, completion_tokens=500))
    prices = {"judge-model": ModelPrice(input_per_million=3.0, output_per_million=15.0)}
    config = fake_llm.config(models={Role.JUDGE: "judge-model"}, prices=prices)
    client = LLMClient(config)

    async def _main() -> None:
        for index in range(3):
            await client.chat(Role.JUDGE, [{"role": "user", "content": f"judge {index}"}])
        await client.chat(Role.WORLD_MODEL, USER)
        await client.chat(Role.WORLD_MODEL, USER)  # cache hit
        await client.aclose()

    run(_main())
    usage = client.usage
    assert [request.body["model"] for request in fake_llm.requests if request.body] == ["judge-model"] * 3 + [
        "fake-model"
    ]
    assert usage["totals"]["calls"] == 4 and usage["totals"]["cache_hits"] == 1
    assert usage["totals"]["prompt_tokens"] == 4000 and usage["totals"]["completion_tokens"] == 2000
    judge = usage["by_role"]["judge"]
    assert (judge["calls"], judge["prompt_tokens"], judge["completion_tokens"]) == (3, 3000, 1500)
    assert judge["cost_usd"] == pytest.approx(3 * (1000 * 3.0 + 500 * 15.0) / 1e6)
    assert usage["by_model"]["fake-model"]["cost_usd"] == 0.0
    assert usage["by_model"]["fake-model"]["cache_hits"] == 1
    assert usage["totals"]["cost_usd"] == pytest.approx(judge["cost_usd"])
    report = client.format_usage()
    assert "role:judge" in report and "model:judge-model" in report
    assert json.loads(client.ledger.to_json())["totals"]["calls"] == 4


def test_missing_usage_is_estimated(fake_llm: FakeLLMServer) -> None:
    fake_llm.script(FakeReply(text="a" * 40, omit_usage=True))
    result = chat_once(LLMClient(fake_llm.config()))
    assert result.usage_estimated
    assert result.prompt_tokens > 0 and result.completion_tokens == 11


def test_extra_body_params_reach_the_endpoint(fake_llm: FakeLLMServer) -> None:
    chat_once(
        LLMClient(fake_llm.config()),
        temperature=0.6,
        top_p=0.95,
        max_tokens=128,
        seed=7,
        stop=["</predicted_observation>"],
        top_k=20,
        chat_template_kwargs={"enable_thinking": False},
    )
    body = fake_llm.requests[0].body
    assert body is not None
    assert body["temperature"] == 0.6 and body["top_p"] == 0.95 and body["max_tokens"] == 128
    assert body["seed"] == 7 and body["stop"] == ["</predicted_observation>"]
    assert body["top_k"] == 20 and body["chat_template_kwargs"] == {"enable_thinking": False}
    assert fake_llm.requests[0].headers.get("authorization") == "Bearer test-key"
    with pytest.raises(ValueError, match="chat_samples"):
        chat_once(LLMClient(fake_llm.config()), n=3)
    assert len(fake_llm.requests) == 1


def test_rules_route_by_model_and_user_text(fake_llm: FakeLLMServer) -> None:
    fake_llm.add_rule("judged: 5", model="judge-model")
    fake_llm.add_rule(FakeReply(text="only once"), user_contains="special", times=1)
    fake_llm.add_rule(lambda request: f"n={len(request['messages'])}", match=lambda r: len(r["messages"]) > 1)
    config = fake_llm.config(models={"judge": "judge-model"}, cache_path=None)

    assert chat_once(LLMClient(config), role=Role.JUDGE).text == "judged: 5"
    special = [{"role": "user", "content": "a special request"}]
    assert chat_once(LLMClient(config), messages=special).text == "only once"
    assert chat_once(LLMClient(config), messages=special).text == "echo: a special request"
    two = [{"role": "system", "content": "sys"}, {"role": "user", "content": "u"}]
    assert chat_once(LLMClient(config), messages=two).text == "n=2"


def test_fake_server_lists_models_for_the_openai_client(fake_llm: FakeLLMServer) -> None:
    async def _main() -> list[str]:
        client = openai.AsyncOpenAI(base_url=fake_llm.base_url, api_key="k", max_retries=0)
        try:
            page = await client.models.list()
            return [model.id for model in page.data]
        finally:
            await client.close()

    assert run(_main()) == ["fake-model"]


def test_config_from_env_and_clear_errors(tmp_path: Path) -> None:
    env = {
        "WORLDLINE_LLM_BASE_URL": "http://localhost:8000/v1",
        "WORLDLINE_LLM_API_KEY": "secret",
        "WORLDLINE_LLM_MODEL": "Qwen-AgentWorld-35B-A3B",
        "WORLDLINE_LLM_MODEL_JUDGE": "judge-72b",
        "WORLDLINE_LLM_CONCURRENCY": "16",
        "WORLDLINE_LLM_MAX_CALLS": "500",
        "WORLDLINE_LLM_CACHE": str(tmp_path / "c.sqlite"),
        "WORLDLINE_LLM_PRICES": '{"judge-72b": [0.5, 1.5]}',
    }
    config = LLMConfig.from_env(env)
    assert config.model_for(Role.JUDGE) == "judge-72b"
    assert config.model_for("world_model") == "Qwen-AgentWorld-35B-A3B"
    assert (config.concurrency, config.max_calls, config.max_total_tokens) == (16, 500, None)
    assert config.cache_path == tmp_path / "c.sqlite"
    assert config.prices["judge-72b"] == ModelPrice(0.5, 1.5)
    assert LLMConfig.from_env({**env, "WORLDLINE_LLM_CACHE": "off"}).cache_path is None
    assert LLMConfig.from_env(env, concurrency=2).concurrency == 2
    assert endpoint_configured(env) and not endpoint_configured({})

    with pytest.raises(LLMNotConfigured, match="WORLDLINE_LLM_BASE_URL"):
        LLMClient(LLMConfig.from_env({}))
    with pytest.raises(LLMNotConfigured, match="WORLDLINE_LLM_MODEL_OPTIMIZER"):
        LLMConfig.from_env({"WORLDLINE_LLM_BASE_URL": "http://x/v1"}).model_for(Role.OPTIMIZER)
    with pytest.raises(ValueError, match="WORLDLINE_LLM_MAX_CALLS"):
        LLMConfig.from_env({"WORLDLINE_LLM_MAX_CALLS": "lots"})
    with pytest.raises(ValueError, match="WORLDLINE_LLM_PRICES"):
        LLMConfig.from_env({"WORLDLINE_LLM_PRICES": "[1, 2]"})
    with pytest.raises(ValueError):
        Role("planner")


# --- parsing helpers -------------------------------------------------------------------------------


def test_predicted_observation_examples() -> None:
    reply = (
        "<think>Maybe <predicted_observation>wrong</predicted_observation></think>"
        "Draft: <predicted_observation>first</predicted_observation>\n"
        "Final: <predicted_observation>\n$ ls\nREADME.md\n</predicted_observation>"
    )
    assert extract_predicted_observation(reply) == "$ ls\nREADME.md"
    assert parse_predicted_observation("no tags at all").reason == "no_block"
    assert parse_predicted_observation("<predicted_observation>cut").reason == "unterminated_block"
    assert parse_predicted_observation(
        "<predicted_observation>a</predicted_observation><predicted_observation>b"
    ).reason == ("unterminated_block")
    assert (
        parse_predicted_observation("<predicted_observation> </predicted_observation>").reason
        == "empty_block"
    )
    assert parse_predicted_observation("</predicted_observation>").reason == "no_block"
    assert (
        extract_predicted_observation("reasoning</think><PREDICTED_OBSERVATION>ok</PREDICTED_OBSERVATION>")
        == "ok"
    )


def test_split_reasoning_examples() -> None:
    assert split_reasoning("<think>a</think>answer") == ("a", "answer")
    assert split_reasoning("implicit open</think> answer") == ("implicit open", "answer")
    assert split_reasoning("<think>never closed") == ("never closed", "")
    assert split_reasoning("<think>1</think> <think>2</think>z <think>3</think>") == (
        "1\n\n2",
        "z <think>3</think>",
    )
    assert split_reasoning("answer quoting <think> literally") == ("", "answer quoting <think> literally")
    assert strip_think("plain") == "plain"


def test_lenient_json_examples() -> None:
    assert parse_json_lenient('<think>{"no": 1}</think>```json\n{"score": 4}\n```') == {"score": 4}
    assert parse_json_lenient('Scores: {"format": 5, "realism": 4,') == {"format": 5, "realism": 4}
    assert parse_json_lenient("[1, 2, 3]") == [1, 2, 3]
    assert parse_json_lenient("no json here") is None
    assert parse_json_lenient("") is None
    assert parse_json_object('[{"a": 1}, {"b": 2}]') == {"b": 2}
    assert parse_json_object("42") is None
    assert parse_tool_arguments('{"a": 1') == ({"a": 1}, True)
    assert parse_tool_arguments(None) == ({}, False)


TAG_FRAGMENTS = st.sampled_from(
    [
        "<think>",
        "</think>",
        "<predicted_observation>",
        "</predicted_observation>",
        "<PREDICTED_OBSERVATION>",
        "{",
        "}",
        "[",
        '"',
        "```json\n",
        "```",
        ":",
        ",",
    ]
)
MODEL_OUTPUT = st.lists(st.one_of(st.text(max_size=30), TAG_FRAGMENTS), max_size=25).map("".join)
PLAIN_TEXT = st.text(max_size=200).filter(lambda text: "<" not in text and ">" not in text)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(MODEL_OUTPUT)
def test_parsers_never_raise_on_arbitrary_text(text: str) -> None:
    parsed = parse_predicted_observation(text)
    assert parsed.reason in {"ok", "no_block", "unterminated_block", "empty_block"}
    assert (parsed.observation is not None) == (parsed.reason == "ok")
    if parsed.observation is not None:
        assert parsed.observation == parsed.observation.strip() and parsed.observation
    reasoning, answer = split_reasoning(text)
    assert not answer.lower().startswith("<think>")
    assert len(reasoning) + len(answer) <= len(text)
    parse_json_lenient(text)
    parse_json_object(text)
    parse_tool_arguments(text)


@settings(max_examples=200, deadline=None)
@given(PLAIN_TEXT, PLAIN_TEXT, st.booleans())
def test_leading_reasoning_is_split_off(reasoning: str, answer: str, template_opened: bool) -> None:
    text = f"{reasoning}</think>{answer}" if template_opened else f"<think>{reasoning}</think>{answer}"
    assert split_reasoning(text) == (reasoning.strip(), answer.strip())


@settings(max_examples=200, deadline=None)
@given(PLAIN_TEXT, PLAIN_TEXT, PLAIN_TEXT)
def test_last_prediction_block_is_recovered(reasoning: str, earlier: str, observation: str) -> None:
    text = (
        f"<think>{reasoning}</think>"
        f"<predicted_observation>{earlier}</predicted_observation>"
        f"{reasoning}<predicted_observation>{observation}</predicted_observation>\n"
    )
    expected = observation.strip() or None
    assert extract_predicted_observation(text) == expected


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=8), JSON_VALUES, min_size=1, max_size=5))
@example({"": None, "```": None})  # a fence inside a JSON string must not cut the block short
def test_fenced_json_round_trips(value: dict[str, Any]) -> None:
    text = f"<think>thinking</think>Here is my verdict:\n```json\n{json.dumps(value)}\n```\n"
    assert parse_json_lenient(text) == value
    assert parse_json_object(json.dumps(value)) == value
