"""Search backends: where web_search results and web_extractor pages come from.

- `local`: the BM25 index `make setup` builds from the machine's documentation (collectors/search_index.py).
- `http`: any service speaking the SearXNG JSON API (`GET {url}/search?q=...&format=json&pageno=1`,
  answering `{"results": [{"url", "title", "content", "publishedDate"}, ...]}`), configured by URL and an
  optional key (sent as `Authorization: Bearer ...`, or read from the variable named by `api_key_env`);
  pages are fetched over HTTP and converted to markdown.

The http backend runs on the host, so every request it makes is checked (collectors/url_policy.py): the
search URL and every page `web_extractor` fetches must be http(s) with only public addresses, unless the
operator names the origin in WORLDLINE_SEARCH_ALLOWED_URLS (or `worldline collect --search-allow-url`).
Redirects are followed by hand, at most MAX_REDIRECTS hops, each checked; each connection resolves the
host, checks every address and connects to an address it checked (`GuardedAdapter`). A task's
`api_key_env` may name only variables starting with API_KEY_ENV_PREFIX, which the operator exposes
for this purpose.

A backend's own failures (an HTTP error, a timeout, a page that does not exist) are `BackendError`s:
the environment records them as the observation, as a search tool would show them.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from typing import Any
from urllib.parse import urljoin

import requests
import urllib3
from lxml import etree
from lxml import html as lxml_html
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from collectors.search_corpus import MarkdownWriter
from collectors.search_index import Hit, LocalIndex, PageText
from collectors.url_policy import OriginPolicy, URLNotAllowed

USER_AGENT = "worldline-search-collector/0.1"
ALLOWED_URLS_ENV = "WORLDLINE_SEARCH_ALLOWED_URLS"
URL_FIX = (
    f"an operator who trusts that server names its origin in {ALLOWED_URLS_ENV} "
    "(comma-separated, e.g. http://127.0.0.1:8888) or with `worldline collect --search-allow-url ORIGIN`"
)
API_KEY_ENV_PREFIX = "WORLDLINE_SEARCH_"
MAX_REDIRECTS = 5


class BackendError(RuntimeError):
    """The backend failed this request; `text` is what the tool shows."""


def search_policy() -> OriginPolicy:
    """The search domain's URL policy, from WORLDLINE_SEARCH_ALLOWED_URLS."""
    return OriginPolicy.from_env(ALLOWED_URLS_ENV)


def guarded_adapter(policy: OriginPolicy) -> HTTPAdapter:
    """A requests adapter whose every TCP connection resolves the host itself, checks each address
    against `policy` (URLNotAllowed when one is forbidden) and connects only to the checked addresses;
    TLS still verifies the URL's host name."""

    def new_conn(base: type[HTTPConnection]) -> Any:
        def _new_conn(self: Any) -> Any:
            addresses = policy.resolve_checked(self.host, self.port)
            dns_host = self._dns_host
            error: Exception | None = None
            try:
                for address in addresses:
                    self._dns_host = address
                    try:
                        return base._new_conn(self)
                    except urllib3.exceptions.NewConnectionError as exc:
                        error = exc
            finally:
                self._dns_host = dns_host
            assert error is not None
            raise error

        return _new_conn

    http_conn = type("GuardedHTTPConnection", (HTTPConnection,), {"_new_conn": new_conn(HTTPConnection)})
    https_conn = type("GuardedHTTPSConnection", (HTTPSConnection,), {"_new_conn": new_conn(HTTPSConnection)})
    http_pool = type("GuardedHTTPPool", (HTTPConnectionPool,), {"ConnectionCls": http_conn})
    https_pool = type("GuardedHTTPSPool", (HTTPSConnectionPool,), {"ConnectionCls": https_conn})

    class GuardedAdapter(HTTPAdapter):
        def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
            super().init_poolmanager(*args, **kwargs)
            self.poolmanager.pool_classes_by_scheme = {"http": http_pool, "https": https_pool}

    return GuardedAdapter(max_retries=0)


class SearchBackend(ABC):
    name: str

    @abstractmethod
    def search(self, query: str, limit: int) -> list[Hit]:
        """Up to `limit` results for `query`, best first."""

    @abstractmethod
    def extract(self, url: str) -> PageText:
        """The page at `url` as markdown; BackendError when it cannot be had."""

    @abstractmethod
    def describe(self) -> str:
        """What this backend searches, for the trajectory's initial state."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections (nothing to do for most backends)."""


class LocalBackend(SearchBackend):
    """The offline BM25 index over the machine's documentation."""

    name = "local"

    def __init__(self, index: LocalIndex) -> None:
        self.index = index

    def search(self, query: str, limit: int) -> list[Hit]:
        return self.index.search(query, limit)

    def extract(self, url: str) -> PageText:
        page = self.index.page(url)
        if page is None:
            raise BackendError(f"Error: HTTP 404 Not Found: {url} is not a page of this index.")
        return page

    def describe(self) -> str:
        meta = self.index.meta
        sources = ", ".join(f"{d} as {u}" for d, u in (meta.get("sources") or {}).items())
        return (
            f"local BM25 index (tantivy) of {meta.get('pages')} pages / {meta.get('sections')} sections "
            f"built {meta.get('built_at')} from {sources}"
        )


