#!/usr/bin/env bash
# Pools built from the same shards at two commits: row for row identical?
#
#   bash benchmarks/pools_identity.sh REV_A REV_B [WORK_DIR]
#
# Builds the inputs once with the current checkout (400 synthetic trajectories from
# benchmarks/pools_bench.py and the public traces under tests/fixtures cleaned by `worldline clean`),
# then `worldline pools build` (default config) with the code of each commit (git worktrees, this
# checkout's .venv), and compares every pool's rows and the removed records. Prints one line per pool
# and ALL IDENTICAL or DIFFERENT.
set -euo pipefail
A=$1; B=$2
ROOT=$(cd "$(dirname "$0")/.." && pwd)
W=${3:-$(mktemp -d -t worldline-identity-XXXXXX)}
PY=$ROOT/.venv/bin/python
mkdir -p "$W"
for side in a b; do
  rev=$([ "$side" = a ] && echo "$A" || echo "$B")
  git -C "$ROOT" worktree remove --force "$W/wt_$side" 2>/dev/null || true
  git -C "$ROOT" worktree add -f --detach "$W/wt_$side" "$rev" >/dev/null
done
cleanup() { git -C "$ROOT" worktree remove --force "$W/wt_a" 2>/dev/null || true
            git -C "$ROOT" worktree remove --force "$W/wt_b" 2>/dev/null || true; }
trap cleanup EXIT
rm -rf "$W/in" "$W/out_a" "$W/out_b"
W="$W" ROOT="$ROOT" PYTHONPATH="$ROOT" "$PY" - <<'PYEOF'
import os, sys
from pathlib import Path
sys.argv = ["x"]
from benchmarks.pools_bench import make_trajectories
from curation_agents.clean_run import CleanRun
from curation_agents.model import CleanConfig
from schemas.shards import write_trajectories
w = Path(os.environ["W"])
write_trajectories(w / "in" / "synthetic", make_trajectories(400, 8, seed=11))
fixtures = Path(os.environ["ROOT"]) / "tests" / "fixtures"
names = ("osworld", "mcp_universe", "swe_agent", "mini_swe_agent", "openhands", "terminal", "atif",
         "toolathlon", "widesearch", "mcpmark")
CleanRun([str(fixtures / n) for n in names if (fixtures / n).exists()], w / "in" / "public", CleanConfig()).run()
PYEOF
for side in a b; do
  (cd "$W/wt_$side" && PYTHONPATH="$W/wt_$side" "$PY" -c "from worldline.cli import main; main()" \
     pools build --in "$W/in/synthetic" --in "$W/in/public" --out "$W/out_$side" > "$W/build_$side.log" 2>&1) \
     || { echo "build at side $side failed: $W/build_$side.log"; exit 1; }
done
W="$W" "$PY" - <<'PYEOF'
import os
from pathlib import Path
import pyarrow as pa
import pyarrow.parquet as pq
w = Path(os.environ["W"])
same = True
for pool in ("cpt", "sft", "rl", "eval"):
    rows = {}
    for side in "ab":
        files = sorted((w / f"out_{side}" / pool).glob("part-*.parquet"))
        rows[side] = pa.concat_tables([pq.read_table(f) for f in files]).to_pylist() if files else []
    equal = rows["a"] == rows["b"]
    same &= equal
    print(f"{pool}: {len(rows['a'])} rows vs {len(rows['b'])}, identical: {equal}")
ra, rb = (sorted(map(str, pq.read_table(w / f"out_{s}" / "removed").to_pylist())) for s in "ab")
print(f"removed: {len(ra)} vs {len(rb)}, identical: {ra == rb}")
print("ALL IDENTICAL" if same and ra == rb else "DIFFERENT")
PYEOF
