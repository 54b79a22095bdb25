"""LLM-backed align and score, through the shared client (role `cleaner`).

They run only where the deterministic path is unsure: an unknown domain after alignment, or a quality
score within `unsure_band` of the threshold. Any LLM failure falls back to the deterministic answer and
is recorded in the trajectory's metadata, so an outage never stops a clean.
"""

from __future__ import annotations

from typing import Any

from schemas import Domain, Trajectory
from worldline.llm import LLMConfig, LLMError, Role, SyncLLMClient, endpoint_configured, parse_json_object

_PREVIEW_TURNS = 6
_PREVIEW_CHARS = 600

DOMAIN_PROMPT = (
    "You classify agent interaction logs into one environment domain. Domains: mcp (JSON tool calls to "
    "tool servers), search (web_search / page extraction), terminal (shell sessions), swe (reading, editing "
    "and testing a code repository), android, web (browser actions on an accessibility tree), os (desktop "
    'GUI automation). Answer with JSON only: {"domain": "<one of the names>", "why": "<one sentence>"}.'
)
QUALITY_PROMPT = (
    "You rate whether an agent trajectory is good training data for a model that predicts the environment's "
    "next observation from the history and the action. Good data: real actions with real, complete, "
    "informative environment responses. Bad data: garbage or repeated actions, empty or truncated "
    "observations, binary noise, harness errors. Answer with JSON only: "
    '{"score": <0.0..1.0>, "reasons": ["<short reason>", ...]}.'
)


def llm_available() -> bool:
    return endpoint_configured()


def _preview(traj: Trajectory) -> str:
    lines = [
        f"Task: {traj.task[:_PREVIEW_CHARS]}",
        f"Tools: {', '.join(sorted(traj.action_space.tool_names()))[:_PREVIEW_CHARS]}",
    ]
    for index, turn in enumerate(traj.turns[:_PREVIEW_TURNS], start=1):
        lines.append(
            f"### Turn {index}\nAction ({turn.action.kind.value}): {turn.action.text[:_PREVIEW_CHARS]}"
        )
        lines.append(f"Observation: {turn.observation.text[:_PREVIEW_CHARS]}")
    if len(traj.turns) > _PREVIEW_TURNS:
        lines.append(f"... {len(traj.turns) - _PREVIEW_TURNS} more turns")
    return "\n".join(lines)


class LLMCurator:
    """The LLM-backed align (domain) and score (quality) decisions for the cleaner."""

    def __init__(self, client: SyncLLMClient | None = None) -> None:
        self.client = client or SyncLLMClient(LLMConfig.from_env())

    def _ask(self, system: str, traj: Trajectory) -> dict[str, Any] | None:
        result = self.client.chat(
            Role.CLEANER,
            [{"role": "system", "content": system}, {"role": "user", "content": _preview(traj)}],
            temperature=0.0,
            max_tokens=300,
        )
        return parse_json_object(result.text)

    def classify_domain(self, traj: Trajectory) -> tuple[Domain | None, str]:
        """(domain, note): None with the reason when the answer is missing or not a known domain."""
        try:
            answer = self._ask(DOMAIN_PROMPT, traj)
        except LLMError as exc:
            return None, f"llm_align_failed: {type(exc).__name__}"
        value = str((answer or {}).get("domain", "")).strip().lower()
        if value not in {d.value for d in Domain}:
            return None, f"llm_align_unparsed: {value[:40]!r}"
        return Domain(value), str((answer or {}).get("why", ""))[:300]

    def judge_quality(self, traj: Trajectory) -> tuple[float | None, list[str]]:
        """(score in 0..1, reasons); None when the judge failed or answered out of range."""
        try:
            answer = self._ask(QUALITY_PROMPT, traj)
        except LLMError as exc:
            return None, [f"llm_score_failed: {type(exc).__name__}"]
        score = (answer or {}).get("score")
        if isinstance(score, bool) or not isinstance(score, int | float) or not 0.0 <= float(score) <= 1.0:
            return None, [f"llm_score_unparsed: {str(score)[:40]!r}"]
        reasons = (answer or {}).get("reasons")
        return float(score), [str(r)[:200] for r in reasons] if isinstance(reasons, list) else []
