"""The local search index: BM25 (tantivy) over the documentation corpus, plus the pages for extraction.

Layout of an index folder (default `infra/.cache/search-index`, built by `make setup` through
`infra/build-search-index.sh`, i.e. `python -m collectors.search_index build`):

    tantivy/      the BM25 index of sections (title and text stemmed in English; URL, title, date stored)
    pages.jsonl   one page per line: {"url", "title", "date", "markdown"}, what web_extractor returns
    meta.json     sources, counts, build time and seconds, engine

tantivy over bm25s: benchmarks/mcp_search_bench.py measures both on the same pages in one run; on a
loaded 2-core machine tantivy built its index 1.4-2.3x faster and answered 1.1-6x more queries per second
across runs (on the 15,553 sections, 3x and 9x). It also stores the fields, makes query-aware snippets
itself, memory-maps the index (opens in about 1 ms), and its searcher is safe to share between
concurrent episodes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urldefrag

import tantivy

from collectors.search_corpus import DEFAULT_SOURCES, iter_pages, plain_text
from schemas.atomic import replace_dir

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_INDEX_DIR = Path(os.environ.get("WORLDLINE_SEARCH_INDEX", ROOT / "infra" / ".cache" / "search-index"))
BUILD_FIX = "bash infra/build-search-index.sh   (part of `make setup`)"
SNIPPET_CHARS = 240


class SearchIndexMissing(FileNotFoundError):
    """No usable index at the given folder; the message says how to build one."""


@dataclass(frozen=True)
class Hit:
    """One search result: where, what, a query-aware snippet and the page's date."""

    url: str
    title: str
    snippet: str
    date: str


@dataclass(frozen=True)
class PageText:
    url: str
    title: str
    date: str
    markdown: str


def _schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("title", stored=True, tokenizer_name="en_stem")
    builder.add_text_field("text", stored=True, tokenizer_name="en_stem")
    builder.add_text_field("url", stored=True, tokenizer_name="raw")
    builder.add_text_field("date", stored=True, tokenizer_name="raw")
    return builder.build()


def build_index(out: Path, sources: dict[str, str] | None = None) -> dict[str, object]:
    """Build the index into `out` (replacing what is there, atomically: `schemas.atomic.replace_dir`) and
    return its meta."""
    sources = sources or DEFAULT_SOURCES
    started = time.monotonic()
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "tantivy").mkdir(parents=True)
    index = tantivy.Index(_schema(), path=str(tmp / "tantivy"))
    writer = index.writer()
    pages = sections = chars = 0
    with (tmp / "pages.jsonl").open("w", encoding="utf-8") as fh:
        for page in iter_pages(sources):
            pages += 1
            chars += len(page.markdown)
            fh.write(
                json.dumps(
                    {"url": page.url, "title": page.title, "date": page.date, "markdown": page.markdown},
                    ensure_ascii=False,
                )
                + "\n"
            )
            for section in page.sections:
                sections += 1
                writer.add_document(
                    tantivy.Document(
                        title=section.title, text=plain_text(section.text), url=section.url, date=section.date
                    )
                )
    writer.commit()
    writer.wait_merging_threads()
    meta: dict[str, object] = {
        "sources": sources,
        "pages": pages,
        "sections": sections,
        "characters": chars,
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "build_seconds": round(time.monotonic() - started, 2),
        "engine": "tantivy",
    }
    (tmp / "meta.json").write_text(json.dumps(meta, indent=1), "utf-8")
    replace_dir(tmp, out)
    return meta


def index_size_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


class LocalIndex:
    """An opened index: BM25 search over sections and page lookup by URL. Thread-safe; shared per folder."""

    _opened: dict[Path, LocalIndex] = {}
    _lock = threading.Lock()

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        meta_path = folder / "meta.json"
        if not meta_path.exists() or not (folder / "tantivy").is_dir():
            raise SearchIndexMissing(
                f"no search index at {folder} (meta.json or tantivy/ missing); build it: {BUILD_FIX}"
            )
        self.meta = json.loads(meta_path.read_text("utf-8"))
        self.index = tantivy.Index.open(str(folder / "tantivy"))
        self.index.reload()
        self.schema = _schema()
        self._pages: dict[str, PageText] | None = None

    @classmethod
    def open(cls, folder: Path | str | None = None) -> LocalIndex:
        path = Path(folder or DEFAULT_INDEX_DIR).resolve()
        with cls._lock:
            if path not in cls._opened:
                cls._opened[path] = cls(path)
            return cls._opened[path]

    def search(self, query: str, limit: int = 10) -> list[Hit]:
        """The best `limit` sections for `query` (BM25 over title and text), with snippets."""
        if not query.strip():
            return []
        parsed, _errors = self.index.parse_query_lenient(query, ["title", "text"])
        searcher = self.index.searcher()
        hits = searcher.search(parsed, limit).hits
        snippets = tantivy.SnippetGenerator.create(searcher, parsed, self.schema, "text")
        snippets.set_max_num_chars(SNIPPET_CHARS)
        out: list[Hit] = []
        for _score, address in hits:
            doc = searcher.doc(address)
            snippet = snippets.snippet_from_doc(doc).fragment().strip()
            if not snippet:
                snippet = doc["text"][0][:SNIPPET_CHARS]
            out.append(Hit(doc["url"][0], doc["title"][0], " ".join(snippet.split()), doc["date"][0]))
        return out

    def page(self, url: str) -> PageText | None:
        """The page at `url` (its fragment ignored), or None when the corpus has no such page."""
        if self._pages is None:
            with self._lock:
                if self._pages is None:
                    pages: dict[str, PageText] = {}
                    with (self.folder / "pages.jsonl").open(encoding="utf-8") as fh:
                        for line in fh:
                            obj = json.loads(line)
                            pages[obj["url"]] = PageText(
                                obj["url"], obj["title"], obj["date"], obj["markdown"]
                            )
                    self._pages = pages
        return self._pages.get(urldefrag(url.strip()).url)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build the search domain's local BM25 index (offline).")
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="index the documentation folders into OUT")
    build.add_argument("--out", type=Path, default=DEFAULT_INDEX_DIR)
    build.add_argument(
        "--source",
        action="append",
        default=[],
        metavar="DIR=BASE_URL",
        help=f"an HTML documentation folder and its public base URL (default: {DEFAULT_SOURCES})",
    )
    build.add_argument("--if-missing", action="store_true", help="do nothing when OUT already holds an index")
    args = parser.parse_args(argv)
    if args.if_missing and (args.out / "meta.json").exists():
        print(f"search index: {args.out} already built")
        return 0
    sources: dict[str, str] = {}
    for item in args.source:
        folder, sep, base = item.partition("=")
        if not sep or not base.startswith(("http://", "https://")):
            parser.error(f"--source {item!r}: expected DIR=BASE_URL with an http(s) URL")
        sources[folder] = base if base.endswith("/") else base + "/"
    try:
        meta = build_index(args.out, sources or None)
    except FileNotFoundError as exc:
        print(f"search index: {exc}", file=sys.stderr)
        return 1
    print(
        f"search index: {meta['pages']} pages, {meta['sections']} sections, "
        f"{index_size_bytes(args.out) / 1e6:.1f} MB in {args.out} ({meta['build_seconds']} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
