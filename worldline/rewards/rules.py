"""Rule verifiers: executable 0/1 checks of a predicted observation, derived from the real one.

A turn's rules are plain JSON (`derive_rules`) so they travel inside a pool row (the RL row's
`reward_spec`) and are checked later by the reward function (`verify`), with no access to the
trajectory. Kinds, one per content tier the paper says can be checked by rule:

- `exact_match`: deterministic content (file reads, computed output) must equal `expected`.
- `masked_match`: deterministic text with runtime metadata inside (timestamps, PIDs, addresses):
  the text must match exactly outside the metadata, and each metadata span must have its format.
- `range`: every number captured by `pattern` lies in [min, max] (PIDs, ports, years, hours).
- `span_match`: the turn has replay span labels (`worldline replay`): the text must equal the real
  one on every deterministic span, and each runtime or variable span must have the real value's
  format (a PID also its range). Used instead of the pattern tiers whenever labels exist.
- `json_schema`: the prediction is JSON and validates against the schema of the real tool result
  (keys, types, the `isError` flag).

Comparison normalises line endings, trailing spaces per line and surrounding blank lines, nothing
else. `verify` passes (1) only when every check passes, and says which failed and why.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from schemas.domains import domain_spec, is_registered
from schemas.span_labels import TurnLabels
from worldline.rewards.spans import check_segments, has_checkable_content, span_segments
from worldline.rewards.spans import normalise_text as normalise_text  # the rules' normalisation, shared

# Actions whose observation is deterministic content (the paper's first tier). `is_deterministic_action`
# also decides `verifier = exact_match` for the RL rows pipelines/render.py writes.
DETERMINISTIC_COMMANDS = frozenset(
    {
        "cat", "head", "tail", "wc", "sort", "uniq", "grep", "echo", "printf", "expr", "sha256sum",
        "md5sum", "base64", "seq", "tr", "cut", "jq", "nl", "rev",
    }
)  # fmt: skip
DETERMINISTIC_TOOLS = frozenset({"read", "read_file", "view", "str_replace_editor_view", "read_text_file"})

# Runtime metadata: (name, pattern in the ground truth, format the prediction must have there).
METADATA_FORMATS: tuple[tuple[str, str, str], ...] = (
    ("uuid", r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"),
    ("datetime", r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?", r"\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])[T ](?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?"),
    ("date", r"\d{4}-\d{2}-\d{2}", r"\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])"),
    ("time", r"\d{1,2}:\d{2}:\d{2}(?:\.\d+)?", r"(?:[01]?\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d+)?"),
    ("address", r"0x[0-9a-f]{6,}", r"0x[0-9a-fA-F]{4,}"),
)  # fmt: skip
_METADATA = re.compile(
    "|".join(f"(?P<{name}>{pattern})" for name, pattern, _ in METADATA_FORMATS), re.IGNORECASE
)
_PID = re.compile(r"\bpid\b", re.IGNORECASE)
PID_MAX = 4_194_304  # Linux's pid_max ceiling


def _command_of(action_text: str) -> str:
    command = action_text
    try:
        parsed = json.loads(action_text)
    except ValueError:
        return command
    if isinstance(parsed, list):  # keystrokes form: the typed text
        return "".join(str(k.get("keystrokes", "")) for k in parsed if isinstance(k, dict))
    if isinstance(parsed, dict):
        arguments = parsed.get("arguments")
        nested = arguments.get("command") if isinstance(arguments, dict) else None
        return str(parsed.get("command") or nested or "")
    return command


def rule_verifier_applies(domain: str) -> bool:
    """Whether the domain's observations are checked by rule (its `DomainSpec.rule_verifier`)."""
    return is_registered(domain) and domain_spec(domain).rule_verifier


def is_deterministic_action(domain: str, action_text: str, tool_name: str | None) -> bool:
    """A read or computation whose output the action and earlier state fully determine."""
    if not rule_verifier_applies(domain):
        return False
    if (tool_name or "").lower() in DETERMINISTIC_TOOLS:
        return True
    words = _command_of(action_text).strip().split()
    return bool(words) and words[0] in DETERMINISTIC_COMMANDS


def infer_schema(value: Any, *, depth: int = 0) -> dict[str, Any]:
    """A JSON schema of the real result's shape: types, required keys, item shape, the error flag."""
    if depth > 6:
        return {}
    if isinstance(value, bool):
        return {"type": "boolean"}
    if isinstance(value, int):
        return {"type": "integer"}
    if isinstance(value, float):
        return {"type": "number"}
    if isinstance(value, str):
        return {"type": "string"}
    if value is None:
        return {"type": "null"}
    if isinstance(value, list):
        schema: dict[str, Any] = {"type": "array"}
        if value:
            schema["items"] = infer_schema(value[0], depth=depth + 1)
        return schema
    if isinstance(value, dict):
        properties: dict[str, Any] = {}
        for key, item in value.items():
            if key in ("isError", "is_error") and isinstance(item, bool):
                properties[key] = {"const": item}  # success versus error is deterministic status
            else:
                properties[key] = infer_schema(item, depth=depth + 1)
        return {"type": "object", "properties": properties, "required": sorted(value)}
    return {}


def _masked_pattern(text: str) -> str:
    """A regex equal to `text` outside runtime-metadata spans, each span replaced by its format."""
    formats = {name: fmt for name, _, fmt in METADATA_FORMATS}
    parts: list[str] = []
    pos = 0
    for match in _METADATA.finditer(text):
        parts.append(re.escape(text[pos : match.start()]))
        parts.append(f"(?:{formats[match.lastgroup or '']})")
        pos = match.end()
    parts.append(re.escape(text[pos:]))
    return "".join(parts)


