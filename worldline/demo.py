"""`worldline demo`: the main job end to end on this machine, with no LLM endpoint needed.

1. collect in every domain that can run here, on generated tasks with the exploration policy
   (android is reported as skipped unless a device is connected);
2. clean the bundled public traces and terminal recordings;
3. build the pools on the Beam runner with the AgentWorldBench samples as the evaluation set;
4. verify the pools and write the HTML report.

With an LLM endpoint configured (WORLDLINE_LLM_BASE_URL) it also runs the openai policy on a few
tasks, scores the cleaned traces with the LLM, runs a small rejection-sampling pass, judges world-model
predictions on the evaluation export and runs a one-iteration autoresearch experiment.

Each step is a `worldline` (or `autoresearch`) command run as its own process, exactly as a user would
type it; a failing step is reported and the rest goes on. The summary says what ran, what failed and
why, and where to look next.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from schemas.domains import domain_spec, registered_domains

ROOT = Path(__file__).resolve().parents[1]
# Every registered domain, the text ones first (seconds for all their tasks), then the GUI ones, then
# those that need an outside device; in registry order within each group.
ALL_DOMAINS = tuple(s.value for s in sorted(registered_domains(), key=lambda s: (not s.local, s.gui)))
LOCAL_DOMAINS = tuple(d for d in ALL_DOMAINS if domain_spec(d).local)
# Tasks per domain by default (`DomainSpec.demo_tasks`): GUI episodes cost seconds each, the others a
# fraction of one; and how many run at once (`DomainSpec.demo_jobs`).
DEFAULT_TASKS = {d: domain_spec(d).demo_tasks for d in ALL_DOMAINS}
CONCURRENCY = {d: domain_spec(d).demo_jobs for d in ALL_DOMAINS}
EVAL_SET = (
    ROOT / "worldline" / "samples"
)  # the AgentWorldBench samples every demo build decontaminates against
EXAMPLES = {d: ROOT / "collectors" / "tasks" / f"{d}_examples.jsonl" for d in ALL_DOMAINS}


@dataclass
class Step:
    """One step of the demo and how it went."""

    name: str
    status: str = "pending"  # ok | failed | skipped
    seconds: float = 0.0
    detail: str = ""


@dataclass
class DemoPlan:
    out: Path
    domains: tuple[str, ...] = LOCAL_DOMAINS
    tasks: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_TASKS))
    seed: int = 0
    policy: str = "explore"
    clean: bool = True
    llm: bool = False


def worldline_command() -> list[str]:
    return [sys.executable, "-m", "worldline"]


def llm_configured() -> bool:
    return bool(os.environ.get("WORLDLINE_LLM_BASE_URL"))


def android_device() -> str | None:
    """Why the android domain cannot run here, or None when a device is connected."""
    try:
        import adbutils

        devices = adbutils.AdbClient(socket_timeout=5).device_list()
    except Exception as exc:  # no adb server, no adb binary: the reason is what the user needs
        return f"no adb server answered ({type(exc).__name__}); start one and connect a device"
    if not devices:
        return (
            "no Android device connected (adb devices lists none); connect one with `adb connect HOST:PORT`"
        )
    return None


def policy_available(name: str) -> bool:
    from collectors.policies import POLICIES

    return name in POLICIES


class Demo:
    """Runs the steps in order, each as a child process, and keeps what happened."""

    def __init__(self, plan: DemoPlan, echo: Callable[[str], None] = print) -> None:
        self.plan = plan
        self.echo = echo
        self.steps: list[Step] = []
        self.collected: dict[str, Path] = {}
        self.cleaned: list[Path] = []

    # --- running one command -------------------------------------------------------------------

    def run(self, name: str, args: Sequence[str], *, program: Sequence[str] | None = None) -> Step:
        step = Step(name)
        self.steps.append(step)
        self.echo(f"\n== {name}")
        started = time.monotonic()
        command = [*(program or worldline_command()), *args]
        env = {**os.environ, "PYTHONWARNINGS": os.environ.get("PYTHONWARNINGS", "ignore")}
        lines: list[str] = []
        with subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
        ) as child:
            assert child.stdout is not None
            for line in child.stdout:  # streamed, so the user sees each command's progress as it runs
                line = line.rstrip("\n")
                lines.append(line)
                self.echo("   " + line)
        step.seconds = time.monotonic() - started
        done = child
        # The last line that says something (not a table border) sums the step up.
        said = [line.strip() for line in lines if any(ch.isalnum() for ch in line)]
        tail = said[-1] if said else ""
        if done.returncode == 0:
            step.status, step.detail = "ok", tail
        else:
            step.status, step.detail = "failed", f"exit {done.returncode}: {tail}"
        self.echo(f"   -> {step.status} in {step.seconds:.1f} s")
        return step

    def skip(self, name: str, why: str) -> None:
        self.steps.append(Step(name, "skipped", 0.0, why))
        self.echo(f"\n== {name}\n   -> skipped: {why}")

    # --- the job -------------------------------------------------------------------------------

    def collect(self) -> None:
        out = self.plan.out
        explore = self.plan.policy == "explore" and policy_available("explore")
        for domain in self.plan.domains:
            if domain == "android":
                why = android_device()
                if why:
                    self.skip("collect android", why)
                    continue
            n = self.plan.tasks.get(domain, DEFAULT_TASKS[domain])
            target = out / "collected" / domain
            if explore:
                tasks = out / "tasks" / f"{domain}.jsonl"
                tasks.parent.mkdir(parents=True, exist_ok=True)
                gen = self.run(
                    f"tasks {domain}: generate {n}",
                    [
                        "tasks",
                        "generate",
                        "--env",
                        domain,
                        "--n",
                        str(n),
                        "--seed",
                        str(self.plan.seed),
                        "--out",
                        str(tasks),
                    ],
                )
                if gen.status != "ok":
                    continue
                policy = "explore"
            else:
                tasks, policy = EXAMPLES[domain], "scripted"
            step = self.run(
                f"collect {domain} ({policy})",
                [
                    "collect",
                    "--env",
                    domain,
                    "--tasks",
                    str(tasks),
                    "--policy",
                    policy,
                    "--out",
                    str(target),
                    "--concurrency",
                    str(CONCURRENCY[domain]),
                    "--no-progress",
                ],
            )
            # A domain whose run failed part-way still contributes what it published.
            if (target / "manifest.json").is_file():
                self.collected[domain] = target
            elif step.status == "ok":
                step.detail += " (no dataset written)"

    def clean(self) -> None:
        samples = ROOT / "curation_agents" / "samples"
        casts = sorted(str(p) for p in samples.glob("*.cast"))
        traces = sorted(
            str(p)
            for p in samples.iterdir()
            if p.is_file() and p.suffix != ".cast" and p.name != "SOURCES.md"
        )
        for name, files, kind, source, licence in (
            ("recordings", casts, "public", "worldline-terminal-recordings", "Apache-2.0"),
            ("public", traces, "public", "public-agent-traces", "MIT"),
        ):
            target = self.plan.out / "cleaned" / name
            args = [
                "clean",
                *files,
                "--out",
                str(target),
                "--source-kind",
                kind,
                "--source-name",
                source,
                "--licence",
                licence,
            ]
            if not self.plan.llm:
                args.append("--no-llm")
            self.run(f"clean {name} ({len(files)} files{', LLM scoring' if self.plan.llm else ''})", args)
            if (target / "manifest.json").is_file():
                self.cleaned.append(target)

    def pools(self) -> bool:
        inputs = [*self.collected.values(), *self.cleaned]
        if not inputs:
            self.skip("pools build", "no step produced a dataset")
            return False
        args = ["pools", "build", "--config", str(ROOT / "pipelines" / "configs" / "demo.yaml")]
        for path in inputs:
            args += ["--in", str(path)]
        args += [
            "--eval",
            str(EVAL_SET),
            "--out",
            str(self.plan.out / "pools"),
            "--overwrite",
        ]
        if self.run(f"pools build ({len(inputs)} inputs, Beam)", args).status != "ok":
            return False
        self.run("pools verify", ["pools", "verify", str(self.plan.out / "pools")])
        self.run("report", ["report", str(self.plan.out / "pools")])
        return True

    def llm_steps(self) -> None:
        out = self.plan.out
        tasks = out / "tasks" / "terminal-openai.jsonl"
        tasks.parent.mkdir(parents=True, exist_ok=True)
        generated = self.run(
            "tasks terminal: generate 3 for the openai policy",
            [
                "tasks",
                "generate",
                "--env",
                "terminal",
                "--n",
                "3",
                "--seed",
                str(self.plan.seed + 1),
                "--out",
                str(tasks),
            ],
        )
        if generated.status == "ok":
            self.run(
                "collect terminal (openai policy, 3 tasks)",
                [
                    "collect",
                    "--env",
                    "terminal",
                    "--tasks",
                    str(tasks),
                    "--policy",
                    "openai",
                    "--no-progress",
                    "--out",
                    str(out / "collected" / "terminal-openai"),
                ],
            )
        pools = out / "pools"
        if (pools / "manifest.json").is_file():
            self.run(
                "sft rejection-sample (3 samples)",
                [
                    "sft",
                    "rejection-sample",
                    str(pools),
                    "--out",
                    str(out / "sft-rejection"),
                    "--limit",
                    "3",
                    "--rollouts",
                    "2",
                ],
            )
            predictions = out / "judge" / "predictions.jsonl"
            # The eval pool's export when the build made one; else the evaluation set the build
            # decontaminated against (the demo's config sends its collected tasks to SFT / RL only).
            reference = pools if eval_samples(pools) else EVAL_SET
            step = Step(
                f"world-model predictions on {'the eval export' if reference == pools else 'the eval set'}"
            )
            self.steps.append(step)
            try:
                started = time.monotonic()
                n = write_predictions(reference, predictions, limit=6)
                step.status, step.seconds, step.detail = "ok", time.monotonic() - started, f"{n} predictions"
            except Exception as exc:  # the endpoint's failure is the step's outcome, not the demo's
                step.status, step.detail = "failed", f"{type(exc).__name__}: {exc}"
            if step.status == "ok":
                self.run(
                    "judge the predictions",
                    ["judge", str(predictions), "--reference", str(reference), "--out", str(out / "judge")],
                )
        data = self.collected.get("terminal")
        if data is not None:
            autoresearch = [str(Path(sys.executable).with_name("autoresearch"))]
            self.run(
                "autoresearch (1 run x 1 iteration)",
                [
                    "run",
                    "--domain",
                    "terminal",
                    "--data",
                    str(data),
                    "--runs",
                    "1",
                    "--iterations",
                    "1",
                    "--eval-size",
                    "2",
                    "--out",
                    str(out / "autoresearch"),
                    "--quiet",
                ],
                program=autoresearch,
            )

    def run_all(self) -> list[Step]:
        self.plan.out.mkdir(parents=True, exist_ok=True)
        self.run("sandbox doctor", ["sandbox", "doctor"])
        self.collect()
        if self.plan.clean:
            self.clean()
        self.pools()
        if self.plan.llm:
            self.llm_steps()
        else:
            self.skip(
                "LLM steps",
                "no endpoint configured (set WORLDLINE_LLM_BASE_URL and the role models; docs/llm.md)",
            )
        summary = {
            "steps": [step.__dict__ for step in self.steps],
            "pools": pool_counts(self.plan.out / "pools"),
        }
        (self.plan.out / "demo-summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        return self.steps


def eval_samples(source: Path) -> list[Path]:
    """The AgentWorldBench files of `source`: a pools OUT's eval export, or a folder of sample files."""
    exports = source / "exports" / "agentworldbench"
    files = sorted(exports.glob("*.jsonl")) if exports.is_dir() else sorted(source.glob("*.jsonl"))
    return [f for f in files if f.stat().st_size > 0]


