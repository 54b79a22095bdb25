"""Rendering trajectories into CPT, SFT and RL pool rows (the one internal form of each pool).

SFT and RL rows carry the conversation exactly as AgentWorldBench's eval.py sends it
(`schemas.worldmodel.evaluator_messages`): the system prompt, one user (action prompt) / assistant
(`**Environment Observation:**` + ground truth) pair per earlier turn, and the current action prompt
as the last user message; the prompts are the exporter's own (schemas.agentworldbench), so a model
is trained on what it is evaluated on. CPT
text lays the same turn blocks out as one document. System prompts come from the active template set with the
trajectory's own tool definitions, demonstrations, initial state and simulation instruction.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from pipelines.config import PoolsConfig
from pipelines.lossmask import (
    MASKED,
    harness_mask,
    kept_token_range,
    loss_mask_category,
    runtime_weighted_spans,
)
from pipelines.minhash import stable_hash
from pipelines.span_table import LabelTable, turn_labels
from schemas.agentworldbench import AgentWorldBenchSample, trajectory_to_samples
from schemas.templates import TemplateSet, system_values
from schemas.trajectory import Trajectory
from schemas.worldmodel import (
    SCORING_DIMENSIONS,
    answer_text,
    evaluator_messages,
    render_action_prompt,
    render_observation,
)
from worldline.chat_template import count_chat_tokens, message_tokens
from worldline.rewards.rules import derive_rules, is_deterministic_action, rule_verifier_applies
from worldline.tokenizer import TokenCounter

# Runtime metadata in an observation (times, PIDs, addresses) voids the exact-match rule verifier.
_RUNTIME_METADATA = re.compile(
    r"\d{1,2}:\d{2}:\d{2}|\d{4}-\d{2}-\d{2}|0x[0-9a-f]{6,}|\bpid\b|[0-9a-f]{8}-[0-9a-f]{4}-", re.IGNORECASE
)


def action_block(n: int, traj: Trajectory, index: int) -> str:
    """AgentWorldBench's action prompt for turn n (the same renderer its exporter uses)."""
    return render_action_prompt(n, traj.turns[index].action.text, traj.domain) + "\n"


def turn_block(n: int, traj: Trajectory, index: int) -> str:
    """One history turn: the action prompt and the ground-truth observation."""
    return f"{action_block(n, traj, index)}{render_observation(traj.turns[index].observation.text)}\n\n"


def sft_template_version(cfg: PoolsConfig, trajectory_id: str, turn_index: int) -> int:
    """Uniform, seeded choice among the SFT template versions, per sample."""
    versions = cfg.sft.template_versions
    return versions[stable_hash("sft-template", cfg.sft.seed, trajectory_id, turn_index) % len(versions)]


def rl_turn_index(
    cfg: PoolsConfig, trajectory_id: str, num_turns: int, masked: frozenset[int] = frozenset()
) -> int:
    """The one RL turn of a trajectory (1-based), a seeded hash of its id: never process order. Turns
    masked for a harness fact (`masked`, 1-based) are never chosen; the filters drop a trajectory whose
    every turn is masked."""
    candidates = [t for t in range(1, num_turns + 1) if t not in masked] or list(range(1, num_turns + 1))
    return candidates[stable_hash("rl-turn", cfg.rl.seed, trajectory_id) % len(candidates)]


def masked_turn_indices(traj: Trajectory, cfg: PoolsConfig) -> frozenset[int]:
    """The 1-based turns masked for a harness fact (filters.harness_facts: mask)."""
    return frozenset(i for i, t in enumerate(traj.turns, 1) if harness_mask(t.metadata, cfg.filters))


def _boundary(counter: TokenCounter, text: str, ids: list[int], k: int, direction: int) -> tuple[int, int]:
    """Character offset of token boundary k, moved by `direction` until it falls on a character edge."""
    while 0 < k < len(ids):
        prefix = counter.decode(ids[:k])
        if text.startswith(prefix):
            return k, len(prefix)
        k += direction
    return k, (0 if k <= 0 else len(text))


def kept_char_span(counter: TokenCounter, text: str, share: float, keep: str) -> tuple[int, int, int]:
    """(start_char, end_char, kept_tokens) of the part of `text` that stays in the loss."""
    ids = counter.encode(text)
    start, end = kept_token_range(len(ids), share, keep)
    if start == end:
        return 0, 0, 0
    if keep == "tail":
        start, start_char = _boundary(counter, text, ids, start, +1)
        return start_char, len(text), len(ids) - start
    end, end_char = _boundary(counter, text, ids, end, -1)
    return 0, end_char, end


