"""The search domain: the documentation corpus and its BM25 index, web_search / web_extractor /
dict_memory end to end through the runner, every simulation condition (deterministic under the seed),
the SearXNG-shaped HTTP backend against a local server, and bad input."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collectors.collection import CollectConfig, collect
from collectors.doctor import run_checks
from collectors.environment import EnvironmentOptions, Task, TaskError, tool_call_action
from collectors.search import SearchEnvironment, render_hits
from collectors.search_backends import html_to_markdown
from collectors.search_conditions import ConditionError, Conditions
from collectors.search_corpus import iter_pages
from collectors.search_index import DEFAULT_INDEX_DIR, Hit, LocalIndex, SearchIndexMissing, build_index
from schemas import TrajectoryStatus, iter_trajectories
from tests.helpers.fakellm import FakeReply, FakeToolCall

BASE = "https://docs.example.org/3/"
ROOT = Path(__file__).resolve().parents[2]


def page_html(title: str, body: str, date: str = "March 02, 2024") -> str:
    return f"""<!DOCTYPE html><html><head><title>{title} &#8212; Python 3.11.2 documentation</title></head>
<body><div class="related" role="navigation"><a href="../index.html">index</a></div>
<div class="document"><div class="body" role="main">{body}</div></div>
<div class="sphinxsidebar">sidebar noise</div>
<div class="footer">Last updated on {date}.</div></body></html>"""


RIVERS = page_html(
    "rivers — Facts about rivers",
    """<section id="module-rivers"><h1><code>rivers</code> — Facts about rivers<a class="headerlink" href="#x">¶</a></h1>
<p>This module describes European rivers. See <a href="lakes.html#lake-toma">Lake Toma</a>.</p>
<section id="the-rhine"><h2>The Rhine<a class="headerlink" href="#the-rhine">¶</a></h2>
<p>The Rhine flows about 1,230 km from the Swiss Alps to the North Sea.</p>
<pre>rivers.length("Rhine")
1230</pre>
<dl class="py function"><dt class="sig" id="rivers.length"><span>rivers.length</span>(<em>name</em>)<a class="headerlink" href="#rivers.length">¶</a></dt>
<dd><p>Return the length of the river <em>name</em> in kilometres.</p></dd></dl>
<ul><li><p>Source: Lake Toma</p></li><li><p>Mouth: North Sea</p></li></ul>
</section>
<section id="the-danube"><h2>The Danube</h2><p>The Danube flows 2,850 km to the Black Sea.</p>
<table><tr><th>City</th><th>Country</th></tr><tr><td>Vienna</td><td>Austria</td></tr></table></section>
</section>""",
)
LAKES = page_html(
    "lakes — Facts about lakes",
    """<section id="module-lakes"><h1>lakes — Facts about lakes</h1><p>Alpine lakes and their rivers.</p>
