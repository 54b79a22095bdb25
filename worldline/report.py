"""`worldline report POOLS_OUT`: one self-contained HTML page of what a pools build made.

The page shows what a data engineer checks after a build, as plots rather than tables: the filter
funnel (records in, removed per rule, pooled), token lengths per pool against the caps, turns per
trajectory, the domain x source mix per pool, dedup cluster sizes, decontamination hits, loss-mask
category shares, the template spread, and (when the build's inputs are collected datasets) their
coverage. Plots are Plotly figures; plotly.js is embedded once, so the page needs no network when
it is opened.
"""

from __future__ import annotations

import html
import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

POOLS = ("cpt", "sft", "rl")
# The token column of each pool and the cap the build applied to it (key in per_pool_rules).
TOKEN_COLUMNS = {
    "cpt": ("tokens", None),
    "sft": ("tokens", "sft_max_tokens"),
    "rl": ("prompt_tokens", "rl_max_prompt_tokens"),
}
DECONTAMINATION_MARKERS = ("decontam", "eval_overlap", "contaminat")


class ReportError(ValueError):
    """POOLS_OUT is not a finished pools build (no manifest, or a manifest of something else)."""


@dataclass
class PoolsBuild:
    """What the report reads from a finished build: the top manifest and the tables it lists."""

    root: Path
    manifest: dict[str, Any]
    pools: dict[str, pa.Table] = field(default_factory=dict)
    assignments: pa.Table | None = None
    removed: pa.Table | None = None
    coverage: dict[str, Any] | None = None


def _resolve(root: Path, folder: str, rel: str) -> Path:
    """A manifest path, written relative to the pool folder or (older builds) to POOLS_OUT."""
    for candidate in (root / folder / rel, root / rel):
        if candidate.is_file():
            return candidate
    raise ReportError(f"{root}: the manifest lists {rel!r} but no such file exists; rebuild the pools")


def _read(
    root: Path, folder: str, entries: Iterable[dict[str, Any]], columns: list[str] | None = None
) -> pa.Table | None:
    tables = []
    for entry in entries:
        path = _resolve(root, folder, entry["path"])
        schema = pq.read_schema(path)
        wanted = [c for c in columns if c in schema.names] if columns else None
        tables.append(pq.read_table(path, columns=wanted))
    if not tables:
        return None
    return pa.concat_tables(tables, promote_options="permissive")


def load_build(root: str | Path) -> PoolsBuild:
    """Read a finished pools build, or raise ReportError saying what is missing."""
    root = Path(root)
    path = root / "manifest.json"
    if not path.is_file():
        raise ReportError(
            f"{root}: no manifest.json; pass the --out folder of a finished `worldline pools build`"
        )
    try:
        manifest = json.loads(path.read_text("utf-8"))
    except json.JSONDecodeError as exc:
        raise ReportError(f"{path}: not valid JSON ({exc})") from exc
    if manifest.get("kind") != "worldline.pools":
        kind = manifest.get("kind", "a dataset")
        raise ReportError(
            f"{root}: this is {kind!r}, not a pools build; pass the --out folder of `worldline pools build`"
        )
    build = PoolsBuild(root=root, manifest=manifest)
    columns = {
        "cpt": [
            "domain",
            "source_kind",
            "template_version",
            "tokens",
            "loss_tokens",
            "loss_spans",
            "num_turns",
            "is_knowledge",
        ],
        "sft": ["domain", "source_kind", "template_version", "tokens", "truncated", "target_truncated"],
        "rl": ["domain", "source_kind", "template_version", "prompt_tokens", "num_turns", "verifier"],
    }
    for pool in POOLS:
        files = manifest.get("pools", {}).get(pool, {}).get("files", [])
        table = _read(root, pool, files, columns[pool])
        if table is not None:
            build.pools[pool] = table
    build.assignments = _read(
        root,
        "",
        manifest.get("assignments", []),
        ["pool", "domain", "source_kind", "dedup_cluster", "num_turns"],
    )
    build.removed = _read(root, "", manifest.get("removed", []), ["reason", "domain"])
    return build


