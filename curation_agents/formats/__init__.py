"""One module per source format: each turns a raw record into a format-neutral `ParsedRecord`.

`curation_agents.reader` decides which format a file holds and splits it into records; the parsers
here never touch the file system except the terminal ones, which stream their recording from disk.
"""

from __future__ import annotations

from enum import StrEnum


class Format(StrEnum):
    """Source formats the cleaner reads (plain or gzip)."""

    ASCIICAST_V2 = "asciicast-v2"
    ASCIICAST_V3 = "asciicast-v3"
    TYPESCRIPT = "script-typescript"
    SCRIPT_TIMING = "script-timing"  # a companion of a typescript, never a record of its own
    SWE_AGENT = "swe-agent-traj"
    MINI_SWE_AGENT = "mini-swe-agent"
    OPENHANDS = "openhands-events"
    OPENAI_MESSAGES = "openai-messages"
    SHAREGPT = "sharegpt"
    ATIF = "atif"
    HARBOR = "harbor-trial"  # an ATIF trajectory in a harbor job folder, with the trial's provenance
    MCP_JSONRPC = "mcp-jsonrpc"
    AGENTWORLDBENCH = "agentworldbench"
    WEBARENA = "webarena"
    UIAUTOMATOR_DUMP = "uiautomator-dump"
    OSWORLD = "osworld-traj"
    WIDESEARCH = "widesearch-response"
    ANDROIDWORLD = "androidworld-episodes"
    MCPMARK = "mcpmark-task"
    MCP_UNIVERSE = "mcp-universe-trace"
    TOOLATHLON = "toolathlon-traj"
    ADP = "adp-standardized"  # Agent Data Protocol standardised records
    UNKNOWN = "unknown"


TERMINAL_FORMATS = frozenset({Format.ASCIICAST_V2, Format.ASCIICAST_V3, Format.TYPESCRIPT})
