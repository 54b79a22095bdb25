"""Search domain: `web_search`, `web_extractor` and `dict_memory` over a real backend, with conditions.

Tools and layouts follow AgentWorldBench's search domain: `web_search` takes `{"query": ...}` or
`{"queries": [...]}` and answers numbered blocks of URL, Title, Snippet and Date; `web_extractor` takes
`{"url": ...}` and answers the page as markdown; `dict_memory` is a key-value memory (add, update,
retrieve, retrieve_all, remove, remove_all). Backends: the local BM25 index (no container, no network)
or a SearXNG-compatible HTTP API (collectors/search_backends.py). The task's `search.conditions`
perturb what the backend returned (collectors/search_conditions.py) and are stated in the trajectory's
simulation instruction.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from collectors.environment import (
    Check,
    Environment,
    ResetResult,
    StepResult,
    Task,
    TaskError,
    out_of_action_space,
    parse_tool_call,
)
from collectors.search_backends import (
    API_KEY_ENV_PREFIX,
    URL_FIX,
    BackendError,
    LocalBackend,
    SearchBackend,
    SearxngBackend,
    search_policy,
)
from collectors.search_conditions import AnswerHider, ConditionError, Conditions
from collectors.search_index import BUILD_FIX, DEFAULT_INDEX_DIR, Hit, LocalIndex, SearchIndexMissing
from collectors.url_policy import URLNotAllowed
from schemas import Action, ActionSpace, Domain, Observation, ObservationFormat, ToolSpec

DEFAULT_MAX_RESULTS = 10
MEMORY_ACTIONS = ("add", "update", "retrieve", "retrieve_all", "remove", "remove_all")
SEARCH_KEYS = {
    "backend",
    "seed",
    "conditions",
    "max_results",
    "index",
    "url",
    "api_key",
    "api_key_env",
    "headers",
}
SEARCH_KEYS |= {"timeout_s", "params"}

ACTION_SPACE = ActionSpace(
    description=(
        "Search and read web pages with the tools below, and keep notes in a key-value memory. Each action "
        'is a JSON tool call {"name": ..., "arguments": {...}}.'
    ),
    tools=[
        ToolSpec(
            name="web_search",
            description=(
                "Search the web; returns numbered results with URL, title, snippet and date. Give one "
                "`query` or a list of `queries`; `page` (from 1) asks for later results when they are paged."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "query": {"type": "string"},
                    "queries": {"type": "array", "items": {"type": "string"}},
                    "page": {"type": "integer", "minimum": 1},
                },
            },
        ),
        ToolSpec(
            name="web_extractor",
            description="Fetch a page and return its content as markdown.",
            parameters={"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]},
        ),
        ToolSpec(
            name="dict_memory",
            description=(
                "A key-value memory for notes: add (new key), update (existing key), retrieve (one key), "
                "retrieve_all, remove (one key), remove_all."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": list(MEMORY_ACTIONS)},
                    "key": {"type": "string"},
                    "value": {"type": "string"},
                },
                "required": ["action"],
            },
        ),
    ],
)


def render_hits(hits: list[Hit], start: int = 1) -> str:
    """AgentWorldBench's result layout: numbered blocks of URL, Title, Snippet and Date."""
    blocks = [
        f"{i}. URL: {h.url}\n   Title: {h.title}\n   Snippet: {h.snippet}\n   Date: {h.date or 'unknown'}"
        for i, h in enumerate(hits, start=start)
    ]
    return "\n\n".join(blocks)


