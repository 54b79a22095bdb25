#!/usr/bin/env bash
# Install the bundled MCP servers of the mcp collector domain into infra/.cache (pinned, idempotent):
#   npm:  @modelcontextprotocol/server-filesystem, server-memory, server-everything -> infra/.cache/mcp-node
#   PyPI: mcp-server-git, mcp-server-time, mcp-server-sqlite -> infra/.cache/mcp-python/<server>, one
#         --target folder each, run with PYTHONPATH: their pins never meet the project's or each other's
#         (mcp-server-sqlite is built on the mcp 1.x server API, the others on mcp 2.x)
# Re-running with the same pins does nothing; changing a pin here reinstalls.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="$ROOT/infra/.cache"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"

NPM_PACKAGES=(
  @modelcontextprotocol/server-filesystem@2026.8.31
  @modelcontextprotocol/server-memory@2026.8.31
  @modelcontextprotocol/server-everything@2026.8.31
)
# server folder -> its pinned requirements
declare -A PY_SERVERS=(
  [git]="mcp-server-git==2026.10.19 mcp==2.3.0"
  [time]="mcp-server-time==2026.10.19 mcp==2.3.0"
  [sqlite]="mcp-server-sqlite==2025.4.25 mcp==1.30.0"
)

install_node() {
  local dest="$CACHE/mcp-node" stamp="$CACHE/mcp-node/.pins"
  local want="${NPM_PACKAGES[*]}"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    echo "install-mcp-servers: npm servers already installed in $dest"
    return
  fi
  command -v npm >/dev/null || { echo "install-mcp-servers: npm is missing (install nodejs)" >&2; exit 1; }
  mkdir -p "$dest"
  npm install --prefix "$dest" --no-audit --no-fund --loglevel=error "${NPM_PACKAGES[@]}"
  echo "$want" > "$stamp"
  echo "install-mcp-servers: npm servers installed in $dest"
}

install_python() {
  local name="$1" want="$2" dest="$CACHE/mcp-python/$1"
  if [ -f "$dest/.pins" ] && [ "$(cat "$dest/.pins")" = "$want" ]; then
    echo "install-mcp-servers: PyPI server $name already installed in $dest"
    return
  fi
  rm -rf "$dest"
  mkdir -p "$dest"
  # shellcheck disable=SC2086  # the pins are words
  "$PYTHON" -m pip install -q --disable-pip-version-check --target "$dest/lib" $want
  echo "$want" > "$dest/.pins"
  echo "install-mcp-servers: PyPI server $name installed in $dest"
}

install_node
rm -rf "$CACHE/mcp-python/lib"  # the single shared folder of earlier versions of this script
for name in "${!PY_SERVERS[@]}"; do
  install_python "$name" "${PY_SERVERS[$name]}"
done
