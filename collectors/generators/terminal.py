"""Terminal tasks: seeded data files (CSV, JSON, logs), file trees, git repositories with history and
branches, config files with a checker, a small service, and programs with a planted bug and failing
tests. Each family computes its answer here, so `goal.answer` says what a correct run finds."""

from __future__ import annotations

import json
import random
from collections import Counter
from typing import Any

from collectors.generators import programs, vocab
from collectors.generators.vocab import shell_quote


def _csv_report(rng: random.Random) -> dict[str, Any]:
    kind = rng.choice(("sales", "people", "inventory"))
    rows: list[list[Any]] = []
    if kind == "sales":
        header = ["region", "product", "units", "price"]
        for _ in range(rng.randint(8, 60)):
            rows.append(
                [
                    rng.choice(vocab.REGIONS),
                    rng.choice(vocab.PRODUCTS),
                    rng.randint(1, 40),
                    rng.randint(3, 250),
                ]
            )
        group, value = 0, 2
    elif kind == "people":
        header = ["name", "city", "age", "visits"]
        for _ in range(rng.randint(8, 60)):
            rows.append(
                [vocab.full_name(rng), rng.choice(vocab.CITIES), rng.randint(18, 90), rng.randint(0, 30)]
            )
        group, value = 1, 3
    else:
        header = ["sku", "warehouse", "qty", "reorder_at"]
        for _ in range(rng.randint(8, 60)):
            rows.append(
                [
                    f"SKU-{rng.randint(1000, 9999)}",
                    rng.choice(vocab.CITIES[:6]),
                    rng.randint(0, 500),
                    rng.randint(5, 80),
                ]
            )
        group, value = 1, 2
    totals: Counter[str] = Counter()
    for row in rows:
        totals[str(row[group])] += int(row[value])
    best = sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[0]
    path = f"{rng.choice(('data', 'reports', 'exports', 'in'))}/{kind}-{rng.randint(2019, 2026)}.csv"
    text = "\n".join(",".join(map(str, r)) for r in [header, *rows]) + "\n"
    question = rng.choice(("total", "count"))
    g, v = header[group], header[value]
    if question == "total":
        instruction = f"In {path}, which {g} has the largest total {v}? Print it with its total."
        answer = f"{best[0]} {best[1]}"
        solve = f"tail -n +2 {path} | awk -F, '{{t[${group + 1}] += ${value + 1}}} END {{for (k in t) print t[k], k}}' | sort -rn | head -n 1"
    else:
        pick = str(rng.choice(rows)[group])
        count = sum(1 for r in rows if str(r[group]) == pick)
        instruction = f"How many rows of {path} have {g} equal to {pick}?"
        answer = str(count)
        solve = f"tail -n +2 {path} | cut -d, -f{group + 1} | grep -cx {shell_quote(pick)}"
    return {
        "instruction": instruction,
        "files": {path: text},
        "actions": [f"ls -R {path.split('/')[0]}", f"head -n 5 {path}", f"wc -l {path}", solve],
        "goal": {"answer": answer, "kind": f"csv-{question}"},
    }


def _json_records(rng: random.Random) -> dict[str, Any]:
    roles = ("admin", "editor", "viewer", "owner")
    users: list[dict[str, Any]] = []
    for uid in rng.sample(range(100, 999), rng.randint(5, 25)):
        first, last = vocab.person(rng)
        users.append(
            {
                "id": uid,
                "user": f"{first}.{last}",
                "role": rng.choice(roles),
                "active": rng.random() < 0.7,
                "logins": rng.randint(0, 400),
                "team": rng.choice(vocab.DEPARTMENTS),
            }
        )
    path = f"{rng.choice(('users', 'export', 'accounts'))}.json"
    nested = rng.random() < 0.5
    doc: Any = {"generated": vocab.timestamp(rng, rng.randint(1, 28)), "users": users} if nested else users
    text = json.dumps(doc, indent=rng.choice((None, 2, 4)))
    role = rng.choice(roles)
    wanted = sorted(u["user"] for u in users if u["role"] == role and u["active"])
    top = sorted(users, key=lambda u: (-u["logins"], u["user"]))[0]
    load = f"d = json.load(open({path!r})); u = d['users'] if isinstance(d, dict) else d"
    if rng.random() < 0.5:
        instruction = f"List, sorted, the user names of the active {role}s in {path}."
        answer = ",".join(wanted) or "(none)"
        code = f"import json; {load}; print(sorted(x['user'] for x in u if x['role'] == {role!r} and x['active']))"
    else:
        instruction = f"Which user in {path} has the most logins, and on which team?"
        answer = f"{top['user']} {top['team']}"
        code = f"import json; {load}; t = max(u, key=lambda x: x['logins']); print(t['user'], t['team'])"
    return {
        "instruction": instruction,
        "files": {path: text},
        "actions": [f"head -c 400 {path}; echo", f"python3 -c {shell_quote(code)}"],
        "goal": {"answer": answer, "kind": "json-query"},
    }