<section id="lake-toma"><h2>Lake Toma</h2><p>Lake Toma is the traditional source of the Rhine, at 2,345 m.</p></section>
<section id="lake-geneva"><h2>Lake Geneva</h2><p>The Rhone crosses Lake Geneva before reaching Lyon.</p></section>
</section>""",
    date="January 15, 2023",
)


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("docs")
    (root / "library").mkdir()
    (root / "library" / "rivers.html").write_text(RIVERS)
    (root / "library" / "lakes.html").write_text(LAKES)
    (root / "genindex-R.html").write_text(page_html("Index", "<p>Rhine Rhine Rhine</p>"))
    (root / "_sources").mkdir()
    (root / "_sources" / "x.html").write_text(page_html("source", "<p>Rhine</p>"))
    return root


@pytest.fixture(scope="module")
def index_dir(docs: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("index") / "search-index"
    meta = build_index(out, {str(docs): BASE})
    assert meta["pages"] == 2
    return out


def search_task(
    index_dir: Path, task_id: str = "t", seed: int = 0, actions: list[Any] | None = None, **cond: Any
) -> Task:
    cfg: dict[str, Any] = {"backend": "local", "index": str(index_dir), "seed": seed}
    if cond:
        cfg["conditions"] = cond
    return Task(
        id=task_id, instruction="Find facts about the Rhine.", actions=actions or [], config={"search": cfg}
    )


def run_actions(task: Task, actions: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    SearchEnvironment.validate_task(task)
    env = SearchEnvironment(EnvironmentOptions())
    try:
        env.reset(task)
        return [env.step(tool_call_action(name, args)) for name, args in actions]
    finally:
        env.close()


# -- corpus and index ------------------------------------------------------------------------------


def test_corpus_pages_have_urls_titles_dates_sections_and_markdown(docs: Path) -> None:
    pages = {p.url: p for p in iter_pages({str(docs): BASE})}
    assert set(pages) == {BASE + "library/rivers.html", BASE + "library/lakes.html"}  # index pages skipped
    rivers = pages[BASE + "library/rivers.html"]
    assert rivers.title == "rivers — Facts about rivers" and rivers.date == "2024-03-02"
    assert pages[BASE + "library/lakes.html"].date == "2023-01-15"
    md = rivers.markdown
    assert "## The Rhine" in md and "¶" not in md and "sidebar noise" not in md
    assert f"[Lake Toma]({BASE}library/lakes.html#lake-toma)" in md  # links made absolute
    assert '```\nrivers.length("Rhine")\n1230\n```' in md
    assert "- Source: Lake Toma" in md and "| Vienna | Austria |" in md
    anchors = {s.url.rpartition("#")[2]: s.title for s in rivers.sections if "#" in s.url}
    assert anchors["the-rhine"] == "The Rhine — rivers — Facts about rivers"
    assert anchors["rivers.length"].startswith("rivers.length(name)")
    assert "Return the length" in next(s.text for s in rivers.sections if s.url.endswith("#rivers.length"))


def test_index_search_and_page_lookup(index_dir: Path) -> None:
    index = LocalIndex.open(index_dir)
    hits = index.search("traditional source Toma", 5)
    assert hits[0].url == BASE + "library/lakes.html#lake-toma"
    assert hits[0].title == "Lake Toma — lakes — Facts about lakes" and hits[0].date == "2023-01-15"
    assert "Rhine" in hits[0].snippet and "[" not in hits[0].snippet  # plain text, no markdown links
    assert index.search("   ", 5) == []
    assert index.search('unbalanced "quote AND (', 5) is not None  # lenient parsing never raises
    page = index.page(BASE + "library/rivers.html#the-rhine")
    assert page is not None and page.markdown.startswith("# `rivers` — Facts about rivers")
    assert index.page(BASE + "library/nope.html") is None


def test_missing_index_says_how_to_build_it(tmp_path: Path) -> None:
    with pytest.raises(SearchIndexMissing, match="build-search-index.sh"):
        LocalIndex.open(tmp_path / "none")


def test_the_setup_index_covers_pythons_documentation() -> None:
    index = LocalIndex.open(DEFAULT_INDEX_DIR)
    assert int(index.meta["pages"]) > 300
    hits = index.search("json dumps indent pretty print", 5)
    assert hits and all(h.url.startswith("https://docs.python.org/3.11/") for h in hits)
    assert any("json" in h.url for h in hits)
    assert all(re.fullmatch(r"\d{4}-\d{2}-\d{2}", h.date) for h in hits)


# -- the environment end to end --------------------------------------------------------------------

LAYOUT = re.compile(r"^(\d+)\. URL: (\S+)\n   Title: (.+)\n   Snippet: (.+)\n   Date: (\S+)$")


def blocks(text: str) -> list[re.Match[str]]:
    parts = text.split("\n\n")
    matches = [LAYOUT.match(p) for p in parts if not p.startswith(("Page ", "No results"))]
    assert all(matches), text
    return [m for m in matches if m]


def test_collect_search_end_to_end(index_dir: Path, tmp_path: Path) -> None:
    actions = [
        {"name": "web_search", "arguments": {"query": "Rhine length km"}},
        {"name": "web_search", "arguments": {"queries": ["Lake Toma", "Rhine North Sea"]}},
        {"name": "web_extractor", "arguments": {"url": BASE + "library/lakes.html"}},
        {"name": "web_extractor", "arguments": {"url": BASE + "library/missing.html"}},
        {"name": "dict_memory", "arguments": {"action": "add", "key": "length", "value": "1,230 km"}},
        {"name": "dict_memory", "arguments": {"action": "retrieve", "key": "length"}},
        {"name": "translate", "arguments": {"text": "x"}},
    ]
    rows = [
        {
            "id": "ok",
            "instruction": "How long is the Rhine?",
            "search": {"index": str(index_dir)},
            "actions": actions,
        },
        {
            "id": "no-index",
            "instruction": "x",
            "search": {"index": str(tmp_path / "nowhere")},
            "actions": actions[:1],
        },
    ]
    tasks = tmp_path / "t.jsonl"
    tasks.write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = collect(CollectConfig(env="search", tasks_path=tasks, policy="scripted", out=tmp_path / "out"))
    assert summary.written == 2
    by_id = {t.metadata["task_id"]: t for t in iter_trajectories(tmp_path / "out")}
    missing = by_id["no-index"]
    assert missing.status == TrajectoryStatus.ENV_FAILURE
    assert "no search index" in (missing.status_reason or "") and "build-search-index.sh" in (
        missing.status_reason or ""
    )
    assert {t.name for t in missing.action_space.tools} == {"web_search", "web_extractor", "dict_memory"}
    ok = by_id["ok"]
    assert ok.status == TrajectoryStatus.COMPLETE and "local BM25 index" in (ok.initial_state or "")
    assert ok.simulation_instruction is None  # no conditions
    first = blocks(ok.turns[0].observation.text)
    assert [int(m.group(1)) for m in first] == list(range(1, len(first) + 1))
    assert first[0].group(2) == BASE + "library/rivers.html#the-rhine" and first[0].group(5) == "2024-03-02"
    merged = [m.group(2) for m in blocks(ok.turns[1].observation.text)]
    assert len(merged) == len(set(merged)) and BASE + "library/lakes.html#lake-toma" in merged[:2]
    assert ok.turns[2].observation.text.startswith("# lakes — Facts about lakes")
    assert ok.turns[3].observation.is_error and "404" in ok.turns[3].observation.text
    assert ok.turns[5].observation.text == "1,230 km"
    assert ok.turns[6].metadata == {"out_of_action_space": True}


def test_dict_memory_actions(index_dir: Path) -> None:
    steps = run_actions(
        search_task(index_dir),
        [
            ("dict_memory", {"action": "add", "key": "a", "value": "1"}),
            ("dict_memory", {"action": "add", "key": "a", "value": "2"}),
            ("dict_memory", {"action": "update", "key": "a", "value": "3"}),
            ("dict_memory", {"action": "update", "key": "b", "value": "3"}),
            ("dict_memory", {"action": "add", "key": "b", "value": "4"}),
            ("dict_memory", {"action": "retrieve_all"}),
            ("dict_memory", {"action": "remove", "key": "a"}),
            ("dict_memory", {"action": "retrieve", "key": "a"}),
            ("dict_memory", {"action": "remove_all"}),
            ("dict_memory", {"action": "retrieve_all"}),
            ("dict_memory", {"action": "forget"}),
            ("dict_memory", {"action": "add", "key": "c"}),
        ],
    )
    errors = [bool(s.observation.is_error) for s in steps]
    assert errors == [False, True, False, True, False, False, False, True, False, False, True, True]
    assert json.loads(steps[5].observation.text) == {"a": "3", "b": "4"}
    assert steps[8].observation.text == "Removed all 1 keys." and json.loads(steps[9].observation.text) == {}


# -- conditions ------------------------------------------------------------------------------------

SEARCHES = [
    ("web_search", {"query": "Rhine"}),
    ("web_search", {"query": "lake river source"}),
    ("web_extractor", {"url": BASE + "library/rivers.html"}),
    ("web_search", {"query": "Rhine"}),
    ("web_extractor", {"url": BASE + "library/lakes.html"}),
    ("web_search", {"queries": ["Danube", "Rhone"]}),
]


@pytest.mark.parametrize(
    "conditions",
    [
        {"hide_answer": "1,230 km"},
        {"partial": 0.5},
        {"page_size": 2},
        {"error_rate": 0.5},
        {"truncate_chars": 120},
        {
            "hide_answer": ["Lake Toma"],
            "partial": 0.7,
            "page_size": 1,
            "error_rate": 0.3,
            "truncate_chars": 200,
        },
    ],
)
def test_each_condition_is_deterministic_under_the_seed(index_dir: Path, conditions: dict[str, Any]) -> None:
    runs = [
        [s.observation.text for s in run_actions(search_task(index_dir, seed=5, **conditions), SEARCHES)]
        for _ in range(2)
    ]
    assert runs[0] == runs[1]


def test_hide_answer_keeps_it_out_of_results_but_not_pages(index_dir: Path) -> None:
    steps = run_actions(
        search_task(index_dir, hide_answer="1,230 km"),
        [
            ("web_search", {"query": "Rhine flows km"}),
            ("web_extractor", {"url": BASE + "library/rivers.html"}),
        ],
    )
    assert "1,230 km" not in steps[0].observation.text and "[...]" in steps[0].observation.text
    assert "1,230 km" in steps[1].observation.text


def test_partial_returns_a_seeded_subset_in_ranked_order(index_dir: Path) -> None:
    full = [
        m.group(2) for m in blocks(run_actions(search_task(index_dir), [SEARCHES[1]])[0].observation.text)
    ]
    subsets = set()
    for seed in range(8):
        step = run_actions(search_task(index_dir, seed=seed, partial=0.5), [SEARCHES[1]])[0]
        urls = [m.group(2) for m in blocks(step.observation.text)]
        assert len(urls) == max(1, round(len(full) * 0.5))
        assert urls == [u for u in full if u in urls]  # ranked order kept
        subsets.add(tuple(urls))
    assert len(subsets) > 1  # the seed matters


def test_pagination(index_dir: Path) -> None:
    steps = run_actions(
        search_task(index_dir, page_size=2),
        [
            ("web_search", {"query": "Rhine lake"}),
            ("web_search", {"query": "Rhine lake", "page": 2}),
            ("web_search", {"query": "Rhine lake", "page": 99}),
            ("web_search", {"query": "Rhine lake", "page": 0}),
        ],
    )
    first = steps[0].observation.text
    assert [int(m.group(1)) for m in blocks(first)] == [1, 2]
    assert re.search(
        r'Page 1 of (\d+): results 1-2 of \d+\. Call web_search again with "page": 2 for more\.$', first
    )
    assert [int(m.group(1)) for m in blocks(steps[1].observation.text)][0] == 3
    assert steps[2].observation.text.startswith("No results on page 99")
    assert steps[3].observation.is_error


def test_error_rate_injects_the_configured_errors(index_dir: Path) -> None:
    always = run_actions(search_task(index_dir, error_rate=1.0, errors=["429", "timeout"]), SEARCHES)
    assert all(s.observation.is_error for s in always)
    kinds = {s.info["injected_error"] for s in always}
    assert kinds <= {"429", "timeout"}
    for step in always:
        assert step.observation.text.startswith(
            ("Error: HTTP 429 Too Many Requests", "Error: the request timed out after")
        )
    some = run_actions(search_task(index_dir, seed=1, error_rate=0.5), SEARCHES * 3)
    flags = [bool(s.observation.is_error) for s in some]
    assert any(flags) and not all(flags)
    memory = run_actions(
        search_task(index_dir, error_rate=1.0), [("dict_memory", {"action": "retrieve_all"})]
    )
    assert not memory[0].observation.is_error  # the memory is local: never injected


def test_truncation_marks_what_was_cut(index_dir: Path) -> None:
    (step,) = run_actions(
        search_task(index_dir, truncate_chars=100), [("web_extractor", {"url": BASE + "library/rivers.html"})]
    )
    text, _, marker = step.observation.text.partition("\n\n[... truncated: ")
    assert len(text) == 100 and marker.endswith(" more characters]")
    assert step.info["truncated_chars"] == int(marker.split()[0])


def test_conditions_are_written_into_the_simulation_instruction(index_dir: Path, tmp_path: Path) -> None:
    row = {
        "id": "c",
        "instruction": "x",
        "simulation_instruction": "Answer as a search engine would.",
        "search": {
            "index": str(index_dir),
            "seed": 9,
            "conditions": {
                "hide_answer": "Toma",
                "partial": 0.5,
                "page_size": 3,
                "error_rate": 0.2,
                "truncate_chars": 2000,
            },
        },
        "actions": [SEARCHES[0] and {"name": "web_search", "arguments": {"query": "Rhine"}}],
    }
    tasks = tmp_path / "t.jsonl"
    tasks.write_text(json.dumps(row) + "\n")
    collect(CollectConfig(env="search", tasks_path=tasks, policy="scripted", out=tmp_path / "out"))
    (trajectory,) = iter_trajectories(tmp_path / "out")
    text = trajectory.simulation_instruction or ""
    assert text.startswith(
        "Answer as a search engine would.\n\nSimulation conditions of this search environment:"
    )
    for phrase in [
        '("Toma")',
        "about 50% of the matching results",
        "pages of 3",
        "about 20% of web_search",
        "HTTP 429",
        "HTTP 500",
        "timeouts",
        "at most 2000 characters",
    ]:
        assert phrase in text


@given(
    st.dictionaries(
        st.sampled_from([*Conditions.KEYS, "other"]),
        st.one_of(
            st.none(),
            st.booleans(),
            st.integers(-5, 5000),
            st.floats(-1, 2, allow_nan=False),
            st.text(max_size=5),
            st.lists(st.sampled_from(["429", "500", "timeout", "418", ""]), max_size=3),
        ),
    )
)
def test_conditions_parse_or_refuse_with_the_field(cfg: dict[str, Any]) -> None:
    try:
        conditions = Conditions.from_config(cfg, seed=1)
    except ConditionError as exc:
        assert "conditions." in str(exc)
        return
    assert conditions.partial is None or 0 < conditions.partial <= 1
    assert conditions.page_size is None or conditions.page_size >= 1
    assert set(conditions.errors) <= {"429", "500", "timeout"}
    assert bool(conditions.describe()) == conditions.active()


@given(
    st.lists(
        st.tuples(st.text(min_size=1, max_size=20).map(str.strip).filter(bool), st.text(max_size=30)),
        max_size=6,
    ),
    st.integers(1, 50),
)
def test_render_hits_numbers_blocks_from_start(items: list[tuple[str, str]], start: int) -> None:
    hits = [
        Hit(f"https://x.org/{i}", " ".join(t.split()) or "t", " ".join(s.split()) or "s", "2024-01-01")
        for i, (t, s) in enumerate(items)
    ]
    text = render_hits(hits, start)
    numbers = [int(line.split(".")[0]) for line in text.splitlines() if re.match(r"^\d+\. URL: ", line)]
    assert numbers == list(range(start, start + len(hits)))


HTML_PIECES = st.sampled_from(
    [
        "<p>",
        "</p>",
        "<h2>",
        "</h2>",
        "<pre>",
        "</pre>",
        "<ul><li>",
        "</li></ul>",
        "<table><tr><td>",
        "</td></tr></table>",
        "<dl><dt id='x'>",
        "</dt><dd>",
        "</dd></dl>",
        "<a href='../a.html'>",
        "</a>",
        "<code>",
        "</code>",
        "<main>",
        "</main>",
        "<section id='s'>",
        "</section>",
        "<title>",
        "</title>",
        "<script>",
        "</script>",
        "&amp;",
        "<br>",
        "<",
    ]
)


@given(st.lists(st.one_of(HTML_PIECES, st.text(max_size=12)), max_size=30))
def test_html_to_markdown_takes_any_page(pieces: list[str]) -> None:
    title, markdown = html_to_markdown("".join(pieces), "https://example.org/dir/page.html")
    assert isinstance(title, str) and isinstance(markdown, str)


@given(st.lists(st.text(alphabet="abcdefghij", min_size=1, max_size=8), min_size=1, max_size=10))
def test_html_to_markdown_keeps_paragraph_words(words: list[str]) -> None:
    _, markdown = html_to_markdown(
        f"<html><body><main><p>{'  '.join(words)}</p></main></body></html>", "https://x.org/"
    )
    assert markdown == " ".join(words)


@pytest.mark.parametrize(
    ("cfg", "message"),
    [
        ({"backend": "bing"}, "'search.backend' must be 'local' or 'http'"),
        ({"backend": "http"}, "'search.url' must be the http"),
        ({"seed": "x"}, "'search.seed' must be an integer"),
        ({"max_results": 0}, "'search.max_results' must be an integer from 1 to 100"),
        ({"conditions": {"partial": 0}}, r"conditions.partial' must be in \(0, 1\]"),
        ({"conditions": {"page_size": "3"}}, "conditions.page_size' must be a positive integer"),
        ({"conditions": {"error_rate": 1.5}}, r"conditions.error_rate' must be in \[0, 1\]"),
        ({"conditions": {"errors": ["503"]}}, "conditions.errors' must be a non-empty list"),
        ({"conditions": {"pagination": 3}}, r"unknown field\(s\) conditions.pagination"),
        ({"engine": "x"}, r"unknown field\(s\) search.engine"),
        ({"backend": "http", "url": "http://x", "headers": ["a"]}, "'search.headers' must be a JSON object"),
        (
            {"backend": "http", "url": "http://x", "timeout_s": -1},
            "'search.timeout_s' must be a positive number",
        ),
    ],
)
def test_invalid_search_configuration_names_task_and_field(cfg: dict[str, Any], message: str) -> None:
    with pytest.raises(TaskError, match=message):
        SearchEnvironment.validate_task(Task(id="q7", instruction="x", config={"search": cfg}))


# -- the HTTP backend against a local SearXNG-shaped server ----------------------------------------


class SearxHandler(BaseHTTPRequestHandler):
    seen: list[dict[str, Any]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: str, ctype: str) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # the http.server API names it
        url = urlparse(self.path)
        query = parse_qs(url.query)
        SearxHandler.seen.append(
            {"path": url.path, "query": query, "auth": self.headers.get("Authorization")}
        )
        host = f"http://127.0.0.1:{self.server.server_address[1]}"
        if url.path == "/search":
            q = query.get("q", [""])[0]
            if q == "overload":
                return self._send(429, "slow down", "text/plain")
            if q == "broken":
                return self._send(500, "internal error", "text/plain")
            results = [
                {
                    "url": f"{host}/pages/rhine.html",
                    "title": "Rhine - Encyclopedia",
                    "content": f"About {q}: the Rhine flows 1,230 km.",
                    "publishedDate": "2024-02-11T00:00:00",
                },
                {
                    "url": f"{host}/pages/toma.html",
                    "title": "Lake Toma",
                    "content": "Source of the Rhine.",
                    "publishedDate": None,
                },
            ]
            return self._send(200, json.dumps({"query": q, "results": results}), "application/json")
        if url.path == "/pages/rhine.html":
            html = "<html><head><title>Rhine</title></head><body><nav>menu</nav><main><h1>Rhine</h1><p>It flows <b>1,230 km</b>.</p></main></body></html>"
            return self._send(200, html, "text/html")
        return self._send(404, "not found", "text/plain")


@pytest.fixture
def searx(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The fake SearXNG on the loopback, allowed as an operator would allow a local service."""
    SearxHandler.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), SearxHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    origin = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setenv("WORLDLINE_SEARCH_ALLOWED_URLS", origin)
    try:
        yield origin
    finally:
        server.shutdown()
        server.server_close()


