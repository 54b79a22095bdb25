"""Configuration of the shared LLM client: endpoint, per-role models, limits, cache, budget and prices.

Everything can come from environment variables (`LLMConfig.from_env`) or be passed in code, so that
jobs, notebooks and tests configure the client the same way.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path

from worldline.llm.errors import LLMNotConfigured

ENV_BASE_URL = "WORLDLINE_LLM_BASE_URL"
ENV_API_KEY = "WORLDLINE_LLM_API_KEY"
ENV_MODEL = "WORLDLINE_LLM_MODEL"
ENV_MODEL_PREFIX = "WORLDLINE_LLM_MODEL_"
ENV_CONCURRENCY = "WORLDLINE_LLM_CONCURRENCY"
ENV_TIMEOUT = "WORLDLINE_LLM_TIMEOUT_S"
ENV_MAX_RETRIES = "WORLDLINE_LLM_MAX_RETRIES"
ENV_CACHE = "WORLDLINE_LLM_CACHE"
ENV_MAX_CALLS = "WORLDLINE_LLM_MAX_CALLS"
ENV_MAX_TOKENS = "WORLDLINE_LLM_MAX_TOKENS"
ENV_PRICES = "WORLDLINE_LLM_PRICES"

# Local OpenAI-compatible servers (vLLM, SGLang) accept any key, but the openai client refuses an empty one.
PLACEHOLDER_API_KEY = "EMPTY"
CACHE_DISABLED_VALUES = frozenset({"", "0", "off", "none", "false", "disabled"})


class Role(StrEnum):
    """Who is calling the LLM; each role can be served by a different model."""

    WORLD_MODEL = "world_model"
    JUDGE = "judge"
    OPTIMIZER = "optimizer"
    ROLLOUT = "rollout"
    CLEANER = "cleaner"
    AGENT_POLICY = "agent_policy"
    TASK_GENERATOR = "task_generator"

    @property
    def model_env_var(self) -> str:
        """The environment variable that names this role's model, e.g. WORLDLINE_LLM_MODEL_JUDGE."""
        return ENV_MODEL_PREFIX + self.value.upper()


@dataclass(frozen=True)
class ModelPrice:
    """USD per one million prompt (input) and completion (output) tokens for one model."""

    input_per_million: float = 0.0
    output_per_million: float = 0.0

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input_per_million + completion_tokens * self.output_per_million) / 1e6


def default_cache_path() -> Path:
    """Where the response cache lives unless configured: $XDG_CACHE_HOME/worldline/llm-cache.sqlite."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "worldline" / "llm-cache.sqlite"


@dataclass(frozen=True)
class LLMConfig:
    """Everything the client needs; `models` maps a Role to a model name, `default_model` fills gaps.

    `max_retries` counts retries after the first attempt. `max_calls` / `max_total_tokens` of None mean
    no budget. `cache_path` of None disables the response cache.
    """

    base_url: str | None = None
    api_key: str | None = None
    default_model: str | None = None
    models: Mapping[Role, str] = field(default_factory=dict)
    concurrency: int = 8
    timeout_s: float = 600.0
    max_retries: int = 5
    backoff_base_s: float = 1.0
    backoff_max_s: float = 60.0
    retry_after_max_s: float = 300.0
    cache_path: Path | None = None
    max_calls: int | None = None
    max_total_tokens: int | None = None
    prices: Mapping[str, ModelPrice] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError(f"LLMConfig.concurrency must be >= 1, got {self.concurrency}")
        if self.max_retries < 0:
            raise ValueError(f"LLMConfig.max_retries must be >= 0, got {self.max_retries}")
        if self.timeout_s <= 0:
            raise ValueError(f"LLMConfig.timeout_s must be > 0, got {self.timeout_s}")
        # Accept plain strings as role keys ("judge") so YAML/JSON configs map directly.
        object.__setattr__(self, "models", {Role(key): value for key, value in self.models.items()})

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> LLMConfig:
        """Read the WORLDLINE_LLM_* variables; keyword overrides win over the environment."""
        source = os.environ if env is None else env
        models = {role: source[role.model_env_var] for role in Role if source.get(role.model_env_var)}
        cache_value = source.get(ENV_CACHE)
        if cache_value is None:
            cache_path: Path | None = default_cache_path()
        elif cache_value.strip().lower() in CACHE_DISABLED_VALUES:
            cache_path = None
        else:
            cache_path = Path(cache_value).expanduser()
        config = cls(
            base_url=source.get(ENV_BASE_URL) or None,
            api_key=source.get(ENV_API_KEY) or None,
            default_model=source.get(ENV_MODEL) or None,
            models=models,
            concurrency=_env_int(source, ENV_CONCURRENCY, 8),
            timeout_s=_env_float(source, ENV_TIMEOUT, 600.0),
            max_retries=_env_int(source, ENV_MAX_RETRIES, 5),
            cache_path=cache_path,
            max_calls=_env_optional_int(source, ENV_MAX_CALLS),
            max_total_tokens=_env_optional_int(source, ENV_MAX_TOKENS),
            prices=_env_prices(source),
        )
        return replace(config, **overrides) if overrides else config  # type: ignore[arg-type]

    @property
    def endpoint_configured(self) -> bool:
        return bool(self.base_url)

    def require_endpoint(self) -> str:
        """The base URL, or LLMNotConfigured naming the variable to set."""
        if not self.base_url:
            raise LLMNotConfigured(
                f"No LLM endpoint configured: set {ENV_BASE_URL} (e.g. http://localhost:8000/v1 for a "
                f"vLLM/SGLang server) and {ENV_API_KEY} if the endpoint needs a key, or pass "
                f"LLMConfig(base_url=...)."
            )
        return self.base_url

    def model_for(self, role: Role | str) -> str:
        """The model serving `role`, or LLMNotConfigured naming both variables that could set it."""
        role = Role(role)
        model = self.models.get(role) or self.default_model
        if not model:
            raise LLMNotConfigured(
                f"No model configured for role '{role.value}': set {role.model_env_var} or {ENV_MODEL}, "
                f"or pass LLMConfig(models={{Role.{role.name}: ...}})."
            )
        return model

    def price_for(self, model: str) -> ModelPrice:
        return self.prices.get(model, ModelPrice())


def endpoint_configured(env: Mapping[str, str] | None = None) -> bool:
    """True when WORLDLINE_LLM_BASE_URL is set; steps without an endpoint take their deterministic path."""
    source = os.environ if env is None else env
    return bool(source.get(ENV_BASE_URL))


def _env_int(env: Mapping[str, str], name: str, default: int) -> int:
    value = _env_optional_int(env, name)
    return default if value is None else value


def _env_optional_int(env: Mapping[str, str], name: str) -> int | None:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not an integer; set it to a whole number or unset it") from None


def _env_float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise ValueError(
            f"{name}={raw!r} is not a number; set it to seconds (e.g. 120) or unset it"
        ) from None


def _env_prices(env: Mapping[str, str]) -> dict[str, ModelPrice]:
    """WORLDLINE_LLM_PRICES='{"model": [input_usd_per_1M, output_usd_per_1M], ...}'."""
    raw = env.get(ENV_PRICES)
    if not raw:
        return {}
    try:
        table = json.loads(raw)
        return {str(model): ModelPrice(float(pair[0]), float(pair[1])) for model, pair in table.items()}
    except (ValueError, TypeError, IndexError, AttributeError, KeyError):
        raise ValueError(
            f"{ENV_PRICES} must be a JSON object mapping model -> [input_usd_per_1M, output_usd_per_1M], "
            f"got {raw!r}"
        ) from None
