"""LLM clients for the three roles (optimizer, world model, judge), sharing one cache and one budget.

Roles on the same endpoint share one client (one concurrency bound); roles on different endpoints get
one client each, all with the RUNDIR's response cache and one usage ledger, so the budget in calls and
tokens covers the whole experiment.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from prompt_autoresearch.engine import RoleClients
from prompt_autoresearch.state import REQUESTS_FILE
from worldline.llm import LLMClient, LLMConfig, Role, UsageLedger
from worldline.llm.accounting import RequestJournal

ROLES = (Role.OPTIMIZER, Role.WORLD_MODEL, Role.JUDGE)


@dataclass(frozen=True)
class RoleEndpoint:
    """Where one role is served: base URL (None: the default endpoint) and model (None: the default)."""

    base_url: str | None = None
    model: str | None = None


def resolve_models(base: LLMConfig, endpoints: dict[Role, RoleEndpoint]) -> dict[str, str]:
    """The model name of each role, for the state fingerprint and the same-model warning."""
    models = {}
    for role in ROLES:
        chosen = endpoints.get(role, RoleEndpoint()).model
        models[role.value] = chosen or base.model_for(role)
    return models


def judge_is_world_model(base: LLMConfig, endpoints: dict[Role, RoleEndpoint]) -> bool:
    models = resolve_models(base, endpoints)
    urls = {r: endpoints.get(r, RoleEndpoint()).base_url or base.base_url for r in ROLES}
    return models["judge"] == models["world_model"] and urls[Role.JUDGE] == urls[Role.WORLD_MODEL]


def build_clients(
    base: LLMConfig,
    endpoints: dict[Role, RoleEndpoint],
    *,
    cache_path: Path,
    concurrency: int,
) -> tuple[RoleClients, UsageLedger]:
    """One client per distinct endpoint, with the role models set, the RUNDIR cache and a shared ledger
    (whose budget the caller sets) backed by RUNDIR's request journal, so its totals include every
    request earlier sessions sent, a killed one's included."""
    models = resolve_models(base, endpoints)
    ledger = UsageLedger(prices=dict(base.prices))
    ledger.attach_journal(RequestJournal(cache_path.parent / REQUESTS_FILE))
    by_url: dict[str, LLMClient] = {}
    chosen: dict[Role, LLMClient] = {}
    for role in ROLES:
        url = endpoints.get(role, RoleEndpoint()).base_url or base.require_endpoint()
        if url not in by_url:
            config = replace(
                base,
                base_url=url,
                models={Role(name): model for name, model in models.items()},
                cache_path=cache_path,
                concurrency=concurrency,
                max_calls=None,
                max_total_tokens=None,
            )
            client = LLMClient(config)
            client.ledger = ledger
            by_url[url] = client
        chosen[role] = by_url[url]
    return RoleClients(chosen[Role.OPTIMIZER], chosen[Role.WORLD_MODEL], chosen[Role.JUDGE]), ledger
