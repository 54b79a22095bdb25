"""The cleaner's fast paths agree with the slow definitions they stand in for: the direct graph executor
with LangGraph's Pregel loop, the redaction pre-check with the redaction regexes, the recording-line
decoder with json.loads, and chunked terminal rendering with one-shot rendering."""

from __future__ import annotations

import copy
import json
import operator
from collections import Counter
from pathlib import Path
from typing import Annotated, Any, TypedDict
from unittest import mock

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from langgraph.graph import END, START, StateGraph

from curation_agents import denoise, segment
from curation_agents.clean_run import CleanRun, GraphSession, checkpoint_thread_id, record_ref
from curation_agents.executor import DirectGraphExecutor, UnsupportedGraph
from curation_agents.formats.terminal import loads_event_line
from curation_agents.graph import _depth_exceeds, build_graph
from curation_agents.model import CleanConfig
from curation_agents.reader import discover, iter_records
from curation_agents.score import BINARY_NOISE, _binary_noise_count
from curation_agents.terminal_screen import TerminalScreen
from schemas import Action, ActionKind, ObservationFormat
from worldline.redaction.detect import (
    _COMBINED,
    _NEEDLE,
    _NEEDLE_DFA,
    _STRUCTURED_GATE,
    PII_CLASSES,
    PemBlockFilter,
    _pii_possible,
    json_text_is_clean,
    may_contain_secret,
    redact,
    redact_lines,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _initial_states(config: CleanConfig) -> list[dict[str, Any]]:
    states = []
    for path, dataset_path in discover([str(FIXTURES)]):
        for raw in iter_records(path, config.limits):
            state: dict[str, Any] = {
                "record": record_ref(raw, path, dataset_path),
                "payload": raw.payload,
                "quarantine": [],
                "failed": False,
            }
            if raw.failure is not None:
                state["preflight"] = {"reason": raw.failure.reason.value, "detail": raw.failure.detail}
            states.append(state)
    return states


# -- the direct executor -----------------------------------------------------------------------------


@pytest.mark.parametrize("max_episode_turns", [200, 3])
def test_direct_executor_ends_in_the_same_state_as_langgraph_on_every_fixture(max_episode_turns: int) -> None:
    config = CleanConfig(licence="MIT", max_episode_turns=max_episode_turns)
    graph = build_graph(config)
    direct = DirectGraphExecutor(graph)
    states = _initial_states(config)
    assert len(states) >= 10
    outcomes = set()
    for state in states:
        expected = graph.invoke(copy.deepcopy(state))
        assert direct.invoke(copy.deepcopy(state)) == expected, state["record"]["key"]
        outcomes.add(bool(expected.get("accepted")))
    assert outcomes == {True, False}  # both branches of every conditional edge were walked


def test_graph_session_uses_the_direct_executor_only_without_checkpoints(tmp_path: Path) -> None:
    assert GraphSession(CleanConfig(), None).direct is not None
    checkpointed = GraphSession(CleanConfig(), tmp_path / "ck.sqlite")
    try:
        assert checkpointed.direct is None
    finally:
        checkpointed.close()


class _Summed(TypedDict, total=False):
    total: Annotated[int, operator.add]


class _Plain(TypedDict, total=False):
    value: int
    other: int


def _compiled(schema: type, wire: Any) -> Any:
    graph = StateGraph(schema)
    wire(graph)
    return graph.compile()


def test_a_checkpoint_holding_trajectories_in_json_form_resumes_at_score(tmp_path: Path) -> None:
    """Checkpoints written before the state held typed trajectories carry their JSON form."""
    path = FIXTURES / "terminal" / "dev_basics.cast"
    config = CleanConfig(licence="MIT")
    (raw,) = list(iter_records(path, config.limits))
    ref = record_ref(raw, path, path.name)
    expected = GraphSession(config, None).run(raw, ref)
    assert expected.trajectories
    session = GraphSession(config, tmp_path / "ck.sqlite")
    thread = {"configurable": {"thread_id": checkpoint_thread_id(ref["key"])}}
    after_align = {
        "record": ref,
        "trajectories": [t.to_json() for t in expected.trajectories],
        "quarantine": [],
        "failed": False,
    }
    session.graph.update_state(thread, after_align, as_node="align")
    assert session.graph.get_state(thread).next == ("score",)
    outcome = session.run(raw, ref)
    assert [t.to_json() for t in outcome.trajectories] == expected.accepted
    # A record that finished before a kill, its accepted episodes stored in JSON form, is not rerun.
    session.graph.update_state(thread, {"accepted": expected.accepted}, as_node="accept")
    assert not session.graph.get_state(thread).next
    outcome = session.run(raw, ref)
    session.close()
    assert [t.to_json() for t in outcome.trajectories] == expected.accepted


def test_direct_executor_refuses_graphs_it_would_run_differently() -> None:
    def reducer(g: Any) -> None:
        g.add_node("a", lambda s: {"total": 1})
        g.add_edge(START, "a")
        g.add_edge("a", END)

    def fan_out(g: Any) -> None:
        g.add_node("a", lambda s: {"value": 1})
        g.add_node("b", lambda s: {"value": 2})
        g.add_node("c", lambda s: {"other": 3})
        g.add_edge(START, "a")
        g.add_edge("a", "b")
        g.add_edge("a", "c")

    with pytest.raises(UnsupportedGraph, match="reducer"):
        DirectGraphExecutor(_compiled(_Summed, reducer))
    with pytest.raises(UnsupportedGraph, match="fans out"):
        DirectGraphExecutor(_compiled(_Plain, fan_out))


def test_direct_executor_follows_conditional_edges_and_rejects_foreign_keys() -> None:
    def wire(g: Any) -> None:
        g.add_node("double", lambda s: {"value": s["value"] * 2})
        g.add_node("mark", lambda s: {"other": 1})
        g.add_edge(START, "double")
        g.add_conditional_edges(
            "double", lambda s: "big" if s["value"] > 10 else "small", {"big": "mark", "small": END}
        )
        g.add_edge("mark", END)

    compiled = _compiled(_Plain, wire)
    direct = DirectGraphExecutor(compiled)
    for value in (1, 6):
        assert direct.invoke({"value": value}) == compiled.invoke({"value": value})

    def foreign(g: Any) -> None:
        g.add_node("a", lambda s: {"nope": 1})
        g.add_edge(START, "a")

    with pytest.raises(UnsupportedGraph, match="outside the state"):
        DirectGraphExecutor(_compiled(_Plain, foreign)).invoke({"value": 1})


# -- redaction pre-check ------------------------------------------------------------------------------

_FRAGMENTS = [
    "@",
    ".",
    "://",
    ":",
    "a@b.io",
    "user@",
    "-----BEGIN RSA PRIVATE KEY-----",
    "AKIA",
    "ASIA",
    "ghp_",
    "github_pat_",
    "sk-",
    "AIza",
    "xoxb-",
    "glpat-",
    "hf_",
    "eyJ",
    "Authorization: Bearer ",
    "--password=",
    "-p",
    "PASSWORD=",
    "TOKEN:",
    "api_key",
    "sshpass -p ",
    "mysql -u root -p",
    "\u212aey=",  # Kelvin sign: folds to "k" under case-insensitive matching
    "pa\u017fs",  # long s: folds to "s"
    "0123456789abcdefghij",
    "ABCDEFGHIJKLMNOP",
    " ",
    "\n",
    "=",
]
_secretish_text = st.lists(st.sampled_from(_FRAGMENTS) | st.text(max_size=6), max_size=12).map("".join)


@settings(max_examples=400, deadline=None)
@given(_secretish_text)
def test_redaction_precheck_never_hides_a_match(text: str) -> None:
    if not may_contain_secret(text):
        assert _COMBINED.search(text) is None


@settings(max_examples=300, deadline=None)
@given(_secretish_text)
def test_redaction_with_precheck_equals_redaction_without_it(text: str) -> None:
    counts: Counter[str] = Counter()
    result = redact(text, counts)
    reference_counts: Counter[str] = Counter()
    with (
        mock.patch("worldline.redaction.detect.may_contain_secret", return_value=True),
        mock.patch("worldline.redaction.detect._nothing_but_pii_hints", return_value=False),
    ):
        reference = redact(text, reference_counts)
    assert (result, counts) == (reference, reference_counts)


@settings(max_examples=300, deadline=None)
@given(st.lists(_secretish_text, max_size=40).map(lambda parts: " ".join(parts) * 8))
def test_needle_dfa_finds_what_the_needle_regex_finds(text: str) -> None:
    lowered = text.lower()
    if text.isascii():  # the pre-check uses the needles on ASCII text only
        assert (_NEEDLE_DFA.search(lowered) is None) == (_NEEDLE.search(lowered) is None)


def _json_text_is_clean_check_by_check(source: bytes, pii: frozenset[str]) -> bool:
    """json_text_is_clean's definition, one pre-check after another (its one-pass scan stands in for it)."""
    if b"\\u" in source or b"\\/" in source or not source.isascii():
        return False
    text = source.decode("ascii")
    return (
        not may_contain_secret(text)
        and _STRUCTURED_GATE.search(text) is None
        and not any(kind in pii and _pii_possible(text, kind) for kind in PII_CLASSES)
    )


@settings(max_examples=500, deadline=None)
@given(
    st.lists(
        st.sampled_from([*_FRAGMENTS, "SG.", "sg.", "Pass", "KEY", "\\u00e9", "\\/", "\\n", '"', "é"])
        | st.sampled_from(["+1", "(415)", "-555-0100", ".555.0100", ".1.2", ":ab:", "a@b.c", "@box:"])
        | st.text(alphabet=st.characters(max_codepoint=127), max_size=4),
        max_size=10,
    ).map(lambda parts: "".join(parts).encode()),
    st.sampled_from([frozenset(), frozenset({"email"}), frozenset({"phone"}), frozenset(PII_CLASSES)]),
)
@example(b'{"url": "https://me@host"}', frozenset())
@example(b'{"key": "SG.x"}', frozenset())
def test_json_text_prechecks_in_one_pass_equal_them_one_by_one(source: bytes, pii: frozenset[str]) -> None:
    assert json_text_is_clean(source, pii) == _json_text_is_clean_check_by_check(source, pii)


_pii_sets = st.sampled_from([frozenset(), frozenset({"email", "phone"}), frozenset(PII_CLASSES)])
_ascii = st.text(alphabet=st.characters(max_codepoint=127), max_size=6)  # non-ASCII takes the slow path
# PII and look-alikes with no secret needle (the lines-at-once fast path), and every secretish fragment.
_pii_fragments = [
    "@",
    ".",
    ":",
    "-",
    "a@b.io",
    "user@",
    "+1 415 555 0100",
    "(415) 555-0100",
    "10.1.2.3",
    "fe80::1:2",
]
_line_fragments = [*_FRAGMENTS, *_pii_fragments, "-----END RSA PRIVATE KEY-----"]
_secretish_lines = st.lists(
    st.lists(st.sampled_from(_pii_fragments) | _ascii, max_size=8).map("".join)
    | st.lists(st.sampled_from(_line_fragments) | _ascii, max_size=8).map("".join),
    max_size=8,
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_secretish_lines, max_size=4), _pii_sets)
def test_redacting_lines_at_once_equals_redacting_each_line(
    batches: list[list[str]], pii: frozenset[str]
) -> None:
    at_once, one_by_one = PemBlockFilter(), PemBlockFilter()
    counts: Counter[str] = Counter()
    reference: Counter[str] = Counter()
    for lines in batches:
        assert at_once.lines(lines, counts, pii) == [one_by_one.line(x, reference, pii) for x in lines]
    assert counts == reference
    counts, reference = Counter(), Counter()
    for lines in batches:
        assert redact_lines(lines, counts, pii) == [redact(x, reference, pii) for x in lines]
    assert counts == reference


