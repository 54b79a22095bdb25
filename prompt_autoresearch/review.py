"""Reading an experiment back: status tables, the human approval gate and the export of v0..v11.

`approve` records, in the state, that a finished run's result is accepted for a version slot; only
approved templates are exported. `export` writes a template set in the layout the pools read
(`index.json` + one file per version, checked by `load_template_set`): the approved templates are
numbered from the shortest to the longest over the approved slots, so a full set has v0 (RL) the
shortest and v11 the longest. Slots nobody approved are filled from a base set (the seed set by
default) and said so.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from prompt_autoresearch.state import REQUESTS_FILE, STATE_FILE, load_state, save_state
from schemas.atomic import replace_dir
from schemas.templates import SEED_TEMPLATES_DIR, TemplateError, check_template, load_template_set
from worldline.llm import UsageLedger
from worldline.llm.accounting import RequestJournal

VERSIONS = tuple(range(12))
USED_BY = {0: "rl", 1: "cpt"}


class ReviewError(ValueError):
    """A review command cannot do what was asked; the message names the run or version and the fix."""


def require_state(rundir: Path) -> dict[str, Any]:
    state = load_state(rundir)
    if state is None:
        raise ReviewError(
            f"{rundir}: no {STATE_FILE}; start an experiment with `autoresearch run --out {rundir}`"
        )
    journal = rundir / REQUESTS_FILE
    if journal.is_file():
        # The journal counts every request before it is sent; the state only up to its last checkpoint.
        ledger = UsageLedger()
        ledger.attach_journal(RequestJournal(journal))
        totals = ledger.snapshot()["totals"]
        ledger.journal.close()  # type: ignore[union-attr]
        if totals["requests"] >= int(state["usage"].get("calls", 0)):
            state["usage"] = {
                **state["usage"],
                "calls": totals["requests"],
                **{k: totals[k] for k in ("prompt_tokens", "completion_tokens", "cost_usd")},
            }
    return state


def parse_version(text: str) -> int:
    raw = text.strip().lower().removeprefix("v")
    if not raw.isdigit() or int(raw) not in VERSIONS:
        raise ReviewError(f"--as {text!r}: give a template version v0..v11")
    return int(raw)


def candidate(state: dict[str, Any], run: int, candidate_id: str) -> dict[str, Any]:
    for row in state["runs"][str(run)]["candidates"]:
        if row["candidate_id"] == candidate_id:
            return cast(dict[str, Any], row)
    raise ReviewError(f"run {run} has no candidate {candidate_id}")


def approve(rundir: Path, run: int, version: int) -> dict[str, Any]:
    """Approve run `run`'s result as template v`version` (replacing an earlier approval of that slot)."""
    state = require_state(rundir)
    rs = state["runs"].get(str(run))
    if rs is None:
        have = ", ".join(sorted(state["runs"], key=int)) or "none"
        raise ReviewError(f"--run {run}: this experiment has no run {run} (runs: {have})")
    if rs.get("status") != "done" or not rs.get("result"):
        raise ReviewError(
            f"--run {run} is not finished (status {rs.get('status')}, {rs.get('iterations_done')} iterations "
            f"done): resume it with `autoresearch run` before approving its result"
        )
    row = candidate(state, run, rs["result"])
    check_template(row["text"], f"run {run} result {row['candidate_id']}")
    for slot, approval in list(state["approvals"].items()):
        if approval["run"] == run and slot != f"v{version}":
            del state["approvals"][slot]  # one run, one slot
    approval = {
        "run": run,
        "candidate_id": row["candidate_id"],
        "template_hash": row["template_hash"],
        "lines": row["lines"],
        "style": rs["style"],
        "score": row["score"],
    }
    state["approvals"][f"v{version}"] = approval
    save_state(rundir, state)
    return approval


@dataclass(frozen=True)
class ExportedTemplate:
    version: int
    origin: str
    lines: int
    style: str
    approved_as: int | None


