"""What the judge scores: one turn's history, current action, ground truth and a world model's output.

Builders read the shapes predictions arrive in: AgentWorldBench samples (and `eval.py infer` lines,
which are samples plus `gen`), and chat rows of our pools (the evaluator's conversation shape, as
the RL export writes them, or one user message holding every turn).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from schemas.agentworldbench import AgentWorldBenchSample, domain_name_of
from schemas.worldmodel import OBSERVATION_MARKER, TURN_HEADING_RE
from worldline.llm.parsing import PredictionParse, parse_predicted_observation, strip_think


@dataclass(frozen=True)
class JudgeSample:
    """One prediction to judge. `output` is the world model's raw answer (reasoning included); only
    its last `<predicted_observation>` block reaches the judge."""

    sample_id: str
    domain: str
    history: tuple[tuple[str, str], ...]
    current_prompt: str
    ground_truth: str
    output: str
    meta: Mapping[str, Any] = field(default_factory=dict)

    def prediction(self, *, require_block: bool = True) -> PredictionParse:
        """The judged text. Without a block: a failure (`require_block`), or, as AgentWorldBench's
        evaluator does, the answer with reasoning removed."""
        parsed = parse_predicted_observation(self.output)
        if parsed.ok or require_block:
            return parsed
        answer = strip_think(self.output).strip()
        return PredictionParse(answer, "whole_answer") if answer else parsed

    def with_output(self, output: str) -> JudgeSample:
        return JudgeSample(
            self.sample_id,
            self.domain,
            self.history,
            self.current_prompt,
            self.ground_truth,
            output,
            self.meta,
        )


def sample_key(domain: str, sample_id: Any, turn_idx: int | None = None) -> str:
    """The stable key of an evaluation sample: `domain/id/turn` (AgentWorldBench ids repeat per turn)."""
    return f"{domain}/{sample_id}" if turn_idx is None else f"{domain}/{sample_id}/{turn_idx}"


def from_agentworldbench(sample: AgentWorldBenchSample, output: str) -> JudgeSample:
    """History = turns before `turn_idx`, current = `current_prompt`, truth = `response[turn_idx-1]`."""
    t = sample.turn_idx - 1
    history = tuple(zip(sample.prompt[:t], sample.response[:t], strict=False))
    current = sample.current_prompt or sample.prompt[t]
    domain = sample.domain_name
    return JudgeSample(
        sample_id=sample_key(domain, sample.id, sample.turn_idx),
        domain=domain,
        history=history,
        current_prompt=current,
        ground_truth=sample.ground_truth,
        output=output,
        meta={"id": sample.id, "turn_idx": sample.turn_idx, "task": sample.task},
    )


def split_user_prompt(user: str) -> tuple[tuple[tuple[str, str], ...], str]:
    """Split a pool prompt (`### Turn N` blocks with observations, then the current action) into
    history pairs and the current action prompt. Text before the first turn header (a note that old
    turns were omitted) is dropped; without any header the whole text is the current prompt."""
    starts = [m.start() for m in TURN_HEADING_RE.finditer(user)]
    if not starts:
        return (), user.strip()
    segments = [user[a:b] for a, b in zip(starts, [*starts[1:], len(user)], strict=False)]
    history: list[tuple[str, str]] = []
    for segment in segments[:-1]:
        marker = segment.find("\n" + OBSERVATION_MARKER)
        if marker < 0:
            history.append((segment.strip(), ""))
        else:
            history.append((segment[:marker].strip(), segment[marker + 1 :].strip()))
    return tuple(history), segments[-1].strip()


def from_chat(
    messages: Sequence[Mapping[str, Any]],
    ground_truth: str,
    output: str,
    *,
    domain: str,
    sample_id: str,
    meta: Mapping[str, Any] | None = None,
) -> JudgeSample:
    """A judge sample from the chat messages of a pool row or RL prompt.

    The evaluator's shape (system, then one user/assistant pair per earlier turn, then the current
    action as the last user message) gives the history pairs directly; a single user message holding
    `### Turn N` blocks is split into them. A trailing assistant message (an SFT target) is ignored."""
    turns = [m for m in messages if m.get("role") in ("user", "assistant")]
    while turns and turns[-1].get("role") == "assistant":
        turns = turns[:-1]
    if not turns:
        return JudgeSample(sample_id, domain, (), "", ground_truth, output, dict(meta or {}))
    current = str(turns[-1].get("content") or "")
    earlier = turns[:-1]
    if not earlier:
        history, current = split_user_prompt(current)
        return JudgeSample(sample_id, domain, history, current, ground_truth, output, dict(meta or {}))
    pairs: list[tuple[str, str]] = []
    for message in earlier:
        content = str(message.get("content") or "")
        if message.get("role") == "user":
            pairs.append((content.strip(), ""))
        elif pairs and not pairs[-1][1]:
            pairs[-1] = (pairs[-1][0], content.strip())
        else:  # an assistant message without its action prompt
            pairs.append(("", content.strip()))
    return JudgeSample(
        sample_id, domain, tuple(pairs), current.strip(), ground_truth, output, dict(meta or {})
    )


def from_prediction_record(
    record: Mapping[str, Any], reference: Mapping[str, AgentWorldBenchSample] | None = None
) -> JudgeSample:
    """One line of a predictions file: an `eval.py infer` line (a sample plus `gen`), or a short
    line `{task|domain, id, turn_idx, gen|prediction|output}` whose sample comes from `reference`.
    Raises ValueError naming the missing field and the fix."""
    output = next(
        (record[k] for k in ("gen", "prediction", "output") if isinstance(record.get(k), str)), None
    )
    if output is None:
        raise ValueError(
            "prediction line has no 'gen' (or 'prediction' / 'output') string: add the model output"
        )
    task = record.get("task") or record.get("domain")
    if not isinstance(task, str) or "id" not in record or "turn_idx" not in record:
        raise ValueError("prediction line needs 'task' (or 'domain'), 'id' and 'turn_idx' to find its sample")
    key = sample_key(domain_name_of(task), record["id"], int(record["turn_idx"]))
    if reference is not None and key in reference:
        return from_agentworldbench(reference[key], output)
    try:
        sample = AgentWorldBenchSample.from_json({k: v for k, v in record.items() if k not in ("gen",)})
    except ValueError as error:
        raise ValueError(
            f"prediction {key}: not in the reference data and not a full AgentWorldBench sample ({error}); "
            f"pass --reference with the samples it was generated from"
        ) from None
    return from_agentworldbench(sample, output)
