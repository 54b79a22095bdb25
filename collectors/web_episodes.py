"""Pages that run their own episodes (MiniWoB++): how the web domain starts one and reads its status.

A MiniWoB++ page (the `miniwob` package's html/miniwob/*.html, with its core/core.js) draws its problem
and its instruction (the utterance in `#query`) only when an episode starts. The package's Selenium
environment (miniwob/selenium_instance.py, `begin_task`) does `Math.seedrandom(seed)`,
`core.setDataMode(mode)`, `core.startEpisodeReal()`, then waits for `WOB_TASK_READY`; the page calls
`core.endEpisode(reward)` when the agent succeeds or fails, which sets `WOB_DONE_GLOBAL`. The web domain
does the same through Playwright after the start page loads (task field `web.miniwob`), with the
episode timer raised to `episode_ms` (core.js ends an episode after 10 s; BrowserGym raises it too) and
the page's reward/timer display and click canvas hidden, as both the package and BrowserGym leave them
out of the agent's view. `#query` stays: the page's instruction is part of the observation.
"""

from __future__ import annotations

import json
from typing import Any

from collectors.environment import TaskError

MINIWOB_KEYS = {"seed": int, "data_mode": str, "episode_ms": int}
MINIWOB_EPISODE_MS = 3_600_000

MINIWOB_STATUS_JS = (
    "() => ({utterance: core.getUtterance(), done: WOB_DONE_GLOBAL, reward: WOB_REWARD_GLOBAL, "
    "raw_reward: WOB_RAW_REWARD_GLOBAL, reason: WOB_REWARD_REASON, episode_id: WOB_EPISODE_ID})"
)


def check_miniwob(config: Any, where: str) -> None:
    if not isinstance(config, dict) or "seed" not in config:
        raise TaskError(f'{where}: field \'web.miniwob\' must be an object with a "seed", e.g. {{"seed": 3}}')
    for key, value in config.items():
        typ = MINIWOB_KEYS.get(key)
        if typ is None:
            raise TaskError(f"{where}: web.miniwob has unknown key {key!r}; known: {', '.join(MINIWOB_KEYS)}")
        if not isinstance(value, typ) or isinstance(value, bool):
            raise TaskError(f"{where}: web.miniwob.{key} must be {typ.__name__}, got {value!r}")


def miniwob_episode(config: dict[str, Any]) -> dict[str, str]:
    """The helper's `episode` request for a task's `web.miniwob`: start, ready and status JS."""
    seed = json.dumps(config["seed"])
    mode = json.dumps(config.get("data_mode", "train"))
    episode_ms = int(config.get("episode_ms", MINIWOB_EPISODE_MS))
    start = (
        "() => { Math.seedrandom(" + seed + "); core.setDataMode(" + mode + "); "
        f"core.EPISODE_MAX_TIME = {episode_ms}; core.startEpisodeReal(); "
        "var s = document.createElement('style'); "
        "s.textContent = '#reward-display, #click-canvas { display: none !important; }'; "
        "document.head.appendChild(s); }"
    )
    return {"start": start, "ready": "() => WOB_TASK_READY", "status": MINIWOB_STATUS_JS}
