#!/usr/bin/env bash
# The main job on the embedded default: local sandboxes, local files, the Beam DirectRunner, no LLM.
#   1. collect terminal, SWE, MCP and search trajectories from real backends, web and desktop ones on
#      real Chromium and gedit, with the scripted policy
#   2. clean the bundled public traces and terminal recordings
#   3. import the bundled AgentWorldBench sample
#   4. build, verify and summarise disjoint CPT / SFT / RL pools from all of it
# Usage: infra/demo.sh [OUT_DIR]   (default out/demo; rebuilt from scratch on every run)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
OUT="${1:-out/demo}"
WL="$ROOT/.venv/bin/worldline"
export PYTHONWARNINGS="${PYTHONWARNINGS:-ignore}"

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

rm -rf "$OUT"
mkdir -p "$OUT"

step "1/5 collect: terminal, SWE, MCP, search, web (Chromium) and desktop (gedit) tasks on real backends (scripted policy)"
"$WL" sandbox doctor
"$WL" collect --env terminal --tasks collectors/tasks/terminal_examples.jsonl --policy scripted \
  --out "$OUT/collected/terminal" --concurrency 4
"$WL" collect --env swe --tasks collectors/tasks/swe_examples.jsonl --policy scripted \
  --out "$OUT/collected/swe" --concurrency 2
"$WL" collect --env web --tasks collectors/tasks/web_examples.jsonl --policy scripted \
  --out "$OUT/collected/web" --concurrency 2
"$WL" collect --env os --tasks collectors/tasks/os_examples.jsonl --policy scripted \
  --out "$OUT/collected/os"
"$WL" collect --env mcp --tasks collectors/tasks/mcp_examples.jsonl --policy scripted \
  --out "$OUT/collected/mcp" --concurrency 3
"$WL" collect --env search --tasks collectors/tasks/search_examples.jsonl --policy scripted \
  --out "$OUT/collected/search" --concurrency 2

step "2/5 clean: bundled terminal recordings and public agent traces (see curation_agents/samples/SOURCES.md)"
"$WL" clean curation_agents/samples/*.cast --out "$OUT/cleaned/recordings" \
  --source-kind public --source-name worldline-terminal-recordings --licence Apache-2.0
mapfile -t traces < <(find curation_agents/samples -maxdepth 1 -type f ! -name '*.cast' ! -name 'SOURCES.md' | sort)
"$WL" clean "${traces[@]}" --out "$OUT/cleaned/public" \
  --source-kind public --source-name public-agent-traces --licence MIT
echo "quarantined records and why: $OUT/cleaned/public/quarantine/ (reasons in summary.json)"

step "3/5 import: the bundled AgentWorldBench sample"
"$WL" import agentworldbench worldline/samples/*_test.jsonl --out "$OUT/imported"

step "4/5 inspect: stats of everything gathered, and one collected trajectory"
for ds in "$OUT/collected/terminal" "$OUT/collected/swe" "$OUT/collected/web" "$OUT/collected/os" "$OUT/collected/mcp" "$OUT/collected/search" "$OUT/cleaned/recordings" "$OUT/cleaned/public" "$OUT/imported"; do
  "$WL" stats "$ds"
done
first_id="$("$ROOT/.venv/bin/python" -c 'import sys, worldline; print(worldline.open_dataset(sys.argv[1]).select("id").head(1).collect().item())' "$OUT/collected/terminal")"
"$WL" show "$OUT/collected/terminal" --id "$first_id" --max-chars 600

step "5/5 pools: build on the Beam DirectRunner, verify disjointness and per-pool rules"
# The AgentWorldBench samples are the evaluation set: decontamination input, never training input.
"$WL" pools build --config pipelines/configs/demo.yaml \
  --in "$OUT/collected/terminal" --in "$OUT/collected/swe" --in "$OUT/collected/web" --in "$OUT/collected/os" \
  --in "$OUT/collected/mcp" --in "$OUT/collected/search" \
  --in "$OUT/cleaned/recordings" --in "$OUT/cleaned/public" \
  --eval worldline/samples \
  --out "$OUT/pools" --overwrite
"$WL" pools verify "$OUT/pools"

printf '\n\033[1mdone.\033[0m collected, cleaned and imported shards: %s/{collected,cleaned,imported}\n' "$OUT"
echo "pools and dataset cards: $OUT/pools/{cpt,sft,rl,eval}/README.md; manifest: $OUT/pools/manifest.json"