def _log_triage(rng: random.Random) -> dict[str, Any]:
    services = rng.sample(vocab.SERVICES, rng.randint(2, 5))
    weights = {
        lvl: w
        for lvl, w in zip(vocab.LEVELS, (rng.random(), 3, 1 + rng.random(), 0.5 + rng.random()), strict=True)
    }
    files: dict[str, str] = {}
    errors: Counter[str] = Counter()
    first_error = ""
    day = rng.randint(1, 27)
    names = ["app.log"] + (["app.log.1"] if rng.random() < 0.4 else [])
    for name in reversed(names):
        lines = []
        stamps = sorted(vocab.timestamp(rng, day) for _ in range(rng.randint(20, 120)))
        day += 1
        for stamp in stamps:
            level = vocab.pick_weighted(rng, weights)
            service = rng.choice(services)
            pool = vocab.ERROR_MESSAGES if level in ("ERROR", "WARN") else vocab.INFO_MESSAGES
            lines.append(f"{stamp} {level:<5} {service}[{rng.randint(100, 9999)}]: {rng.choice(pool)}")
            if level == "ERROR":
                errors[service] += 1
                first_error = first_error or stamp
        files[f"logs/{name}"] = "\n".join(lines) + "\n"
    if errors and rng.random() < 0.6:
        top = sorted(errors.items(), key=lambda kv: (-kv[1], kv[0]))[0]
        instruction = "Which service logged the most ERROR lines across the logs in logs/, and how many?"
        answer = f"{top[0]} {top[1]}"
        solve = 'cat logs/app.log* | awk \'$2 == "ERROR" {split($3, s, "["); n[s[1]]++} END {for (k in n) print n[k], k}\' | sort -rn | head -n 1'
    else:
        instruction = "When was the first ERROR logged (the oldest file is app.log.1 when it exists)?"
        answer = first_error or "(none)"
        solve = "cat $(ls -r logs/app.log*) | grep -m1 ' ERROR ' | cut -d' ' -f1"
    return {
        "instruction": instruction,
        "files": files,
        "actions": ["ls -la logs", "tail -n 5 logs/app.log", "grep -c ERROR logs/*", solve],
        "goal": {"answer": answer, "kind": "log-triage"},
    }


def _file_tree(rng: random.Random) -> dict[str, Any]:
    exts = ("txt", "md", "py", "tmp", "log", "cfg")
    dirs = [vocab.slug(rng, 1)]
    for _ in range(rng.randint(2, 6)):
        dirs.append(f"{rng.choice(dirs)}/{rng.choice(vocab.WORDS)}")
    files: dict[str, str] = {}
    marker = rng.choice(("TODO", "FIXME", "XXX"))
    for _ in range(rng.randint(6, 24)):
        path = f"{rng.choice(dirs)}/{rng.choice(vocab.WORDS)}-{rng.randint(1, 99)}.{rng.choice(exts)}"
        body = "\n".join(vocab.sentence(rng, rng.randint(3, 12)) for _ in range(rng.randint(1, 30)))
        if rng.random() < 0.3:
            body += f"\n{marker}: {vocab.sentence(rng, 4)}"
        files[path] = body + "\n"
    root = dirs[0]
    goal = rng.choice(("largest", "marker", "cleanup"))
    if goal == "largest":
        ext = rng.choice(sorted({p.rsplit(".", 1)[1] for p in files}))
        best = sorted(
            (p for p in files if p.endswith("." + ext)), key=lambda p: (-len(files[p].encode()), p)
        )[0]
        instruction = f"Find the largest .{ext} file under {root}/."
        answer = best
        solve = f"find {root} -name '*.{ext}' -type f -printf '%s %p\\n' | sort -rn | head -n 1"
    elif goal == "marker":
        hits = sorted(p for p, body in files.items() if marker + ":" in body)
        instruction = f"List the files under {root}/ that contain a {marker}: note."
        answer = ",".join(hits) or "(none)"
        solve = f"grep -rl '{marker}:' {root} | sort"
    else:
        tmp = sorted(p for p in files if p.endswith(".tmp"))
        instruction = f"Delete every .tmp file under {root}/ and say how many you removed."
        answer = str(len(tmp))
        solve = f"find {root} -name '*.tmp' -print -delete | wc -l"
    return {
        "instruction": instruction,
        "files": files,
        "actions": [f"find {root} | head -n 40", "du -sh " + root, solve],
        "goal": {"answer": answer, "kind": f"tree-{goal}"},
    }