def write_predictions(source: Path, target: Path, *, limit: int) -> int:
    """Ask the world model (role world_model) for the first `limit` evaluation samples' observations;
    `source` is a pools OUT (its eval export) or a folder of AgentWorldBench sample files."""
    from schemas.agentworldbench.io import read_samples
    from schemas.worldmodel import evaluator_messages
    from worldline.llm import SyncLLMClient

    samples = [s for path in eval_samples(source) for s in read_samples(path)][:limit]
    if not samples:
        raise ValueError(f"{source} holds no AgentWorldBench evaluation samples")
    target.parent.mkdir(parents=True, exist_ok=True)
    client = SyncLLMClient()
    rows = []
    for sample in samples:
        history = list(
            zip(sample.prompt[: sample.turn_idx - 1], sample.response[: sample.turn_idx - 1], strict=True)
        )
        result = client.chat(
            "world_model", evaluator_messages(sample.system_str, history, sample.current_prompt)
        )
        rows.append(json.dumps({**sample.to_json(), "gen": result.text}, ensure_ascii=False))
    tmp = target.with_suffix(".tmp")
    tmp.write_text("\n".join(rows) + "\n", encoding="utf-8")
    tmp.replace(target)
    return len(rows)


def pool_counts(pools: Path) -> dict[str, Any]:
    path = pools / "manifest.json"
    if not path.is_file():
        return {}
    manifest = json.loads(path.read_text("utf-8"))
    return {
        "counts": manifest.get("counts", {}),
        "pools": {
            name: {"samples": p.get("samples", 0), "trajectories": p.get("trajectories", 0)}
            for name, p in manifest.get("pools", {}).items()
        },
    }


def fresh_out(out: Path) -> None:
    """The demo rebuilds OUT from scratch; refuse to wipe a folder that is not a demo's."""
    if (
        out.exists()
        and any(out.iterdir())
        and not (out / "demo-summary.json").exists()
        and not (out / "collected").exists()
    ):
        raise ValueError(f"{out} exists and is not a demo output; pass an empty or new folder")
    shutil.rmtree(out, ignore_errors=True)
