"""What every policy is: the Policy interface, its Decision and its error (collectors/policies.py
holds the policies and the registry; a policy module imports only this one, so the registry can
import it without a cycle)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from collectors.environment import Task
from schemas import Action, ActionSpace, Observation


class PolicyError(RuntimeError):
    """The policy could not produce an action; names the task. `retryable`: the failure was the
    policy's infrastructure (the LLM endpoint down, the budget spent), not the task, so resume runs it
    again; `stops_run`: no further episode can succeed (a spent budget), so the job starts no more."""

    def __init__(self, message: str, *, retryable: bool = False, stops_run: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.stops_run = stops_run


@dataclass
class Decision:
    """The next action, or None when the policy is done; `note` says why it stopped."""

    action: Action | None
    note: str = ""
    model: str | None = None
    info: dict[str, Any] = field(default_factory=dict)  # recorded as the turn's `policy` metadata


class Policy(ABC):
    """Chooses the next action given the task, the action space and the latest observation."""

    name: str = "policy"
    model: str | None = None

    @abstractmethod
    def begin(
        self, task: Task, action_space: ActionSpace, first_observation: Observation, domain: str | None = None
    ) -> None:
        """Start an episode in `domain` (the collector's; None when the caller does not know it)."""

    @abstractmethod
    def next_action(self, observation: Observation | None) -> Decision:
        """The action after `observation` (None before the first action)."""