def git_history(rng: random.Random, repo: str = "repo") -> dict[str, Any]:
    """A repository with several commits on main and one or two branches, built by setup commands from
    staged file versions (so nothing in the task is a shell-quoted file body)."""
    author = vocab.full_name(rng)
    email = author.lower().replace(" ", ".")  # no @: the redaction of collected data would mask it
    module = vocab.ident(rng, 1)
    state: dict[str, str] = {"README.md": f"# {module}\n\n{vocab.sentence(rng)}\n"}
    files: dict[str, str] = {}
    setup = [f"git init -q -b main {repo}"]
    git = f"git -C {repo} -c user.name={shell_quote(author)} -c user.email={email}"
    log: list[tuple[str, str, list[str]]] = []
    day = rng.randint(1, 20)

    def commit(step: int, message: str, changes: dict[str, str], branch: str) -> None:
        for path, text in changes.items():
            files[f".seed/{step}/{path}"] = text
        date = f"2026-04-{day + step:02d}T{rng.randint(8, 18):02d}:00:00Z"
        setup.append(
            f"cp -a .seed/{step}/. {repo}/ && {git} add -A && GIT_AUTHOR_DATE={date} GIT_COMMITTER_DATE={date} "
            f"{git} commit -q -m {shell_quote(message)}"
        )
        log.append((branch, message, sorted(changes)))

    step = 0
    commit(step, f"{module}: first version", dict(state), "main")
    for _ in range(rng.randint(2, 5)):
        step += 1
        path = rng.choice(
            (f"{module}/{rng.choice(vocab.WORDS)}.py", "README.md", f"docs/{rng.choice(vocab.WORDS)}.md")
        )
        text = state.get(path, "") + f"{vocab.sentence(rng, 6)}\n"
        state[path] = text
        commit(
            step, f"{path.split('/')[0]}: {vocab.sentence(rng, 4).rstrip('.').lower()}", {path: text}, "main"
        )
    branches = []
    for _ in range(rng.randint(1, 2)):
        step += 1
        branch = f"feature/{vocab.slug(rng)}"
        branches.append(branch)
        setup.append(f"git -C {repo} checkout -q -b {branch} main")
        path = f"{module}/{rng.choice(vocab.WORDS)}_{step}.py"
        commit(
            step,
            f"{branch.split('/')[1]}: add {path.rsplit('/', 1)[1]}",
            {path: f"VALUE = {rng.randint(1, 999)}\n"},
            branch,
        )
        setup.append(f"git -C {repo} checkout -q main")
    setup.append("rm -rf .seed")
    return {"files": files, "setup": setup, "log": log, "branches": branches, "author": author}


def _git_repo(rng: random.Random) -> dict[str, Any]:
    history = git_history(rng)
    log, branches = history["log"], history["branches"]
    kind = rng.choice(("branch-file", "count", "merge"))
    if kind == "branch-file":
        branch, message, paths = next(entry for entry in log if entry[0] == branches[0])
        instruction = f"Which file does branch {branch} add that main does not have?"
        answer = paths[0]
        solve = f"git -C repo diff --name-only main...{branch}"
    elif kind == "count":
        instruction = "How many commits are on main in the repository in repo/?"
        answer = str(sum(1 for b, _, _ in log if b == "main"))
        solve = "git -C repo rev-list --count main"
    else:
        branch = branches[-1]
        instruction = f"Merge {branch} into main in repo/ and show the resulting log."
        answer = f"main contains {branch}"
        solve = f"git -C repo -c user.name=agent -c user.email=agent merge --no-edit {branch} && git -C repo log --oneline --graph | head"
    return {
        "instruction": instruction,
        "files": history["files"],
        "setup": history["setup"],
        "actions": ["git -C repo log --oneline --all --graph", "git -C repo branch -a", solve],
        "goal": {"answer": answer, "kind": f"git-{kind}"},
    }


