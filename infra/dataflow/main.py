"""Flex Template entry point: the same `worldline pools build` job, parameters from metadata.json.

Dataflow passes the template parameters (--in, --out, ...) and its own pipeline options in one list;
`pools build` takes Beam options only after `--`, so they are separated here.
"""

from __future__ import annotations

import sys

from worldline.cli import app

BUILD_FLAGS = {"--overwrite", "--incremental"}
BUILD_OPTIONS = {"--in", "--out", "--config", "--knowledge", "--eval", "--group-by"}


def split_arguments(argv: list[str]) -> tuple[list[str], list[str]]:
    """(pools build arguments, Beam pipeline options) of a Flex Template launch."""
    ours: list[str] = []
    beam: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        name = arg.split("=", 1)[0]
        if name in BUILD_FLAGS or (name in BUILD_OPTIONS and "=" in arg):
            ours.append(arg)
        elif name in BUILD_OPTIONS and i + 1 < len(argv):
            ours += [arg, argv[i + 1]]
            i += 1
        else:
            beam.append(arg)
        i += 1
    return ours, beam


if __name__ == "__main__":
    build_args, beam_args = split_arguments(sys.argv[1:])
    sys.argv = ["worldline", "pools", "build", *build_args, "--", *beam_args]
    app()