@dataclass(slots=True)
class Lineage:
    """The pool-independent facts every row of one trajectory carries."""

    source_id: str
    source_kind: str
    dedup_cluster: str
    licence: str | None = None


def _common(traj: Trajectory, lineage: Lineage, sample_id: str, version: int) -> dict[str, Any]:
    return {
        "sample_id": sample_id,
        "trajectory_id": traj.id,
        "source_id": lineage.source_id,
        "source_kind": lineage.source_kind,
        "licence": traj.source.licence or lineage.licence,
        "domain": traj.domain.value,
        "template_version": version,
        "dedup_cluster": lineage.dedup_cluster,
    }


def cpt_row(
    traj: Trajectory,
    lineage: Lineage,
    cfg: PoolsConfig,
    templates: TemplateSet,
    counter: TokenCounter,
    labels: LabelTable | None = None,
) -> dict[str, Any]:
    """The whole trajectory as one text (template v1) with per-turn loss-mask spans (Table 3). With
    replay span LABELS for a turn, its span is cut where it crosses runtime spans of the observation,
    and those pieces get `loss_mask.runtime_span_weight`."""
    lm = cfg.loss_mask
    system = templates.get(cfg.cpt.template_version).render(system_values(traj)) + "\n"
    spans: list[dict[str, Any]] = []
    parts = [system]
    offset = 0
    loss_tokens = 0
    s, e, k = kept_char_span(counter, system, lm.system_prompt_share, lm.keep)
    if e > s:
        spans.append(
            {
                "start": s,
                "end": e,
                "weight": 1.0,
                "turn_index": 0,
                "category": "system",
                "share": lm.system_prompt_share,
            }
        )
        loss_tokens += k
    offset = len(system)
    categories = []
    for i, turn in enumerate(traj.turns):
        block = turn_block(i + 1, traj, i)
        if harness_mask(turn.metadata, cfg.filters):  # context only: the harness cut this step
            category, share = MASKED, 0.0
        else:
            category, share = loss_mask_category(turn.action.text, turn.observation.text, lm)
        categories.append(category)
        s, e, k = kept_char_span(counter, block, share, lm.keep)
        if e > s:
            span = {
                "start": offset + s,
                "end": offset + e,
                "weight": 1.0,
                "turn_index": i + 1,
                "category": category,
                "share": share,
            }
            text_labels = turn_labels(labels, traj.id, i, turn.observation.text)
            # The block ends with the observation and a blank line: where the observation starts.
            observation_start = offset + len(block) - 2 - len(turn.observation.text)
            spans += runtime_weighted_spans(span, observation_start, text_labels, lm.runtime_span_weight)
            loss_tokens += k
        parts.append(block)
        offset += len(block)
    text = "".join(parts)
    return {
        **_common(traj, lineage, f"cpt:{traj.id}", cfg.cpt.template_version),
        "text": text,
        "loss_spans": spans,
        "turn_categories": categories,
        "num_turns": len(traj.turns),
        "tokens": counter.count(text),
        "loss_tokens": loss_tokens,
        "is_knowledge": False,
    }


def knowledge_row(doc: dict[str, Any], lineage: Lineage, counter: TokenCounter) -> dict[str, Any]:
    """A world-knowledge document as single-turn CPT text, wholly in the loss."""
    text = doc["text"]
    tokens = counter.count(text)
    return {
        "sample_id": f"cpt:{doc['id']}",
        "trajectory_id": doc["id"],
        "source_id": lineage.source_id,
        "source_kind": "knowledge",
        "licence": doc.get("licence") or lineage.licence,
        "domain": "knowledge",
        "template_version": -1,
        "dedup_cluster": lineage.dedup_cluster,
        "text": text,
        "loss_spans": [
            {
                "start": 0,
                "end": len(text),
                "weight": 1.0,
                "turn_index": 0,
                "category": "knowledge",
                "share": 1.0,
            }
        ],
        "turn_categories": [],
        "num_turns": 1,
        "tokens": tokens,
        "loss_tokens": tokens,
        "is_knowledge": True,
    }


REASONING_KEY = "world_model_reasoning"
"""Turn metadata key holding a world model's reasoning for this turn (kept by rejection sampling); when
present, the SFT target opens with it in a <think> block before the prediction block."""


