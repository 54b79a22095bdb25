"""The cleaner as a LangGraph StateGraph: ingest -> denoise -> segment -> align -> score -> accept,
with a conditional edge after every stage that sends a failed record to quarantine.

Each node declares what it reads and writes (see CleanState). A node never raises: a StageFailure or
any unexpected error becomes a quarantine entry naming the stage, so a bad record never stops a run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from langgraph.graph import END, START, StateGraph

from curation_agents.align import align_episode
from curation_agents.denoise import normalise_record, redact_record
from curation_agents.formats import (
    Format,
    adp,
    agentworldbench,
    androidworld,
    atif,
    chat,
    harbor,
    mcp_log,
    mcp_universe,
    mcpmark,
    openhands,
    osworld,
    swe_agent,
    toolathlon,
    webarena,
    widesearch,
)
from curation_agents.formats.common import CORRUPT_INPUT_ERRORS
from curation_agents.formats.terminal import parse_asciicast, parse_typescript
from curation_agents.model import (
    CleanConfig,
    CleanState,
    ParsedRecord,
    QuarantineEntry,
    Stage,
    StageFailure,
    as_trajectory,
)
from curation_agents.reader import is_file_payload
from curation_agents.score import score_episode
from curation_agents.segment import segment_record
from schemas import Trajectory
from schemas.reasons import ReasonCode
from worldline.redaction.detect import redact, redact_json

NodeFn = Callable[[CleanState], dict[str, Any]]


def _depth_exceeds(value: Any, limit: int) -> bool:
    """Whether decoded JSON nests deeper than `limit` (iterative: safe on hostile input)."""
    level: list[Any] = [value]  # the containers at `depth` (and the root, whatever it is)
    depth = 1
    while level:
        if depth > limit:
            return True
        below: list[Any] = []
        for item in level:
            if isinstance(item, dict):
                below += [v for v in item.values() if isinstance(v, dict | list)]
            elif isinstance(item, list):
                below += [v for v in item if isinstance(v, dict | list)]
        level, depth = below, depth + 1
    return False


def parse_payload(fmt: str, payload: Any, config: CleanConfig) -> ParsedRecord:
    """Ingest's dispatch from a detected format to its parser."""
    limits = config.limits
    if fmt in (Format.ASCIICAST_V2, Format.ASCIICAST_V3):
        return parse_asciicast(payload["path"], limits)
    if fmt == Format.TYPESCRIPT:
        return parse_typescript(payload["path"], limits)
    if fmt == Format.MCP_JSONRPC:
        return mcp_log.parse(mcp_log.read_messages(payload["path"], limits.max_record_bytes))
    if fmt == Format.OSWORLD:
        return osworld.parse_file(payload["path"], limits.max_record_bytes)
    if fmt == Format.MCPMARK:
        return mcpmark.parse_file(payload["path"], limits.max_record_bytes)
    if fmt == Format.TOOLATHLON:
        return toolathlon.parse_file(payload["path"], limits.max_record_bytes)
    if fmt == Format.UIAUTOMATOR_DUMP:
        raise StageFailure(
            ReasonCode.NOT_A_TRAJECTORY,
            "a single view-hierarchy dump has no actions; record a session to get turns",
        )
    if _depth_exceeds(payload, limits.max_json_depth):
        raise StageFailure(ReasonCode.TOO_DEEP, f"JSON nests deeper than {limits.max_json_depth} levels")
    parsers: dict[str, Callable[[Any], ParsedRecord]] = {
        Format.SWE_AGENT: swe_agent.parse,
        Format.MINI_SWE_AGENT: chat.parse_mini_swe_agent,
        Format.OPENAI_MESSAGES: chat.parse_openai,
        Format.SHAREGPT: chat.parse_sharegpt,
        Format.OPENHANDS: openhands.parse,
        Format.ATIF: atif.parse,
        Format.ADP: adp.parse,
        Format.HARBOR: harbor.parse,
        Format.AGENTWORLDBENCH: agentworldbench.parse,
        Format.WEBARENA: webarena.parse,
        Format.WIDESEARCH: widesearch.parse,
        Format.ANDROIDWORLD: androidworld.parse,
        Format.MCP_UNIVERSE: mcp_universe.parse,
    }
    parser = parsers.get(fmt)
    if parser is None:
        raise StageFailure(ReasonCode.UNSUPPORTED_FORMAT, f"no parser for format {fmt!r}")
    return parser(payload)