# --- figures ------------------------------------------------------------------------------------------


def _funnel(build: PoolsBuild) -> Any:
    import plotly.graph_objects as go

    stats = build.manifest.get("stats", {})
    counts = build.manifest.get("counts", {})
    removed = sorted(
        ((k, v) for k, v in stats.items() if k.startswith(("dropped.", "quarantined.")) and v),
        key=lambda kv: -kv[1],
    )
    pooled = {k.split(".", 1)[1]: v for k, v in stats.items() if k.startswith("pooled.")}
    records_in = counts.get("records_in", 0)
    left = records_in - sum(v for _, v in removed)
    # Removals step down from the records in to what is left after the filters; the pools stand beside.
    fig = go.Figure(
        go.Waterfall(
            x=["records in", *(k for k, _ in removed), "left after filters"],
            measure=["absolute", *(["relative"] * len(removed)), "total"],
            y=[records_in, *(-v for _, v in removed), 0],
            connector={"line": {"color": "#999"}},
        )
    )
    fig.add_trace(
        go.Bar(
            x=[f"pooled: {p}" for p in sorted(pooled)], y=[pooled[p] for p in sorted(pooled)], name="pooled"
        )
    )
    fig.update_layout(
        title=f"Filter funnel: {records_in} records in, {left} after filters, "
        f"{counts.get('pooled', 0)} pooled (reconciles: {counts.get('reconciles')})",
        showlegend=False,
        xaxis_tickangle=-30,
    )
    return fig


def _token_lengths(build: PoolsBuild) -> Any:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    pools = [p for p in POOLS if p in build.pools]
    rules = build.manifest.get("per_pool_rules", {})
    fig = make_subplots(
        rows=1, cols=max(1, len(pools)), subplot_titles=[f"{p.upper()}: {TOKEN_COLUMNS[p][0]}" for p in pools]
    )
    for i, pool in enumerate(pools, start=1):
        column, cap_key = TOKEN_COLUMNS[pool]
        values = build.pools[pool].column(column).to_pylist()
        fig.add_trace(go.Histogram(x=values, name=pool, nbinsx=40), row=1, col=i)
        cap = rules.get(cap_key) if cap_key else None
        if cap and values:
            over = sum(1 for v in values if v > cap)
            longest = max(values)
            # A cap far beyond the longest sample would squash the histogram: say it instead of drawing it.
            if cap <= 2 * longest:
                fig.add_vline(x=cap, line_dash="dash", line_color="red", row=1, col=i)
            fig.update_xaxes(title_text=f"cap {cap}: {over} over, longest {longest}", row=1, col=i)
    fig.update_layout(title="Token lengths per pool against the caps", showlegend=False, bargap=0.05)
    return fig


def _turns(build: PoolsBuild) -> Any:
    import plotly.graph_objects as go

    fig = go.Figure()
    if build.assignments is not None:
        pools = build.assignments.column("pool").to_pylist()
        turns = build.assignments.column("num_turns").to_pylist()
        for pool in sorted(set(pools)):
            fig.add_trace(
                go.Histogram(x=[t for p, t in zip(pools, turns, strict=True) if p == pool], name=pool)
            )
    fig.update_layout(
        title="Turns per trajectory, by pool",
        barmode="overlay",
        xaxis_title="turns",
        yaxis_title="trajectories",
    )
    fig.update_traces(opacity=0.7)
    return fig


def _mix(build: PoolsBuild) -> Any:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    pools = [p for p in POOLS if p in build.pools]
    fig = make_subplots(
        rows=1, cols=max(1, len(pools)), subplot_titles=[p.upper() for p in pools], shared_yaxes=True
    )
    domains = sorted({d for p in pools for d in build.pools[p].column("domain").to_pylist()})
    kinds = sorted({k for p in pools for k in build.pools[p].column("source_kind").to_pylist()})
    for i, pool in enumerate(pools, start=1):
        pairs = Counter(
            zip(
                build.pools[pool].column("domain").to_pylist(),
                build.pools[pool].column("source_kind").to_pylist(),
                strict=True,
            )
        )
        z = [[pairs.get((d, k), 0) for k in kinds] for d in domains]
        fig.add_trace(
            go.Heatmap(z=z, x=kinds, y=domains, coloraxis="coloraxis", text=z, texttemplate="%{text}"),
            row=1,
            col=i,
        )
    fig.update_layout(title="Samples per domain x source kind, by pool", coloraxis={"colorscale": "Blues"})
    return fig