def target_text(observation: str, cfg: PoolsConfig, reasoning: str | None = None) -> str:
    """The SFT answer in the format the evaluator parses: reasoning, then the prediction block."""
    if cfg.sft.target_format == "raw":
        return observation
    return answer_text(observation, reasoning or None)


def eval_samples(traj: Trajectory) -> list[AgentWorldBenchSample]:
    """One AgentWorldBench sample per turn, exactly as the exporter writes them (same prompt text)."""
    return trajectory_to_samples(traj)


def _char_prefix(counter: TokenCounter, text: str, ids: list[int], k: int) -> str:
    """The longest prefix of `text` spanned by at most k of its tokens, cut on a character edge."""
    k, end = _boundary(counter, text, ids, k, -1)
    return text[:end] if k > 0 else ""


def fit_target(
    counter: TokenCounter, observation: str, reasoning: str | None, budget: int, cfg: PoolsConfig
) -> tuple[str, int] | None:
    """The longest target whose final-answer message fits `budget` tokens, as (target, its tokens).

    Reasoning is dropped before the observation is cut; a cut observation keeps its leading tokens
    and the block keeps its closing tag. None when not even one observation token fits (the sample
    is skipped rather than trained on an empty target)."""
    for why in [reasoning, None] if reasoning else [None]:
        target = target_text(observation, cfg, why)
        n = message_tokens(counter, "assistant", target, final_answer=True)
        if n <= budget:
            return target, n
    ids = counter.encode(observation)
    lo, hi, best = 1, len(ids) - 1, None
    while lo <= hi:
        mid = (lo + hi) // 2
        cut = _char_prefix(counter, observation, ids, mid)
        if not cut:
            lo = mid + 1
            continue
        target = target_text(cut, cfg)
        n = message_tokens(counter, "assistant", target, final_answer=True)
        if n <= budget:
            best, lo = (target, n), mid + 1
        else:
            hi = mid - 1
    return best


def sft_rows(
    traj: Trajectory, lineage: Lineage, cfg: PoolsConfig, templates: TemplateSet, counter: TokenCounter
) -> tuple[list[dict[str, Any]], list[int]]:
    """One sample per turn, in the conversation shape AgentWorldBench evaluates (system, one user /
    assistant pair per earlier turn, the current action), answered by the prediction block.

    Caps apply to the chat-template-rendered conversation (`worldline.chat_template`). An over-long
    sample loses its oldest history pairs first; if system prompt, action and target alone exceed the
    cap, the target is cut (`fit_target`). Returns (rows, turn indices skipped because their
    observation is blank or not even a one-token target fits).
    """
    cap = cfg.sft.max_tokens
    samples = eval_samples(traj)
    prompts = [s.prompt[s.turn_idx - 1] for s in samples]
    responses = [s.response[s.turn_idx - 1] for s in samples]
    # Every message is closed by special tokens, so a conversation's count is the sum of its messages'.
    pair_tokens = [
        message_tokens(counter, "user", p) + message_tokens(counter, "assistant", r)
        for p, r in zip(prompts, responses, strict=True)
    ]
    values = system_values(traj)
    systems: dict[int, tuple[str, int]] = {}  # template version -> (system prompt, its tokens)
    rows: list[dict[str, Any]] = []
    skipped: list[int] = []
    for t in range(1, len(traj.turns) + 1):
        version = sft_template_version(cfg, traj.id, t)
        if version not in systems:
            rendered = templates.get(version).render(values)
            systems[version] = (rendered, message_tokens(counter, "system", rendered) if rendered else 0)
        system, system_tokens = systems[version]
        turn = traj.turns[t - 1]
        if harness_mask(turn.metadata, cfg.filters):
            # A step the harness cut (timed out, truncated, ...): history for later samples, never a target.
            skipped.append(t)
            continue
        if not turn.observation.text.strip():
            # Nothing to predict (a screen that showed nothing new): the turn stays in the history of
            # later samples but is never a target, so no SFT target is empty.
            skipped.append(t)
            continue
        reasoning = turn.metadata.get(REASONING_KEY)
        reasoning = reasoning if isinstance(reasoning, str) and reasoning.strip() else None
        target = target_text(turn.observation.text, cfg, reasoning)
        target_tokens = message_tokens(counter, "assistant", target, final_answer=True)
        fixed = system_tokens + message_tokens(counter, "user", prompts[t - 1])
        history_tokens = sum(pair_tokens[: t - 1])
        before = fixed + history_tokens + target_tokens
        dropped = 0
        while dropped < t - 1 and fixed + history_tokens + target_tokens > cap:
            history_tokens -= pair_tokens[dropped]
            dropped += 1
        target_truncated = False
        if fixed + history_tokens + target_tokens > cap:
            fitted = fit_target(counter, turn.observation.text, reasoning, cap - fixed - history_tokens, cfg)
            if fitted is None:
                skipped.append(t)
                continue
            target, target_tokens = fitted
            target_truncated = True
        history = zip(prompts[dropped : t - 1], responses[dropped : t - 1], strict=True)
        messages = evaluator_messages(system, history, prompts[t - 1])
        messages.append({"role": "assistant", "content": target})
        rows.append(
            {
                **_common(traj, lineage, f"sft:{traj.id}:{t}", version),
                "turn_index": t,
                "messages": messages,
                "tokens": fixed + history_tokens + target_tokens,
                "truncated": dropped > 0 or target_truncated,
                "dropped_history_turns": dropped,
                "target_truncated": target_truncated,
                "tokens_before_truncation": before,
            }
        )
    return rows, skipped


