"""Policies choose actions from observations; they never touch the sandbox.

`scripted` replays the actions in the task file (also how public traces are re-grounded: their actions
are run in a real sandbox and the real observations recorded). `openai` is a tool-calling agent on any
OpenAI-compatible endpoint through the shared client `worldline.llm`, working as a persona drawn per
rollout (collectors/personas.py).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from collectors import personas
from collectors.environment import Task, read_action
from collectors.policy_base import Decision as Decision
from collectors.policy_base import Policy as Policy
from collectors.policy_base import PolicyError as PolicyError
from schemas import Action, ActionKind, ActionSpace, Observation


def scripted_action(item: Any, where: str) -> Action:
    """One task-file action as an Action (collectors.environment.read_action); `where` names it in
    the error. Task files are checked when they are read, so this fails only for a Task built in code."""
    try:
        return read_action(item)
    except ValueError as exc:
        raise PolicyError(f"{where}: {exc}") from None


class ScriptedPolicy(Policy):
    """Replays the task's `actions` in order, then stops."""

    name = "scripted"

    def __init__(self) -> None:
        self._actions: list[Action] = []
        self._next = 0

    def begin(
        self, task: Task, action_space: ActionSpace, first_observation: Observation, domain: str | None = None
    ) -> None:
        if not task.actions:
            raise PolicyError(f"task {task.id}: the scripted policy needs a non-empty 'actions' list")
        self._actions = [
            scripted_action(a, f"task {task.id} actions[{i}]") for i, a in enumerate(task.actions)
        ]
        self._next = 0

    def next_action(self, observation: Observation | None) -> Decision:
        if self._next >= len(self._actions):
            return Decision(None, "script finished")
        action = self._actions[self._next]
        self._next += 1
        return Decision(action)


AGENT_SYSTEM_PROMPT = (
    "You are an agent completing a task in a sandboxed environment. Act only through the tools. "
    "When the task is done, reply with a short final message and no tool call.\n\n"
    "Task: {task}\n\nAction space: {space}"
)


