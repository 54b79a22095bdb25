"""Trajectories that exercise every pool filter and rule, with the counts each rule must remove."""

from __future__ import annotations

import json
from pathlib import Path

from schemas.shards import write_trajectories
from schemas.trajectory import (
    Action,
    ActionKind,
    ActionSpace,
    Domain,
    Observation,
    ObservationFormat,
    Source,
    SourceKind,
    ToolSpec,
    Trajectory,
    TrajectoryStatus,
    Turn,
)

WORDS = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
    "quebec romeo sierra tango uniform victor whiskey xray yankee zulu"
).split()


def prose(seed: int, n: int = 40) -> str:
    """Deterministic distinct text: different seeds share few 5-word shingles."""
    out = []
    x = seed * 7919 + 17
    for _ in range(n):
        x = (x * 1103515245 + 12345) % (2**31)
        out.append(f"{WORDS[x % len(WORDS)]}{x % 97}")
    return " ".join(out)


def term_turn(cmd: str, output: str) -> Turn:
    return Turn(Action(ActionKind.COMMAND, cmd), Observation(output, ObservationFormat.TERMINAL))


def terminal(tid: str, group: str, kind: SourceKind, seed: int, turns: int = 4, **kw: object) -> Trajectory:
    return Trajectory(
        id=tid,
        domain=Domain.TERMINAL,
        source=Source(kind=kind, name=group, licence="MIT"),
        task=f"task {seed}: inspect the repository",
        action_space=ActionSpace(description="bash commands"),
        turns=[term_turn(f"cat notes{seed}_{i}.txt", prose(seed * 100 + i)) for i in range(turns)],
        initial_state="files: notes.txt",
        simulation_instruction=kw.get("sim"),  # type: ignore[arg-type]
    )


def mcp(tid: str, group: str, kind: SourceKind, seed: int, tool: str = "read_file") -> Trajectory:
    tools = [ToolSpec("read_file", "read a file", {"type": "object"}), ToolSpec("list_dir", "list", None)]
    turns = [
        Turn(
            Action(
                ActionKind.TOOL_CALL,
                json.dumps({"name": name, "arguments": {"path": f"/f{seed}{i}"}}),
                tool_name=name,
            ),
            Observation(prose(seed * 100 + i), ObservationFormat.JSON),
        )
        for i, name in enumerate(["list_dir", tool, "read_file"])
    ]
    return Trajectory(
        id=tid,
        domain=Domain.MCP,
        source=Source(kind=kind, name=group),
        task=f"mcp task {seed}",
        action_space=ActionSpace(description="MCP tools", tools=tools),
        turns=turns,
        demonstrations="call list_dir first",
    )


def web(
    tid: str, group: str, kind: SourceKind, seed: int, *, captcha: bool = False, no_change: bool = False
) -> Trajectory:
    obs = [prose(seed * 100 + i) for i in range(4)]
    if captcha:
        obs[2] = "RootWebArea 'Just a moment' heading 'Verify you are human' CAPTCHA"
    turns = [
        Turn(
            Action(ActionKind.GUI, f"click('{seed}{i}')"),
            Observation(o, ObservationFormat.AXTREE),
            state_changed=True,
        )
        for i, o in enumerate(obs)
    ]
    if no_change:
        turns.insert(
            2,
            Turn(
                Action(ActionKind.GUI, "scroll(0, 10)"),
                Observation(obs[1], ObservationFormat.AXTREE),
                state_changed=False,
            ),
        )
    return Trajectory(
        id=tid, domain=Domain.WEB, source=Source(kind=kind, name=group), task=f"web task {seed}", turns=turns
    )


