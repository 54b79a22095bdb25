"""A small bundled AgentWorldBench-format dataset (seven domains, one trajectory each) for demos and tests.

`worldline import agentworldbench worldline/samples/*_test.jsonl --out DIR` turns it into trajectory
shards; `sample_files()` lists the files from Python.
"""

from __future__ import annotations

from pathlib import Path

SAMPLES_DIR = Path(__file__).resolve().parent


def sample_files() -> list[Path]:
    """The bundled `<domain>_test.jsonl` files, sorted by name."""
    return sorted(SAMPLES_DIR.glob("*_test.jsonl"))
