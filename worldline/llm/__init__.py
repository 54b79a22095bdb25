"""worldline's one LLM client: any OpenAI-compatible endpoint, per-role models, retries, a persistent
cache, bounded concurrency, token/cost accounting and a hard budget. Nothing else in the project talks
to an LLM endpoint directly. See docs/llm.md.
"""

from worldline.llm.accounting import UsageLedger, UsageTotals
from worldline.llm.cache import ResponseCache, cache_key
from worldline.llm.client import ChatRequest, ChatResult, LLMClient, SyncLLMClient, ToolCall
from worldline.llm.config import (
    ENV_API_KEY,
    ENV_BASE_URL,
    ENV_MODEL,
    LLMConfig,
    ModelPrice,
    Role,
    endpoint_configured,
)
from worldline.llm.errors import (
    BudgetExceeded,
    LLMCallFailed,
    LLMError,
    LLMNotConfigured,
    MalformedResponse,
    RequestRejected,
    RetriesExhausted,
)
from worldline.llm.parsing import (
    PredictionParse,
    extract_predicted_observation,
    parse_json_lenient,
    parse_json_object,
    parse_predicted_observation,
    split_reasoning,
    strip_think,
)

__all__ = [
    "ENV_API_KEY",
    "ENV_BASE_URL",
    "ENV_MODEL",
    "BudgetExceeded",
    "ChatRequest",
    "ChatResult",
    "LLMCallFailed",
    "LLMClient",
    "LLMConfig",
    "LLMError",
    "LLMNotConfigured",
    "MalformedResponse",
    "ModelPrice",
    "PredictionParse",
    "RequestRejected",
    "ResponseCache",
    "RetriesExhausted",
    "Role",
    "SyncLLMClient",
    "ToolCall",
    "UsageLedger",
    "UsageTotals",
    "cache_key",
    "endpoint_configured",
    "extract_predicted_observation",
    "parse_json_lenient",
    "parse_json_object",
    "parse_predicted_observation",
    "split_reasoning",
    "strip_think",
]