class OpenAIPolicy(Policy):
    """A tool-calling agent: each turn sends the conversation so far and executes one tool call.
    Stops when the model answers without a tool call (its stop condition) or after `max_turns`.

    What the model sends is what is recorded, however malformed: arguments that are not JSON, not an
    object, or of the wrong types go to the environment as sent and come back as its error observation
    (arguments JSON we could repair is executed repaired, with `repaired` and the raw text in the turn's
    `policy` metadata); of several parallel calls the first is executed and the others are answered
    with an error and listed in the metadata. When the conversation outgrows `context_tokens`, the
    oldest turns are replaced by a one-line summary of their actions, and the turn says how many.

    With a persona (`persona`, over which the task's `metadata.persona` goes), its paragraph ends the
    system prompt and its temperature and top_p replace `temperature`; the task's instruction and the
    tools stay as they are. `persona_record` is what the trajectory's metadata records of it."""

    name = "openai"

    def __init__(
        self,
        client: Any,
        *,
        max_turns: int = 30,
        temperature: float | None = 0.0,
        sample_index: int = 0,
        context_tokens: int | None = None,
        persona: personas.PersonaSetting | None = None,
    ) -> None:
        # `client` is a worldline.llm.SyncLLMClient; typed loosely so collectors import no LLM code
        # unless this policy is chosen.
        self.client = client
        self.max_turns = max_turns
        self.temperature = temperature
        self.sample_index = sample_index  # distinct per rollout so the LLM cache does not replay one answer
        self.context_tokens = context_tokens
        self.persona = persona or personas.PersonaSetting()
        self.persona_record: dict[str, Any] | None = None
        self._sampling: dict[str, Any] = {"temperature": temperature}
        self.messages: list[dict[str, Any]] = []
        self.tools: list[dict[str, Any]] = []
        self._pending_call_id: str | None = None
        self._turns = 0
        self._task_id = ""
        self.dropped_turns = 0
        self.usage: Counter[str] = Counter()  # this episode's LLM use, recorded in the trajectory
        self.final_text = ""  # the model's answer without a tool call that ended the episode

    def begin(
        self, task: Task, action_space: ActionSpace, first_observation: Observation, domain: str | None = None
    ) -> None:
        self._task_id = task.id
        self.tools = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description or "",
                    "parameters": t.parameters or {"type": "object", "properties": {}},
                },
            }
            for t in action_space.tools
        ]
        system = AGENT_SYSTEM_PROMPT.format(task=task.instruction, space=action_space.description or "")
        try:
            setting = self.persona.for_task(task.id, task.metadata)
            chosen = setting.choose(task.id, self.sample_index)
        except personas.PersonaError as exc:
            raise PolicyError(str(exc)) from None
        self.persona_record = None
        self._sampling = {"temperature": self.temperature}
        if chosen is not None:
            system += chosen.system_text
            self._sampling = chosen.sampling
            set_by = "task" if task.metadata.get("persona") is not None else "run"
            self.persona_record = personas.record(chosen, setting, set_by, self.sample_index)
        self.messages = [
            {"role": "system", "content": system},
            {
                "role": "user",
                "content": f"The environment is ready. Current state:\n{first_observation.text}",
            },
        ]
        self._pending_call_id = None
        self._turns = 0
        self.dropped_turns = 0
        self.usage = Counter()
        self.final_text = ""
        if task.max_turns:
            self.max_turns = task.max_turns

    def next_action(self, observation: Observation | None) -> Decision:
        from worldline.llm import BudgetExceeded, LLMCallFailed, LLMError, RequestRejected, Role

        if observation is not None and self._pending_call_id is not None:
            self.messages.append(
                {"role": "tool", "tool_call_id": self._pending_call_id, "content": observation.text}
            )
            self._pending_call_id = None
        if self._turns >= self.max_turns:
            return Decision(None, "max_turns")
        info: dict[str, Any] = {}
        dropped = self._fit_context()
        if dropped:
            info["context_dropped_turns"] = dropped
        try:
            result = self.client.chat(
                Role.AGENT_POLICY,
                self.messages,
                tools=self.tools,
                sample_index=self.sample_index,
                **self._sampling,
            )
        except BudgetExceeded as exc:  # nothing was sent
            raise PolicyError(f"task {self._task_id}: {exc}", retryable=True, stops_run=True) from exc
        except LLMCallFailed as exc:
            self.usage["calls"] += 1
            self.usage["failed_calls"] += 1
            self.usage["requests"] += exc.attempts
            # The endpoint is down, or refuses every request alike (authentication, unknown model, rate
            # limit): the infrastructure failed, not the task. A request refused for what it holds
            # (400, 413, 422: this conversation) is this episode's outcome.
            status = exc.status_code if isinstance(exc, RequestRejected) else None
            endpoint = status is None or status in _ENDPOINT_STATUSES
            raise PolicyError(
                f"task {self._task_id}: the agent's LLM call failed: {exc}",
                retryable=endpoint,
                stops_run=status in _ENDPOINT_STATUSES,
            ) from exc
        except LLMError as exc:
            raise PolicyError(f"task {self._task_id}: the agent's LLM call failed: {exc}") from exc
        self.usage["calls"] += 1
        self.usage["cached_calls"] += int(result.cached)
        self.usage["requests"] += 0 if result.cached else max(result.attempts, 1)
        self.usage["prompt_tokens"] += 0 if result.cached else result.prompt_tokens
        self.usage["completion_tokens"] += 0 if result.cached else result.completion_tokens
        self.model = result.model
        if not result.tool_calls:
            self.messages.append({"role": "assistant", "content": result.text})
            self.final_text = result.text
            return Decision(None, "agent finished", model=result.model)
        call, *extra = result.tool_calls
        arguments: Any = call.arguments
        if call.arguments_repaired:
            info["raw_arguments"] = call.raw_arguments
            info["repaired"] = isinstance(call.arguments, dict)
            if not isinstance(call.arguments, dict):
                arguments = call.raw_arguments  # unrepairable: the environment answers with the error
        if extra:
            info["ignored_parallel_calls"] = [{"name": c.name, "arguments": c.raw_arguments} for c in extra]
        self.messages.append(
            {
                "role": "assistant",
                "content": result.text or None,
                "tool_calls": [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {
                            "name": c.name,
                            "arguments": json.dumps(c.arguments)
                            if isinstance(c.arguments, dict)
                            else c.raw_arguments,
                        },
                    }
                    for c in result.tool_calls
                ],
            }
        )
        for c in extra:  # every call needs an answer; only the first one runs
            self.messages.append(
                {
                    "role": "tool",
                    "tool_call_id": c.id,
                    "content": "Error: one tool call per turn; this call was not executed.",
                }
            )
        self._pending_call_id = call.id
        self._turns += 1
        action = Action(
            kind=ActionKind.TOOL_CALL,
            text=json.dumps({"name": call.name, "arguments": arguments}, ensure_ascii=False),
            tool_name=call.name,
        )
        return Decision(action, model=result.model, info=info)

    def _fit_context(self) -> int:
        """Drop the oldest whole turns (an assistant message and its tool answers) while the estimated
        size (4 characters a token) exceeds `context_tokens`; one user note lists what was dropped."""
        if not self.context_tokens:
            return 0
        budget = self.context_tokens * 4
        head = 2 if not self.dropped_turns else 3  # system, task, and the note once there is one
        dropped: list[str] = []
        while _size(self.messages) > budget:
            start = head
            if start >= len(self.messages) or self.messages[start].get("role") != "assistant":
                break
            end = start + 1
            while end < len(self.messages) and self.messages[end].get("role") == "tool":
                end += 1
            if end >= len(self.messages):
                break  # never drop the turn that is being answered
            for c in self.messages[start].get("tool_calls") or []:
                dropped.append(f"{c['function']['name']}({c['function']['arguments'][:80]})")
            del self.messages[start:end]
        if not dropped:
            return 0
        self.dropped_turns += len(dropped)
        note = {
            "role": "user",
            "content": f"[worldline: {self.dropped_turns} earlier turn(s) were dropped to fit the context; "
            f"latest dropped actions: {'; '.join(dropped[-10:])}]",
        }
        if head == 3:
            self.messages[2] = note
        else:
            self.messages.insert(2, note)
        return len(dropped)


