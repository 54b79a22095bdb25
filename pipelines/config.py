"""The pool-building configuration: one YAML file, small dataclasses, every paper rule a setting.

`PoolsConfig.load(path)` reads `pipelines/configs/pools.yaml`-style files; every key is optional and
defaults to the paper's choices (section 3), so an empty file builds pools the way the paper did.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from pipelines.benchmarks_exclusion import DEFAULT_EXCLUDED, UnknownBenchmark, canonical_list
from schemas.gui_failure import POOL_FAILURE_MARKERS
from schemas.turn_facts import ENDED, FACTS

HARNESS_ACTIONS = ("keep", "mask", "drop_turn", "drop")
"""What the pools do with a turn that carries a harness fact (schemas.turn_facts): keep it; mask it
(it stays in the history of later turns and in the CPT text, but is never in the loss: no CPT span, no
SFT target, never the RL turn); drop_turn (remove it, as the no-change filter removes turns); drop
(remove the whole trajectory)."""

DEFAULT_HARNESS_FACTS = {fact: "mask" for fact in FACTS} | {ENDED: "keep"}
"""A timed-out, truncated, out-of-action-space or interrupted step shows what the screen showed up to a
cut the harness made, which no world model can predict from the action: masked by default. `ended`
(the shell exited, the server died) is what the environment really answered: kept."""

POOLS = ("cpt", "sft", "rl")
"""Training pools, in the order pool rules are tried."""

EVAL_POOL = "eval"
"""Held-out evaluation set: disjoint from every training pool, exported in AgentWorldBench format."""

ALL_POOLS = (*POOLS, EVAL_POOL)


class ConfigError(ValueError):
    """The pools configuration is not valid; the message names the key and the fix."""


@dataclass(slots=True)
class FilterConfig:
    """Trajectory and turn filters of paper 3.1.2; each can be switched off."""

    min_turns: int = 2
    drop_undeclared_tools: bool = True
    drop_gui_env_failures: bool = True
    strip_empty_actions: bool = True
    skip_retry_cycles: bool = True
    drop_gui_no_change: bool = True
    # Rewrite terminal actions as keystroke arrays and SWE actions as JSON tool calls (pipelines.actions).
    canonical_actions: bool = True
    # Substrings that mark a GUI observation as an environment failure even when the collector did
    # not set status=env_failure (public traces rarely do). Matched case-insensitively, and only on a
    # screen in an error state: at most `gui_failure_max_words` words, or the marker is (most of) the
    # page title / a heading / a window or dialog name (schemas.gui_failure.error_state_marker).
    gui_failure_max_words: int = 150
    gui_failure_markers: list[str] = field(default_factory=lambda: list(POOL_FAILURE_MARKERS))
    # Turns carrying a harness fact (turn.metadata["harness"]): fact -> keep | mask | drop_turn | drop.
    # Facts not named here take DEFAULT_HARNESS_FACTS.
    harness_facts: dict[str, str] = field(default_factory=dict)

    def harness_action(self, fact: str) -> str:
        """What the pools do with a turn carrying `fact`."""
        return self.harness_facts.get(fact, DEFAULT_HARNESS_FACTS.get(fact, "mask"))


@dataclass(slots=True)
class DedupConfig:
    """Exact and near-duplicate removal over normalised action + observation text."""

    num_perm: int = 128
    # Exact Jaccard of the word-shingle sets at and above which two records are near duplicates; LSH
    # candidates come from bands/rows chosen from it and num_perm (minhash.candidate_bands).
    threshold: float = 0.8
    shingle_words: int = 5
    seed: int = 1
    # Fold digit runs to 0 before comparing (timestamps, PIDs, ports in actions). Observations keep
    # their digits by default: "sum = 4" and "sum = 5" are different results, not duplicates.
    fold_digits_actions: bool = True
    fold_digits_observations: bool = False
    # Which member of a cluster survives: the highest source priority, then more turns, then the
    # smallest seeded hash of the id. Ties cannot remain (ids are unique).
    source_priority: list[str] = field(default_factory=lambda: ["inhouse", "infra", "public", "knowledge"])


@dataclass(slots=True)
class DecontaminationConfig:
    """Removal of trajectories whose turns near-duplicate an evaluation sample."""

    threshold: float = 0.7  # Jaccard between one training turn and one evaluation turn
    min_turn_words: int = 8  # shorter turns ("ls", "ok") match by chance and are not evidence
    shingle_words: int = 3
    # Containment: the share of an evaluation turn's (or task's) word n-grams found inside one
    # training turn (task, document). Catches evaluation text pasted into longer training text.
    ngram_words: int = 13
    containment: float = 0.5
    # Source-level decontamination (pipelines.benchmarks_exclusion): trajectories whose provenance
    # or task text names one of these benchmarks are dropped. Default: the evaluator's nine source
    # benchmarks; [] keeps them. Any spelling is accepted and stored canonical.
    exclude_benchmarks: list[str] = field(default_factory=lambda: list(DEFAULT_EXCLUDED))


@dataclass(slots=True)
class PoolRule:
    """Where a source kind goes: one pool, or several split by seeded hash of the source group."""

    pools: dict[str, float]

    def validate(self, where: str) -> None:
        for name, weight in self.pools.items():
            if name not in ALL_POOLS:
                raise ConfigError(f"{where}: unknown pool {name!r}; use one of {', '.join(ALL_POOLS)}")
            if weight < 0:
                raise ConfigError(f"{where}.{name}: weight {weight} is negative")
        if sum(self.pools.values()) <= 0:
            raise ConfigError(f"{where}: weights sum to zero; give at least one positive weight")


@dataclass(slots=True)
class AssignmentConfig:
    """Source-group-to-pool rules. `by_source_kind` follows the paper; `by_ratio` ignores kinds."""

    mode: str = "by_source_kind"
    seed: int = 17
    # Records without an explicit Source.group: one group per task (default), per source, or per record.
    group_by: str = "task"
    by_kind: dict[str, PoolRule] = field(
        default_factory=lambda: {
            "infra": PoolRule({"cpt": 1.0}),
            "public": PoolRule({"cpt": 1.0}),
            "inhouse": PoolRule({"sft": 0.5, "rl": 0.5}),
            "knowledge": PoolRule({"cpt": 1.0}),
        }
    )
    ratios: PoolRule = field(default_factory=lambda: PoolRule({"cpt": 0.6, "sft": 0.2, "rl": 0.2}))

    def rule_for(self, kind: str) -> PoolRule:
        if self.mode == "by_ratio":
            return self.ratios
        rule = self.by_kind.get(kind)
        if rule is None:
            raise ConfigError(f"assignment.by_kind has no rule for source kind {kind!r}; add one")
        return rule


@dataclass(slots=True)
class LossMaskConfig:
    """Table 3 of the paper with the three decisions it leaves open made explicit.

    precedence: the order categories are tried; the first whose signature matches wins. The most
    specific, lowest-share signatures come first: echo (nested inside boilerplate), boilerplate,
    transform; then expansion (mostly nested inside retrieval), action, retrieval. With the default
    shares the assigned share is the smallest share among all matching signatures.
    short_action_chars: an observation is "short" when it has at most this many characters; the
    action category then applies regardless of R (a brief acknowledgement of a long action).
    keep: which tokens of a partially kept turn stay in the loss: "tail" (default: echoed or
    repeated material comes first in terminal echoes and re-rendered pages, what is new comes last)
    or "head".
    runtime_span_weight: the loss weight of the characters replay span labels mark `runtime` (a PID,
    a time, an address, a temp path, a random id) inside a kept observation, in 0..1: their value is
    the environment's choice, only their format is learnable. Applies only where labels exist.
    """

    shares: dict[str, float] = field(
        default_factory=lambda: {
            "retrieval": 1.0,
            "expansion": 1.0,
            "action": 1.0,
            "transform": 0.5,
            "boilerplate": 0.1,
            "echo": 0.05,
            "other": 1.0,
        }
    )
    precedence: list[str] = field(
        default_factory=lambda: ["echo", "boilerplate", "transform", "expansion", "action", "retrieval"]
    )
    short_observation_chars: int = 80
    keep: str = "tail"
    system_prompt_share: float = 0.0  # the rendered template repeats across samples: not learned
    runtime_span_weight: float = 0.25

    def validate(self) -> None:
        known = {"retrieval", "expansion", "action", "transform", "boilerplate", "echo"}
        unknown = set(self.precedence) - known
        if unknown:
            raise ConfigError(f"loss_mask.precedence: unknown categories {sorted(unknown)}")
        if set(self.precedence) != known:
            missing = sorted(known - set(self.precedence))
            raise ConfigError(f"loss_mask.precedence: list every category once; missing {missing}")
        if self.keep not in ("head", "tail"):
            raise ConfigError(f"loss_mask.keep: {self.keep!r} is not 'head' or 'tail'")
        for name, share in self.shares.items():
            if not 0.0 <= share <= 1.0:
                raise ConfigError(f"loss_mask.shares.{name}: {share} is outside 0..1")
        weight = self.runtime_span_weight
        if isinstance(weight, bool) or not isinstance(weight, int | float) or not 0.0 <= weight <= 1.0:
            raise ConfigError(f"loss_mask.runtime_span_weight: {weight!r} is not a number in 0..1")


@dataclass(slots=True)
class SftConfig:
    max_tokens: int = 256_000
    template_versions: list[int] = field(default_factory=lambda: list(range(2, 12)))
    seed: int = 23
    target_format: str = "tagged"  # "tagged": <predicted_observation> block; "raw": the observation only


@dataclass(slots=True)
class RlConfig:
    max_prompt_tokens: int = 128_000
    template_version: int = 0
    seed: int = 29
    rubric_weight: float = 0.9
    rule_weight: float = 0.1


@dataclass(slots=True)
class CptConfig:
    template_version: int = 1
    knowledge_template: str = "plain"  # world-knowledge documents are single-turn text, no template


@dataclass(slots=True)
class EvalExportConfig:
    """AgentWorldBench export of the eval pool: text domains keep first, last and 3 middle turns."""

    seed: int = 31


@dataclass(slots=True)
class PoolsConfig:
    """Everything `worldline pools build` needs besides its inputs."""

    filters: FilterConfig = field(default_factory=FilterConfig)
    dedup: DedupConfig = field(default_factory=DedupConfig)
    decontamination: DecontaminationConfig = field(default_factory=DecontaminationConfig)
    assignment: AssignmentConfig = field(default_factory=AssignmentConfig)
    loss_mask: LossMaskConfig = field(default_factory=LossMaskConfig)
    cpt: CptConfig = field(default_factory=CptConfig)
    sft: SftConfig = field(default_factory=SftConfig)
    rl: RlConfig = field(default_factory=RlConfig)
    eval_export: EvalExportConfig = field(default_factory=EvalExportConfig)
    templates_dir: str | None = None  # None: the shipped seed templates
    tokenizer: str | None = None  # None: WORLDLINE_TOKENIZER or Qwen3.6
    # Replay span labels (schemas/span_labels.py): a span-labels file or a folder holding
    # span_labels.parquet; None: `span_labels.parquet` beside the input trajectories, when present.
    span_labels: str | None = None
    # Grounding verdicts (schemas/grounding.py, `worldline replay --ground`): a grounding.parquet or
    # the folder holding it; trajectories it lists as `disagrees` leave every pool (`ungrounded`).
    grounding: str | None = None
    trajectories_per_shard: int = 2_000
    # Upper bound on one part file, in bytes of Arrow data (parts roll over to the next file when a
    # write would exceed it); the number of parts per pool is estimated from the input's bytes.
    part_max_bytes: int = 256 * 1024 * 1024

    @classmethod
    def load(cls, path: str | Path | None) -> PoolsConfig:
        if path is None:
            cfg = cls()
        else:
            try:
                from pipelines import fs

                text = fs.read_bytes(str(path)).decode("utf-8")  # local or any Beam filesystem
                raw = yaml.safe_load(text) or {}
            except yaml.YAMLError as exc:
                mark = getattr(exc, "problem_mark", None)
                where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
                problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
                raise ConfigError(f"{where}: not valid YAML ({problem}); fix the file's syntax") from exc
            if not isinstance(raw, dict):
                raise ConfigError(f"{path}: top level must be a mapping of sections")
            cfg = cls.from_dict(raw, where=str(path))
        cfg.validate()
        return cfg

    @classmethod
    def from_dict(cls, raw: dict[str, Any], where: str = "config") -> PoolsConfig:
        cfg = cls()
        sections = {f.name: f for f in fields(cls)}
        for key, value in raw.items():
            if key not in sections:
                raise ConfigError(f"{where}: unknown key {key!r}; known: {', '.join(sections)}")
            current = getattr(cfg, key)
            if key == "assignment":
                setattr(cfg, key, _assignment(value, f"{where}.assignment"))
            elif hasattr(current, "__dataclass_fields__"):
                setattr(cfg, key, _section(type(current), value, f"{where}.{key}"))
            else:
                setattr(cfg, key, value)
        return cfg

    def validate(self) -> None:
        self.loss_mask.validate()
        if self.span_labels is not None and (not isinstance(self.span_labels, str) or not self.span_labels):
            raise ConfigError(f"span_labels: {self.span_labels!r} is not a path (leave it unset for none)")
        if self.grounding is not None and (not isinstance(self.grounding, str) or not self.grounding):
            raise ConfigError(f"grounding: {self.grounding!r} is not a path (leave it unset for none)")
        harness = self.filters.harness_facts
        if not isinstance(harness, dict):
            raise ConfigError("filters.harness_facts: give a mapping fact -> keep | mask | drop_turn | drop")
        for fact, action in harness.items():
            if fact not in FACTS:
                raise ConfigError(
                    f"filters.harness_facts.{fact}: unknown harness fact; known: {', '.join(FACTS)}"
                )
            if action not in HARNESS_ACTIONS:
                raise ConfigError(
                    f"filters.harness_facts.{fact}: {action!r} is not one of {', '.join(HARNESS_ACTIONS)}"
                )
        if self.assignment.mode not in ("by_source_kind", "by_ratio"):
            raise ConfigError(f"assignment.mode: {self.assignment.mode!r} is not by_source_kind or by_ratio")
        if self.assignment.group_by not in ("source", "task", "record"):
            raise ConfigError(
                f"assignment.group_by: {self.assignment.group_by!r} is not source, task or record"
            )
        for kind, rule in self.assignment.by_kind.items():
            rule.validate(f"assignment.by_kind.{kind}")
        self.assignment.ratios.validate("assignment.ratios")
        knowledge = self.assignment.by_kind.get("knowledge")
        if knowledge and set(knowledge.pools) - {"cpt"}:
            raise ConfigError("assignment.by_kind.knowledge: world-knowledge documents can only go to cpt")
        if not self.sft.template_versions:
            raise ConfigError("sft.template_versions: give at least one template version")
        if abs(self.rl.rubric_weight + self.rl.rule_weight - 1.0) > 1e-9:
            raise ConfigError("rl.rubric_weight + rl.rule_weight must sum to 1 (the paper mixes 9:1)")
        dc = self.decontamination
        if not 0 < self.dedup.threshold <= 1 or not 0 < dc.threshold <= 1 or not 0 < dc.containment <= 1:
            raise ConfigError(
                "dedup.threshold, decontamination.threshold and decontamination.containment must lie in (0, 1]"
            )
        if dc.ngram_words < 1:
            raise ConfigError("decontamination.ngram_words: give a positive number of words (13 by default)")
        if not isinstance(dc.exclude_benchmarks, list):
            raise ConfigError(
                "decontamination.exclude_benchmarks: give a list of benchmark names ([] for none)"
            )
        try:
            dc.exclude_benchmarks = canonical_list(str(n) for n in dc.exclude_benchmarks)
        except UnknownBenchmark as exc:
            raise ConfigError(f"decontamination.exclude_benchmarks: {exc}") from exc

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def fingerprint(self) -> str:
        """A short hash of the effective configuration, recorded in every card and manifest."""
        text = json.dumps(self.to_json(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def _section(cls: type, value: Any, where: str) -> Any:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a mapping, got {type(value).__name__}")
    known = {f.name for f in fields(cls)}
    unknown = set(value) - known
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)}; known: {sorted(known)}")
    base = cls()
    for k, v in value.items():
        setattr(base, k, v)
    return base


def _rule(value: Any, where: str) -> PoolRule:
    if isinstance(value, str):
        return PoolRule({value: 1.0})
    if isinstance(value, list):
        return PoolRule({str(v): 1.0 for v in value})
    if isinstance(value, dict) and set(value) == {"pools"} and isinstance(value["pools"], dict):
        value = value["pools"]  # the form `to_json()` writes
    if isinstance(value, dict):
        return PoolRule({str(k): float(v) for k, v in value.items()})
    raise ConfigError(f"{where}: give a pool name, a list of pools or a mapping pool -> weight")


def _assignment(value: Any, where: str) -> AssignmentConfig:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a mapping")
    cfg = AssignmentConfig()
    for key, v in value.items():
        if key == "mode":
            cfg.mode = str(v)
        elif key == "seed":
            cfg.seed = int(v)
        elif key == "group_by":
            cfg.group_by = str(v)
        elif key == "by_kind":
            cfg.by_kind = {str(k): _rule(r, f"{where}.by_kind.{k}") for k, r in v.items()}
        elif key == "ratios":
            cfg.ratios = _rule(v, f"{where}.ratios")
        else:
            raise ConfigError(f"{where}: unknown key {key!r}; known: mode, seed, group_by, by_kind, ratios")
    return cfg