def test_http_backend_speaks_the_searxng_json_api(searx: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORLDLINE_SEARCH_TEST_KEY", "s3cret")
    task = Task(
        id="h",
        instruction="x",
        config={
            "search": {
                "backend": "http",
                "url": searx,
                "api_key_env": "WORLDLINE_SEARCH_TEST_KEY",
                "conditions": {"hide_answer": "1,230 km"},
            }
        },
    )
    assert not SearchEnvironment.needs_engine(task)
    steps = run_actions(
        task,
        [
            ("web_search", {"query": "rhine length"}),
            ("web_extractor", {"url": f"{searx}/pages/rhine.html"}),
            ("web_search", {"query": "overload"}),
            ("web_search", {"query": "broken"}),
            ("web_extractor", {"url": f"{searx}/pages/missing.html"}),
        ],
    )
    found = blocks(steps[0].observation.text)
    assert [m.group(2) for m in found] == [f"{searx}/pages/rhine.html", f"{searx}/pages/toma.html"]
    assert found[0].group(4) == "About rhine length: the Rhine flows [...]."
    assert found[0].group(5) == "2024-02-11" and found[1].group(5) == "unknown"
    assert steps[1].observation.text == "# Rhine\n\nIt flows **1,230 km**."
    assert steps[2].observation.is_error and steps[2].observation.text.startswith("Error: HTTP 429")
    assert steps[3].observation.is_error and "HTTP 500" in steps[3].observation.text
    assert steps[4].observation.is_error and "HTTP 404" in steps[4].observation.text
    search_calls = [s for s in SearxHandler.seen if s["path"] == "/search"]
    assert search_calls[0]["query"] == {"q": ["rhine length"], "format": ["json"], "pageno": ["1"]}
    assert all(s["auth"] == "Bearer s3cret" for s in SearxHandler.seen)


def test_http_backend_that_is_down_is_an_observation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORLDLINE_SEARCH_ALLOWED_URLS", "http://127.0.0.1:9")
    task = Task(
        id="down",
        instruction="x",
        config={"search": {"backend": "http", "url": "http://127.0.0.1:9", "timeout_s": 2}},
    )
    (step,) = run_actions(task, [("web_search", {"query": "x"})])
    assert step.observation.is_error and step.observation.text.startswith("Error: could not reach")


# -- policies and doctor ---------------------------------------------------------------------------


def test_openai_policy_searches(index_dir: Path, tmp_path: Path, fake_llm) -> None:  # type: ignore[no-untyped-def]
    fake_llm.script(
        FakeReply(text="", tool_calls=[FakeToolCall("web_search", {"query": "traditional source Toma"})]),
        FakeReply(text="", tool_calls=[FakeToolCall("web_extractor", {"url": BASE + "library/lakes.html"})]),
        FakeReply(text="Lake Toma."),
    )
    tasks = tmp_path / "t.jsonl"
    tasks.write_text(
        json.dumps(
            {"id": "o", "instruction": "Where does the Rhine start?", "search": {"index": str(index_dir)}}
        )
        + "\n"
    )
    collect(
        CollectConfig(
            env="search",
            tasks_path=tasks,
            policy="openai",
            out=tmp_path / "out",
            llm_config=fake_llm.config(),
        )
    )
    (trajectory,) = iter_trajectories(tmp_path / "out")
    assert trajectory.status == TrajectoryStatus.COMPLETE and len(trajectory.turns) == 2
    assert {t["function"]["name"] for t in fake_llm.requests[0].body["tools"]} == {
        "web_search",
        "web_extractor",
        "dict_memory",
    }
    assert "1. URL: " + BASE + "library/lakes.html#lake-toma" in fake_llm.requests[1].messages[-1]["content"]


def test_doctor_reports_the_search_index() -> None:
    (check,) = [c for c in run_checks(["search"]) if c.domain == "search"]
    assert check.ok and "local BM25 index" in check.detail


def test_index_build_script_is_idempotent() -> None:
    import subprocess

    script = ROOT / "infra" / "build-search-index.sh"
    result = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "already built" in result.stdout


# -- the hidden answer: absent in every spelling, replaced by whole words ---------------------------

_SEPARATORS = [" ", "-", "_", "%20", "", "+", ".", ", "]


def leaked_spellings(answer: str, shown: str) -> list[str]:
    """The spellings of `answer` still visible in `shown` (an oracle independent of the hider): its
    words joined by each separator, any case, percent-escapes decoded, plural -ies included."""
    from urllib.parse import unquote

    words = re.findall(r"[^\W_]+", answer.lower())
    text = unquote(shown).lower()
    spellings = {sep.join(words) for sep in _SEPARATORS}
    if words and len(words[-1]) > 1 and words[-1].endswith("y"):
        spellings |= {sep.join([*words[:-1], words[-1][:-1] + "ies"]) for sep in _SEPARATORS}
    return sorted(s for s in spellings if s and s in text)


def unnatural(shown: str) -> bool:
    """A placeholder glued to letters or digits ("List [...]s", "term-list-[...]x")."""
    return bool(re.search(r"[^\W_]\[\.\.\.\d*\]|\[\.\.\.\d*\][^\W_]", shown))


def spell(words: list[str], sep: str, case: str, suffix: str) -> str:
    text = sep.join(words) + suffix
    return {"lower": text.lower(), "upper": text.upper(), "title": text.title(), "as is": text}[case]


_word = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=2, max_size=8)
_filler = st.lists(st.sampled_from(["the", "of", "a", "python", "index", "value", "list", "set"]), max_size=4)


