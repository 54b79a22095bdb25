"""`pools build` and `pools verify` as library calls; the CLI only parses arguments and prints.

A build is two calls so a caller can show what it is about to do before the long part runs:
`plan_build(config, inputs, out, ...)` checks the target folder, merges an incremental build's earlier
inputs and resolves every input (nothing is written); `build_pools(plan, beam_args)` runs the Beam job
into a staging folder beside OUT, finalizes it (manifests, cards, exports) and publishes it as OUT only
when its counts reconcile. A staging folder that fails or does not reconcile is discarded, so OUT is
always a complete build or untouched. The Beam job's modules are imported by the calls that run it, so
`pools summary` and `pools verify` start without them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pipelines import fs
from pipelines.config import PoolsConfig
from pipelines.span_table import span_label_sources

if TYPE_CHECKING:
    from pipelines.build import ProgressFn
    from pipelines.stages.read import BuildInputs
    from pipelines.verify_checks import Violation

MANIFEST = "manifest.json"


class BuildInputsError(ValueError):
    """An input of the build cannot be read; the message names the file (no traceback needed)."""


class ManifestMissing(FileNotFoundError):
    """OUT holds no manifest.json: nothing was built (or published) there."""

    def __init__(self, out: str) -> None:
        self.path = fs.join(out, MANIFEST)
        super().__init__(f"{self.path} is missing: run `worldline pools build --out {out}` first")


@dataclass(slots=True)
class BuildPlan:
    """What a build will read and where it publishes: absolute paths, the resolved inputs."""

    config: PoolsConfig
    out: str
    inputs: list[str]
    knowledge: list[str]
    evals: list[str]
    resolved: BuildInputs
    new_inputs: list[str] | None = None
    """The inputs an incremental build adds to the earlier ones (None for a full build)."""


@dataclass(slots=True)
class BuildResult:
    """A finished build: its manifest, and whether it was published as OUT (only when counts reconcile)."""

    out: str
    manifest: dict[str, Any] = field(default_factory=dict)
    published: bool = False
    empty_pools: list[str] = field(default_factory=list)
    """One line per pool the configuration leaves empty because no source kind of the data maps to it."""

    @property
    def groups_defaulted(self) -> int:
        """Trajectories without a source group, grouped by the configured default instead."""
        return int(self.manifest["stats"].get("groups_defaulted", 0))


def plan_build(
    config: PoolsConfig,
    inputs: list[str],
    out: str,
    *,
    knowledge: list[str] | None = None,
    evals: list[str] | None = None,
    overwrite: bool = False,
    incremental: bool = False,
) -> BuildPlan:
    """Check OUT, merge an incremental build's earlier inputs and resolve every input; writes nothing.

    Raises `PublishError` when OUT may not be written (exists without --overwrite, or an earlier input
    of an incremental build changed) and `BuildInputsError` when an input cannot be read.
    """
    from pipelines.build import resolve_inputs
    from pipelines.publish import check_target, incremental_plan
    from schemas.shards import ShardError

    out = fs.absolute(out)
    in_paths = [fs.absolute(p) for p in inputs]
    know = [fs.absolute(p) for p in knowledge or []]
    ev = [fs.absolute(p) for p in evals or []]
    check_target(out, overwrite=overwrite, incremental=incremental)
    new_inputs = None
    if incremental:
        plan = incremental_plan(out, config.fingerprint(), in_paths, know, ev)
        in_paths, know, ev, new_inputs = plan.inputs, plan.knowledge, plan.evals, plan.new_inputs
    try:
        check_inputs_hold_data(in_paths, know, ev)
        resolved = resolve_inputs(in_paths, know, ev, config)
        resolved.span_label_files = span_label_sources(config, [fs.absolute(item) for item in in_paths])
        if config.grounding:  # a configured table that cannot be read stops the build before it starts
            from pipelines.stages.filter import grounding_verdicts

            grounding_verdicts(config.grounding)
    except (ShardError, ValueError, OSError) as exc:
        raise BuildInputsError(str(exc)) from exc
    if resolved.total_rows == 0:
        raise BuildInputsError(
            f"--in {' '.join(in_paths)}: the inputs hold no trajectories (their parts have 0 rows)"
        )
    return BuildPlan(config, out, in_paths, know, ev, resolved, new_inputs)


def check_inputs_hold_data(inputs: list[str], knowledge: list[str], evals: list[str]) -> None:
    """Refuse an input that holds nothing to read (a folder without shards, corpus files or
    evaluation files): built from, it would publish pools without a word about the missing data."""
    from pipelines.inputs import eval_files, input_parts, knowledge_files

    for item in inputs:
        if not input_parts(item):
            raise BuildInputsError(
                f"--in {item}: no trajectory parts (a dataset folder with manifest.json and "
                "trajectories/part-*.parquet, a folder of parts, or one part file)"
            )
    for item in knowledge:
        if not knowledge_files(item):
            raise BuildInputsError(f"--knowledge {item}: no corpus files (.jsonl, .parquet, .txt, .md)")
    for item in evals:
        if not eval_files(item):
            raise BuildInputsError(
                f"--eval {item}: no evaluation data (AgentWorldBench *.jsonl files or trajectory parts)"
            )


def build_pools(
    plan: BuildPlan, beam_args: list[str] | None = None, *, progress: ProgressFn | None = None
) -> BuildResult:
    """Run the Beam job into staging, finalize it and publish it as OUT when its counts reconcile."""
    import os

    from pipelines.build import run_build
    from pipelines.finalize import finalize
    from pipelines.publish import (
        STAGING_ENV,
        discard,
        publish,
        reap_stale_staging,
        signals_raise,
        staging_folder,
        stop_job_processes,
    )

    reap_stale_staging(plan.out)  # what a killed earlier build of OUT left: its staging and workers
    staging = staging_folder(plan.out)
    with signals_raise(staging):
        previous_tag = os.environ.get(STAGING_ENV)
        os.environ[STAGING_ENV] = staging  # inherited by the job's worker processes
        try:
            run_build(plan.resolved, staging, plan.config, list(beam_args or []), progress=progress)
            manifest = finalize(staging, plan.config, plan.inputs, plan.knowledge, plan.evals)
            empty = unreached_pools(plan.config, manifest, assigned_kinds(staging))
        except BaseException:
            stop_job_processes(staging)
            discard(staging)
            raise
        finally:
            if previous_tag is None:
                os.environ.pop(STAGING_ENV, None)
            else:
                os.environ[STAGING_ENV] = previous_tag
        stop_job_processes(staging)
    if not manifest["counts"]["reconciles"]:
        discard(staging)
        return BuildResult(plan.out, manifest, published=False, empty_pools=empty)
    publish(staging, plan.out)
    return BuildResult(plan.out, manifest, published=True, empty_pools=empty)


def assigned_kinds(out: str) -> Counter[str]:
    """Records per source kind that reached group assignment (OUT/assignments)."""
    from pipelines.build import ASSIGNMENTS
    from pipelines.finalize import pool_parts, read_parquet

    kinds: Counter[str] = Counter()
    for f in pool_parts(out, ASSIGNMENTS):
        kinds.update(read_parquet(f, ["source_kind"]).column("source_kind").to_pylist())
    return kinds


def unreached_pools(config: PoolsConfig, manifest: dict[str, Any], kinds: Counter[str]) -> list[str]:
    """Why each empty pool is empty when the assignment rules send none of the data's source kinds
    to it (the default rules send collected `infra` data to CPT only)."""
    from pipelines.config import ALL_POOLS

    rules = config.assignment
    held = ", ".join(f"{k} ({n})" for k, n in sorted(kinds.items())) or "none"
    lines = []
    for pool in ALL_POOLS:
        if manifest["pools"][pool]["samples"]:
            continue
        if rules.mode == "by_ratio":
            if rules.ratios.pools.get(pool, 0) <= 0:
                lines.append(f"pool {pool} is empty: assignment.ratios gives it no share")
            continue
        takers = sorted(k for k, rule in rules.by_kind.items() if rule.pools.get(pool, 0) > 0)
        if not set(takers) & set(kinds):
            sends = "; ".join(
                f"{k} -> {', '.join(sorted(rules.by_kind[k].pools))}"
                for k in sorted(kinds)
                if k in rules.by_kind
            )
            lines.append(
                f"pool {pool} is empty: no source kind of the data maps to it (the data holds {held}; "
                f"assignment.by_kind: {sends}; {pool} takes {', '.join(takers) or 'no kind'}); "
                "change assignment.by_kind in the --config YAML"
            )
    return lines


def built_manifest(out: str) -> dict[str, Any]:
    """OUT's manifest.json; `ManifestMissing` if OUT holds no build."""
    manifest_path = fs.join(out, MANIFEST)
    if not fs.is_file(manifest_path):
        raise ManifestMissing(out)
    manifest: dict[str, Any] = fs.read_json(manifest_path)
    return manifest


def verify_built_pools(
    out: str, *, recount_tokens: bool = True, beam_args: list[str] | None = None
) -> list[Violation]:
    """Recheck a published build against the configuration its manifest records (`pipelines.verify`);
    in this process, or as a Beam job when `beam_args` is given. Returns the violations found."""
    from pipelines.verify import verify_pools

    config = PoolsConfig.from_dict(built_manifest(out)["config"])
    return verify_pools(out, config, recount_tokens=recount_tokens, beam_args=beam_args)
