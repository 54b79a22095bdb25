"""AgentWorldBench import/export: the format exactly, turn variants, bad lines, paper turn selection."""

from __future__ import annotations

import json
import random
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from curation_agents.agentworldbench_import import import_agentworldbench
from schemas import (
    Action,
    ActionKind,
    ActionSpace,
    Domain,
    Observation,
    Source,
    SourceKind,
    ToolSpec,
    Trajectory,
    Turn,
    iter_trajectories,
)
from schemas.agentworldbench import (
    META_KEY,
    AgentWorldBenchSample,
    SampleError,
    export_agentworldbench,
    parse_system_str,
    read_samples,
    render_system_str,
    sample_to_trajectory,
    select_turns_paper,
    trajectory_to_samples,
    turns_for_export,
    write_samples,
)
from schemas.worldmodel import (
    SystemPromptParts,
    parse_action_prompt,
    parse_observation,
    render_action_prompt,
    render_observation,
)
from worldline.samples import sample_files

# --------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------


def _sample_key(obj: dict[str, Any]) -> tuple[str, str, int]:
    return (obj["task"], json.dumps(obj["id"]), obj["turn_idx"])


def _read_dir(directory: Path) -> list[dict[str, Any]]:
    out = []
    for f in sorted(directory.glob("*_test.jsonl")):
        out.extend(json.loads(line) for line in f.read_text("utf-8").split("\n") if line)
    return out


def _without_uri(t: Trajectory) -> dict[str, Any]:
    obj = t.to_json()
    obj["source"]["uri"] = None
    return obj


def _export_from_dataset(dataset: Path, out: Path, turns: str = "source") -> None:
    export_agentworldbench(iter_trajectories(dataset), out, turns=turns)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------------
# the bundled sample dataset and the reference evaluator's reading
# --------------------------------------------------------------------------------------------------


def test_bundled_samples_cover_several_domains_and_read_cleanly() -> None:
    files = sample_files()
    assert len(files) >= 5
    domains = set()
    for f in files:
        samples = list(read_samples(f))
        assert samples, f
        for s in samples:
            domains.add(s.domain_name)
            assert f.name == f"{s.domain_name}_test.jsonl"
            assert s.current_prompt == s.prompt[s.turn_idx - 1]
            assert s.current_prompt.startswith(f"### Turn {s.turn_idx}\n")
            assert "**Action:**\n```" in s.current_prompt
            assert s.ground_truth.startswith("**Environment Observation:**\n")
            assert "<predicted_observation></predicted_observation>" in s.system_str
    assert len(domains) >= 5


def test_bundled_samples_round_trip_byte_for_byte(tmp_path: Path) -> None:
    # Secrets are redacted on import whatever the options; the samples hold none, and their fictional
    # addresses stay when no personal-data class is asked for.
    report = import_agentworldbench(sample_files(), tmp_path / "ds", pii=frozenset())
    assert report.reconciles() and report.samples_quarantined == 0
    assert report.trajectories_written == len(sample_files())  # one trajectory per file, its turns merged
    _export_from_dataset(tmp_path / "ds", tmp_path / "out")
    for f in sample_files():
        assert (tmp_path / "out" / f.name).read_bytes() == f.read_bytes(), f.name


