"""Aggregating judge results per domain and overall, two ways so numbers compare.

- `valid_only`: AgentWorldBench's `eval.py score`: each dimension's mean over samples whose judgement
  succeeded, normalised (raw-1)/4*100; failures are only counted.
- `failures_as_zero` (worldline's headline): every sample counts; a failed sample contributes the
  bottom of the scale (normalised 0, the reward spec's 0) to every dimension and the total.
Both sit next to the failure count and reasons, so a model that fails to answer cannot look better.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from schemas.worldmodel import SCORING_DIMENSIONS
from worldline.judge.judge import JudgeResult
from worldline.judge.parsing import normalise

OVERALL = "overall"


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _slice(results: list[JudgeResult]) -> dict[str, Any]:
    valid = [r for r in results if r.scores is not None]
    valid_only: dict[str, float | None] = {}
    as_zero: dict[str, float | None] = {}
    for dimension in SCORING_DIMENSIONS:
        valid_values = [normalise(r.scores[dimension]) for r in valid if r.scores is not None]
        valid_only[dimension] = _mean(valid_values)
        as_zero[dimension] = _mean(
            [normalise(r.scores[dimension]) if r.scores is not None else 0.0 for r in results]
        )
    valid_only["total"] = _mean([r.normalised for r in valid if r.normalised is not None])
    as_zero["total"] = _mean([r.normalised if r.normalised is not None else 0.0 for r in results])
    reasons = Counter(r.failure for r in results if r.failure)
    return {
        "samples": len(results),
        "valid": len(valid),
        "failed": len(results) - len(valid),
        "failure_rate": (len(results) - len(valid)) / len(results) if results else 0.0,
        "failure_reasons": dict(sorted(reasons.items())),
        "valid_only": valid_only,
        "failures_as_zero": as_zero,
        "rubric_reward_mean": _mean([r.rubric_reward for r in results]),
        "calls": sum(r.cost.calls for r in results),
        "cache_hits": sum(r.cost.cache_hits for r in results),
        "prompt_tokens": sum(r.cost.prompt_tokens for r in results),
        "completion_tokens": sum(r.cost.completion_tokens for r in results),
        "cost_usd": sum(r.cost.cost_usd for r in results),
    }


def aggregate(results: Iterable[JudgeResult]) -> dict[str, Any]:
    """{domain: slice, ..., "overall": slice}; see the module docstring for the two means."""
    items = list(results)
    by_domain: dict[str, list[JudgeResult]] = {}
    for result in items:
        by_domain.setdefault(result.domain, []).append(result)
    report = {domain: _slice(by_domain[domain]) for domain in sorted(by_domain)}
    report[OVERALL] = _slice(items)
    return report


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def format_report(report: Mapping[str, Mapping[str, Any]]) -> str:
    """A markdown table: per domain, both means of each dimension and the total, and failures."""
    header = (
        "| domain | samples | failed | total (failures=0) | total (valid only) | "
        + " | ".join(f"{d} (f=0 / valid)" for d in SCORING_DIMENSIONS)
        + " |"
    )
    lines = [header, "|" + "---|" * (5 + len(SCORING_DIMENSIONS))]
    for domain, row in report.items():
        zero, valid = row["failures_as_zero"], row["valid_only"]
        cells = [
            domain,
            str(row["samples"]),
            f"{row['failed']} ({row['failure_rate'] * 100:.1f}%)",
            _fmt(zero["total"]),
            _fmt(valid["total"]),
            *(f"{_fmt(zero[d])} / {_fmt(valid[d])}" for d in SCORING_DIMENSIONS),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    reasons = report.get(OVERALL, {}).get("failure_reasons") or {}
    if reasons:
        lines.append("")
        lines.append("Failures: " + ", ".join(f"{reason}={count}" for reason, count in reasons.items()))
    return "\n".join(lines)
