#!/usr/bin/env bash
# Build the search domain's local BM25 index offline from the documentation installed on this machine
# (Python's HTML docs from Debian's python3-doc, which infra/install-system.sh installs) into
# infra/.cache/search-index. Skipped when the index exists; WORLDLINE_REBUILD_INDEX=1 rebuilds.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
OUT="${WORLDLINE_SEARCH_INDEX:-$ROOT/infra/.cache/search-index}"
args=(build --out "$OUT")
[ "${WORLDLINE_REBUILD_INDEX:-0}" = 1 ] || args+=(--if-missing)
"$ROOT/.venv/bin/python" -m collectors.search_index "${args[@]}"