def test_import_recovers_the_five_parts_and_turn_fields(tmp_path: Path) -> None:
    import_agentworldbench(sample_files(), tmp_path / "ds")
    by_domain = {t.domain: t for t in iter_trajectories(tmp_path / "ds")}
    term = by_domain[Domain.TERMINAL]
    assert term.task.startswith("Sum the 'amount' column")
    assert term.initial_state is not None and "gawk" in term.initial_state
    assert term.source.kind is SourceKind.PUBLIC and term.source.uri.endswith("terminal_test.jsonl")
    assert term.turns[0].action.kind is ActionKind.KEYSTROKES
    assert json.loads(term.turns[0].action.text) == [{"keystrokes": "ls -l 2024\n", "duration": 0.5}]
    assert term.turns[0].observation.text.endswith("/srv/invoices# ")
    mcp = by_domain[Domain.MCP]
    assert [t.name for t in mcp.action_space.tools] == ["list_tables", "describe_table", "read_query"]
    assert mcp.action_space.tools[2].parameters == {
        "type": "object",
        "properties": {"query": {"type": "string"}},
        "required": ["query"],
    }
    assert mcp.simulation_instruction is not None
    assert mcp.turns[1].action.tool_name == "read_query"
    assert mcp.turns[2].observation.is_error is True
    web = by_domain[Domain.WEB]
    assert web.turns[0].metadata["current_state"].startswith("URL: http://shop.example.com/")
    assert web.turns[0].action.text == "click('a58')"


def test_exported_samples_follow_the_evaluator_contract() -> None:
    # eval.py: history = prompt[:turn_idx-1] / response[:turn_idx-1]; truth = response[turn_idx-1].
    traj = sample_to_trajectory(next(read_samples(sample_files()[0])))
    for s in trajectory_to_samples(traj):
        t = s.turn_idx
        assert s.current_prompt == s.prompt[t - 1]
        assert parse_observation(s.response[t - 1]) == traj.turns[t - 1].observation.text
        assert s.total_turns == len(traj.turns) == len(s.prompt)
        assert list(s.to_json())[:8] == [
            "task",
            "id",
            "prompt",
            "response",
            "current_prompt",
            "system_str",
            "turn_idx",
            "total_turns",
        ]


# --------------------------------------------------------------------------------------------------
# turn text layout
# --------------------------------------------------------------------------------------------------


def test_action_prompt_layout_and_parse() -> None:
    text = render_action_prompt(3, '{"name": "Read", "arguments": {"path": "a.py"}}', Domain.SWE)
    assert text == '### Turn 3\n**Action:**\n```json\n{"name": "Read", "arguments": {"path": "a.py"}}\n```'
    with_state = render_action_prompt(1, "click('a1')", Domain.WEB, current_state="[a1] button 'OK'")
    assert (
        with_state
        == "### Turn 1\n**Current State:**\n[a1] button 'OK'\n\n**Action:**\n```text\nclick('a1')\n```"
    )
    parsed = parse_action_prompt(with_state)
    assert parsed is not None and (parsed.turn, parsed.action, parsed.current_state) == (
        1,
        "click('a1')",
        "[a1] button 'OK'",
    )
    # An action containing a fence gets a longer fence and still parses back.
    tricky = "print('```')\n```"
    back = parse_action_prompt(render_action_prompt(2, tricky, Domain.OS))
    assert back is not None and back.action == tricky and back.fence_language == "python"
    assert parse_action_prompt("Action: execute_bash\nCommand: ls") is None
    assert render_observation("x\n") == "**Environment Observation:**\nx\n"
    assert parse_observation("no marker") is None


def test_non_canonical_turn_text_survives_verbatim() -> None:
    sample = AgentWorldBenchSample(
        task="search",
        id=17,
        turn_idx=1,
        total_turns=2,
        system_str="# Role and Objective\n\nYou are a **Search World Model** ...",
        prompt=[
            '### Turn 1\n**Action:**\n```json\n{"name": "web_search"}\n```\n\nPredict the result.',
            "Turn two",
        ],
        response=[
            "**Environment Observation:**  1. URL: https://a.example",
            "**Environment Observation:**\nok",
        ],
        current_prompt="### Turn 1 (evaluated)",
        extra={"split": "test"},
    )
    traj = sample_to_trajectory(sample)
    assert traj.task == sample.system_str and traj.metadata[META_KEY]["system_str_verbatim"] is True
    assert traj.turns[1].action.text == "Turn two"
    assert traj.turns[1].observation.text == "ok"
    [again] = trajectory_to_samples(traj, turns_for_export(traj, "source"))
    assert again.to_json() == sample.to_json()


