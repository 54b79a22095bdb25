"""Secret and personal-data redaction shared by every path into a pool.

`detect` holds the detectors (vendor formats, keyword context, checksummed personal numbers);
`records` applies them to trajectories, chat messages and asciicast recordings, including input a
terminal did not echo. Collectors, the cleaner, the AgentWorldBench import and the LLM client all use
this package; nothing here imports collectors/ or curation_agents/.
"""

from worldline.redaction.detect import (
    DEFAULT_PII,
    MARKER_PREFIX,
    PII_CLASSES,
    PemBlockFilter,
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
    "json_text_is_clean",
    "marker",
    "may_contain_secret",
    "parse_pii_classes",
    "redact",
    "redact_json",
    "redact_lines",
    "redact_text_or_json",
]
