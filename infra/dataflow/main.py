"""Flex Template entry point: the same `worldline pools build` job, parameters from metadata.json."""

from __future__ import annotations

import sys

from worldline.cli import app

if __name__ == "__main__":
    # Dataflow passes --in/--out/--config/... plus pipeline options; typer forwards the unknown ones to Beam.
    sys.argv = ["worldline", "pools", "build", *sys.argv[1:]]
    app()