def test_system_prompt_parts_round_trip() -> None:
    parts = SystemPromptParts(
        task="Rename the file.",
        action_space=ActionSpace(
            description="Python with pyautogui.",
            tools=[ToolSpec("click", None, {"type": "object"}), ToolSpec("press", "Press a key.", None)],
        ),
        initial_state=None,
        demonstrations="",
        simulation_instruction="Inject a modal dialog on the second click.",
    )
    text = render_system_str(Domain.OS, parts)
    assert text.startswith("# Role and Objective\n\nYou are a **Desktop World Model**")
    assert "# Initial State" not in text and "# Demonstrations\n\n\n\n# Simulation Instruction" in text
    assert parse_system_str(Domain.OS, text) == parts
    assert parse_system_str(Domain.WEB, text) is None  # another domain's preamble: not our layout


# --------------------------------------------------------------------------------------------------
# property tests
# --------------------------------------------------------------------------------------------------

# Any text JSON and UTF-8 can carry.
free_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)
# Text that cannot contain the layout's own marker lines (a heading, a fence, a marker), so that a
# trajectory -> samples -> trajectory trip can recover every field from the canonical layout.
plain_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="#*`"), max_size=30)
action_texts = plain_text | st.builds(json.dumps, st.dictionaries(plain_text, plain_text, max_size=2))


@st.composite
def sample_groups(draw: st.DrawFn, index: int) -> list[AgentWorldBenchSample]:
    """The samples of one trajectory, in any layout the format allows."""
    domain = draw(st.sampled_from(Domain))
    task = draw(st.sampled_from([domain.value, f"lwm/{domain.value}"]))
    sample_id: int | str = draw(st.integers(-(2**53), 2**53) | st.text(min_size=1, max_size=8))
    sample_id = sample_id * 10 + index if isinstance(sample_id, int) else f"{sample_id}-{index}"
    n = draw(st.integers(1, 5))
    prompts, responses = [], []
    for i in range(1, n + 1):
        canonical = render_action_prompt(i, draw(action_texts), domain, draw(st.none() | plain_text))
        prompts.append(draw(st.sampled_from([canonical, canonical + draw(free_text)]) | free_text))
        responses.append(draw(st.builds(render_observation, free_text) | free_text))
    if draw(st.booleans()):
        system_str = draw(free_text)
    else:
        system_str = render_system_str(
            domain,
            SystemPromptParts(
                draw(plain_text),
                ActionSpace(draw(st.none() | plain_text.filter(bool))),
                draw(st.none() | plain_text),
                draw(st.none() | plain_text),
                draw(st.none() | plain_text),
            ),
        )
    prefix_layout = draw(st.booleans())
    extra = draw(st.sampled_from([{}, {"split": "test", "benchmark_task": "tau-bench"}]))
    chosen = draw(st.sets(st.integers(1, n), min_size=1))
    samples = []
    for t in sorted(chosen):
        length = t if prefix_layout else n
        samples.append(
            AgentWorldBenchSample(
                task=task,
                id=sample_id,
                turn_idx=t,
                total_turns=n,
                system_str=system_str,
                prompt=prompts[:length],
                response=responses[:length],
                current_prompt=draw(st.sampled_from([prompts[t - 1]]) | free_text),
                extra=dict(extra),
            )
        )
    return samples


@st.composite
def sample_files_content(draw: st.DrawFn) -> list[AgentWorldBenchSample]:
    groups = [draw(sample_groups(i)) for i in range(draw(st.integers(1, 3)))]
    samples = [s for g in groups for s in g]
    return draw(st.permutations(samples))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(samples=sample_files_content())