def _guarded(stage: Stage, fn: NodeFn) -> NodeFn:
    def node(state: CleanState) -> dict[str, Any]:
        try:
            return fn(state)
        except StageFailure as failure:
            return _fail(state, stage, failure.reason, failure.detail)
        except RecursionError:
            return _fail(state, stage, ReasonCode.TOO_DEEP, "structure nested too deeply to process")
        except MemoryError:
            return _fail(state, stage, ReasonCode.TOO_LARGE, "record does not fit in memory")
        except CORRUPT_INPUT_ERRORS as exc:
            return _fail(state, stage, ReasonCode.CORRUPT_INPUT, f"{type(exc).__name__}: {exc}"[:500])
        except Exception as exc:
            return _fail(state, stage, ReasonCode.INTERNAL_ERROR, f"{type(exc).__name__}: {exc}"[:500])

    node.__name__ = stage.value
    return node


def _fail(state: CleanState, stage: Stage, reason: ReasonCode, detail: str) -> dict[str, Any]:
    # Details quote exceptions, which may quote the record: redact them like any other text.
    entry: QuarantineEntry = {
        "stage": stage.value,
        "reason": reason.value,
        "detail": redact(detail),
        "episode": None,
    }
    return {"failed": True, "quarantine": [*state.get("quarantine", []), entry], "payload": None}


