"""`worldline coverage` on datasets the real collector wrote: explore against scripted on the same
generated terminal tasks, near-duplicates across two scripted runs, the thin spots it names, and the
action labels it counts."""

from __future__ import annotations

import json
import os
from pathlib import Path

from typer.testing import CliRunner

from collectors.collection import CollectConfig, collect
from collectors.generators import generate, write_tasks
from worldline.cli import app
from worldline.coverage import action_label, coverage_report, near_duplicate_share, program_of


def test_action_labels() -> None:
    assert program_of("grep -c ERROR logs/app.log | sort -rn | head -n 1") == "grep|sort|head"
    assert program_of("FOO=1 python3 x.py && echo ok") == "python3|echo"
    assert program_of("echo 'unbalanced") == "echo"
    call = json.dumps({"name": "Bash", "arguments": {"command": "git log | head"}})
    assert action_label("swe", "tool_call", call, "Bash") == "Bash:git|head"
    assert action_label("web", "command", 'click("e12")', None) == "click"
    assert action_label("web", "gui", "fill('e3', 'x')", None) == "fill"
    assert (
        action_label("web", "gui", json.dumps({"action": "click", "role": "link", "name": "Cart"}), None)
        == "click:link"
    )
    assert (
        action_label("terminal", "keystrokes", json.dumps([{"keystrokes": "python3\n"}]), None)
        == "keys:python3"
    )
    assert near_duplicate_share(["a b c d e f g h", "a b c d e f g h", "x y z w v u t s"]) == round(2 / 3, 3)


def test_coverage_of_explore_against_scripted(tmp_path: Path) -> None:
    os.environ.setdefault("DOCKER_HOST", "unix:///tmp/worldline-podman.sock")
    tasks = tmp_path / "tasks.jsonl"
    write_tasks(tasks, generate("terminal", 3, 31))
    for policy, out in (("scripted", "s1"), ("scripted", "s2"), ("explore", "e1")):
        collect(
            CollectConfig(env="terminal", tasks_path=tasks, policy=policy, out=tmp_path / out, concurrency=2)
        )
    scripted = coverage_report([tmp_path / "s1"])["domains"]["terminal"]
    explore = coverage_report([tmp_path / "e1"])["domains"]["terminal"]
    assert explore["distinct_used"] > scripted["distinct_used"]
    assert explore["distinct_states"] > scripted["distinct_states"]
    assert explore["behaviours"] and not scripted["behaviours"]
    twice = coverage_report([tmp_path / "s1", tmp_path / "s2"])
    assert twice["domains"]["terminal"]["near_duplicate_share"] >= 0.6  # the same scripts, run twice
    assert any("near-duplicate" in note for note in twice["thin"])
    assert any("only 6 trajectories" in note for note in twice["thin"])
    result = CliRunner().invoke(app, ["coverage", str(tmp_path / "e1"), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["domains"]["terminal"]["trajectories"] == 3
    text = CliRunner().invoke(app, ["coverage", str(tmp_path / "e1")])
    assert "== terminal: 3 trajectories" in text.output and "thin:" in text.output
    missing = CliRunner().invoke(app, ["coverage", str(tmp_path / "nope")])
    assert missing.exit_code == 2