def test_any_samples_survive_import_export_import(samples: list[AgentWorldBenchSample]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_samples(root / "in" / "mixed.jsonl", samples)
        report = import_agentworldbench([root / "in" / "mixed.jsonl"], root / "ds")
        assert report.reconciles() and report.samples_quarantined == 0
        assert report.trajectories_written == len({(s.domain_name, json.dumps(s.id)) for s in samples})
        _export_from_dataset(root / "ds", root / "out")
        exported = _read_dir(root / "out")
        assert sorted(exported, key=_sample_key) == sorted((s.to_json() for s in samples), key=_sample_key)
        # ... and importing the export gives the same trajectories again.
        import_agentworldbench(sorted((root / "out").glob("*.jsonl")), root / "ds2")
        first = sorted((_without_uri(t) for t in iter_trajectories(root / "ds")), key=lambda o: o["id"])
        second = sorted((_without_uri(t) for t in iter_trajectories(root / "ds2")), key=lambda o: o["id"])
        assert first == second


tools = st.builds(
    ToolSpec,
    name=plain_text,
    description=st.none() | plain_text,
    parameters=st.none() | st.dictionaries(plain_text, st.integers() | plain_text, max_size=2),
)
clean_trajectories = st.builds(
    Trajectory,
    id=st.text(min_size=1, max_size=10),
    domain=st.sampled_from(Domain),
    source=st.just(Source(SourceKind.INHOUSE, "collector")),
    task=plain_text,
    action_space=st.builds(
        ActionSpace, description=st.none() | plain_text.filter(bool), tools=st.lists(tools, max_size=2)
    ),
    initial_state=st.none() | plain_text,
    demonstrations=st.none() | plain_text,
    simulation_instruction=st.none() | plain_text,
    turns=st.lists(
        st.builds(
            Turn,
            action=st.builds(Action, kind=st.just(ActionKind.MESSAGE), text=action_texts),
            observation=st.builds(Observation, text=free_text),
            metadata=st.sampled_from([{}]) | st.builds(lambda s: {"current_state": s}, plain_text),
        ),
        min_size=1,
        max_size=4,
    ),
)


@settings(max_examples=60, deadline=None)
@given(traj=clean_trajectories)
def test_trajectory_fields_the_format_has_survive_export(traj: Trajectory) -> None:
    samples = trajectory_to_samples(traj)
    assert [s.turn_idx for s in samples] == list(range(1, len(traj.turns) + 1))
    back = sample_to_trajectory(samples[-1])
    assert back.domain == traj.domain
    assert (back.task, back.initial_state, back.demonstrations, back.simulation_instruction) == (
        traj.task,
        traj.initial_state,
        traj.demonstrations,
        traj.simulation_instruction,
    )
    assert back.action_space.to_json() == traj.action_space.to_json()
    assert [t.action.text for t in back.turns] == [t.action.text for t in traj.turns]
    assert [t.observation.text for t in back.turns] == [t.observation.text for t in traj.turns]
    assert [t.metadata.get("current_state") for t in back.turns] == [
        t.metadata.get("current_state") for t in traj.turns
    ]
    assert all(META_KEY not in t.metadata for t in back.turns)  # the canonical layout needs no verbatim copy


# --------------------------------------------------------------------------------------------------
# turn variants
# --------------------------------------------------------------------------------------------------


def _variants(path: Path) -> list[AgentWorldBenchSample]:
    return list(read_samples(path))


def test_turn_variants_merge_and_contradictions_stay_apart(tmp_path: Path) -> None:
    terminal = next(f for f in sample_files() if f.name.startswith("terminal"))
    variants = _variants(terminal)
    random.Random(7).shuffle(variants)
    contradicting = AgentWorldBenchSample(
        task=variants[0].task,
        id=variants[0].id,
        turn_idx=1,
        total_turns=variants[0].total_turns,
        system_str=variants[0].system_str,
        prompt=[variants[0].prompt[0].replace("ls -l 2024", "ls -la 2024"), *variants[0].prompt[1:]],
        response=list(variants[0].response),
        current_prompt="",
    )
    contradicting.current_prompt = contradicting.prompt[0]
    write_samples(tmp_path / "terminal_test.jsonl", [*variants, contradicting, variants[2]])
    report = import_agentworldbench([tmp_path / "terminal_test.jsonl"], tmp_path / "ds")
    assert report.samples_read == len(variants) + 2
    assert report.quarantined == {"duplicate_sample": 1}
    assert report.conflicting_variants == 1
    assert report.trajectories_written == 2
    assert report.reconciles()
    trajs = list(iter_trajectories(tmp_path / "ds"))
    assert len({t.id for t in trajs}) == 2
    main = next(t for t in trajs if len(t.metadata[META_KEY]["turn_indices"]) == len(variants))
    assert len(main.turns) == variants[0].total_turns


def test_prefix_layout_is_reproduced_and_truncation_is_recorded(tmp_path: Path) -> None:
    full = _variants(next(f for f in sample_files() if f.name.startswith("swe")))
    prefix = [
        AgentWorldBenchSample(
            s.task,
            s.id,
            s.turn_idx,
            s.total_turns,
            s.system_str,
            s.prompt[: s.turn_idx],
            s.response[: s.turn_idx],
            s.current_prompt,
        )
        for s in full[:2]
    ]
    write_samples(tmp_path / "in" / "swe_test.jsonl", prefix)
    import_agentworldbench([tmp_path / "in" / "swe_test.jsonl"], tmp_path / "ds")
    [traj] = list(iter_trajectories(tmp_path / "ds"))
    assert len(traj.turns) == 2 and traj.status.value == "truncated"
    _export_from_dataset(tmp_path / "ds", tmp_path / "out")
    assert (tmp_path / "out" / "swe_test.jsonl").read_text() == (
        tmp_path / "in" / "swe_test.jsonl"
    ).read_text()


def test_reimport_adds_nothing(tmp_path: Path) -> None:
    import_agentworldbench(sample_files(), tmp_path / "ds")
    again = import_agentworldbench(sample_files(), tmp_path / "ds")
    assert again.trajectories_written == 0 and again.samples_already_present == again.samples_read
    assert len(list(iter_trajectories(tmp_path / "ds"))) == len(sample_files())


# --------------------------------------------------------------------------------------------------
# bad input
# --------------------------------------------------------------------------------------------------

GOOD = {
    "task": "terminal",
    "id": 5,
    "turn_idx": 1,
    "total_turns": 1,
    "system_str": "s",
    "prompt": ["p"],
    "response": ["r"],
    "current_prompt": "p",
}


@pytest.mark.parametrize(
    ("line", "field", "reason"),
    [
        (b"{not json", "<line>", "invalid_json"),
        (b'{"task": "terminal", "id": "\xff"}', "<line>", "invalid_utf8"),
        (b"[1, 2]", "<line>", "not_an_object"),
        (
            json.dumps({k: v for k, v in GOOD.items() if k != "system_str"}).encode(),
            "system_str",
            "missing_field",
        ),
        (json.dumps({**GOOD, "turn_idx": "1"}).encode(), "turn_idx", "wrong_type"),
        (json.dumps({**GOOD, "turn_idx": 2}).encode(), "turn_idx", "invalid_value"),
        (json.dumps({**GOOD, "prompt": ["p", 3]}).encode(), "prompt[1]", "wrong_type"),
        (json.dumps({**GOOD, "response": []}).encode(), "response", "list_length_mismatch"),
        (json.dumps({**GOOD, "id": True}).encode(), "id", "wrong_type"),
    ],
)
def test_bad_lines_name_file_line_and_field(tmp_path: Path, line: bytes, field: str, reason: str) -> None:
    path = tmp_path / "terminal_test.jsonl"
    path.write_bytes(json.dumps(GOOD).encode() + b"\n\n" + line + b"\n")
    with pytest.raises(SampleError) as info:
        list(read_samples(path))
    err = info.value
    assert (err.path, err.line, err.field, err.reason) == (str(path), 3, field, reason)
    assert str(err).startswith(f"{path}:3: field {field!r}: ")
    # The importer quarantines the line instead, and the counts reconcile.
    report = import_agentworldbench([path], tmp_path / "ds")
    assert report.quarantined == {reason: 1} and report.trajectories_written == 1 and report.reconciles()
    [entry] = [json.loads(x) for x in Path(report.quarantine_file or "").read_text().splitlines()]
    assert entry == {"file": str(path), "line": 3, "field": field, "reason": reason, "message": err.detail}


def test_unknown_domain_is_quarantined_and_file_name_fills_in(tmp_path: Path) -> None:
    (tmp_path / "web_test.jsonl").write_text(json.dumps({**GOOD, "task": "lwm"}) + "\n")
    (tmp_path / "misc.jsonl").write_text(json.dumps({**GOOD, "task": "chess"}) + "\n")
    report = import_agentworldbench([tmp_path / "web_test.jsonl", tmp_path / "misc.jsonl"], tmp_path / "ds")
    assert report.quarantined == {"unknown_domain": 1}
    [traj] = list(iter_trajectories(tmp_path / "ds"))
    assert traj.domain is Domain.WEB


# --------------------------------------------------------------------------------------------------
# paper turn selection
# --------------------------------------------------------------------------------------------------


@given(n=st.integers(1, 300), seed=st.integers(0, 2**32), key=st.text(max_size=8))
def test_paper_selection_keeps_first_last_and_three_middle(n: int, seed: int, key: str) -> None:
    turns = select_turns_paper(n, seed, key)
    assert turns == select_turns_paper(n, seed, key)
    if n <= 5:
        assert turns == list(range(1, n + 1))
    else:
        assert len(turns) == 5 and turns == sorted(set(turns))
        assert turns[0] == 1 and turns[-1] == n and all(1 < t < n for t in turns[1:-1])


def test_paper_selection_is_uniform_over_middle_turns() -> None:
    counts = [0] * 11
    for k in range(3000):
        for t in select_turns_paper(12, seed=1, key=f"traj-{k}")[1:-1]:
            counts[t - 1] += 1
    middle = counts[1:11]
    assert min(middle) > 0.8 * (3000 * 3 / 10) and max(middle) < 1.2 * (3000 * 3 / 10)
    assert select_turns_paper(12, 1, "a") != select_turns_paper(12, 2, "a") or select_turns_paper(
        12, 1, "b"
    ) != select_turns_paper(12, 3, "b")


def test_paper_mode_thins_text_domains_only() -> None:
    def traj(domain: Domain) -> Trajectory:
        return Trajectory(
            id=f"t-{domain.value}",
            domain=domain,
            source=Source(SourceKind.INFRA, "x"),
            task="t",
            turns=[Turn(Action(ActionKind.COMMAND, f"a{i}"), Observation(f"o{i}")) for i in range(9)],
        )

    assert len(turns_for_export(traj(Domain.TERMINAL), "paper", seed=3)) == 5
    assert turns_for_export(traj(Domain.WEB), "paper", seed=3) == list(range(1, 10))
    assert turns_for_export(traj(Domain.TERMINAL), "paper", 3) == turns_for_export(
        traj(Domain.TERMINAL), "paper", 3
    )


def test_cli_export_of_collected_data_uses_the_pools_canonical_actions(tmp_path: Path) -> None:
    """Collected terminal actions (commands, `run_command` tool calls) and SWE-agent commands leave
    `worldline export agentworldbench` in the one form the pools and their eval export use."""
    from typer.testing import CliRunner

    from pipelines.actions import canonical_action
    from schemas.shards import write_trajectories
    from schemas.trajectory import Action, ActionKind, Observation, ObservationFormat, Turn
    from schemas.worldmodel import parse_action_prompt
    from tests.helpers.pools_data import terminal
    from worldline.cli import app

    collected = terminal("collected-0", "inhouse-0", SourceKind.INHOUSE, 3, turns=3)
    collected.turns[0].action = Action(ActionKind.COMMAND, "wc -l people.csv")
    collected.turns[1] = Turn(
        Action(ActionKind.TOOL_CALL, json.dumps({"name": "run_command", "arguments": {"command": "ls"}})),
        Observation("people.csv\n", ObservationFormat.TERMINAL),
    )
    expected = [canonical_action(collected, t)[1] for t in collected.turns]
    write_trajectories(tmp_path / "shards", [collected])
    result = CliRunner().invoke(
        app, ["export", "agentworldbench", str(tmp_path / "shards"), "--out", str(tmp_path / "awb")]
    )
    assert result.exit_code == 0, result.output
    samples = [json.loads(x) for x in (tmp_path / "awb" / "terminal_test.jsonl").read_text().splitlines()]
    assert len(samples) == 3
    for sample in samples:
        parsed = parse_action_prompt(sample["current_prompt"])
        assert parsed is not None
        assert parsed.action == expected[sample["turn_idx"] - 1]
        keys = json.loads(parsed.action)  # AgentWorldBench's terminal form: a keystroke array
        assert isinstance(keys, list) and all("keystrokes" in k for k in keys)
    assert json.loads(expected[0])[0]["keystrokes"] == "wc -l people.csv\n"


def test_a_collected_web_trajectory_exports_its_start_screen_as_the_first_current_state(
    tmp_path: Path,
) -> None:
    """AgentWorldBench web samples show the page the first action was taken on (`**Current State:**`)
    and BrowserGym calls; later turns' states are the observations in the history."""
    from schemas.agentworldbench.convert import trajectory_to_samples
    from schemas.trajectory import (
        ActionKind,
        Domain,
        Observation,
        ObservationFormat,
        Source,
        SourceKind,
        Turn,
    )

    screen = 'URL: http://127.0.0.1:8000/notes/\nTitle: Notes\n- textbox "New note" [ref=e8]'
    traj = Trajectory(
        id="web-1",
        domain=Domain.WEB,
        source=Source(kind=SourceKind.INFRA, name="worldline-collect/web"),
        task="Add a note.",
        initial_state=f"## Browser\nChromium 156\n\n## Start page\nURL: x\nTitle: Notes\nTabs: 1\n\n## Screen\n{screen}",
        turns=[
            Turn(
                Action(ActionKind.GUI, "fill('e8', 'water the plants')"),
                Observation("after fill", ObservationFormat.AXTREE),
            ),
            Turn(Action(ActionKind.GUI, "click('e9')"), Observation("after click", ObservationFormat.AXTREE)),
        ],
    )
    sample = trajectory_to_samples(traj, [2])[0]
    first, second = sample.prompt[0], sample.prompt[1]
    assert (
        first
        == f"### Turn 1\n**Current State:**\n{screen}\n\n**Action:**\n```text\nfill('e8', 'water the plants')\n```"
    )
    assert "**Current State:**" not in second and "click('e9')" in second
    # The same layout the bundled web sample has, and it parses back.
    bundled = [
        json.loads(line)
        for line in (Path(sample_files()[0]).parent / "web_test.jsonl").read_text().splitlines()
    ]
    assert bundled[0]["prompt"][0].startswith("### Turn 1\n**Current State:**\n")
    assert parse_action_prompt(first) is not None and parse_action_prompt(first).current_state == screen  # type: ignore[union-attr]
    # A terminal trajectory's first prompt has no state block.
    term = Trajectory(
        id="t-1",
        domain=Domain.TERMINAL,
        source=Source(kind=SourceKind.INFRA, name="c"),
        task="x",
        initial_state="## Screen\nnot a gui",
        turns=traj.turns,
    )
    assert "**Current State:**" not in trajectory_to_samples(term, [1])[0].current_prompt