class DictMemory:
    """The agent's key-value notes: one per episode, state kept only in the history of its calls."""

    def __init__(self) -> None:
        self.items: dict[str, str] = {}

    def apply(self, arguments: dict[str, Any]) -> tuple[str, bool]:
        """(observation text, is_error) for one call."""
        action = arguments.get("action")
        key, value = arguments.get("key"), arguments.get("value")
        if action not in MEMORY_ACTIONS:
            return f"Error: unknown action {action!r}; use one of {', '.join(MEMORY_ACTIONS)}.", True
        if action in ("add", "update", "retrieve", "remove") and not isinstance(key, str):
            return f"Error: action {action!r} needs a string 'key'.", True
        if action in ("add", "update") and not isinstance(value, str):
            return f"Error: action {action!r} needs a string 'value'.", True
        assert action == "retrieve_all" or action == "remove_all" or isinstance(key, str)
        if action == "add":
            if key in self.items:
                return f"Error: key {key!r} already exists; use update to change it.", True
            self.items[str(key)] = str(value)
            return f"Added {key!r}.", False
        if action == "update":
            if key not in self.items:
                return f"Error: key {key!r} does not exist; use add to create it.", True
            self.items[str(key)] = str(value)
            return f"Updated {key!r}.", False
        if action == "retrieve":
            if key not in self.items:
                return f"Error: key {key!r} does not exist.", True
            return self.items[str(key)], False
        if action == "remove":
            if key not in self.items:
                return f"Error: key {key!r} does not exist.", True
            del self.items[str(key)]
            return f"Removed {key!r}.", False
        if action == "remove_all":
            count = len(self.items)
            self.items.clear()
            return f"Removed all {count} keys.", False
        return json.dumps(self.items, ensure_ascii=False, indent=1), False