def export(rundir: Path, out: Path, base: Path | None = None) -> list[ExportedTemplate]:
    """Write the approved templates (plus base templates for unapproved slots) as a template set."""
    state = require_state(rundir)
    approvals = state.get("approvals") or {}
    if not approvals:
        raise ReviewError(
            f"{rundir}: nothing is approved; review with `autoresearch report` and approve with "
            f"`autoresearch approve {rundir} --run K --as vN`"
        )
    if out.resolve() == SEED_TEMPLATES_DIR.resolve():
        raise ReviewError(f"--out {out} is the seed set shipped with worldline; export to another folder")
    if out.exists() and not (out / "index.json").is_file() and any(out.iterdir()):
        raise ReviewError(
            f"--out {out} exists and is not a template set (no index.json); it would be replaced: choose a "
            f"new or empty folder"
        )
    base_set = load_template_set(str(base or SEED_TEMPLATES_DIR))
    approved = []
    for slot, approval in approvals.items():
        row = candidate(state, approval["run"], approval["candidate_id"])
        approved.append((parse_version(slot), row, approval))
    slots = sorted(version for version, _, _ in approved)
    by_length = sorted(approved, key=lambda item: (item[1]["lines"], item[1]["tokens"], item[0]))
    staging = out.with_name(f".{out.name}.staging")
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    written: list[ExportedTemplate] = []
    entries = []
    for version, (asked, row, approval) in zip(slots, by_length, strict=True):
        name = f"v{version}.md"
        (staging / name).write_text(row["text"], encoding="utf-8")
        entries.append(
            {
                "version": version,
                "file": name,
                "style": approval["style"],
                "used_by": USED_BY.get(version, "sft"),
                "lines": row["lines"],
                "origin": f"autoresearch run {approval['run']} {row['candidate_id']} ({row['template_hash']})",
                "approved_as": f"v{asked}",
            }
        )
        written.append(
            ExportedTemplate(version, entries[-1]["origin"], row["lines"], approval["style"], asked)
        )
    for version in VERSIONS:
        if version in slots or version not in base_set.templates:
            continue
        template = base_set.templates[version]
        name = f"v{version}.md"
        (staging / name).write_text(template.text, encoding="utf-8")
        lines = template.text.count("\n") + (0 if template.text.endswith("\n") else 1)
        origin = f"base set {base_set.name} (not approved)"
        entries.append(
            {
                "version": version,
                "file": name,
                "style": template.style,
                "used_by": USED_BY.get(version, "sft"),
                "lines": lines,
                "origin": origin,
            }
        )
        written.append(ExportedTemplate(version, origin, lines, template.style, None))
    entries.sort(key=lambda e: int(e["version"]))
    index = {
        "set": out.name,
        "description": "Templates evolved by autoresearch and approved by a reviewer; approved versions "
        "are numbered from the shortest to the longest.",
        "templates": entries,
    }
    (staging / "index.json").write_text(json.dumps(index, indent=2) + "\n", encoding="utf-8")
    load_template_set.cache_clear()
    try:
        load_template_set(str(staging))  # the pools' own loader and checks
    except TemplateError as error:
        shutil.rmtree(staging)
        raise ReviewError(f"the exported set does not load: {error}") from error
    replace_dir(staging, out)
    load_template_set.cache_clear()
    return sorted(written, key=lambda t: t.version)


def leaderboard(state: dict[str, Any], top: int = 10) -> list[dict[str, Any]]:
    rows = [row for rs in state["runs"].values() for row in rs["candidates"] if row["score"] is not None]
    return sorted(rows, key=lambda r: (-r["score"], r["run"], r["iteration"]))[:top]


def progress(state: dict[str, Any]) -> dict[str, Any]:
    cfg = state["config"]
    runs = state["runs"]
    done = sum(1 for rs in runs.values() if rs["status"] == "done")
    iterations = sum(rs["iterations_done"] for rs in runs.values())
    return {
        "runs_done": done,
        "runs": cfg["runs"],
        "iterations_done": iterations,
        "iterations": cfg["runs"] * cfg["iterations"],
        "candidates": sum(len(rs["candidates"]) for rs in runs.values()),
        "usage": state["usage"],
        "stopped": state.get("stopped"),
        "leaderboard": [
            {k: row[k] for k in ("candidate_id", "run", "iteration", "style", "status", "score", "lines")}
            for row in leaderboard(state)
        ],
    }
