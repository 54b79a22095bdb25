"""The domain registry: everything worldline knows about a domain, in one `DomainSpec` per domain.

Every package reads a domain's facts here (`domain_spec(traj.domain).gui`, `.action_kind`, ...) and
nothing else lists domains. The seven built-in domains are the `Domain` enum's members; a new domain
is one `register_domain(DomainSpec(...))` call plus its collector module and its judge prompt
(`worldline/judge/prompt_texts/<judge_prompt>.md`, or a text in another package). Its value then parses as a `Domain` (a member
outside the enum's seven, so `list(Domain)` and the Arrow schema's `enum` metadata stay the built-in
ones and the on-disk format is unchanged), validation accepts it and every lookup below finds it.

The registry imports no collector: `collector` is the dotted name of the module whose `ENVIRONMENT`
is the domain's `collectors.environment.Environment` subclass, imported only when collecting.
"""

from __future__ import annotations

from collections.abc import Iterator, Set
from dataclasses import dataclass, field
from enum import StrEnum

from schemas.trajectory import ActionKind, Domain, ObservationFormat, extended_domain, forget_extended_domain


class ActionForm(StrEnum):
    """The canonical form a domain's actions take in the pools (pipelines/actions.py)."""

    AS_RECORDED = "as_recorded"  # kind, text and tool name as recorded
    KEYSTROKE_ARRAY = "keystroke_array"  # Terminus keystroke arrays; pauses become keystrokes too
    TOOL_CALL = "tool_call"  # JSON tool calls; SWE-agent commands are parsed into them


@dataclass(frozen=True)
class DomainSignals:
    """What identifies a trace of this domain when its source does not name one (curation's align).

    Terminal recordings and sources that name their domain are decided before these signals. The
    checks then run in a fixed order over all domains: a tool of `any_tool` (or `tool_prefixes`) was
    called, the domain whose tools were called most often winning; only tools of `only_tools` were
    called (CONTROL_TOOLS aside); an action of `action_kind` was taken; tools nothing claims were called
    (`generic_tools`, a guess); an action of `likely_action_kind` was taken (a guess); nothing
    matched (`generic_tools` again, a guess).
    """

    any_tool: frozenset[str] = frozenset()
    only_tools: frozenset[str] = frozenset()
    action_kind: ActionKind | None = None
    generic_tools: bool = False
    likely_action_kind: ActionKind | None = None
    tool_prefixes: tuple[str, ...] = ()
    """Tool names starting with one of these count as tools of `any_tool` (`browser_click`)."""

    def claims(self, tool: str) -> bool:
        """Whether calling TOOL (an MCP-namespaced `mcp__server__tool` by its own name) marks this domain."""
        name = tool_base_name(tool)
        return name in self.any_tool or (bool(self.tool_prefixes) and name.startswith(self.tool_prefixes))


def tool_base_name(tool: str) -> str:
    """A tool's own name: Claude Code and other MCP hosts call `browser_click` `mcp__playwright__browser_click`."""
    if tool.startswith("mcp__") and tool.count("__") >= 2:
        return tool.split("__", 2)[2]
    return tool


CONTROL_TOOLS = frozenset({"finish", "think", "mark_task_complete", "task_tracker", "TodoWrite"})
"""Tools that end or organise an episode without acting on the environment: they say nothing about
the domain (a shell agent that calls `mark_task_complete` is still a shell agent)."""


@dataclass(frozen=True)
class DomainSpec:
    """One domain's facts. `value` is what `Trajectory.domain` holds and what shards store."""

    value: str
    label: str
    """The AgentWorldBench role label: "You are a **{label} World Model**"."""
    description: str
    """What its world model simulates: "you simulate {description}"."""
    action_kind: ActionKind
    """The kind of an action imported from an AgentWorldBench sample of this domain."""
    collector: str
    """Dotted name of the module whose `ENVIRONMENT` collects this domain."""
    gui: bool = False
    """Observations are screens: no-change filtering, env-failure drops and GUI scoring apply."""
    per_trajectory_tools: bool = False
    """The action space differs per trajectory (per server / repository): undeclared tools are dropped."""
    action_form: ActionForm = ActionForm.AS_RECORDED
    rule_verifier: bool = False
    """Observations of deterministic actions are checked by rule (RL `exact_match`, worldline/rewards)."""
    judge_prompt: str = ""
    """The judge's domain prompt: `<name>` for `worldline/judge/prompt_texts/<name>.md` (default: value),
    or `<package>:<file>` for a text shipped in another package."""
    observation_format: ObservationFormat = ObservationFormat.TEXT
    """How an imported observation of this domain is read unless its text says otherwise."""
    first_prompt_state: bool = False
    """The first action prompt shows the screen the action was taken on (`**Current State:**`), as
    AgentWorldBench's web samples do; later turns' states are the observations in the history."""
    action_language: str = "text"
    """The fence info string of a non-JSON action in an AgentWorldBench prompt."""
    action_description: str | None = None
    """The action space of a cleaned trace of this domain, when it is the same for every trace."""
    classifier_hint: str = ""
    """What the cleaner's LLM domain classifier is told a trace of this domain looks like."""
    signals: DomainSignals = field(default_factory=DomainSignals)
    generator: str = ""
    """Dotted name of the module of its seeded task generator (collectors/generators); empty when none."""
    explorer: str = ""
    """`module:Class` of the explore policy's explorer for this domain (collectors/explore.py);
    empty when the explore policy has none."""
    not_replayable: str = ""
    """Why `worldline replay` does not replay this domain's trajectories; empty when it does."""
    shell: bool = False
    """Its actions run at a shell in a sandbox: a replay compares the next prompt too, and public traces
    of it can be re-grounded against a task's sandbox (`worldline replay --ground`)."""
    local: bool = True
    """Its collector runs on this machine alone (sandboxes, local servers); False when it needs an
    outside device, as Android does. `make demo` collects the local domains."""
    demo_tasks: int = 6
    """How many of its example tasks `make demo` collects by default."""
    demo_jobs: int = 1
    """How many of those `make demo` collects at once (`-j`)."""

    def __post_init__(self) -> None:
        if not self.judge_prompt:
            object.__setattr__(self, "judge_prompt", self.value)

    @property
    def domain(self) -> Domain:
        return Domain(self.value)