def rule_verifier(traj: Trajectory, turn_index: int) -> str:
    """ "exact_match" when the turn's observation is deterministic content, else "none"."""
    turn = traj.turns[turn_index - 1]
    if not rule_verifier_applies(traj.domain):
        return "none"
    if _RUNTIME_METADATA.search(turn.observation.text) or turn.observation.is_error:
        return "none"
    deterministic = is_deterministic_action(traj.domain.value, turn.action.text, turn.action.tool_name)
    return "exact_match" if deterministic else "none"


def reward_spec(cfg: PoolsConfig, verifier: str) -> dict[str, Any]:
    """The reward a trainer computes: rubric (5..25) mixed with a 0/1 rule verifier scaled to 0..25.

    Without a verifier the rubric carries the whole reward (weights 1:0), so rows stay comparable.
    """
    has_rule = verifier != "none"
    return {
        "rubric": {
            "dimensions": list(SCORING_DIMENSIONS),
            "scale": [1, 5],
            "score": "mean of the dimensions x 5 (range 5..25); 0 when the judge output cannot be parsed",
            "reference_grounded": True,
        },
        "rule": {"verifier": verifier, "scale": [0, 25], "score": "25 if correct else 0"}
        if has_rule
        else None,
        "weights": {
            "rubric": cfg.rl.rubric_weight if has_rule else 1.0,
            "rule": cfg.rl.rule_weight if has_rule else 0.0,
        },
        "range": [0, 25],
    }


def rl_row(
    traj: Trajectory,
    lineage: Lineage,
    cfg: PoolsConfig,
    templates: TemplateSet,
    counter: TokenCounter,
    labels: LabelTable | None = None,
) -> tuple[dict[str, Any] | None, int]:
    """Exactly one turn of the trajectory, template v0, in the evaluator's conversation shape; None
    when the chat-template-rendered prompt (with the generation prompt) exceeds the cap."""
    t = rl_turn_index(cfg, traj.id, len(traj.turns), masked_turn_indices(traj, cfg))
    system = templates.get(cfg.rl.template_version).render(system_values(traj))
    (sample,) = trajectory_to_samples(traj, [t])
    history = zip(sample.prompt[: t - 1], sample.response[: t - 1], strict=True)
    messages = evaluator_messages(system, history, sample.prompt[t - 1])
    prompt_tokens = count_chat_tokens(counter, messages, add_generation_prompt=True)
    if prompt_tokens > cfg.rl.max_prompt_tokens:
        return None, prompt_tokens
    verifier = rule_verifier(traj, t)
    spec = reward_spec(cfg, verifier)
    if spec["rule"] is not None:  # the executable checks worldline.rewards.verl runs on a rollout
        turn = traj.turns[t - 1]
        spec["rule"]["checks"] = derive_rules(
            traj.domain.value,
            turn.action.text,
            turn.observation.text,
            tool_name=turn.action.tool_name,
            is_error=turn.observation.is_error,
            labels=turn_labels(labels, traj.id, t - 1, turn.observation.text),
        )
    return {
        **_common(traj, lineage, f"rl:{traj.id}", cfg.rl.template_version),
        "turn_index": t,
        "num_turns": len(traj.turns),
        "messages": messages,
        "ground_truth": traj.turns[t - 1].observation.text,
        "prompt_tokens": prompt_tokens,
        "verifier": verifier,
        "reward_spec": json.dumps(spec, sort_keys=True),
    }, prompt_tokens
