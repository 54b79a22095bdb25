"""MCP tasks over the bundled servers, each with its own seeded state: a directory tree (filesystem),
a SQLite schema with rows (sqlite; answers computed with sqlite3 here), a knowledge graph (memory) and
a git repository with history and uncommitted work (git)."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Callable
from typing import Any

from collectors.generators import vocab


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def _filesystem(rng: random.Random) -> dict[str, Any]:
    folders = rng.sample(("notes", "data", "docs", "src", "archive", "inbox", "drafts"), rng.randint(2, 4))
    files: dict[str, str] = {}
    for folder in folders:
        for _ in range(rng.randint(1, 5)):
            ext = rng.choice(("txt", "md", "csv"))
            name = f"{folder}/{rng.choice(vocab.WORDS)}-{rng.randint(1, 50)}.{ext}"
            if ext == "csv":
                files[name] = "city,visits\n" + "".join(
                    f"{c},{rng.randint(1, 900)}\n" for c in rng.sample(vocab.CITIES, rng.randint(2, 6))
                )
            else:
                files[name] = (
                    "\n".join(f"- {vocab.sentence(rng, rng.randint(3, 8))}" for _ in range(rng.randint(1, 8)))
                    + "\n"
                )
    target = rng.choice(sorted(files))
    word = rng.choice(vocab.WORDS)
    goal = rng.choice(("append", "move", "summary"))
    plan = [_call("list_allowed_directories"), _call("directory_tree", path=".")]
    if goal == "append":
        instruction = f"Add a line '- follow up on {word}' at the end of {target}."
        plan += [
            _call("read_text_file", path=target),
            _call("write_file", path=target, content=files[target] + f"- follow up on {word}\n"),
            _call("read_text_file", path=target),
        ]
    elif goal == "move":
        instruction = f"Move {target} into a new folder named {word}/ and confirm it is there."
        plan += [
            _call("create_directory", path=word),
            _call("move_file", source=target, destination=f"{word}/{target.rsplit('/', 1)[1]}"),
            _call("list_directory", path=word),
        ]
    else:
        csvs = sorted(p for p in files if p.endswith(".csv"))
        instruction = "Write index.md listing every file with its folder, then read it back."
        plan += [
            _call("search_files", path=".", pattern="*.csv"),
            *[_call("read_text_file", path=p) for p in csvs[:2]],
            _call("write_file", path="index.md", content="".join(f"- {p}\n" for p in sorted(files))),
            _call("read_text_file", path="index.md"),
        ]
    return {
        "instruction": instruction,
        "mcp": {"server": "filesystem", "files": files},
        "actions": plan,
        "goal": {"kind": f"fs-{goal}", "target": target},
    }


_SCHEMAS: dict[str, tuple[str, Callable[[random.Random, int], tuple[Any, ...]], str, str]] = {
    "employees": (
        "CREATE TABLE employees (id INTEGER PRIMARY KEY, name TEXT NOT NULL, dept TEXT, salary INTEGER, hired INTEGER)",
        lambda r, i: (
            i,
            vocab.full_name(r),
            r.choice(vocab.DEPARTMENTS[:5]),
            r.randint(30, 160) * 1000,
            r.randint(2010, 2026),
        ),
        "dept",
        "salary",
    ),
    "books": (
        "CREATE TABLE books (id INTEGER PRIMARY KEY, title TEXT NOT NULL, author TEXT, year INTEGER, pages INTEGER)",
        lambda r, i: (
            i,
            vocab.sentence(r, 3).rstrip("."),
            vocab.full_name(r),
            r.randint(1950, 2025),
            r.randint(80, 900),
        ),
        "author",
        "pages",
    ),
    "readings": (
        "CREATE TABLE readings (id INTEGER PRIMARY KEY, sensor TEXT NOT NULL, city TEXT, celsius REAL, hour INTEGER)",
        lambda r, i: (
            i,
            f"s-{r.randint(1, 6)}",
            r.choice(vocab.CITIES[:6]),
            round(r.uniform(-10, 35), 1),
            r.randint(0, 23),
        ),
        "city",
        "celsius",
    ),
    "orders": (
        "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT NOT NULL, product TEXT, quantity INTEGER, price REAL)",
        lambda r, i: (
            i,
            vocab.full_name(r),
            r.choice(vocab.PRODUCTS[:8]),
            r.randint(1, 12),
            round(r.uniform(2, 300), 2),
        ),
        "product",
        "quantity",
    ),
}


def _sql_literal(value: Any) -> str:
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return repr(value)


def _sqlite(rng: random.Random) -> dict[str, Any]:
    tables = rng.sample(sorted(_SCHEMAS), rng.randint(1, 3))
    sql: list[str] = []
    for table in tables:
        create, row, _, _ = _SCHEMAS[table]
        sql.append(create)
        rows = [row(rng, i) for i in range(1, rng.randint(6, 40))]
        sql.append(
            f"INSERT INTO {table} VALUES "
            + ", ".join("(" + ", ".join(map(_sql_literal, r)) + ")" for r in rows)
        )
    table = tables[0]
    _, _, group, value = _SCHEMAS[table]
    aggregate = rng.choice(("AVG", "SUM", "MAX", "COUNT"))
    query = f"SELECT {group}, {aggregate}({value}) AS v FROM {table} GROUP BY {group} ORDER BY v DESC, {group} LIMIT 1"
    db = sqlite3.connect(":memory:")
    for statement in sql:
        db.execute(statement)
    best = db.execute(query).fetchone()
    db.close()
    plan = [_call("list_tables"), _call("describe_table", table_name=table), _call("read_query", query=query)]
    if rng.random() < 0.4:
        plan.append(_call("write_query", query=f"DELETE FROM {table} WHERE {value} IS NULL"))
    plan.append(
        _call("append_insight", insight=f"{best[0]} has the highest {aggregate.lower()} {value} ({best[1]})")
    )
    return {
        "instruction": f"Which {group} in the {table} table has the highest {aggregate.lower()} of {value}? Record it as an insight.",
        "mcp": {"server": "sqlite", "sql": sql},
        "actions": plan,
        "goal": {"kind": f"sql-{aggregate.lower()}", "answer": f"{best[0]} {best[1]}", "query": query},
    }


def _memory(rng: random.Random) -> dict[str, Any]:
    people = sorted({vocab.person(rng)[0].title() for _ in range(rng.randint(3, 8))})
    teams = [f"{w.title()} team" for w in rng.sample(vocab.WORDS, rng.randint(1, 3))]
    projects = [f"Project {w.title()}" for w in rng.sample(vocab.WORDS, rng.randint(1, 3))]
    entities = [
        *({"name": p, "entityType": "person", "observations": [vocab.sentence(rng, 5)]} for p in people),
        *(
            {
                "name": t,
                "entityType": "team",
                "observations": [f"meets on {rng.choice(('Mondays', 'Tuesdays', 'Fridays'))}"],
            }
            for t in teams
        ),
        *(
            {"name": p, "entityType": "project", "observations": [f"due in week {rng.randint(1, 52)}"]}
            for p in projects
        ),
    ]
    relations = []
    for p in people:
        relations.append({"from": p, "to": rng.choice(teams), "relationType": "member_of"})
        if rng.random() < 0.6:
            relations.append({"from": p, "to": rng.choice(projects), "relationType": "works_on"})
    newcomer = vocab.person(rng)[0].title() + "-" + str(rng.randint(2, 99))
    mentor = rng.choice(people)
    team = rng.choice(teams)
    return {
        "instruction": f"{newcomer} joined {team} and is mentored by {mentor}. Record that, then look up everyone on {team}.",
        "mcp": {"server": "memory", "graph": {"entities": entities, "relations": relations}},
        "actions": [
            _call("read_graph"),
            _call(
                "create_entities",
                entities=[{"name": newcomer, "entityType": "person", "observations": ["new joiner"]}],
            ),
            _call(
                "create_relations",
                relations=[
                    {"from": newcomer, "to": team, "relationType": "member_of"},
                    {"from": mentor, "to": newcomer, "relationType": "mentors"},
                ],
            ),
            _call("search_nodes", query=team.split()[0]),
            _call("open_nodes", names=[mentor, newcomer]),
        ],
        "goal": {
            "kind": "graph-update",
            "answer": sorted([r["from"] for r in relations if r["to"] == team] + [newcomer]),
        },
    }


def _git(rng: random.Random) -> dict[str, Any]:
    module = vocab.ident(rng, 1)
    state = {
        "README.md": f"# {module}\n\n{vocab.sentence(rng)}\n",
        f"{module}.py": f"VERSION = '0.{rng.randint(1, 9)}'\n",
    }
    commits = [{"files": dict(state), "message": f"{module}: first version"}]
    for _ in range(rng.randint(1, 4)):
        path = rng.choice(sorted(state) + [f"docs/{rng.choice(vocab.WORDS)}.md"])
        state[path] = state.get(path, "") + vocab.sentence(rng, 6) + "\n"
        commits.append(
            {"files": dict(state), "message": f"{path}: {vocab.sentence(rng, 3).rstrip('.').lower()}"}
        )
    pending_path = rng.choice(sorted(state))
    uncommitted = {pending_path: state[pending_path] + f"# pending: {vocab.sentence(rng, 4)}\n"}
    message = f"{pending_path}: {vocab.sentence(rng, 3).rstrip('.').lower()}"
    plan = [
        _call("git_status", repo_path="."),
        _call("git_log", repo_path=".", max_count=rng.randint(3, 10)),
        _call("git_diff_unstaged", repo_path="."),
        _call("git_add", repo_path=".", files=[pending_path]),
        _call("git_commit", repo_path=".", message=message),
    ]
    if rng.random() < 0.5:
        branch = f"fix/{vocab.slug(rng)}"
        plan += [
            _call("git_create_branch", repo_path=".", branch_name=branch),
            _call("git_checkout", repo_path=".", branch_name=branch),
        ]
    return {
        "instruction": f"Review the pending change to {pending_path} and commit it with a fitting message.",
        "mcp": {"server": "git", "commits": commits, "uncommitted": uncommitted},
        "actions": plan,
        "goal": {"kind": "git-commit", "answer": pending_path, "commits": len(commits)},
    }


FAMILIES = {"filesystem": _filesystem, "sqlite": _sqlite, "memory": _memory, "git": _git}
