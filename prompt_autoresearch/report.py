"""`autoresearch report`: one self-contained HTML page for reviewing an experiment before approval.

Per run: the score frontier as an inline SVG plot (every candidate by status, the incumbent's score as
a step line, the noise floor as a band), the per-dimension scores of seed and result, the lineage
(each candidate and its parent), the recheck, and side-by-side diffs of every kept candidate against
its parent. No scripts, fonts or images are fetched: the page works offline and from a file.
"""

from __future__ import annotations

import difflib
import html
from typing import Any

from prompt_autoresearch.review import leaderboard, progress
from schemas.worldmodel import SCORING_DIMENSIONS

WIDTH, HEIGHT, PAD = 520, 220, 36
COLOURS = {"keep": "#1a7f37", "discard": "#8c959f", "crash": "#cf222e"}

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px;color:#1f2328}
h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #d0d7de}h3{font-size:15px}
table{border-collapse:collapse;margin:8px 0;font-size:13px}td,th{border:1px solid #d0d7de;padding:3px 6px}
th{background:#f6f8fa}.keep{color:#1a7f37}.discard{color:#57606a}.crash{color:#cf222e}
.diff{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px}
table.diff td{vertical-align:top;white-space:pre-wrap;border:none}.diff_add{background:#dafbe1}
.diff_chg{background:#fff8c5}.diff_sub{background:#ffebe9}.diff_next{display:none}
.muted{color:#57606a}details{margin:6px 0}summary{cursor:pointer}
"""


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _fmt(value: Any, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def frontier_svg(rs: dict[str, Any], iterations: int) -> str:
    """Candidates (x = iteration, y = score 0..100) and the incumbent's score as a step line."""
    width, height = WIDTH - 2 * PAD, HEIGHT - 2 * PAD
    span = max(iterations, 1)

    def x(i: int) -> float:
        return PAD + width * i / span

    def y(score: float) -> float:
        return PAD + height * (1 - max(min(score, 100.0), 0.0) / 100.0)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" role="img" '
        f'aria-label="score frontier of run {rs["run"]}" class="frontier">',
        f'<rect x="{PAD}" y="{PAD}" width="{width}" height="{height}" fill="#fff" stroke="#d0d7de"/>',
    ]
    for tick in (0, 25, 50, 75, 100):
        parts.append(
            f'<line x1="{PAD}" x2="{PAD + width}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" stroke="#eaeef2"/>'
            f'<text x="{PAD - 6}" y="{y(tick) + 4:.1f}" font-size="10" text-anchor="end">{tick}</text>'
        )
    for i in range(0, span + 1):
        parts.append(
            f'<text x="{x(i):.1f}" y="{PAD + height + 14}" font-size="10" text-anchor="middle">{i}</text>'
        )
    parts.append(
        f'<text x="{PAD + width / 2}" y="{HEIGHT - 4}" font-size="11" text-anchor="middle">iteration</text>'
    )
    steps: list[tuple[int, float]] = []
    best: float | None = None
    floor = rs.get("noise_floor") or 0.0
    for row in rs["candidates"]:
        if row["iteration"] == 0 or row["status"] == "keep":
            best = row["score"] if row["score"] is not None else best
        if best is not None:
            steps.append((row["iteration"], best))
    if steps:
        points = []
        for (i, s), nxt in zip(steps, [*steps[1:], None], strict=True):
            points.append(f"{x(i):.1f},{y(s):.1f}")
            end = nxt[0] if nxt else steps[-1][0]
            points.append(f"{x(end):.1f},{y(s):.1f}")
        first_score = steps[0][1]
        parts.append(
            f'<rect x="{PAD}" y="{y(first_score + floor):.1f}" width="{width}" '
            f'height="{max(y(first_score - floor) - y(first_score + floor), 0.5):.1f}" fill="#ddf4ff" '
            f'opacity="0.7"><title>noise floor ±{floor:.2f}</title></rect>'
        )
        parts.append(
            f'<polyline points="{" ".join(points)}" fill="none" stroke="#0969da" stroke-width="2" '
            f'class="frontier-line"/>'
        )
    for row in rs["candidates"]:
        colour = COLOURS.get(row["status"], "#000")
        score = row["score"]
        title = _e(f"{row['candidate_id']} {row['status']} {_fmt(score)}: {row['reason']}")
        if score is None:
            cx, cy = x(row["iteration"]), PAD + height - 4
            parts.append(
                f'<text x="{cx:.1f}" y="{cy:.1f}" fill="{colour}" font-size="12" text-anchor="middle" '
                f'class="point {row["status"]}">x<title>{title}</title></text>'
            )
        else:
            parts.append(
                f'<circle cx="{x(row["iteration"]):.1f}" cy="{y(score):.1f}" r="4" fill="{colour}" '
                f'class="point {row["status"]}"><title>{title}</title></circle>'
            )
    parts.append("</svg>")
    return "".join(parts)


def _diff(old: str, new: str, old_label: str, new_label: str) -> str:
    table = difflib.HtmlDiff(wrapcolumn=70).make_table(
        old.splitlines(), new.splitlines(), _e(old_label), _e(new_label), context=True, numlines=2
    )
    return table


def _run_section(rs: dict[str, Any], iterations: int) -> str:
    by_id = {row["candidate_id"]: row for row in rs["candidates"]}
    seed = by_id.get(rs.get("seed") or "")
    result = by_id.get(rs.get("result") or rs.get("incumbent") or "")
    out = [
        f'<section class="run" id="run-{rs["run"]}"><h2>Run {rs["run"]}: {_e(rs["style"])}</h2>',
        f'<p class="muted">status {_e(rs["status"])}, {rs["iterations_done"]} of {iterations} iterations, '
        f"target {rs['band'][0]}-{rs['band'][1]} lines, noise floor {_fmt(rs.get('noise_floor'), 2)} "
        f"(seed scored {', '.join(_fmt(s) for s in rs.get('seed_scores') or [])})</p>",
        frontier_svg(rs, iterations),
    ]
    recheck = rs.get("recheck")
    if recheck:
        out.append(f"<p><b>Recheck:</b> {_e(recheck.get('reason'))}</p>")
    out.append("<h3>Per-dimension scores (1-5)</h3><table><tr><th>template</th><th>score</th>")
    out.append("".join(f"<th>{d}</th>" for d in SCORING_DIMENSIONS) + "<th>lines</th></tr>")
    for label, row in (("seed", seed), ("result", result)):
        if row is None:
            continue
        out.append(
            f"<tr><td>{label} {row['candidate_id']}</td><td>{_fmt(row['score'])}</td>"
            + "".join(f"<td>{_fmt(row.get(d), 2)}</td>" for d in SCORING_DIMENSIONS)
            + f"<td>{row['lines']}</td></tr>"
        )
    out.append("</table><h3>Lineage</h3><table class='lineage'><tr><th>candidate</th><th>parent</th>")
    out.append(
        "<th>status</th><th>score</th><th>lines</th><th>valid/failed</th><th>calls</th><th>reason</th>"
    )
    out.append("<th>description</th></tr>")
    for row in rs["candidates"]:
        out.append(
            f"<tr><td>{row['candidate_id']}</td><td>{_e(row['parent'] or '-')}</td>"
            f"<td class='{row['status']}'>{row['status']}</td><td>{_fmt(row['score'])}</td>"
            f"<td>{row['lines']}</td><td>{row['valid']}/{row['failed']}</td><td>{row['calls']}</td>"
            f"<td>{_e(row['reason'])}</td><td>{_e(row['description'])}</td></tr>"
        )
    out.append("</table><h3>Template diffs</h3>")
    for row in rs["candidates"]:
        if row["status"] != "keep" or row["iteration"] == 0 or row["parent"] not in by_id:
            continue
        parent = by_id[row["parent"]]
        out.append(
            f"<details open><summary>{row['parent']} → {row['candidate_id']} "
            f"({_fmt(parent['score'])} → {_fmt(row['score'])})</summary>"
            f"{_diff(parent['text'], row['text'], row['parent'], row['candidate_id'])}</details>"
        )
    if seed is not None and result is not None and result is not seed:
        out.append(
            f"<details><summary>seed → result ({seed['candidate_id']} → {result['candidate_id']})</summary>"
            f"{_diff(seed['text'], result['text'], seed['candidate_id'], result['candidate_id'])}</details>"
        )
    out.append("</section>")
    return "".join(out)


def render_report(state: dict[str, Any]) -> str:
    cfg = state["config"]
    summary = progress(state)
    usage = summary["usage"]
    runs = [dict(rs, run=int(key)) for key, rs in sorted(state["runs"].items(), key=lambda kv: int(kv[0]))]
    head = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>autoresearch: {_e(cfg['domain'])}</title><style>{CSS}</style></head><body>",
        f"<h1>autoresearch — {_e(cfg['domain'])}</h1>",
        f"<p>{summary['runs_done']} of {summary['runs']} runs done, {summary['iterations_done']} of "
        f"{summary['iterations']} iterations; models: "
        + ", ".join(f"{_e(k)}={_e(v)}" for k, v in cfg["models"].items())
        + f"; {usage['calls']} calls, {usage['prompt_tokens'] + usage['completion_tokens']} tokens, "
        f"${usage['cost_usd']:.4f}.</p>",
    ]
    if summary["stopped"]:
        head.append(f"<p class='crash'>Stopped: {_e(summary['stopped'])}</p>")
    approvals = state.get("approvals") or {}
    if approvals:
        head.append(
            "<p>Approved: "
            + ", ".join(
                f"{_e(slot)} = run {a['run']} {_e(a['candidate_id'])}"
                for slot, a in sorted(approvals.items())
            )
            + "</p>"
        )
    head.append("<h2>Leaderboard</h2><table><tr><th>candidate</th><th>style</th><th>status</th>")
    head.append("<th>score</th><th>lines</th></tr>")
    for row in leaderboard(state):
        head.append(
            f"<tr><td>{row['candidate_id']}</td><td>{_e(row['style'])}</td>"
            f"<td class='{row['status']}'>{row['status']}</td><td>{_fmt(row['score'])}</td>"
            f"<td>{row['lines']}</td></tr>"
        )
    head.append("</table>")
    body = [_run_section(rs, cfg["iterations"]) for rs in runs]
    return "".join(head + body) + "</body></html>\n"