def html_to_markdown(raw: str, url: str) -> tuple[str, str]:
    """(title, markdown) of an HTML page: its main content (role=main, <main>, <article>, else <body>)."""
    try:
        tree = lxml_html.fromstring(raw)
    except (etree.ParserError, ValueError):
        return url, raw
    title_el = tree.find(".//title")
    title = " ".join(title_el.text_content().split()) if title_el is not None else url
    main = tree.xpath('//*[@role="main"]') or tree.xpath("//main") or tree.xpath("//article") or [tree]
    writer = MarkdownWriter(url)
    writer.write(main[0])
    return title, writer.markdown()


class SearxngBackend(SearchBackend):
    """A SearXNG-compatible JSON search API, and plain HTTP for page extraction."""

    name = "http"

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        headers: dict[str, str] | None = None,
        timeout_s: float = 10.0,
        extra_params: dict[str, Any] | None = None,
        policy: OriginPolicy | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self.extra_params = dict(extra_params or {})
        self.policy = policy if policy is not None else search_policy()
        self.http = requests.Session()
        self.http.trust_env = False  # no proxies or .netrc credentials from the host's environment
        adapter = guarded_adapter(self.policy)
        self.http.mount("http://", adapter)
        self.http.mount("https://", adapter)
        self.http.headers["User-Agent"] = USER_AGENT
        self.http.headers.update(headers or {})
        if api_key:
            self.http.headers["Authorization"] = f"Bearer {api_key}"

    @classmethod
    def from_config(cls, cfg: dict[str, Any]) -> SearxngBackend:
        key = cfg.get("api_key")
        if key is None and cfg.get("api_key_env"):
            name = str(cfg["api_key_env"])
            if not name.startswith(API_KEY_ENV_PREFIX):
                raise URLNotAllowed(
                    f"search.api_key_env {name!r} is not a variable exposed for search keys; "
                    f"name one starting with {API_KEY_ENV_PREFIX}"
                )
            key = os.environ.get(name)
        return cls(
            str(cfg["url"]),
            api_key=key,
            headers=cfg.get("headers"),
            timeout_s=float(cfg.get("timeout_s", 10.0)),
            extra_params=cfg.get("params"),
        )

    def check(self) -> None:
        """URLNotAllowed when the search URL may not be reached now (the episode's env_failure)."""
        try:
            self.policy.check_url(self.url)
        except URLNotAllowed as exc:
            raise URLNotAllowed(f"search.url {self.url}: {exc}; {URL_FIX}", exc.unresolved) from exc

    def _get(self, url: str, params: dict[str, Any] | None = None) -> requests.Response:
        """GET `url`, following up to MAX_REDIRECTS redirects by hand, each hop checked by the policy."""
        for _ in range(MAX_REDIRECTS + 1):
            try:
                self.policy.check_url(url)
            except URLNotAllowed as exc:
                raise BackendError(f"Error: the collector does not fetch {url}: {exc}.") from exc
            response = self._get_once(url, params)
            if not response.is_redirect:
                break
            location = response.headers.get("location", "")
            response.close()
            url, params = urljoin(response.url, location), None
        else:
            raise BackendError(f"Error: more than {MAX_REDIRECTS} redirects, the last to {url}.")
        if response.status_code >= 400:
            reason = response.reason or "error"
            raise BackendError(f"Error: HTTP {response.status_code} {reason}: {response.text.strip()[:300]}")
        return response

    def _get_once(self, url: str, params: dict[str, Any] | None) -> requests.Response:
        try:
            response = self.http.get(url, params=params, timeout=self.timeout_s, allow_redirects=False)
        except URLNotAllowed as exc:
            raise BackendError(f"Error: the collector does not fetch {url}: {exc}.") from exc
        except requests.Timeout as exc:
            raise BackendError(
                f"Error: the request timed out after {self.timeout_s:g} s without a response."
            ) from exc
        except requests.RequestException as exc:
            raise BackendError(f"Error: could not reach {url}: {type(exc).__name__}.") from exc
        return response

    def search(self, query: str, limit: int) -> list[Hit]:
        params = {"q": query, "format": "json", "pageno": 1, **self.extra_params}
        response = self._get(urljoin(self.url + "/", "search"), params)
        try:
            payload = response.json()
        except ValueError as exc:
            raise BackendError("Error: the search service answered with something that is not JSON.") from exc
        hits: list[Hit] = []
        for item in payload.get("results") or []:
            if not isinstance(item, dict) or not item.get("url"):
                continue
            date = str(item.get("publishedDate") or item.get("pubdate") or "")[:10]
            hits.append(
                Hit(
                    url=str(item["url"]),
                    title=" ".join(str(item.get("title") or "").split()),
                    snippet=" ".join(str(item.get("content") or "").split()),
                    date=date,
                )
            )
            if len(hits) >= limit:
                break
        return hits

    def extract(self, url: str) -> PageText:
        if not url.startswith(("http://", "https://")):
            raise BackendError(f"Error: {url!r} is not an http(s) URL.")
        response = self._get(url)
        content_type = response.headers.get("content-type", "")
        if "html" in content_type or response.text.lstrip()[:1] == "<":
            title, markdown = html_to_markdown(response.text, url)
        else:
            title, markdown = url, response.text
        date = response.headers.get("last-modified", "")
        return PageText(url=url, title=title, date=date, markdown=markdown)

    def describe(self) -> str:
        return f"SearXNG-compatible JSON search API at {self.url} (pages fetched over HTTP)"

    def close(self) -> None:
        self.http.close()
