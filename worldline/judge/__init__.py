"""worldline's judge: reference-grounded five-dimension scoring of world-model predictions.

Python API (what `worldline judge`, the verl reward, SFT rejection sampling and autoresearch use):

    from worldline.judge import JudgeConfig, judge_batch, judge_batch_sync, from_agentworldbench
    batch = judge_batch_sync(samples, llm_config, JudgeConfig(attempts=3))
    for r in batch.finished:
        r.scores        # {"format": 1..5, "factuality": ..., ...} or None when the judgement failed
        r.normalised    # (mean - 1) / 4 * 100, None when failed
        r.failure       # "" | "no_prediction:<why>" | "parse:<why>" | "call_failed"
        r.cost          # calls, cache_hits, prompt/completion tokens, cost_usd for this sample
    aggregate(batch.finished)   # per domain and overall, valid-only and failures-as-zero

See docs/judging.md.
"""

from worldline.judge.judge import (
    CallCost,
    Judge,
    JudgeBatch,
    JudgeConfig,
    JudgeResult,
    judge_batch,
    judge_batch_sync,
)
from worldline.judge.parsing import JudgeAnswer, normalise, parse_judge_answer
from worldline.judge.prompts import judge_messages, judge_system_prompt
from worldline.judge.report import aggregate, format_report
from worldline.judge.samples import (
    JudgeSample,
    from_agentworldbench,
    from_chat,
    from_prediction_record,
    sample_key,
)

__all__ = [
    "CallCost",
    "Judge",
    "JudgeAnswer",
    "JudgeBatch",
    "JudgeConfig",
    "JudgeResult",
    "JudgeSample",
    "aggregate",
    "format_report",
    "from_agentworldbench",
    "from_chat",
    "from_prediction_record",
    "judge_batch",
    "judge_batch_sync",
    "judge_messages",
    "judge_system_prompt",
    "normalise",
    "parse_judge_answer",
    "sample_key",
]