def build_fixture(root: Path) -> dict[str, object]:
    """Write the fixture shards and eval set under root; return paths and expected counts."""
    T = []
    # CPT candidates (infra / public)
    for i in range(6):
        T.append(terminal(f"infra-{i}", "infra-run-a" if i < 3 else "infra-run-b", SourceKind.INFRA, i))
    T.append(terminal("pub-0", "public-swe", SourceKind.PUBLIC, 50))
    # exact duplicate of infra-0 (same text, other id) and near duplicate of infra-1 (one word changed)
    dup = terminal("pub-exact", "public-swe", SourceKind.PUBLIC, 0)
    T.append(dup)
    near = terminal("pub-near", "public-swe", SourceKind.PUBLIC, 1)
    near.turns[0].observation.text = near.turns[0].observation.text.replace(
        near.turns[0].observation.text.split()[5], "changed", 1
    )
    T.append(near)
    # in-house -> SFT / RL by group hash
    for i in range(8):
        T.append(terminal(f"inh-{i}", f"inhouse-{i % 4}", SourceKind.INHOUSE, 100 + i, turns=3 + i % 3))
    ok = mcp("inh-mcp-ok", "inhouse-mcp", SourceKind.INHOUSE, 200)
    ok.turns.insert(1, Turn(Action(ActionKind.EMPTY, "thinking about the next step"), Observation("")))
    ok.turns.insert(
        2,
        Turn(
            Action(ActionKind.TOOL_CALL, '{"name": "read_file", "arguments": {"path": '),
            Observation("malformed JSON in tool call", ObservationFormat.TEXT, is_error=True),
        ),
    )
    T.append(ok)
    T.append(web("inh-web-nochange", "inhouse-web", SourceKind.INHOUSE, 300, no_change=True))
    # filter targets
    T.append(terminal("short-1", "infra-run-a", SourceKind.INFRA, 400, turns=1))  # too few turns
    T.append(mcp("mcp-undeclared", "inhouse-mcp", SourceKind.INHOUSE, 401, tool="delete_everything"))
    T.append(web("web-captcha", "inhouse-web", SourceKind.INHOUSE, 402, captcha=True))
    failed = web("web-envfail", "inhouse-web", SourceKind.INHOUSE, 403)
    failed.status, failed.status_reason = TrajectoryStatus.ENV_FAILURE, "state file missing"
    T.append(failed)
    # contaminated: one turn equals an eval sample's turn
    T.append(terminal("contaminated", "infra-run-b", SourceKind.INFRA, 500))
    write_trajectories(root / "shards", T, row_group_rows=5, max_file_rows=12)
    # an empty-id record is quarantined
    bad = terminal("", "infra-run-a", SourceKind.INFRA, 600)
    write_trajectories(root / "bad", [bad])
    evals = root / "eval" / "terminal_test.jsonl"
    evals.parent.mkdir(parents=True, exist_ok=True)
    c = T[-1]
    sample = {
        "task": "terminal",
        "id": 1,
        "turn_idx": 1,
        "total_turns": 1,
        "system_str": "sim",
        "prompt": [f"### Turn 1\n**Action:**\n```text\n{c.turns[2].action.text}\n```"],
        "response": [f"**Environment Observation:**\n{c.turns[2].observation.text}"],
        "current_prompt": f"### Turn 1\n**Action:**\n```text\n{c.turns[2].action.text}\n```",
    }
    evals.write_text(json.dumps(sample) + "\n")
    know = root / "knowledge.jsonl"
    know.write_text(
        "\n".join(json.dumps({"text": prose(900 + i, 60), "source": "wiki"}) for i in range(3)) + "\n"
    )
    return {
        "inputs": [root / "shards", root / "bad"],
        "eval": evals,
        "knowledge": know,
        "n_records": len(T) + 1,
    }


# Every kind to CPT except in-house, which is split over SFT, RL and eval: each pool gets samples.
SPLIT_CONFIG = {
    "assignment": {
        "by_kind": {
            "infra": "cpt",
            "public": "cpt",
            "knowledge": "cpt",
            "inhouse": {"sft": 1, "rl": 1, "eval": 1},
        }
    }
}


def build_fixture_pools(
    root: Path, config: dict[str, object] | None = None
) -> tuple[Path, dict[str, object]]:
    """Build and finalize pools from `build_fixture(root)` into root/out; return OUT and its manifest."""
    from pipelines.build import resolve_inputs, run_build
    from pipelines.config import PoolsConfig
    from pipelines.finalize import finalize

    fx = build_fixture(root)
    cfg = PoolsConfig.from_dict(config or SPLIT_CONFIG)
    ins = [str(p) for p in fx["inputs"]]  # type: ignore[attr-defined]
    know, ev = [str(fx["knowledge"])], [str(fx["eval"])]
    run_build(resolve_inputs(ins, know, ev, cfg), str(root / "out"), cfg, [])
    return root / "out", finalize(root / "out", cfg, ins, know, ev)


def build_pools_from(root: Path, trajectories: list[Trajectory], yaml_text: str) -> Path:
    """Write TRAJECTORIES to root/in, build and finalize pools with the pools.yaml text YAML_TEXT into
    root/out (in-process runner); return OUT."""
    from pipelines.build import resolve_inputs, run_build
    from pipelines.config import PoolsConfig
    from pipelines.finalize import finalize

    write_trajectories(root / "in", trajectories)
    path = root / "pools.yaml"
    path.write_text(yaml_text)
    cfg = PoolsConfig.load(path)
    out = root / "out"
    run_build(resolve_inputs([str(root / "in")], [], [], cfg), str(out), cfg, [])
    finalize(str(out), cfg, [str(root / "in")], [], [])
    return out


def pooled_ids(out: Path, pool: str) -> set[str]:
    """The trajectory ids of one pool's rows."""
    import pyarrow.parquet as pq

    return {
        r["trajectory_id"]
        for f in (out / pool).glob("part-*.parquet")
        for r in pq.read_table(f, columns=["trajectory_id"]).to_pylist()
    }
