#!/usr/bin/env bash
# start|stop|status of the project-local Podman service that speaks the Docker API.
# `start` is idempotent: it returns as soon as the socket answers (starting the service only if needed)
# and prints the DOCKER_HOST to use. Settings come from infra/containers.conf via CONTAINERS_CONF.
set -euo pipefail

INFRA_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
RUN_DIR="${WORLDLINE_RUN_DIR:-$INFRA_DIR/.run}"
# A unix socket path must stay short (108 bytes), so it lives in /tmp rather than in the checkout.
SOCKET="${WORLDLINE_PODMAN_SOCKET:-/tmp/worldline-podman.sock}"
PIDFILE="$RUN_DIR/podman-service.pid"
LOGFILE="$RUN_DIR/podman-service.log"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$INFRA_DIR/containers.conf}"

socket_answers() {
  [ -S "$SOCKET" ] && curl -fsS --max-time 2 --unix-socket "$SOCKET" http://d/_ping >/dev/null 2>&1
}

service_pid() {
  if [ -f "$PIDFILE" ]; then
    local pid
    pid="$(cat "$PIDFILE")"
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
      echo "$pid"
      return 0
    fi
  fi
  return 1
}

ensure_subids() {
  # User-namespace ranges for rootful Podman's `--userns=auto` (collectors/sandbox.py): the
  # `containers` user owns 2^31 ids above the host's; each sandbox gets 65536 of them. Idempotent.
  local file
  for file in /etc/subuid /etc/subgid; do
    if ! grep -q '^containers:' "$file" 2>/dev/null; then
      if [ -w "$(dirname "$file")" ]; then
        echo 'containers:2147483647:2147483648' >>"$file"
      else
        echo "engine: $file has no 'containers' range and cannot be written; as root add" \
          "'containers:2147483647:2147483648' to it" >&2
      fi
    fi
  done
}

start() {
  ensure_subids
  if socket_answers; then
    echo "DOCKER_HOST=unix://$SOCKET"
    return 0
  fi
  if ! command -v podman >/dev/null; then
    echo "engine: podman is not installed; run infra/install-system.sh as root" >&2
    return 1
  fi
  mkdir -p "$RUN_DIR"
  if pid="$(service_pid)"; then
    kill "$pid" 2>/dev/null || true   # a service whose socket does not answer is stuck: replace it
  fi
  rm -f "$SOCKET"
  # setsid + nohup: the service must outlive the shell that ran `make setup`.
  setsid nohup podman system service --time=0 "unix://$SOCKET" >"$LOGFILE" 2>&1 </dev/null &
  echo $! >"$PIDFILE"
  for _ in $(seq 1 150); do
    if socket_answers; then
      echo "DOCKER_HOST=unix://$SOCKET"
      return 0
    fi
    sleep 0.2
  done
  echo "engine: podman service did not answer on $SOCKET within 30 s; log: $LOGFILE" >&2
  tail -n 20 "$LOGFILE" >&2 || true
  return 1
}

stop() {
  if pid="$(service_pid)"; then
    kill "$pid"
    for _ in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    echo "engine: stopped (pid $pid)"
  else
    echo "engine: not running"
  fi
  rm -f "$PIDFILE" "$SOCKET"
}

status() {
  if socket_answers; then
    echo "engine: running; DOCKER_HOST=unix://$SOCKET"
  else
    echo "engine: not answering on $SOCKET (start it with: infra/engine.sh start)"
    return 1
  fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
