"""Do the span labels predict a third run? Collect the demo's terminal and swe tasks, replay them
twice to label each observation, replay a third time, and print the share of the characters labelled
deterministic that the third run reproduces identically (goal: >= 99%).

    .venv/bin/python benchmarks/replay_agreement.py [--terminal 6] [--swe 3] [--seed 0] [--work DIR]

Needs the container engine (DOCKER_HOST). The tasks are `worldline tasks generate` tasks collected
with the exploration policy, as `worldline demo` collects them.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from collectors.collection import CollectConfig, collect
from collectors.replay import ReplayConfig, replay, replay_report
from schemas.shards import iter_trajectories
from schemas.span_labels import SpanLabel, changed_characters, read_span_labels


def collect_domain(domain: str, n: int, seed: int, work: Path) -> Path:
    tasks = work / "tasks" / f"{domain}.jsonl"
    tasks.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "worldline", "tasks", "generate", "--env", domain, "--n", str(n)]
        + ["--seed", str(seed), "--out", str(tasks)],
        check=True,
    )
    out = work / "collected" / domain
    collect(CollectConfig(env=domain, tasks_path=tasks, policy="explore", out=out, concurrency=2))
    return out


def agreement(collected: Path, labelled: Path, third: Path) -> tuple[int, int]:
    """(deterministic characters, of which the third run reproduced identically)."""
    labels = read_span_labels(labelled)
    replays = {t.metadata["replay"]["of"]: t for t in iter_trajectories(third / "replays" / "run-1")}
    total = kept = 0
    for trajectory in iter_trajectories(collected):
        again = replays.get(trajectory.id)
        if again is None:
            continue
        for index, turn in enumerate(trajectory.turns):
            row = labels.get((trajectory.id, index))
            if row is None:
                continue
            text = turn.observation.text
            other = again.turns[index].observation.text if index < len(again.turns) else ""
            changed = changed_characters(text, other)
            for span in row.spans:
                if span.label == SpanLabel.DETERMINISTIC:
                    total += span.end - span.start
                    kept += sum(1 for c in changed[span.start : span.end] if not c)
    return total, kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--terminal", type=int, default=6)
    parser.add_argument("--swe", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="replay-agreement-"))
    grand_total = grand_kept = 0
    for domain, n in (("terminal", args.terminal), ("swe", args.swe)):
        if n <= 0:
            continue
        collected = collect_domain(domain, n, args.seed, work)
        labelled = work / "labels" / domain
        summary = replay(ReplayConfig(source=collected, out=labelled, times=2))
        for line in replay_report(summary):
            print(line)
        third = work / "third" / domain
        replay(ReplayConfig(source=collected, out=third, times=1))
        total, kept = agreement(collected, labelled, third)
        grand_total, grand_kept = grand_total + total, grand_kept + kept
        print(
            f"{domain}: third run reproduces {kept}/{total} deterministic characters ({kept / max(total, 1):.3%})"
        )
    share = grand_kept / max(grand_total, 1)
    print(
        f"all: {grand_kept}/{grand_total} deterministic characters replay identically in a third run ({share:.3%}; goal >= 99%)"
    )
    print(f"work folder: {work}")


if __name__ == "__main__":
    main()