def _dedup(build: PoolsBuild) -> Any:
    import plotly.graph_objects as go

    fig = go.Figure()
    if build.assignments is not None:
        sizes = Counter(Counter(build.assignments.column("dedup_cluster").to_pylist()).values())
        xs = sorted(sizes)
        fig.add_trace(go.Bar(x=[str(x) for x in xs], y=[sizes[x] for x in xs]))
    dropped = {k: v for k, v in build.manifest.get("stats", {}).items() if "dup" in k and v}
    note = ", ".join(f"{k}: {v}" for k, v in sorted(dropped.items())) or "no duplicates removed"
    fig.update_layout(
        title=f"Dedup cluster sizes of pooled trajectories ({note})",
        xaxis_title="trajectories in the cluster",
        yaxis_title="clusters",
        yaxis_type="log",
    )
    return fig


def _decontamination(build: PoolsBuild) -> Any:
    import plotly.graph_objects as go

    hits: Counter[str] = Counter()
    if build.removed is not None:
        for reason, domain in zip(
            build.removed.column("reason").to_pylist(), _column_or(build.removed, "domain"), strict=True
        ):
            if any(m in str(reason) for m in DECONTAMINATION_MARKERS):
                hits[f"{reason} ({domain})" if domain else str(reason)] += 1
    else:
        for key, value in build.manifest.get("stats", {}).items():
            if value and any(m in key for m in DECONTAMINATION_MARKERS):
                hits[key] += value
    evals = build.manifest.get("evaluation_sets", [])
    fig = go.Figure(go.Bar(x=list(hits.values()), y=list(hits.keys()), orientation="h"))
    if not hits:
        fig.add_annotation(
            text="no trajectory overlapped the evaluation sets",
            showarrow=False,
            x=0.5,
            y=0.5,
            xref="paper",
            yref="paper",
        )
        fig.update_xaxes(visible=False)
        fig.update_yaxes(visible=False)
    fig.update_layout(
        title=f"Decontamination hits against {len(evals)} evaluation set(s): {sum(hits.values())} in all"
    )
    return fig


def _column_or(table: pa.Table, name: str) -> list[Any]:
    return table.column(name).to_pylist() if name in table.column_names else [None] * table.num_rows


def _loss_mask(build: PoolsBuild) -> Any:
    import plotly.graph_objects as go

    chars: Counter[str] = Counter()
    cpt = build.pools.get("cpt")
    if cpt is not None and "loss_spans" in cpt.column_names:
        for spans in cpt.column("loss_spans").to_pylist():
            for span in spans:
                if span["weight"] > 0:
                    chars[span["category"]] += span["end"] - span["start"]
    fig = go.Figure(go.Pie(labels=list(chars), values=list(chars.values()), hole=0.4))
    fig.update_layout(title="CPT loss-mask categories: share of trained characters")
    return fig


def _templates(build: PoolsBuild) -> Any:
    import plotly.graph_objects as go

    fig = go.Figure()
    for pool in POOLS:
        if pool not in build.pools:
            continue
        counts = Counter(build.pools[pool].column("template_version").to_pylist())
        xs = sorted(counts)
        fig.add_trace(
            go.Bar(
                x=[("knowledge" if v < 0 else f"v{v}") for v in xs],
                y=[counts[v] for v in xs],
                name=pool.upper(),
            )
        )
    fig.update_layout(title="Template spread: samples per template version", barmode="group")
    return fig