@given(
    words=st.lists(_word, min_size=1, max_size=3),
    sep=st.sampled_from(_SEPARATORS),
    case=st.sampled_from(["lower", "upper", "title", "as is"]),
    suffix=st.sampled_from(["", "s", "es", "'s", "ed"]),
    glue=st.sampled_from(["", "un", "pre_"]),
    before=_filler,
    after=_filler,
    where=st.sampled_from(["fragment", "path", "query", "host"]),
)
def test_hidden_answers_never_show_in_results(
    words: list[str],
    sep: str,
    case: str,
    suffix: str,
    glue: str,
    before: list[str],
    after: list[str],
    where: str,
) -> None:
    answer = " ".join(words)
    spelled = glue + spell(words, sep, case, suffix)
    text = " ".join([*before, spelled, *after])
    slug = "-".join([*before, spelled.replace(" ", "-"), *after])
    url = {
        "fragment": f"https://docs.example.org/3/glossary.html#term-{slug}",
        "path": f"https://docs.example.org/3/library/{slug}.html#intro",
        "query": f"https://search.example.org/wiki?title={slug.replace('-', '%20')}",
        "host": f"https://{slug.replace('_', '-').strip('-.%+') or 'x'}.example.org/",
    }[where]
    hider = Conditions.from_config({"hide_answer": answer}).hider()
    (hit,) = hider.hide_in_hits([Hit(url, text.title(), f"{text}. {text.upper()}!", "2024-01-01")])
    for shown in (hit.url, hit.title, hit.snippet):
        assert not leaked_spellings(answer, shown), (answer, shown)
        assert not unnatural(shown), shown
    assert hider.resolve(hit.url).split("#")[0] == url.split("#")[0] or hit.url == url.split("#")[0]
    plain = Hit("https://docs.example.org/3/library/other.html#x", "Other page", "nothing to hide", "")
    if not leaked_spellings(answer, " ".join((plain.url, plain.title, plain.snippet))):  # e.g. "or" in .org
        assert hider.hide_in_hits([plain]) == [plain]  # text without the answer is untouched


