"""AgentWorldBench, the Qwen-AgentWorld evaluation set, as a file format: sample, IO, conversion.

AgentWorldBench ships one JSONL per domain, named `<domain>_test.jsonl`. One line is one evaluation
sample: the turn `turn_idx` (1-based) of a trajectory with `total_turns` turns. Our reading of the
format, matched against the reference evaluator:

- `system_str` is the world model's system prompt, carried by every sample of the trajectory.
- `prompt[i]` / `response[i]` are the action prompt and the ground-truth observation of turn i+1.
  The published data carries the whole trajectory in every sample (`len == total_turns`); derived sets
  carry only the turns up to the evaluated one (`len == turn_idx`). The evaluator reads history from
  `prompt[:turn_idx-1]` / `response[:turn_idx-1]` and the ground truth from `response[turn_idx-1]`,
  so both layouts are valid; we accept any length in `turn_idx..total_turns` and remember it.
- `current_prompt` is the action prompt of the evaluated turn: normally `prompt[turn_idx-1]`.
- `task` names the domain (`mcp`, or a path-like `group/mcp`: the last segment counts).
- Action prompts, responses, the system prompt's layout and the evaluator's conversation are the
  world-model conversation format (`schemas.worldmodel`); this package adds what only the file has.

System prompt. Exports compose `system_str` from the five parts (`schemas.worldmodel`) after the
domain's role preamble (its label and description in `schemas.domains`, which also gives an imported
action its kind and an observation its format); import splits a system prompt in exactly that layout back into the parts.
Any other system prompt (such as the published benchmark's) is kept whole as the task description,
flagged verbatim. Empty action-space descriptions are read back as none.

Text that does not follow the canonical layout is kept verbatim in `metadata["agentworldbench"]` and
used on export while it still agrees with the turn's fields, so import -> export -> import is lossless
for every field the format has.

- `sample`: the typed sample record, its JSON fields and their validation, the domain it names.
- `io`: streaming and validating sample files line by line, writing them atomically.
- `convert`: samples <-> `Trajectory`, turn selection (the paper's) and the per-domain export.

It lives in schemas/ because it needs nothing but the trajectory model and the world-model format, so
every package (collectors, the cleaner, pools, the judge, autoresearch, the CLI) may read and write
it. Importing a sample file into a redacted trajectory dataset needs the redaction core and lives
with the cleaner (`curation_agents.agentworldbench_import`).
"""

from schemas.agentworldbench.convert import (
    PAPER_MIDDLE_TURNS,
    ExportReport,
    TurnSelection,
    export_agentworldbench,
    inference_messages,
    parse_system_str,
    render_system_str,
    role_preamble,
    sample_to_trajectory,
    select_turns_paper,
    trajectory_id_for,
    trajectory_to_samples,
    turns_for_export,
)
from schemas.agentworldbench.io import AtomicTextFile, iter_sample_lines, read_samples, write_samples
from schemas.agentworldbench.sample import (
    FIELD_ORDER,
    FILE_SUFFIX,
    META_KEY,
    REQUIRED_FIELDS,
    SOURCE_NAME,
    AgentWorldBenchSample,
    SampleError,
    SampleFieldError,
    domain_name_of,
    domain_of,
)

__all__ = [
    "FIELD_ORDER",
    "FILE_SUFFIX",
    "META_KEY",
    "PAPER_MIDDLE_TURNS",
    "REQUIRED_FIELDS",
    "SOURCE_NAME",
    "AgentWorldBenchSample",
    "AtomicTextFile",
    "ExportReport",
    "SampleError",
    "SampleFieldError",
    "TurnSelection",
    "domain_name_of",
    "domain_of",
    "export_agentworldbench",
    "inference_messages",
    "iter_sample_lines",
    "parse_system_str",
    "read_samples",
    "render_system_str",
    "role_preamble",
    "sample_to_trajectory",
    "select_turns_paper",
    "trajectory_id_for",
    "trajectory_to_samples",
    "turns_for_export",
    "write_samples",
]
