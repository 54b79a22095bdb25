#!/usr/bin/env bash
# Build worldline/mcp offline: worldline/debian plus node and the bundled MCP servers that
# infra/install-mcp-servers.sh installed into infra/.cache, laid out under /opt/mcp:
#   /opt/mcp/bin/node, /opt/mcp/node/node_modules/..., /opt/mcp/python/<server>/lib
# The mcp domain runs the servers that touch files or state (filesystem, memory, git, sqlite) in
# sandboxes of this image. Cached: skipped when the image exists; WORLDLINE_REBUILD_IMAGES=1 rebuilds.
set -euo pipefail

INFRA_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE_DIR="${WORLDLINE_IMAGE_CACHE:-$INFRA_DIR/.cache}"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$INFRA_DIR/containers.conf}"
NAME=worldline/mcp
if command -v podman >/dev/null; then ENGINE_CLI=podman; else ENGINE_CLI=docker; fi

if [ "${WORLDLINE_REBUILD_IMAGES:-0}" != 1 ] && "$ENGINE_CLI" image inspect "$NAME" >/dev/null 2>&1; then
  echo "build-mcp-image: $NAME exists (cached)"
  exit 0
fi
NODE="$(command -v node || true)"
[ -n "$NODE" ] || { echo "build-mcp-image: node is missing (install nodejs)" >&2; exit 1; }
[ -d "$CACHE_DIR/mcp-node/node_modules" ] && [ -d "$CACHE_DIR/mcp-python" ] || {
  echo "build-mcp-image: the MCP servers are not installed; run infra/install-mcp-servers.sh" >&2
  exit 1
}
"$ENGINE_CLI" image inspect worldline/debian >/dev/null 2>&1 || {
  echo "build-mcp-image: worldline/debian is missing; run infra/build-images.sh" >&2
  exit 1
}

ctx="$(mktemp -d "$CACHE_DIR/mcp-image.XXXXXX")"
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/opt/mcp/bin" "$ctx/opt/mcp/node"
cp "$(readlink -f "$NODE")" "$ctx/opt/mcp/bin/node"
cp -a "$CACHE_DIR/mcp-node/node_modules" "$ctx/opt/mcp/node/"
cp -a "$CACHE_DIR/mcp-python" "$ctx/opt/mcp/python"
cat >"$ctx/Containerfile" <<'CONTAINERFILE'
FROM worldline/debian
COPY opt /opt
ENV PATH=/opt/mcp/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
CMD ["/bin/bash"]
CONTAINERFILE
if [ "$ENGINE_CLI" = podman ]; then
  podman build -q --pull=never -t "$NAME" "$ctx" >/dev/null
else
  docker build -q -t "$NAME" "$ctx" >/dev/null
fi
echo "build-mcp-image: built $NAME"
