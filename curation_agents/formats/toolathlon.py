"""Tool Decathlon (Toolathlon) trajectories as its authors publish them: one JSON file per run,
`<model>_<task>.json` (`trajs/` of the Toolathlon trajectory viewer), holding `{"pass", "messages",
"failure"}`.

`messages` is the conversation Toolathlon's `TaskAgent.save_results` writes into `traj_log.json`
(`ContextManagedRunner.get_formatted_history`): the task as the first `user` message, assistant
messages with OpenAI `tool_calls` (`<server>-<tool>` names, `local-*` for Toolathlon's own tools)
and an optional `thinking`, and `tool` messages answering them by `tool_call_id`. An MCP tool's
answer is the OpenAI Agents SDK's text of the result (one content block as JSON, or the list of
blocks), observed by the MCP convention (schemas.mcp_observation); Toolathlon's local tools and the
SDK's own messages (`Error running tool ...`) are plain text, kept as they are. `pass` is the
evaluator's verdict and `failure` its output when the check failed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from curation_agents.formats import Format
from curation_agents.formats.common import as_str, decode_json, read_limited
from curation_agents.formats.mcpmark import ChatTurns
from curation_agents.model import ParsedRecord, StageFailure
from schemas.reasons import ReasonCode

BENCHMARK = "Toolathlon"
_HEAD = re.compile(rb'\{\s*"pass"\s*:\s*(?:true|false)\s*,\s*"messages"\s*:\s*\[')
_KEYS = frozenset({"pass", "messages", "failure"})
CLAIM_DONE = "local-claim_done"
"""Toolathlon's stop tool: the agent claims the task done and the run ends on its result."""
_NAME = re.compile(r"(?P<model>[^_]+)_(?P<task>.+)\.json")


def looks_like_head(text: bytes) -> bool:
    """Whether a file's first bytes open a published Toolathlon run (`{"pass": ..., "messages": [`)."""
    return _HEAD.match(text) is not None


def parse_file(path: str, limit: int) -> ParsedRecord:
    """One published run as a trajectory of the MCP domain; the model and task come from its name."""
    run = decode_json(read_limited(path, limit), Path(path).name)
    if not (isinstance(run, dict) and "messages" in run and set(run) <= _KEYS):
        raise StageFailure(ReasonCode.PARSE_ERROR, "not a Toolathlon run ({pass, messages, failure})")
    messages = run["messages"]
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise StageFailure(ReasonCode.PARSE_ERROR, "messages is not a list of messages")
    chat = ChatTurns()
    for msg in messages:
        chat.feed(msg)
    if not chat.turns:
        raise StageFailure(ReasonCode.NO_TURNS, "no tool call and no answer")
    for t in chat.pending.values():
        t.setdefault("metadata", {})["no_output"] = True  # the run stopped before the call returned
    name = _NAME.fullmatch(Path(path).name)
    claimed = bool(chat.turns) and chat.turns[-1].get("tool_name") == CLAIM_DONE
    status, reason = ("complete", None) if chat.ended or claimed else ("truncated", "the run stops mid-task")
    return {
        "format": Format.TOOLATHLON,
        "domain": "mcp",
        "task": chat.task,
        "system_prompt": chat.system_prompt,
        "tools": [],
        "agent": None,
        "model": name["model"] if name else None,
        "status": status,
        "status_reason": reason,
        "turns": chat.turns,
        "metadata": {
            "benchmark": BENCHMARK,
            "task_id": name["task"] if name else None,
            "success": run.get("pass") if isinstance(run.get("pass"), bool) else None,
            "evaluation_output": as_str(run.get("failure")),
            "later_user_messages": json.dumps(chat.later_users, ensure_ascii=False)
            if chat.later_users
            else None,
        },
    }
