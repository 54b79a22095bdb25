"""Search tasks: questions answerable from the local documentation index, with their answers and the
page that holds them, under the domain's conditions (the answer hidden from results, partial results,
paged results, injected errors, truncated pages). Built from the index `make setup` builds, so the same
index and seed give the same file."""

from __future__ import annotations

import random
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

_STOP = frozenset(
    "a an and are as at be by can for from has have if in into is it its may not of on or return returns "
    "that the their this to used when which will with without you your new object value values true false none "
    "given default also only other same such than then these those same see".split()
)
_FRAGMENT = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_]\w*)+$")


@lru_cache(maxsize=2)
def api_sections(index_dir: str | None = None) -> tuple[tuple[str, str, str, str], ...]:
    """(url, api name, module title, first sentence) of every API entry of the index, sorted by URL."""
    import tantivy

    from collectors.search_index import LocalIndex

    index = LocalIndex.open(Path(index_dir) if index_dir else None)
    searcher = index.index.searcher()
    out = []
    for _score, address in searcher.search(tantivy.Query.all_query(), searcher.num_docs).hits:
        doc = searcher.doc(address)
        url, title, text = doc["url"][0], doc["title"][0], doc["text"][0]
        page, _, fragment = url.partition("#")
        if "/library/" not in page or not _FRAGMENT.match(fragment) or " — " not in title:
            continue
        paragraphs = [p.strip() for p in text.split("\n\n") if p.strip()]
        if len(paragraphs) < 2:
            continue
        first = re.split(r"(?<=[.!?])\s", " ".join(paragraphs[1].split()), maxsplit=1)[0]
        if not 40 <= len(first) <= 300:
            continue
        module = page.rsplit("/", 1)[-1].removesuffix(".html").split("-")[0]
        out.append((url, fragment, module, first))
    return tuple(sorted(out))


def _query_words(rng: random.Random, sentence: str, module: str) -> str:
    words = [w for w in re.findall(r"[A-Za-z]{3,}", sentence.lower()) if w not in _STOP]
    picked = sorted(set(words), key=words.index)[: rng.randint(3, 5)]
    return " ".join([module.split(".")[0], *picked])


def _conditions(rng: random.Random, name: str) -> dict[str, Any]:
    kind = rng.choice(
        ("none", "hide_answer", "partial", "page_size", "error_rate", "truncate_chars", "mixed")
    )
    if kind == "none":
        return {}
    if kind == "hide_answer":
        return {"hide_answer": name.rsplit(".", 1)[-1]}
    if kind == "partial":
        return {"partial": rng.choice((0.3, 0.5, 0.7))}
    if kind == "page_size":
        return {"page_size": rng.randint(2, 4)}
    if kind == "error_rate":
        return {
            "error_rate": rng.choice((0.2, 0.3, 0.5)),
            "errors": rng.sample(["429", "500", "timeout"], rng.randint(1, 3)),
        }
    if kind == "truncate_chars":
        return {"truncate_chars": rng.choice((800, 1500, 3000))}
    return {"partial": 0.5, "page_size": 3, "error_rate": 0.2, "truncate_chars": 2000}


def _api_question(rng: random.Random) -> dict[str, Any]:
    url, name, module, first = rng.choice(api_sections())
    conditions = _conditions(rng, name)
    search: dict[str, Any] = {"backend": "local", "seed": rng.randrange(2**31)}
    if conditions:
        search["conditions"] = conditions
    if rng.random() < 0.3:
        search["max_results"] = rng.choice((3, 5, 8))
    query = _query_words(rng, first, module)
    plan: list[dict[str, Any]] = [{"name": "web_search", "arguments": {"query": query}}]
    if "page_size" in conditions:
        plan.append({"name": "web_search", "arguments": {"query": query, "page": 2}})
    plan += [
        {"name": "web_search", "arguments": {"queries": [name, f"{module} {name.rsplit('.', 1)[-1]}"]}},
        {"name": "web_extractor", "arguments": {"url": url}},
        {"name": "dict_memory", "arguments": {"action": "add", "key": name, "value": first}},
        {"name": "dict_memory", "arguments": {"action": "retrieve_all"}},
    ]
    asks = (
        f"In Python 3.11, what does {name} do? Answer in one sentence and give the documentation URL.",
        f"I need the documented behaviour of {name} from the {module} docs: one sentence and the link.",
        f"Look up {name} in the Python documentation and summarise what it is for.",
    )
    return {
        "instruction": rng.choice(asks),
        "search": search,
        "actions": plan,
        "goal": {"kind": "api-lookup", "answer": first, "answer_url": url, "conditions": sorted(conditions)},
    }


def _describe_question(rng: random.Random) -> dict[str, Any]:
    """The reverse question: the behaviour is given, the API's name is the answer."""
    url, name, module, first = rng.choice(api_sections())
    short = name.rsplit(".", 1)[-1]
    conditions = _conditions(rng, name)
    search: dict[str, Any] = {"backend": "local", "seed": rng.randrange(2**31), "conditions": conditions}
    described = re.sub(re.escape(short), "it", first, flags=re.IGNORECASE)
    query = _query_words(rng, first, module)
    return {
        "instruction": f"Which {module} API is documented as follows: \u201c{described}\u201d? Give its name and URL.",
        "search": search,
        "actions": [
            {"name": "web_search", "arguments": {"query": query}},
            {"name": "web_search", "arguments": {"query": f"{module} {query.split()[-1]}"}},
            {"name": "web_extractor", "arguments": {"url": url.partition("#")[0]}},
            {
                "name": "dict_memory",
                "arguments": {"action": "add", "key": "answer", "value": f"{name} {url}"},
            },
        ],
        "goal": {"kind": "api-identify", "answer": name, "answer_url": url, "conditions": sorted(conditions)},
    }


FAMILIES = {"api-lookup": _api_question, "api-identify": _describe_question}