# -- recording lines ---------------------------------------------------------------------------------


def _outcome(fn: Any, data: bytes) -> tuple[str, Any]:
    try:
        return "value", fn(data)
    except RecursionError:
        return "too_deep", None
    except ValueError as exc:
        return type(exc).__name__, None


_event_lines = st.one_of(
    st.builds(
        lambda t, code, text: json.dumps([t, code, text], ensure_ascii=bool(len(text) % 2)).encode(),
        # orjson (the fast path) turns integers beyond 64 bits into floats: the bounds are sampled.
        st.floats(allow_nan=False)
        | st.integers()
        | st.sampled_from([2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1, -(2**64), 10**400])
        | st.sampled_from([float(2**63), -float(2**63), 1e300]),
        st.sampled_from(["o", "i", "r", "m", "x", "q"]),
        st.text(max_size=30),
    ),
    st.binary(max_size=40).map(lambda b: b"[" + b),
    st.binary(max_size=40),
    st.sampled_from(
        [
            b"[1, 2] x",
            b"[01]",
            b"[NaN]",
            b"[1e999]",
            b"[\x00\x00",
            b"[" * 3000 + b"]" * 3000,
            b'[1, "o", "\\ud800"]',
            b'\xef\xbb\xbf[1, "o", "x"]',
            b'[1e400, "o", "x"]',
            b'[1, "o", "x", 99999999999999999999999]',
        ]
    ),
)


