"""The cleaner's redaction: the shared detector core of worldline.redaction, under the names the
cleaner has always imported. Collectors, the AgentWorldBench import and the LLM client use the same
core, so a secret the cleaner removes is removed on every path into a pool (docs/curation.md)."""

from __future__ import annotations

from worldline.redaction.detect import (
    _COMBINED,
    _NEEDLE,
    _NEEDLE_DFA,
    _PII,
    DEFAULT_PII,
    MARKER_PREFIX,
    PII_CLASSES,
    PemBlockFilter,
    _pii_possible,
    json_text_is_clean,
    marker,
    may_contain_secret,
    parse_pii_classes,
    redact,
    redact_json,
    redact_lines,
    redact_text_or_json,
)

__all__ = [
    "DEFAULT_PII",
    "MARKER_PREFIX",
    "PII_CLASSES",
    "PemBlockFilter",
    "_COMBINED",
    "_NEEDLE",
    "_NEEDLE_DFA",
    "_PII",
    "_pii_possible",
    "json_text_is_clean",
    "marker",
    "may_contain_secret",
    "parse_pii_classes",
    "redact",
    "redact_json",
    "redact_lines",
    "redact_text_or_json",
]