_SHELL_TOOLS = frozenset(
    {
        "bash", "execute_bash", "shell", "terminal", "run", "Bash", "exec", "run_command",
        "bash_command", "run_shell_command", "execute_command",  # Terminus-2, Gemini CLI, Cline
    }
)  # fmt: skip
# Browser agents: Playwright MCP (`browser_navigate`, ...), Puppeteer MCP, OpenHands' `browser` tool.
_BROWSER_TOOLS = frozenset({"browser", "browse_interactive"})
_BROWSER_TOOL_PREFIXES = ("browser_", "playwright_", "puppeteer_")
_SEARCH_TOOLS = frozenset({"web_search", "web_extractor", "dict_memory", "search", "fetch", "browse"})
_SWE_TOOLS = frozenset(
    {
        "str_replace_editor", "str_replace_based_edit_tool", "edit", "create", "open", "insert", "goto", "scroll_up",
        "scroll_down", "find_file", "search_file", "search_dir", "submit", "read", "write", "Read", "Edit",
        "Write", "MultiEdit", "Glob", "Grep", "apply_patch", "view", "file_editor",
    }
)  # fmt: skip

# One entry per built-in domain: value, AgentWorldBench label and description, action kind, collector; then
# what sets the domain apart. Laid out by hand so each domain reads as one block.
# fmt: off
BUILT_IN_DOMAINS: tuple[DomainSpec, ...] = (
    DomainSpec(
        Domain.MCP.value, "Tool", "the results of tool calls against MCP servers",
        ActionKind.TOOL_CALL, "collectors.mcp",
        per_trajectory_tools=True, rule_verifier=True, classifier_hint="JSON tool calls to tool servers",
        signals=DomainSignals(generic_tools=True),
        generator="collectors.generators.mcp", explorer="collectors.explore:ToolExplorer", demo_tasks=30, demo_jobs=3,
    ),
    DomainSpec(
        Domain.SEARCH.value, "Search", "a web search engine, a page extractor and a key-value memory",
        ActionKind.TOOL_CALL, "collectors.search",
        classifier_hint="web_search / page extraction", signals=DomainSignals(only_tools=_SEARCH_TOOLS),
        generator="collectors.generators.search", explorer="collectors.explore:SearchExplorer", demo_tasks=120, demo_jobs=2,
    ),
    DomainSpec(
        Domain.TERMINAL.value, "Terminal", "a Linux terminal driven by keystrokes, including its prompt",
        ActionKind.KEYSTROKES, "collectors.terminal",
        action_form=ActionForm.KEYSTROKE_ARRAY, rule_verifier=True, observation_format=ObservationFormat.TERMINAL,
        action_description=(
            "Command lines typed at a shell prompt (or a REPL started from it); the terminal shows the result."
        ),
        classifier_hint="shell sessions",
        signals=DomainSignals(only_tools=_SHELL_TOOLS, likely_action_kind=ActionKind.COMMAND),
        generator="collectors.generators.terminal", shell=True, explorer="collectors.explore:TerminalExplorer", demo_tasks=36, demo_jobs=4,
    ),
    DomainSpec(
        Domain.SWE.value, "Software Engineering", "a code repository: file reads, edits and command output",
        ActionKind.TOOL_CALL, "collectors.swe",
        per_trajectory_tools=True, action_form=ActionForm.TOOL_CALL, rule_verifier=True,
        classifier_hint="reading, editing and testing a code repository", signals=DomainSignals(any_tool=_SWE_TOOLS),
        generator="collectors.generators.swe", shell=True, explorer="collectors.explore:SWEExplorer", demo_tasks=12, demo_jobs=3,
    ),
    DomainSpec(
        Domain.ANDROID.value, "Android", "an Android device screen after taps, swipes and typing",
        ActionKind.GUI, "collectors.android", gui=True, local=False,
        generator="collectors.generators.android", explorer="collectors.explore_android:AndroidExplorer",
        not_replayable="the device's state is not rebuilt from the task alone",
    ),
    DomainSpec(
        Domain.WEB.value, "Web", "a browser page as its accessibility tree after BrowserGym actions",
        ActionKind.GUI, "collectors.web", gui=True, observation_format=ObservationFormat.AXTREE,
        first_prompt_state=True, classifier_hint="browser actions on an accessibility tree",
        signals=DomainSignals(action_kind=ActionKind.GUI, any_tool=_BROWSER_TOOLS, tool_prefixes=_BROWSER_TOOL_PREFIXES),
        generator="collectors.generators.web", explorer="collectors.explore:WebExplorer", demo_tasks=10, demo_jobs=2,
        not_replayable="the site's state is not reproducible from the task alone (live pages, server-side sessions)",
    ),
    DomainSpec(
        Domain.OS.value, "Desktop", "a desktop as its accessibility tree after mouse and keyboard actions",
        ActionKind.CODE, "collectors.os_desktop", gui=True, observation_format=ObservationFormat.AXTREE,
        action_language="python", classifier_hint="desktop GUI automation",
        generator="collectors.generators.os_desktop", explorer="collectors.explore:OSExplorer",
        not_replayable="the desktop application's state is not rebuilt from the task alone",
    ),
)
# fmt: on