# Refusals that every request of the run would get alike: authentication, permission, an unknown
# model or route, rate limiting that outlasted the retries.
_ENDPOINT_STATUSES = frozenset({401, 402, 403, 404, 429})


def _size(messages: list[dict[str, Any]]) -> int:
    return sum(len(json.dumps(m, ensure_ascii=False)) for m in messages)


POLICIES = ("scripted", "openai", "explore")


def make_policy(
    name: str,
    *,
    llm_client: Any = None,
    max_turns: int = 30,
    temperature: float | None = 0.0,
    sample_index: int = 0,
    context_tokens: int | None = None,
    persona: personas.PersonaSetting | None = None,
) -> Policy:
    """A fresh policy by name (one per task: policies keep per-episode state). The openai policy needs
    a worldline.llm SyncLLMClient, shared by all tasks of a run; `persona` is its run's persona setting."""
    if name == "scripted":
        return ScriptedPolicy()
    if name == "explore":  # seeded exploration without an LLM (collectors/explore.py)
        from collectors.explore import ExplorePolicy

        return ExplorePolicy(max_turns=max_turns, sample_index=sample_index)
    if name == "openai":
        if llm_client is None:
            raise ValueError("the openai policy needs an LLM client: pass llm_client=SyncLLMClient()")
        return OpenAIPolicy(
            llm_client,
            max_turns=max_turns,
            temperature=temperature,
            sample_index=sample_index,
            context_tokens=context_tokens,
            persona=persona,
        )
    raise ValueError(f"unknown policy {name!r}; choose one of {', '.join(POLICIES)}")