class SearchEnvironment(Environment):
    """web_search / web_extractor / dict_memory over one backend, perturbed by the task's conditions."""

    domain = Domain.SEARCH

    def __init__(self, options: Any) -> None:
        super().__init__(options)
        self.backend: SearchBackend | None = None
        self.conditions = Conditions()
        self.hider = AnswerHider(())
        self.memory = DictMemory()
        self.max_results = DEFAULT_MAX_RESULTS
        self.calls = 0

    @classmethod
    def validate_task(cls, task: Task, where: str = "task") -> None:
        super().validate_task(task, where)
        cfg = task.domain_config("search")
        at = f"{where} (id {task.id})"
        unknown = sorted(set(cfg) - SEARCH_KEYS)
        if unknown:
            raise TaskError(
                f"{at}: unknown field(s) {', '.join('search.' + k for k in unknown)}; known: {', '.join(sorted(SEARCH_KEYS))}"
            )
        backend = cfg.get("backend", "local")
        if backend not in ("local", "http"):
            raise TaskError(f"{at}: field 'search.backend' must be 'local' or 'http', got {backend!r}")
        if backend == "http" and not (
            isinstance(cfg.get("url"), str) and cfg["url"].startswith(("http://", "https://"))
        ):
            raise TaskError(
                f"{at}: field 'search.url' must be the http(s) base URL of a SearXNG-compatible API when backend is 'http'"
            )
        for key in ("api_key", "api_key_env"):
            if key in cfg and not isinstance(cfg[key], str):
                raise TaskError(f"{at}: field 'search.{key}' must be a string")
        if backend == "http":
            try:
                search_policy().check_url(cfg["url"], resolve_failure_ok=True)
            except URLNotAllowed as exc:
                raise TaskError(f"{at}: field 'search.url': {exc}; {URL_FIX}") from exc
            except ValueError as exc:  # the operator's own setting is malformed
                raise TaskError(f"{at}: field 'search.url' cannot be checked: {exc}") from exc
        key_env = cfg.get("api_key_env")
        if isinstance(key_env, str) and not key_env.startswith(API_KEY_ENV_PREFIX):
            raise TaskError(
                f"{at}: field 'search.api_key_env' names {key_env!r}, which is not exposed to tasks; "
                f"the operator exposes a search key as a variable starting with {API_KEY_ENV_PREFIX} "
                f"(e.g. {API_KEY_ENV_PREFIX}KEY) and the task names that one, or the task gives search.api_key"
            )
        for key in ("headers", "params"):
            if key in cfg and not isinstance(cfg[key], dict):
                raise TaskError(f"{at}: field 'search.{key}' must be a JSON object")
        timeout = cfg.get("timeout_s", 1)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise TaskError(f"{at}: field 'search.timeout_s' must be a positive number of seconds")
        if "index" in cfg and not isinstance(cfg["index"], str):
            raise TaskError(f"{at}: field 'search.index' must be a folder path (a string)")
        seed = cfg.get("seed", 0)
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise TaskError(f"{at}: field 'search.seed' must be an integer, got {seed!r}")
        max_results = cfg.get("max_results", DEFAULT_MAX_RESULTS)
        if isinstance(max_results, bool) or not isinstance(max_results, int) or not 1 <= max_results <= 100:
            raise TaskError(f"{at}: field 'search.max_results' must be an integer from 1 to 100")
        try:
            Conditions.from_config(cfg.get("conditions"), seed)
        except ConditionError as exc:
            raise TaskError(f"{at}: field 'search.conditions': {exc}") from exc

    @classmethod
    def needs_engine(cls, task: Task | None = None) -> bool:
        return False

    @classmethod
    def declared_action_space(cls, task: Task) -> ActionSpace:
        return ACTION_SPACE

    @classmethod
    def doctor_checks(cls) -> list[Check]:
        try:
            index = LocalIndex.open(DEFAULT_INDEX_DIR)
            return [
                Check("local search index", True, LocalBackend(index).describe(), domain="search"),
            ]
        except (SearchIndexMissing, ValueError, OSError) as exc:
            return [Check("local search index", False, str(exc), BUILD_FIX, domain="search")]

    def _backend(self, task: Task, cfg: dict[str, Any]) -> SearchBackend:
        if cfg.get("backend", "local") == "http":
            backend = SearxngBackend.from_config(cfg)
            try:
                backend.check()  # a refused search URL is the episode's env_failure, with the reason
            except URLNotAllowed as exc:
                backend.close()
                raise URLNotAllowed(f"task {task.id}: {exc}", exc.unresolved) from exc
            return backend
        folder = Path(cfg["index"]) if "index" in cfg else DEFAULT_INDEX_DIR
        try:
            return LocalBackend(LocalIndex.open(folder))
        except SearchIndexMissing as exc:
            raise SearchIndexMissing(f"task {task.id}: {exc}") from exc

    def reset(self, task: Task) -> ResetResult:
        self.task = task
        cfg = task.domain_config("search")
        seed = int(cfg.get("seed", 0))
        self.conditions = Conditions.from_config(cfg.get("conditions"), seed)
        self.hider = self.conditions.hider()
        self.max_results = int(cfg.get("max_results", DEFAULT_MAX_RESULTS))
        self.memory = DictMemory()
        self.calls = 0
        self.backend = self._backend(task, cfg)
        described = self.conditions.describe()
        instruction = "\n\n".join(p for p in (task.simulation_instruction, described) if p) or None
        initial_state = "\n".join(
            [
                f"search backend: {self.backend.describe()}",
                f"results per query: up to {self.max_results}",
                f"seed: {seed}",
                "dict_memory: empty",
            ]
        )
        return ResetResult(
            observation=Observation(
                text="The search tools are ready: web_search, web_extractor, dict_memory."
            ),
            initial_state=initial_state,
            action_space=ACTION_SPACE,
            info={"search_backend": self.backend.name, "search_seed": seed},
            simulation_instruction=instruction,
        )

    def step(self, action: Action) -> StepResult:
        if self.backend is None:
            raise RuntimeError("step() before reset(): call reset(task) first")
        try:
            name, arguments = parse_tool_call(action)
        except ValueError as exc:
            return StepResult(
                action, Observation(text=f"Error: {exc}", is_error=True), info={"malformed_call": True}
            )
        if name not in ACTION_SPACE.tool_names():
            return out_of_action_space(action, ACTION_SPACE)
        self.calls += 1
        if name == "dict_memory":
            text, is_error = self.memory.apply(arguments)
            return StepResult(action, Observation(text=text, is_error=is_error))
        rng = self.conditions.rng(self.calls, name, arguments)
        injected = self.conditions.injected_error(rng)
        if injected is not None:
            return StepResult(
                action,
                Observation(text=self.conditions.error_text(injected), is_error=True),
                info={"injected_error": injected},
            )
        try:
            result = (
                self._search(action, arguments, rng)
                if name == "web_search"
                else self._extract(action, arguments)
            )
        except BackendError as exc:
            return StepResult(action, Observation(text=str(exc), is_error=True), info={"backend_error": True})
        if result.observation.is_error is None:
            result.observation.is_error = False
        return result

    def _search(self, action: Action, arguments: dict[str, Any], rng: Any) -> StepResult:
        assert self.backend is not None
        queries = arguments.get("queries")
        if queries is None:
            queries = [arguments.get("query")]
        if (
            not isinstance(queries, list)
            or not queries
            or not all(isinstance(q, str) and q.strip() for q in queries)
        ):
            return StepResult(
                action,
                Observation(
                    text="Error: web_search needs a non-empty 'query' string or a 'queries' list of them.",
                    is_error=True,
                ),
            )
        page = arguments.get("page", 1)
        if isinstance(page, bool) or not isinstance(page, int) or page < 1:
            return StepResult(
                action, Observation(text="Error: 'page' must be a positive integer.", is_error=True)
            )
        # Several queries: one ranked list, results interleaved query by query, each URL once.
        per_query = [self.backend.search(q, self.max_results) for q in queries]
        hits: list[Hit] = []
        seen: set[str] = set()
        for rank in range(max(len(r) for r in per_query)):
            for result in per_query:
                if rank < len(result) and result[rank].url not in seen:
                    seen.add(result[rank].url)
                    hits.append(result[rank])
        hits = self.hider.hide_in_hits(self.conditions.keep_partial(hits, rng))
        info: dict[str, Any] = {"results": len(hits)}
        if not hits:
            return StepResult(action, Observation(text="No results found."), info=info)
        size = self.conditions.page_size
        if size is None:
            return StepResult(action, Observation(text=render_hits(hits)), info=info)
        pages = (len(hits) + size - 1) // size
        if page > pages:
            text = f"No results on page {page}: there are {len(hits)} results in {pages} page(s) of {size}."
            return StepResult(action, Observation(text=text), info=info)
        first = (page - 1) * size
        shown = hits[first : first + size]
        text = render_hits(shown, start=first + 1)
        footer = f"Page {page} of {pages}: results {first + 1}-{first + len(shown)} of {len(hits)}."
        if page < pages:
            footer += f' Call web_search again with "page": {page + 1} for more.'
        info["page"] = page
        return StepResult(action, Observation(text=f"{text}\n\n{footer}"), info=info)

    def _extract(self, action: Action, arguments: dict[str, Any]) -> StepResult:
        assert self.backend is not None
        url = arguments.get("url")
        if not isinstance(url, str) or not url.strip():
            return StepResult(
                action, Observation(text="Error: web_extractor needs a 'url' string.", is_error=True)
            )
        # A URL shown with [...] in place of the hidden answer leads to the page it stands for.
        page = self.backend.extract(self.hider.resolve(url.strip()))
        text, omitted = self.conditions.truncate(self.hider.hide_in_page(page.markdown))
        info: dict[str, Any] = {"truncated_chars": omitted} if omitted else {}
        return StepResult(action, Observation(text=text, format=ObservationFormat.MARKDOWN), info=info)

    def close(self) -> None:
        if self.backend is not None:
            self.backend.close()
            self.backend = None


ENVIRONMENT = SearchEnvironment