def derive_rules(
    domain: str,
    action_text: str,
    observation_text: str,
    *,
    tool_name: str | None = None,
    is_error: bool | None = None,
    labels: TurnLabels | None = None,
) -> list[dict[str, Any]]:
    """The rule checks one turn supports (empty when its observation is not checkable by rule).

    With LABELS (the turn's replay span labels, covering OBSERVATION_TEXT, not diverged) the replay
    decides what is deterministic: one `span_match` check replaces the action list and the metadata
    patterns, which stay the fallback for turns without labels."""
    rules: list[dict[str, Any]] = []
    truth = normalise_text(observation_text)
    if rule_verifier_applies(domain):
        try:
            parsed = json.loads(observation_text)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict | list) and parsed:
            rules.append(
                {"kind": "json_schema", "schema": infer_schema(parsed), "reason": "tool result schema"}
            )
    if is_error:
        return rules
    segments = span_segments(observation_text, labels) if labels and not labels.diverged else []
    if rule_verifier_applies(domain) and has_checkable_content(segments):
        if all("exact" in s for s in segments):
            rules.append({"kind": "exact_match", "expected": truth, "reason": "replayed identically"})
        else:
            reason = "replay labels: deterministic spans exact, runtime and variable spans by format"
            rules.append({"kind": "span_match", "segments": segments, "reason": reason})
        return rules
    if not is_deterministic_action(domain, action_text, tool_name):
        return rules
    if _METADATA.search(truth) is None and _PID.search(truth) is None:
        rules.append({"kind": "exact_match", "expected": truth, "reason": "deterministic content"})
        return rules
    if _PID.search(truth) is not None:
        rules.append(
            {
                "kind": "range",
                "pattern": r"\bpid\b\D{0,3}(\d+)",
                "min": 1,
                "max": PID_MAX,
                "reason": "process ids are positive and below pid_max",
            }
        )
        return rules  # PIDs vary per run and appear in free text: no template of the rest
    rules.append(
        {
            "kind": "masked_match",
            "pattern": _masked_pattern(truth),
            "reason": "deterministic content with runtime metadata",
        }
    )
    return rules


@dataclass(frozen=True)
class CheckOutcome:
    kind: str
    passed: bool
    reason: str


@dataclass(frozen=True)
class RuleOutcome:
    """All checks' outcomes; `score` is 1 when every check passed, 0 otherwise."""

    checks: tuple[CheckOutcome, ...] = field(default_factory=tuple)

    @property
    def score(self) -> int:
        return int(bool(self.checks) and all(check.passed for check in self.checks))

    @property
    def reason(self) -> str:
        failed = [f"{c.kind}: {c.reason}" for c in self.checks if not c.passed]
        return "; ".join(failed) if failed else "all checks passed"


def _check(prediction: str, rule: Mapping[str, Any]) -> CheckOutcome:
    kind = str(rule.get("kind", ""))
    text = normalise_text(prediction)
    if kind == "exact_match":
        expected = normalise_text(str(rule.get("expected", "")))
        if text == expected:
            return CheckOutcome(kind, True, "matches")
        first = next(
            (i for i, (a, b) in enumerate(zip(text, expected, strict=False)) if a != b),
            min(len(text), len(expected)),
        )
        return CheckOutcome(kind, False, f"differs from the real output at character {first}")
    if kind == "masked_match":
        try:
            ok = re.fullmatch(str(rule.get("pattern", "")), text, re.DOTALL) is not None
        except re.error as error:
            return CheckOutcome(kind, False, f"invalid pattern ({error})")
        return CheckOutcome(kind, ok, "matches" if ok else "deterministic text or metadata format differs")
    if kind == "span_match":
        span = check_segments(prediction, list(rule.get("segments") or []))
        return CheckOutcome(kind, span.passed, span.reason)
    if kind == "range":
        try:
            values = [float(v) for v in re.findall(str(rule.get("pattern", "")), text, re.IGNORECASE)]
        except (re.error, ValueError, TypeError) as error:
            return CheckOutcome(kind, False, f"unusable pattern ({error})")
        low, high = float(rule.get("min", float("-inf"))), float(rule.get("max", float("inf")))
        if not values:
            return CheckOutcome(kind, False, "no value where the real output has one")
        bad = [v for v in values if not low <= v <= high]
        return CheckOutcome(kind, not bad, f"{bad[0]:g} outside [{low:g}, {high:g}]" if bad else "in range")
    if kind == "json_schema":
        try:
            value = json.loads(prediction)
        except ValueError:
            return CheckOutcome(kind, False, "prediction is not JSON")
        import jsonschema  # imported here: it costs a quarter second of every pools build's start-up

        try:
            jsonschema.validate(value, rule.get("schema") or {})
        except jsonschema.ValidationError as error:
            where = "/".join(str(p) for p in error.absolute_path) or "<root>"
            return CheckOutcome(kind, False, f"at {where}: {error.message[:200]}")
        except jsonschema.SchemaError as error:
            return CheckOutcome(kind, False, f"invalid schema ({error.message[:200]})")
        return CheckOutcome(kind, True, "valid")
    return CheckOutcome(kind or "<missing>", False, f"unknown rule kind {kind!r}")


def verify(prediction: str, rules: Sequence[Mapping[str, Any]]) -> RuleOutcome | None:
    """Check a predicted observation against a turn's rules; None when the turn has no rules."""
    if not rules:
        return None
    return RuleOutcome(tuple(_check(prediction, rule) for rule in rules))
