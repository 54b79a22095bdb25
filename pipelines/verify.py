"""`pools verify`: prove what the build promises by recomputing it from content.

Nothing the build recorded about content is trusted: the manifest's checksums are checked, but every
other check is recomputed from the pool rows and from the inputs the manifest names, so rewriting the
manifest and its checksums cannot hide a violation.

- disjointness: trajectory ids, source groups and dedup clusters, read from the pool rows;
- duplicates: the pooled trajectories are re-read from the inputs (validated, filtered and
  canonicalised as the build does), their exact keys and MinHash signatures recomputed, and no two
  pooled records may be exact or near duplicates, in one pool or across pools;
- evaluation overlap: every pooled training record against every evaluation set the manifest names
  (near duplicates and 13-gram containment of turns and tasks) and against the eval pool's turns;
- per-pool rules: one RL row per trajectory, token caps recounted with the recorded tokenizer and
  chat template, SFT targets non-empty with their closing tag, the evaluator's conversation shape,
  valid CPT loss spans, template versions and their spread;
- statistics: the manifest's per-pool counts and token statistics equal the rows';
- span labels: a configured `span_labels` file must exist. `deterministic_share_lines` reports the
  share of deterministic content per pool and domain from the labels (or "no labels").

A missing input (shard folder, knowledge corpus, evaluation set) is a violation, never a skip. Rows
are streamed part by part; memory holds one part's batch plus per-record state (ids, groups, one
MinHash signature and the normalised text per pooled record: near duplicates are decided by exact
shingle Jaccard, as the build decides them).
"""

from __future__ import annotations

import os

from pipelines import fs
from pipelines.config import PoolsConfig
from pipelines.span_shares import build_shares, report_lines
from pipelines.stages.spill import ASSIGNMENTS
from pipelines.verify_checks import (
    Report,
    Violation,
    assignment_pairs,
    check_assignments,
    check_checksums,
    check_content,
    check_stats,
    pool_part_files,
    read_pool_rows,
)
from schemas.span_labels import SpanLabelsError


def verify_pools(
    out: str | os.PathLike[str],
    cfg: PoolsConfig,
    *,
    recount_tokens: bool = True,
    check_inputs: bool = True,
    beam_args: list[str] | None = None,
) -> list[Violation]:
    """All violations found in OUT, local or on any Beam filesystem (empty list: the pools are proven
    disjoint and rule-abiding). With `beam_args` (possibly empty: the local runner) the checks run
    as a Beam job (`pipelines.verify_beam`) and give the same report."""
    out = os.fspath(out)
    report = Report()
    manifest_path = fs.join(out, "manifest.json")
    if not fs.is_file(manifest_path):
        return [Violation("manifest", f"{manifest_path} is missing; run `worldline pools build` first", [])]
    manifest = fs.read_json(manifest_path)
    tokenizer: str | None = None
    if recount_tokens:
        tokenizer = (manifest.get("tokenizer") or {}).get("name")
        if not tokenizer:
            report.add("tokenizer", "the manifest does not record the tokenizer the caps were counted with")
        tokenizer = tokenizer or cfg.tokenizer or ""
    if cfg.span_labels and not fs.exists(cfg.span_labels):
        report.add("span_labels", "the configured span_labels file is missing", cfg.span_labels)
    if beam_args is not None:
        from pipelines.verify_beam import run_verify

        report.extend(run_verify(out, manifest, cfg, tokenizer, check_inputs, beam_args))
        return report.violations()
    counter = None
    if tokenizer is not None:
        from worldline.tokenizer import get_token_counter

        counter = get_token_counter(tokenizer or None)
    check_checksums(out, manifest, report)
    seen = read_pool_rows(out, cfg, counter, report)
    check_stats(manifest, seen, report)
    check_assignments(
        [p for f in pool_part_files(out, ASSIGNMENTS) for p in assignment_pairs(f)], seen, report
    )
    if check_inputs:
        check_content(out, manifest, cfg, seen, report)
    return report.violations()


def deterministic_share_lines(out: str | os.PathLike[str], cfg: PoolsConfig | None = None) -> list[str]:
    """The share of deterministic content per pool and domain of the pools in OUT, from the replay
    span labels of their inputs (pipelines/span_shares.py), as report lines; "no labels" without.
    CFG defaults to the configuration the manifest records."""
    out = os.fspath(out)
    manifest = fs.read_json(fs.join(out, "manifest.json"))
    cfg = cfg or PoolsConfig.from_dict(manifest["config"])
    if cfg.span_labels and not fs.exists(cfg.span_labels):
        return [f"deterministic share: no labels ({cfg.span_labels} is missing)"]
    inputs = [str(item["path"]) for item in manifest.get("inputs", [])]
    try:
        return report_lines(build_shares(out, cfg, inputs))
    except SpanLabelsError as exc:
        return [f"deterministic share: no labels ({exc})"]


__all__ = ["Violation", "deterministic_share_lines", "verify_pools"]