def build_graph(config: CleanConfig, curator: Any = None, checkpointer: Any = None) -> Any:
    """Compile the cleaner graph. `curator` (an LLMCurator) enables the LLM-backed align and score."""
    pii = frozenset(config.pii)

    def ingest(state: CleanState) -> dict[str, Any]:
        failure = state.get("preflight")
        if failure:
            raise StageFailure(ReasonCode(failure["reason"]), failure["detail"])
        payload = state["payload"]
        counts: Counter[str] = Counter(state.get("redaction_kinds") or {})
        # A decoded payload is redacted before it is parsed (the cleaning run does it before checkpointing).
        from_file = is_file_payload(payload)
        if not from_file and not state.get("payload_redacted"):
            payload = redact_json(payload, counts, pii)
        parsed = parse_payload(state["record"]["format"], payload, config)
        turns = parsed.get("turns", [])
        if len(turns) > config.limits.max_turns:
            raise StageFailure(ReasonCode.TOO_LARGE, f"more than {config.limits.max_turns} turns")
        if turns and not any(t.get("action_kind") != "empty" for t in turns):
            raise StageFailure(
                ReasonCode.UNSUPPORTED_FORMAT,
                f"{len(turns)} message(s) but no action in a dialect the cleaner reads (OpenAI tool_calls or "
                "function_call, Anthropic tool_use, MCP tools/call, fenced shell blocks)",
            )
        # Redacted before the node returns: the checkpoint written after ingest holds no secret. Text
        # parsed from a redacted payload is redacted; a file read here is rendered and redacted now.
        parsed = redact_record(parsed, counts, pii, texts=from_file)
        return {
            "parsed": parsed,
            "payload": None,
            "redactions": sum(counts.values()),
            "redaction_kinds": dict(counts),
        }

    def denoise(state: CleanState) -> dict[str, Any]:
        counts: Counter[str] = Counter(state.get("redaction_kinds") or {})
        parsed = normalise_record(state["parsed"], counts, pii)
        return {"parsed": parsed, "redactions": sum(counts.values()), "redaction_kinds": dict(counts)}

    def segment(state: CleanState) -> dict[str, Any]:
        counts: Counter[str] = Counter(state.get("redaction_kinds", {}))
        parsed = state["parsed"]
        episodes = segment_record(parsed, config, counts)
        if not episodes:
            raise StageFailure(ReasonCode.NO_TURNS, "no (action, observation) pairs found in the record")
        parsed["turns"] = []
        return {
            "parsed": parsed,
            "episodes": episodes,
            "redactions": sum(counts.values()),
            "redaction_kinds": dict(counts),
        }

    def align(state: CleanState) -> dict[str, Any]:
        episodes = state["episodes"]
        redactions = state.get("redactions", 0)
        trajectories = []
        for index, turns in enumerate(episodes):
            episode = (state["parsed"], turns, index, len(episodes), state["record"], config, redactions)
            traj = align_episode(*episode)
            traj.metadata["redaction_kinds"] = state.get("redaction_kinds", {})
            if curator is not None and traj.metadata.get("align_unsure"):
                domain, note = curator.classify_domain(traj)
                traj.metadata["llm_align"] = note
                if domain is not None:
                    traj = align_episode(*episode, domain_override=domain.value)
                    traj.metadata.update(llm_align=note, redaction_kinds=state.get("redaction_kinds", {}))
            trajectories.append(traj)
        return {"trajectories": trajectories, "episodes": [], "parsed": {}}

    def score(state: CleanState) -> dict[str, Any]:
        accepted: list[Trajectory] = []
        quarantine = list(state.get("quarantine", []))
        for index, trajectory in enumerate(state["trajectories"]):
            verdict = score_episode(as_trajectory(trajectory), config)
            unsure = abs(verdict.score - config.accept_threshold) <= config.unsure_band
            if curator is not None and verdict.reason in (None, ReasonCode.LOW_QUALITY) and unsure:
                llm_score, reasons = curator.judge_quality(verdict.trajectory)
                verdict.trajectory.metadata["llm_quality"] = {"score": llm_score, "reasons": reasons}
                if llm_score is not None:
                    verdict.score = llm_score
                    verdict.trajectory.metadata["quality_score"] = llm_score
                    if llm_score >= config.accept_threshold:
                        verdict.reason, verdict.detail = None, ""
                    else:
                        verdict.reason = ReasonCode.LOW_QUALITY
                        verdict.detail = (
                            f"LLM score {llm_score} < {config.accept_threshold}: {'; '.join(reasons)}"[:500]
                        )
            if verdict.accepted:
                accepted.append(verdict.trajectory)
            else:
                assert verdict.reason is not None
                quarantine.append(
                    {
                        "stage": Stage.SCORE.value,
                        "reason": verdict.reason.value,
                        "detail": redact(verdict.detail),
                        "episode": index,
                    }
                )
        return {"accepted": accepted, "quarantine": quarantine, "trajectories": [], "failed": not accepted}

    graph = StateGraph(CleanState)
    order = [
        (Stage.INGEST, ingest),
        (Stage.DENOISE, denoise),
        (Stage.SEGMENT, segment),
        (Stage.ALIGN, align),
        (Stage.SCORE, score),
    ]
    for stage, fn in order:
        graph.add_node(stage.value, _guarded(stage, fn))  # type: ignore[call-overload]
    graph.add_node("accept", lambda state: {})
    graph.add_node("quarantine", lambda state: {})
    graph.add_edge(START, Stage.INGEST.value)
    for (stage, _), (nxt, _) in zip(order, order[1:], strict=False):
        graph.add_conditional_edges(
            stage.value, _route(nxt.value), {nxt.value: nxt.value, "quarantine": "quarantine"}
        )
    graph.add_conditional_edges(
        Stage.SCORE.value, _route("accept"), {"accept": "accept", "quarantine": "quarantine"}
    )
    graph.add_edge("accept", END)
    graph.add_edge("quarantine", END)
    return graph.compile(checkpointer=checkpointer)


def _route(next_node: str) -> Callable[[CleanState], str]:
    def route(state: CleanState) -> str:
        return "quarantine" if state.get("failed") else next_node

    return route