@settings(max_examples=400, deadline=None)
@given(_event_lines)
def test_recording_line_decoder_matches_json_loads(line: bytes) -> None:
    stripped = line.strip()  # the recording parser strips each line before decoding it
    assert repr(_outcome(loads_event_line, stripped)) == repr(_outcome(_json_loads_replacing, stripped))


def _json_loads_replacing(data: bytes) -> Any:
    """json.loads, except that invalid UTF-8 is decoded with replacement characters first."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return json.loads(data.decode("utf-8", "replace"))
    return json.loads(data)


@settings(max_examples=300, deadline=None)
@given(
    st.text(alphabet=st.sampled_from("ab \n\t\r\x00\x07\x08\x0b\x0e\x1b\x1f\x7f\ufffd\u00e9"), max_size=60)
)
def test_binary_noise_count_matches_the_regex(text: str) -> None:
    assert _binary_noise_count(text) == len(BINARY_NOISE.findall(text))


def _typing(line: str) -> list[list[Any]]:
    """A prompt, LINE typed a key at a time with its echo, then Enter and some output."""
    events: list[list[Any]] = [[0.0, "o", "dev@box:~$ "]]
    for k, ch in enumerate(line):
        events += [[k + 0.1, "i", ch], [k + 0.2, "o", ch]]
    events += [[len(line) + 0.1, "i", "\r"], [len(line) + 0.2, "o", "\r\nok\r\ndev@box:~$ "]]
    return events


@pytest.mark.parametrize(
    ("line", "secret"),
    [
        ("export GITHUB_TOKEN=ghp_" + "a1B2c3D4e5F6g7H8i9J0" * 2 + " && ls", "a1B2c3D4e5F6g7H8i9J0" * 2),
        ("curl -u admin:hunter2hunter2 https://example.com/api && echo bob@example.org", "bob@example.org"),
        ("ls -la /usr/lib && echo done", None),
    ],
)
def test_lines_under_the_cursor_redacted_in_batches_equal_each_redacted_alone(
    line: str, secret: str | None
) -> None:
    events = _typing(line)
    with mock.patch.object(denoise, "_CURSOR_LINE_BATCH", 1):
        alone = denoise.render_transcript(events, 120, 24, Counter())
    for batch in (3, 1000):
        with mock.patch.object(denoise, "_CURSOR_LINE_BATCH", batch):
            assert denoise.render_transcript(events, 120, 24, Counter()) == alone
    if secret is not None:
        assert secret not in repr(alone)


# -- chunked rendering -------------------------------------------------------------------------------

_terminal_text = st.lists(
    st.sampled_from(
        [
            "ab",
            "c",
            "\r",
            "\n",
            "\r\n",
            "\b",
            "\t",
            "\x1b[2K",
            "\x1b[3D",
            "\x1b[31m",
            "\x1b[0m",
            "\x1b[2J",
            "\x1b[5;3H",
            "\x1b]0;title\x07",
            "\x1b[?1049h",
            "\x1b[?1049l",
            "\x1b",
            "[",
            "x\x1b[1@y",
            "\x1b[A",
        ]
    ),
    max_size=40,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(_terminal_text, st.integers(min_value=1, max_value=7))
def test_rendering_does_not_depend_on_how_output_is_chunked(data: str, step: int) -> None:
    whole = TerminalScreen(40, 10)
    whole.feed(data)
    chunked = TerminalScreen(40, 10)
    # Split only where no escape sequence can be cut in half: between two of the plain letters.
    pieces, start = [], 0
    for i in range(step, len(data), step):
        if data[i - 1] in "abcxy" and data[i] in "abcxy":
            pieces.append(data[start:i])
            start = i
    pieces.append(data[start:])
    for piece in pieces:
        chunked.feed(piece)
    assert (chunked.take_all(), chunked.in_fullscreen) == (whole.take_all(), whole.in_fullscreen)


_plain_output_atoms = st.lists(
    st.sampled_from(
        ["ab", "c", "xyz0", "\r", "\n", "\r\n", "\r\r\n", "\rz\r\n", "\t"]
        + ["\x1b[31m", "\x1b[0m", "\x1b[1;32m", "\x1b[3C", "\x1b[2D", "\x1b[K", "\x1b[A", "\x1b[2A", "\x1b[H"]
    ),
    max_size=40,
)


@settings(max_examples=400, deadline=None)
@given(_plain_output_atoms)
def test_plain_output_in_one_piece_renders_as_its_tokens_one_at_a_time(atoms: list[str]) -> None:
    """Runs of text, CR, LF and colours are applied in one step; each token fed alone is the reference."""
    whole = TerminalScreen(40, 10)
    whole.feed("".join(atoms))
    stepwise = TerminalScreen(40, 10)
    for atom in atoms:
        stepwise.feed(atom)
    assert (whole.current_line, whole.col) == (stepwise.current_line, stepwise.col)
    assert whole.take_all() == stepwise.take_all()


# -- progress ----------------------------------------------------------------------------------------


def test_progress_reports_every_finished_file_and_the_final_count(tmp_path: Path) -> None:
    calls: list[tuple[int, int, int]] = []
    summary = CleanRun(
        [str(FIXTURES)],
        tmp_path / "out",
        CleanConfig(licence="MIT"),
        on_progress=lambda files, total, records: calls.append((files, total, records)),
    ).run()
    files = summary["files"]
    assert {c[0] for c in calls} >= set(range(1, files + 1))  # every finished file is reported
    assert calls[-1] == (files, files, summary["records_in"])


def _nesting(value: Any) -> int:
    """Nesting depth by definition: a scalar is 1 deep, a container one more than its deepest item."""
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else None
    if items is None:
        return 1
    return 1 + max((_nesting(v) if isinstance(v, dict | list) else 0 for v in items), default=0)


_json_values = st.recursive(
    st.none() | st.integers() | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner, max_size=3),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(_json_values, st.integers(min_value=0, max_value=8))
def test_depth_check_matches_the_nesting_depth(value: Any, limit: int) -> None:
    assert _depth_exceeds(value, limit) == (_nesting(value) > limit)


_TIME_TOKEN = st.one_of(
    st.integers(min_value=0, max_value=10**12).map(str),
    st.builds(
        lambda whole, digits, frac: f"{whole}.{str(frac).zfill(digits)[:digits]}",
        st.integers(min_value=0, max_value=10**9),
        st.integers(min_value=1, max_value=12),
        st.integers(min_value=0, max_value=10**12),
    ),
    st.floats(min_value=0, max_value=1e12, allow_nan=False).map(lambda f: f"{f:.3e}"),
    st.floats(min_value=0, max_value=1e6, allow_nan=False).map(repr),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(_TIME_TOKEN, st.sampled_from(["", " "])), min_size=1, max_size=12))
def test_asciicast_v2_times_are_rounded_to_microseconds_whatever_their_spelling(
    tmp_path_factory: pytest.TempPathFactory, tokens: list[tuple[str, str]]
) -> None:
    """Times written with at most 6 decimals skip the rounding call; every time still equals round(t, 6)."""
    from curation_agents.formats.terminal import parse_asciicast
    from curation_agents.model import Limits

    path = tmp_path_factory.mktemp("cast") / "times.cast"
    lines = [json.dumps({"version": 2, "width": 80, "height": 24})]
    lines += [f'[{token}{space}, "o", "x"]' for token, space in tokens]
    path.write_text("\n".join(lines) + "\n")
    times = [event[0] for event in parse_asciicast(str(path), Limits())["events"]]
    expected = [round(float(json.loads(token)), 6) for token, _ in tokens]
    assert times == expected and all(type(t) is float for t in times)


_cast_lines = st.one_of(
    st.builds(
        lambda t, code, text: json.dumps([t, code, text], separators=(",", ":")),
        st.integers(min_value=-5, max_value=10**6)
        | st.floats(min_value=-1.0, max_value=1e6, allow_nan=False)
        | st.sampled_from([1e-7, 2.5e3, 0.1234567, 3.0000001, 2**63, float(2**63)]),
        st.sampled_from(["o", "i", "r", "q"]),
        st.text(max_size=12),
    ),
    st.sampled_from(
        [
            '[1.5, "o", "spaced"]',
            "",
            "# a comment",
            '[1, "o"',
            '[2, "o", "x"],[3, "o", "y"]',
            '[[1, "o", "x"]]',
        ]
        # An event torn over two lines, the second also holding a whole one: as many events as lines.
        + ['[1, "o"\n"a"], [2, "o", "b"]']
        + ['[1,["o"],"x"]', '[true,"o","x"]', '[1,"o",5]', '[18446744073709551615,"o","x"]', '[1,{},"x"]']
        + ['[1, "o", "x"] ', '[1, "o", "x"]\r', '[1,"o","x",4]', '[1.0000005e2,"i","a"]', "[1,2,3]", "{}"]
    ),
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(_cast_lines, max_size=30),
    st.sampled_from([2, 3]),
    st.booleans(),
    st.integers(min_value=1, max_value=200) | st.just(1 << 20),
)
@example(['[1,"o","a"]', '[0.1234567,"o","b"]', '[2.12345678,"o","c"]'], 2, True, 1 << 20)
def test_recordings_decoded_a_block_at_a_time_equal_them_decoded_line_by_line(
    tmp_path_factory: pytest.TempPathFactory, lines: list[str], version: int, newline_at_end: bool, block: int
) -> None:
    """Blocks of lines decode in one call where every line is a plain event; any line of another form,
    a block boundary inside a line, or a last line without its newline still gives each line's own
    reading (the line-by-line reader, the reference)."""
    from curation_agents.formats import terminal
    from curation_agents.model import Limits

    body = "\n".join(lines) + ("\n" if newline_at_end and lines else "")
    path = tmp_path_factory.mktemp("cast") / "blocks.cast"
    path.write_text(json.dumps({"version": version, "width": 80, "height": 24}) + "\n" + body)
    expected: list[list[Any]] = []
    terminal._add_lines(body.encode(), version, 0.0, 0, Limits(), expected)
    with mock.patch.object(terminal, "_BLOCK_BYTES", block):
        events = terminal.parse_asciicast(str(path), Limits())["events"]
    assert repr(events) == repr(expected)


@pytest.mark.parametrize("limit", ["max_events", "max_record_bytes"])
def test_recordings_read_by_blocks_stop_at_the_limit_the_line_reader_stops_at(
    tmp_path: Path, limit: str
) -> None:
    from curation_agents.formats import terminal
    from curation_agents.model import Limits, StageFailure

    body = "".join(f'[{i}.5, "o", "line {i}"]\n' for i in range(50))
    path = tmp_path / "long.cast"
    path.write_text(json.dumps({"version": 2, "width": 80, "height": 24}) + "\n" + body)
    limits = Limits(**{limit: 20 if limit == "max_events" else 400})
    with pytest.raises(StageFailure) as line_by_line:
        terminal._add_lines(body.encode(), 2, 0.0, 0, limits, [])
    with mock.patch.object(terminal, "_BLOCK_BYTES", 256), pytest.raises(StageFailure) as by_blocks:
        terminal.parse_asciicast(str(path), limits)
    assert str(by_blocks.value) == str(line_by_line.value)


# -- typing runs -------------------------------------------------------------------------------------

_PROMPTS = ["dev@box:~$ ", "root@host-1.example.org:/srv# ", "Password: ", ">>> ", "... ", "> ", ""]
_KEYS = ["l", "s", " ", "-", "x", "é", ":", "\t", "\r", "\n", "\x7f", "\x03", "\x04", "\x15", "\x17"]
_KEYS += ["\x1b[A", "\x1b", "[A", "\x1bO", "A", "ls -la\r", "echo a@b.io", "pass=hunter2hunter2", ""]
_KEYS += ["echo one\recho two\r"]  # typed ahead: the second line waits for its echo
_KEYS += [
    "ghp_",
    "a1B2c3D4e5F6g7H8",
    "i9J0a1B2c3D4e5F6g7H8i9J0",
    "TOKEN=",
    "bob@example.org",
]  # secrets in parts
_OUTPUTS = [
    "\r\n",
    "ok\r\n",
    "\x1b[31mred\x1b[0m\r\n",
    "\x1b[2J\x1b[H",
    "\x1b[?1049h~\r\n~",
    "\x1b[?1049l",
    "\x08 \x08",
    "\x1b[K",
    "Password: dev@box:~$ ",
    "-----BEGIN RSA PRIVATE KEY-----\r\nMIIEow\r\n",
    "echo one\r\necho two\r\none\r\n",
    "dev@box:~$ echo two\r\ntwo\r\n",
]
_TYPED_AHEAD = [
    [0.0, "o", "dev@box:~$ "],
    [1.0, "i", "echo one\recho two\r"],
    [2.0, "o", "echo one\r\necho two\r\none\r\ndev@box:~$ echo two\r\ntwo\r\ndev@box:~$ "],
    [3.0, "i", "x"],
]


@st.composite
def _session_events(draw: st.DrawFn) -> list[list[Any]]:
    """A shell-like session: prompts, keys with or without their echo, output and escapes split anywhere."""
    events: list[list[Any]] = []
    for step in range(draw(st.integers(min_value=1, max_value=40))):
        t = float(step)
        choice = draw(st.integers(min_value=0, max_value=9))
        if choice == 0:
            events.append([t, "o", draw(st.sampled_from(_PROMPTS))])
        elif choice == 1:
            events.append([t, "o", draw(st.sampled_from(_OUTPUTS))])
        elif choice == 2:
            events.append([t, "r", draw(st.sampled_from(["100x30", "20x5", "bad"]))])
        else:
            key = draw(st.sampled_from(_KEYS))
            events.append([t, "i", key])
            if draw(st.booleans()):
                events.append([t + 0.5, "o", key.replace("\r", "\r\n")])  # the tty's echo
    return events


class _SessionKeyByKey(segment._Session):
    """The segmenter reading every key and every finished line on its own (the fast paths' reference)."""

    def finished_lines(self, lines: list[str]) -> None:
        for line in lines:
            self.finished_line(line)

    def feed_input(self, data: str, current_line: str, t: float) -> None:
        self.feed_keys(data, current_line, t)


@settings(max_examples=400, deadline=None)
@given(_session_events(), st.sampled_from([frozenset({"email", "phone"}), frozenset(PII_CLASSES)]))
@example([[0.0, "o", "Password: "], [1.0, "i", "x"], [2.0, "o", "dev@box:~$ "], [3.0, "i", "l"]], frozenset())
@example(_TYPED_AHEAD, frozenset())
@example(
    [*_TYPED_AHEAD[:2], [2.0, "o", "echo one\r\none\r\ndev@box:~$ echo two\r\necho two\r\nok\r\n"]],
    frozenset(),
)
def test_typing_runs_in_one_item_segment_as_one_item_per_key(
    events: list[list[Any]], pii: frozenset[str]
) -> None:
    """Printable keys after printable keys join one transcript item, and the segmenter takes printable
    keys and plain output lines at once; the turns, and the counts, equal those of one item per key,
    each key and each line read on its own."""
    counts: Counter[str] = Counter()
    items = denoise.render_transcript(copy.deepcopy(events), 80, 24, counts, pii)
    turns = segment.segment_transcript(items, None, counts)
    reference_counts: Counter[str] = Counter()
    with (
        mock.patch.object(denoise, "_MERGE_TYPING", False),
        mock.patch.object(segment, "_Session", _SessionKeyByKey),
    ):
        reference_items = denoise.render_transcript(copy.deepcopy(events), 80, 24, reference_counts, pii)
        reference = segment.segment_transcript(reference_items, None, reference_counts)
    assert (turns, counts) == (reference, reference_counts)
    assert len(items) <= len(reference_items)


_control_text = st.text(
    alphabet=st.sampled_from("ab \n\t\r\x00\x07\x0b\x0c\x0e\x1b\x1f\x7f\x9b\ufffd\u00e9"), max_size=40
)


@settings(max_examples=400, deadline=None)
@given(_control_text)
def test_control_check_by_bytes_matches_the_regex(text: str) -> None:
    from curation_agents.terminal_screen import _HAS_CONTROL, _has_control

    assert _has_control(text) == (_HAS_CONTROL.search(text) is not None)


@settings(max_examples=400, deadline=None)
@given(_control_text, st.sampled_from([k for k in ActionKind if k != ActionKind.TOOL_CALL]))
def test_garbage_check_by_bytes_counts_what_the_character_loop_counts(text: str, kind: ActionKind) -> None:
    """is_garbage_action counts control bytes of ASCII text by deleting them; the loop is the reference."""
    from curation_agents.turn_rules import is_garbage_action

    bad = sum(1 for ch in text if (ch < " " and ch not in "\n\t\r") or ch == "\ufffd")
    expected = bool(text.strip()) and bad / len(text) > 0.2
    assert is_garbage_action(Action(kind=kind, text=text)) == expected


@pytest.mark.parametrize("kind", [*(k.value for k in ActionKind), ActionKind.TOOL_CALL, "", None, "bogus"])
@pytest.mark.parametrize("fmt", ["text", "terminal", ObservationFormat.JSON, "", None, "bogus"])
def test_turns_take_enum_members_from_the_lookup_tables_as_the_enum_calls_give_them(
    kind: Any, fmt: Any
) -> None:
    from curation_agents.align import _turn

    def outcome(fn: Any) -> Any:
        try:
            return fn()
        except ValueError as exc:
            return type(exc)

    def turn(action_kind: Any, observation_format: Any) -> Any:
        raw = {"action_kind": action_kind, "observation_format": observation_format, "action": "ls"}
        return _turn(raw)  # type: ignore[arg-type]

    assert outcome(lambda: turn(kind, "text").action.kind) == outcome(lambda: ActionKind(kind or "command"))
    expected_format = outcome(lambda: ObservationFormat(fmt or "text"))
    assert outcome(lambda: turn("command", fmt).observation.format) == expected_format