def coverage_of_inputs(build: PoolsBuild) -> dict[str, Any] | None:
    """`worldline coverage` of the build's inputs that are still readable folders (None if none is)."""
    if build.coverage is not None:
        return build.coverage
    from worldline.coverage import coverage_report

    folders = [Path(item["path"]) for item in build.manifest.get("inputs", []) if Path(item["path"]).is_dir()]
    if not folders:
        return None
    try:
        build.coverage = coverage_report(folders)
    except (ValueError, OSError):  # an input moved or changed since the build: the rest still reports
        return None
    return build.coverage


def _coverage(build: PoolsBuild) -> Any | None:
    import plotly.graph_objects as go

    report = coverage_of_inputs(build)
    if not report or not report.get("domains"):
        return None
    domains = sorted(report["domains"])
    fig = go.Figure()
    for key, name in (
        ("state_ratio", "distinct states per turn"),
        ("error_share", "error observations"),
        ("noop_share", "no-op turns"),
        ("near_duplicate_share", "near-duplicate trajectories"),
    ):
        fig.add_trace(go.Bar(x=domains, y=[report["domains"][d].get(key) for d in domains], name=name))
    counts = ", ".join(
        f"{d} {report['domains'][d]['trajectories']} traj / {report['domains'][d]['distinct_used']} distinct actions"
        for d in domains
    )
    fig.update_layout(title=f"Coverage of the inputs: {counts}", barmode="group", yaxis_range=[0, 1])
    return fig


FIGURES = (
    ("funnel", _funnel),
    ("token-lengths", _token_lengths),
    ("turns", _turns),
    ("mix", _mix),
    ("dedup", _dedup),
    ("decontamination", _decontamination),
    ("loss-mask", _loss_mask),
    ("templates", _templates),
    ("coverage", _coverage),
)


def render_report(build: PoolsBuild) -> str:
    """The report page for a loaded build: plotly.js inline once, one <div class="plot"> per figure."""
    from plotly.offline import get_plotlyjs

    counts = build.manifest.get("counts", {})
    pools = build.manifest.get("pools", {})
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>worldline pools report: {html.escape(str(build.root))}</title>",
        "<style>body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2em .6em;text-align:right}"
        ".plot{margin:2em 0}</style>",
        f"<script>{get_plotlyjs()}</script></head><body>",
        f"<h1>worldline pools report</h1><p>{html.escape(str(build.root))}: config "
        f"<code>{html.escape(str(build.manifest.get('config_fingerprint', '')))}</code>, "
        f"{counts.get('records_in', 0)} records in, {counts.get('pooled', 0)} pooled, "
        f"{counts.get('removed', 0)} removed; counts reconcile: {counts.get('reconciles')}.</p>",
        "<table><tr><th>pool</th><th>samples</th><th>trajectories</th></tr>",
    ]
    for pool, summary in pools.items():
        parts.append(
            f"<tr><td>{html.escape(pool)}</td><td>{summary.get('samples', 0)}</td><td>{summary.get('trajectories', 0)}</td></tr>"
        )
    parts.append("</table>")
    for name, make in FIGURES:
        fig = make(build)
        if fig is None:
            continue
        fig.update_layout(height=420)
        body = fig.to_html(
            full_html=False, include_plotlyjs=False, div_id=f"plot-{name}", config={"displaylogo": False}
        )
        parts.append(f"<div class='plot' data-plot='{name}'>{body}</div>")
    coverage = coverage_of_inputs(build)
    if coverage and coverage.get("thin"):
        parts.append("<h2>What is thin</h2><ul class='thin'>")
        parts += [f"<li>{html.escape(str(note))}</li>" for note in coverage["thin"]]
        parts.append("</ul>")
    parts.append("</body></html>\n")
    return "".join(parts)


def write_report(pools_out: str | Path, out: str | Path | None = None) -> Path:
    """Write the report of a finished build (default POOLS_OUT/report.html) atomically; return its path."""
    from schemas.atomic import atomic_write_text

    build = load_build(pools_out)
    target = Path(out) if out is not None else Path(pools_out) / "report.html"
    atomic_write_text(target, render_report(build))
    return target