def _config_fix(rng: random.Random) -> dict[str, Any]:
    name = vocab.slug(rng)
    port = rng.randint(1025, 65000)
    workers = rng.randint(1, 16)
    level = rng.choice(("debug", "info", "warning"))
    broken = rng.choice(("port", "workers", "level", "missing"))
    values = {"port": str(port), "workers": str(workers), "log_level": level, "name": name}
    fixes = {"port": str(port), "workers": str(workers), "level": level}
    if broken == "port":
        values["port"] = str(rng.choice((0, 70000, 99999)))
    elif broken == "workers":
        values["workers"] = rng.choice(("-1", "many", "0"))
    elif broken == "level":
        values["log_level"] = rng.choice(("loud", "verbose", "INFOO"))
    else:
        del values["workers"]
    config = (
        "[server]\n" + "".join(f"{k} = {v}\n" for k, v in values.items()) + "\n[paths]\ndata = /work/data\n"
    )
    checker = (
        "import configparser, sys\n"
        "c = configparser.ConfigParser()\n"
        "c.read('app.ini')\n"
        "s = c['server']\n"
        "problems = []\n"
        "if not s.get('port', '').isdigit() or not 1 <= int(s['port']) <= 65535:\n"
        "    problems.append('port must be 1-65535')\n"
        "if not s.get('workers', '').isdigit() or int(s['workers']) < 1:\n"
        "    problems.append('workers must be a positive integer')\n"
        "if s.get('log_level') not in ('debug', 'info', 'warning', 'error'):\n"
        "    problems.append('log_level must be debug, info, warning or error')\n"
        "print('\\n'.join(problems) or 'config ok')\n"
        "sys.exit(1 if problems else 0)\n"
    )
    key = "log_level" if broken == "level" else broken
    if broken == "missing":
        fix = f"sed -i 's/^port = .*/&\\nworkers = {workers}/' app.ini"
    else:
        fix = f"sed -i 's/^{key} = .*/{key} = {fixes[broken]}/' app.ini"
    return {
        "instruction": f"The service {name} refuses to start: `python3 check_config.py` explains why. Fix app.ini so the check passes.",
        "files": {"app.ini": config, "check_config.py": checker},
        "actions": [
            "cat app.ini",
            "python3 check_config.py; echo exit=$?",
            fix,
            "python3 check_config.py; echo exit=$?",
        ],
        "goal": {"answer": "config ok", "kind": f"config-{broken}"},
    }


def _service(rng: random.Random) -> dict[str, Any]:
    name = vocab.slug(rng, 1)
    interval = rng.choice(("0.2", "0.3", "0.5"))
    beats = rng.randint(2, 5)
    version = f"{rng.randint(0, 9)}.{rng.randint(0, 30)}.{rng.randint(0, 99)}"
    config = f"NAME={name}\nVERSION={version}\nINTERVAL={interval}\nLOG=/work/{name}.log\n"
    script = (
        "#!/bin/bash\n"
        ". ./service.conf\n"
        'echo $$ > "$NAME.pid"\n'
        'trap \'echo "$(date +%s) stopping" >> "$LOG"; rm -f "$NAME.pid"; exit 0\' TERM\n'
        'while true; do echo "$(date +%s) $NAME heartbeat" >> "$LOG"; sleep "$INTERVAL" & wait $!; done\n'
    )
    return {
        "instruction": f"Start the {name} service in the background, wait until it has logged {beats} heartbeats, then stop it cleanly and show the end of its log.",
        "files": {"service.conf": config, "service.sh": script},
        "setup": ["chmod +x service.sh"],
        "actions": [
            "cat service.conf",
            "./service.sh &",
            f"sleep {float(interval) * (beats + 1):.1f}; grep -c heartbeat {name}.log",
            f"kill $(cat {name}.pid); for i in $(seq 50); do [ -e {name}.pid ] || break; sleep 0.1; done; tail -n 2 {name}.log; ls",
        ],
        "goal": {"answer": "stopping", "kind": "service"},
    }


def _buggy_program(rng: random.Random) -> dict[str, Any]:
    module = vocab.ident(rng)
    program = programs.planted_program(rng, module)
    buggy, fixed = program["buggy_function"], program["fixed_function"]
    fix_code = f"import pathlib; p = pathlib.Path('{module}.py'); p.write_text(p.read_text().replace({buggy!r}, {fixed!r}))"
    return {
        "instruction": f"`python3 -m unittest test_{module}` fails. Find the bug in {module}.py and fix it.",
        "files": {f"{module}.py": program["source"], f"test_{module}.py": program["tests"]},
        "actions": [
            f"python3 -B -m unittest test_{module} 2>&1 | tail -n 15",  # -B: see generators.swe.TEST_CMD
            f"grep -n 'def ' {module}.py",
            f"python3 -c {shell_quote(fix_code)}",
            f"python3 -B -m unittest test_{module} 2>&1 | tail -n 3",
        ],
        "goal": {"answer": program["buggy"], "kind": "planted-bug", "functions": program["functions"]},
    }


FAMILIES = {
    "csv-report": _csv_report,
    "json-records": _json_records,
    "log-triage": _log_triage,
    "file-tree": _file_tree,
    "git-repo": _git_repo,
    "config-fix": _config_fix,
    "service": _service,
    "buggy-program": _buggy_program,
}