def test_hidden_answer_on_the_real_index_urls_words_and_pages() -> None:
    """The setup index: the glossary's `#term-list-comprehension` and "List Comprehensions" titles."""
    index = LocalIndex.open(DEFAULT_INDEX_DIR)
    answer = "list comprehension"
    task = Task(
        id="hidden",
        instruction="What is a list comprehension?",
        config={
            "search": {"backend": "local", "index": str(index.folder), "conditions": {"hide_answer": answer}}
        },
    )
    steps = run_actions(task, [("web_search", {"query": "list comprehension"})])
    text = steps[0].observation.text
    assert "#term-list-comprehension" not in text and "[...]s" not in text
    assert not leaked_spellings(answer, text) and not unnatural(text)
    urls = [m.group(2) for m in blocks(text)]
    assert "https://docs.python.org/3.11/glossary.html" in urls  # the fragment went, the page stays
    pages = run_actions(task, [("web_extractor", {"url": u}) for u in urls])
    assert not any(p.observation.is_error for p in pages)
    assert any(leaked_spellings(answer, p.observation.text) for p in pages)  # pages unchanged

    # An answer in the URL's path: the shown URL holds [...] and still leads to the page.
    task.config["search"]["conditions"] = {"hide_answer": "json", "hide_in": ["results", "pages"]}
    env = SearchEnvironment(EnvironmentOptions())
    try:
        env.reset(task)
        found = env.step(tool_call_action("web_search", {"query": "json dumps indent"})).observation.text
        assert not leaked_spellings("json", found) and not unnatural(found)
        url = next(u for u in (m.group(2) for m in blocks(found)) if "[...]" in u)
        page = env.step(tool_call_action("web_extractor", {"url": url})).observation
        assert not page.is_error and "dumps" in page.text
        assert not leaked_spellings("json", page.text) and not unnatural(page.text)
    finally:
        env.close()


def test_hidden_answers_drawn_from_real_results_never_leak() -> None:
    """Answers taken from the real index's own titles (1-3 words), hidden from the results of a query
    made of them: no spelling of the answer is left in any title, snippet or URL."""
    index = LocalIndex.open(DEFAULT_INDEX_DIR)
    cases = leaks = 0
    for query in [
        "list comprehension",
        "json dumps",
        "os path join",
        "asyncio event loop",
        "dataclass field",
    ]:
        for hit in index.search(query, 10):
            words = re.findall(r"[A-Za-z]{3,}", hit.title)[:3]
            for n in range(1, len(words) + 1):
                answer = " ".join(words[:n])
                hider = Conditions.from_config({"hide_answer": answer}).hider()
                for shown in hider.hide_in_hits(index.search(answer, 10)):
                    cases += 1
                    for field in (shown.url, shown.title, shown.snippet):
                        leaks += bool(leaked_spellings(answer, field)) or unnatural(field)
    assert cases > 300 and leaks == 0
