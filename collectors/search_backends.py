"""Search backends: where web_search results and web_extractor pages come from.

- `local`: the BM25 index `make setup` builds from the machine's documentation (collectors/search_index.py).
- `http`: any service speaking the SearXNG JSON API (`GET {url}/search?q=...&format=json&pageno=1`,
  answering `{"results": [{"url", "title", "content", "publishedDate"}, ...]}`), configured by URL and an
  optional key (sent as `Authorization: Bearer ...`, or read from the variable named by `api_key_env`);
  pages are fetched over HTTP and converted to markdown.

A backend's own failures (an HTTP error, a timeout, a page that does not exist) are `BackendError`s:
the environment records them as the observation, as a search tool would show them.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from typing import Any
from urllib.parse import urljoin

import requests
from lxml import etree
from lxml import html as lxml_html

from collectors.search_corpus import MarkdownWriter
from collectors.search_index import Hit, LocalIndex, PageText

USER_AGENT = "worldline-search-collector/0.1"


class BackendError(RuntimeError):
    """The backend failed this request; `text` is what the tool shows."""


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
    ) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self.extra_params = dict(extra_params or {})
        self.http = requests.Session()
        self.http.headers["User-Agent"] = USER_AGENT
        self.http.headers.update(headers or {})
        if api_key:
            self.http.headers["Authorization"] = f"Bearer {api_key}"

    @classmethod
    def from_config(cls, cfg: dict[str, Any]) -> SearxngBackend:
        key = cfg.get("api_key")
        if key is None and cfg.get("api_key_env"):
            key = os.environ.get(str(cfg["api_key_env"]))
        return cls(
            str(cfg["url"]),
            api_key=key,
            headers=cfg.get("headers"),
            timeout_s=float(cfg.get("timeout_s", 10.0)),
            extra_params=cfg.get("params"),
        )

    def _get(self, url: str, params: dict[str, Any] | None = None) -> requests.Response:
        try:
            response = self.http.get(url, params=params, timeout=self.timeout_s)
        except requests.Timeout as exc:
            raise BackendError(
                f"Error: the request timed out after {self.timeout_s:g} s without a response."
            ) from exc
        except requests.RequestException as exc:
            raise BackendError(f"Error: could not reach {url}: {type(exc).__name__}.") from exc
        if response.status_code >= 400:
            reason = response.reason or "error"
            raise BackendError(f"Error: HTTP {response.status_code} {reason}: {response.text.strip()[:300]}")
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
