"""Property tests for disjoint pool assignment, seeded choices, config and the template set."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipelines.build import Fingerprint, choose_pool, decide_group_pool
from pipelines.config import ConfigError, PoolsConfig
from pipelines.minhash import union_find_clusters
from pipelines.render import rl_turn_index, sft_template_version
from schemas.templates import PLACEHOLDERS, load_template_set

kinds = st.sampled_from(["infra", "public", "inhouse"])


def fp(i: int, group: str, kind: str) -> Fingerprint:
    return Fingerprint(f"t{i}", "c", kind, group, "terminal", 3, "e", (1, 2), "")


@given(st.lists(st.tuples(st.integers(0, 30), kinds), min_size=1, max_size=60), st.integers(0, 5))
def test_group_pool_follows_the_majority_kind_in_any_member_order(
    records: list[tuple[int, str]], seed: int
) -> None:
    """The decision for one group (what the job computes); the written pools are checked in
    test_pools_build.test_every_source_group_lands_in_exactly_one_pool."""
    cfg = PoolsConfig.from_dict(
        {
            "assignment": {
                "seed": seed,
                "by_kind": {
                    "infra": "cpt",
                    "public": "cpt",
                    "inhouse": {"sft": 1, "rl": 1, "eval": 1},
                    "knowledge": "cpt",
                },
            }
        }
    )
    fps = [fp(i, f"g{g}", k) for i, (g, k) in enumerate(records)]
    groups: dict[str, list[Fingerprint]] = {}
    for f in fps:
        groups.setdefault(f.group, []).append(f)
    decided = dict(decide_group_pool((g, m), cfg) for g, m in groups.items())
    # deterministic: any order of the members gives the same pool
    for g, members in groups.items():
        assert decide_group_pool((g, list(reversed(members))), cfg)[1] == decided[g]
        for kind in ("infra", "public"):
            if sum(m.kind == kind for m in members) > len(members) / 2:
                assert decided[g] == "cpt"
        if sum(m.kind == "inhouse" for m in members) > len(members) / 2:
            assert decided[g] in ("sft", "rl", "eval")


@given(st.text(min_size=1, max_size=20), st.integers(0, 100))
def test_choose_pool_respects_zero_weights(group: str, seed: int) -> None:
    assert choose_pool({"sft": 1.0, "rl": 0.0}, seed, group) == "sft"
    assert choose_pool({"sft": 1.0, "rl": 1.0}, seed, group) in ("sft", "rl")


def test_ratio_split_is_close_to_weights() -> None:
    picks = [choose_pool({"cpt": 0.6, "sft": 0.2, "rl": 0.2}, 1, f"group{i}") for i in range(5000)]
    assert 0.55 < picks.count("cpt") / 5000 < 0.65


@given(st.lists(st.tuples(st.integers(0, 20), st.integers(0, 20)), max_size=40))
def test_union_find_representative_is_the_best_ranked_member(edges: list[tuple[int, int]]) -> None:
    named = [(f"n{a}", f"n{b}") for a, b in edges]
    rank = {f"n{i}": (i % 7, i) for i in range(21)}
    reps = union_find_clusters(named, rank)
    for a, b in named:
        assert reps[a] == reps[b]
    for node, rep in reps.items():
        members = [n for n, r in reps.items() if r == rep]
        assert rep == min(members, key=lambda n: rank[n])
        assert node in members


@given(st.text(min_size=1, max_size=30), st.integers(1, 50))
def test_seeded_choices_depend_only_on_ids(tid: str, turns: int) -> None:
    cfg = PoolsConfig()
    assert 1 <= rl_turn_index(cfg, tid, turns) <= turns
    assert rl_turn_index(cfg, tid, turns) == rl_turn_index(cfg, tid, turns)
    assert sft_template_version(cfg, tid, 1) in range(2, 12)


def test_sft_templates_are_drawn_from_all_ten() -> None:
    cfg = PoolsConfig()
    seen = {sft_template_version(cfg, f"t{i}", t) for i in range(50) for t in range(1, 4)}
    assert seen == set(range(2, 12))


def test_config_errors_name_the_key(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "pools.yaml"
    bad.write_text("assignment:\n  by_kind:\n    knowledge: sft\n")
    with pytest.raises(ConfigError, match="knowledge"):
        PoolsConfig.load(bad)
    bad.write_text("loss_mask:\n  keep: middle\n")
    with pytest.raises(ConfigError, match="loss_mask.keep"):
        PoolsConfig.load(bad)
    bad.write_text("dedupe: {}\n")
    with pytest.raises(ConfigError, match="unknown key"):
        PoolsConfig.load(bad)


def test_shipped_config_loads_and_round_trips() -> None:
    cfg = PoolsConfig.load("pipelines/configs/pools.yaml")
    again = PoolsConfig.from_dict(cfg.to_json())
    again.validate()
    assert again.fingerprint() == cfg.fingerprint()


def test_seed_templates_are_twelve_distinct_styles() -> None:
    s = load_template_set()
    assert sorted(s.templates) == list(range(12))
    assert len({t.text for t in s.templates.values()}) == 12
    lengths = [len(t.text.splitlines()) for t in s.templates.values()]
    assert min(lengths) <= 35 and max(lengths) >= 90
    values: dict[str, str | None] = {p: f"<{p}>" for p in PLACEHOLDERS}
    for t in s.templates.values():
        text = t.render(values)
        for p in ("tool_definitions", "demonstrations", "initial_state", "simulation_instruction"):
            assert f"<{p}>" in text, (t.version, p)
        empty = t.render({**values, "initial_state": None, "simulation_instruction": None})
        assert "<initial_state>" not in empty and "{{" not in empty


@pytest.mark.parametrize("num_perm", [16, 64, 128, 256])
def test_datasketch_bands_choose_what_datasketch_chooses(num_perm: int) -> None:
    from datasketch.lsh import _optimal_param

    from pipelines.minhash import datasketch_bands

    for threshold in [i / 20 for i in range(1, 20)]:
        expected = _optimal_param(threshold, num_perm, 0.5, 0.5)
        assert datasketch_bands(threshold, num_perm) == expected, threshold
