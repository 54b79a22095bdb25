"""Shared data for the judge tests: AgentWorldBench-style samples and a judge that compares texts."""

from __future__ import annotations

import json
import re
from typing import Any

from schemas.agentworldbench import AgentWorldBenchSample
from schemas.worldmodel import SCORING_DIMENSIONS as DIMENSIONS
from tests.helpers.fakellm import FakeReply, last_user_message

SYSTEM = "# Task Description\nInspect files.\n\n# Action Space\nbash"


def awb_sample(i: int, domain: str = "terminal", turn_idx: int = 2) -> AgentWorldBenchSample:
    prompts = [f"### Turn {n}\n**Action:**\n```text\ncat file{i}_{n}.txt\n```" for n in range(1, 4)]
    responses = [f"**Environment Observation:**\ncontent {i} {n}" for n in range(1, 4)]
    return AgentWorldBenchSample(
        task=domain,
        id=i,
        turn_idx=turn_idx,
        total_turns=3,
        system_str=SYSTEM,
        prompt=prompts,
        response=responses,
        current_prompt=prompts[turn_idx - 1],
    )


def prediction(text: str, think: str | None = None) -> str:
    head = f"<think>{think}</think>\n" if think is not None else ""
    return f"{head}<predicted_observation>\n{text}\n</predicted_observation>"


def verdict(scores: dict[str, Any] | int, *, prose: str = "Reasoning about the tiers.") -> str:
    table = {d: scores for d in DIMENSIONS} if isinstance(scores, int) else scores
    body = json.dumps({"strengths": ["s"], "weaknesses": ["w"], "scores": table})
    return f"{prose}\n<final_evaluation>\n```json\n{body}\n```\n</final_evaluation>"


_BLOCK = re.compile(r"\*\*World Model Output \(Simulated\):\*\*\n(`{3,})\n(.*?)\n\1", re.DOTALL)
_TRUTH = re.compile(r"\*\*Ground Truth \(Real Output\):\*\*\n(`{3,})\n(.*?)\n\1", re.DOTALL)


def comparing_judge(request: dict[str, Any]) -> FakeReply:
    """A judge model: 5 on every dimension when the prediction equals the ground truth, 4 when it
    contains it (padding), else 2."""
    user = last_user_message(request)
    predicted, truth = _BLOCK.search(user), _TRUTH.search(user)
    if predicted is None or truth is None:
        return FakeReply(text="I cannot find the blocks.")
    if predicted.group(2) == truth.group(2):
        return FakeReply(text=verdict(5))
    if truth.group(2) in predicted.group(2):
        return FakeReply(text=verdict(4))
    return FakeReply(text=verdict(2))