_SPECS: dict[str, DomainSpec] = {spec.value: spec for spec in BUILT_IN_DOMAINS}
_BUILT_IN_VALUES = frozenset(d.value for d in Domain)


class _DomainsWhere(Set[Domain]):
    """The registered domains whose spec has a flag set, read from the registry on every use."""

    def __init__(self, flag: str) -> None:
        self._flag = flag

    def _members(self) -> list[Domain]:
        return [Domain(s.value) for s in _SPECS.values() if getattr(s, self._flag)]

    def __contains__(self, domain: object) -> bool:
        spec = _SPECS.get(domain) if isinstance(domain, str) else None
        return spec is not None and bool(getattr(spec, self._flag))

    def __iter__(self) -> Iterator[Domain]:
        return iter(self._members())

    def __len__(self) -> int:
        return len(self._members())

    def __repr__(self) -> str:
        return f"{{{', '.join(d.value for d in self)}}}"


GUI_DOMAINS: Set[Domain] = _DomainsWhere("gui")
"""The domains whose observations are screens (`DomainSpec.gui`), registered ones included."""

TOOL_DOMAINS: Set[Domain] = _DomainsWhere("per_trajectory_tools")
"""The domains whose action space is per trajectory (`DomainSpec.per_trajectory_tools`)."""


def domain_spec(domain: Domain | str) -> DomainSpec:
    """The spec of a registered domain; a KeyError names the registered ones and how to add one."""
    spec = _SPECS.get(str(domain))
    if spec is None:
        known = ", ".join(_SPECS)
        raise KeyError(f"unknown domain {str(domain)!r}; registered: {known} (add one with register_domain)")
    return spec


def registered_domains() -> tuple[DomainSpec, ...]:
    """Every registered domain: the seven built-in ones first, then those added, in order."""
    return tuple(_SPECS.values())


def is_registered(value: str) -> bool:
    return value in _SPECS


def register_domain(spec: DomainSpec, *, replace: bool = False) -> Domain:
    """Add a domain (or, with `replace`, swap a registered domain's spec); returns its `Domain` value.

    A new value becomes a `Domain` outside the enum's seven members: `Domain(spec.value)` parses,
    `Trajectory(domain=spec.value)` validates, shards store the string as for any domain.
    """
    value = spec.value
    if not value or not value.isidentifier() or value != value.lower():
        raise ValueError(
            f"domain value {value!r} must be a lowercase identifier (it names files and columns)"
        )
    if value in _SPECS and not replace:
        raise ValueError(f"domain {value!r} is already registered; pass replace=True to swap its spec")
    domain = Domain(value) if value in _BUILT_IN_VALUES else extended_domain(value)
    _SPECS[value] = spec
    return domain


def unregister_domain(value: str) -> None:
    """Remove a domain added by `register_domain`; the seven built-in domains cannot be removed."""
    if value in _BUILT_IN_VALUES:
        raise ValueError(
            f"{value!r} is a built-in domain; register_domain(spec, replace=True) swaps its spec"
        )
    _SPECS.pop(value, None)
    forget_extended_domain(value)
