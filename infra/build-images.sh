#!/usr/bin/env bash
# Build the sandbox base images offline and import them into the engine:
#   worldline/busybox  a static busybox rootfs (seconds to build; fast tests)
#   worldline/debian   a Debian bookworm minbase rootfs with bash, coreutils, python3, git, procps, less
# Both have the sandbox user agent (uid 1000, gid 1000, home /home/agent) that tasks run as, and so
# has every image built from the Debian tarball. Cached: an image that already exists and has the user
# is skipped; the debootstrap tarball is kept in infra/.cache/. Set WORLDLINE_REBUILD_IMAGES=1 to
# rebuild both.
set -euo pipefail

INFRA_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE_DIR="${WORLDLINE_IMAGE_CACHE:-$INFRA_DIR/.cache}"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$INFRA_DIR/containers.conf}"
DEBIAN_SUITE="${WORLDLINE_DEBIAN_SUITE:-bookworm}"
DEBIAN_PACKAGES="bash,coreutils,python3,git,procps,less,ca-certificates"
ENV_PATH="PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SANDBOX_USER=agent SANDBOX_UID=1000 SANDBOX_GID=1000 SANDBOX_HOME=/home/agent
USER_LABEL="worldline.sandbox_user=$SANDBOX_USER:$SANDBOX_UID:$SANDBOX_GID"

# The same images work with a real Docker Engine: use its CLI when podman is absent.
if command -v podman >/dev/null; then ENGINE_CLI=podman; else ENGINE_CLI=docker; fi

image_exists() {
  # An image from before the sandbox user existed is rebuilt.
  [ "${WORLDLINE_REBUILD_IMAGES:-0}" != 1 ] && [ "$("$ENGINE_CLI" image inspect \
    --format '{{index .Config.Labels "worldline.sandbox_user"}}' "$1" 2>/dev/null)" = "${USER_LABEL#*=}" ]
}

add_sandbox_user() {
  # The unprivileged user of every sandbox, in a rootfs directory ($1); idempotent.
  local root="$1"
  grep -q "^$SANDBOX_USER:" "$root/etc/passwd" ||
    echo "$SANDBOX_USER:x:$SANDBOX_UID:$SANDBOX_GID:sandbox user:$SANDBOX_HOME:/bin/bash" >>"$root/etc/passwd"
  grep -q "^$SANDBOX_USER:" "$root/etc/group" || echo "$SANDBOX_USER:x:$SANDBOX_GID:" >>"$root/etc/group"
  if [ -f "$root/etc/shadow" ] && ! grep -q "^$SANDBOX_USER:" "$root/etc/shadow"; then
    echo "$SANDBOX_USER:*:19000:0:99999:7:::" >>"$root/etc/shadow"
  fi
  mkdir -p "$root$SANDBOX_HOME"
  chown "$SANDBOX_UID:$SANDBOX_GID" "$root$SANDBOX_HOME"
  chmod 0700 "$root$SANDBOX_HOME"
  if [ -x "$root/bin/bash" ]; then
    # The terminal's shell runs from an execute-only copy of bash: a process that executes a file it
    # cannot read is not dumpable, so other processes of the same user cannot read or write its memory
    # or environment through /proc (collectors/shell.py).
    mkdir -p "$root/usr/lib/worldline"
    cp "$root/bin/bash" "$root/usr/lib/worldline/bash"
    chmod 0111 "$root/usr/lib/worldline/bash"
  fi
}

tarball_has_user() {
  tar -xOf "$1" ./etc/passwd 2>/dev/null | grep -q "^$SANDBOX_USER:x:$SANDBOX_UID:" &&
    tar -tf "$1" ./usr/lib/worldline/bash >/dev/null 2>&1
}

debian_mirror() {
  # The first http(s) mirror that apt itself uses (deb822 sources first, then the classic list).
  local uri=""
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    uri="$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources)"
  fi
  if [ -z "$uri" ] && [ -f /etc/apt/sources.list ]; then
    uri="$(awk '$1 == "deb" && $2 ~ /^http/ {print $2; exit}' /etc/apt/sources.list)"
  fi
  echo "${uri:-http://deb.debian.org/debian}"
}

build_busybox() {
  local name=worldline/busybox
  if image_exists "$name"; then echo "build-images: $name exists (cached)"; return; fi
  local busybox=/bin/busybox
  [ -x "$busybox" ] || { echo "build-images: $busybox missing; run infra/install-system.sh" >&2; exit 1; }
  local root
  root="$(mktemp -d)"
  trap 'rm -rf "$root"' RETURN
  mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,tmp,root,etc,work,proc,sys,dev}
  chmod 1777 "$root/tmp"
  cp "$busybox" "$root/bin/busybox"
  # One symlink per applet, as `busybox --install -s` would create inside the rootfs.
  for applet in $("$busybox" --list-full); do
    [ -e "$root/$applet" ] || ln -s /bin/busybox "$root/$applet"
  done
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$root/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
  add_sandbox_user "$root"
  sed -i "s|^$SANDBOX_USER:\(.*\):/bin/bash\$|$SANDBOX_USER:\1:/bin/sh|" "$root/etc/passwd"
  tar -C "$root" --numeric-owner -cf "$CACHE_DIR/busybox-rootfs.tar" .
  "$ENGINE_CLI" import -q --change "ENV $ENV_PATH" --change "LABEL $USER_LABEL" --change 'CMD ["/bin/sh"]' \
    "$CACHE_DIR/busybox-rootfs.tar" "$name" >/dev/null
  echo "build-images: built $name"
}

build_debian() {
  local name=worldline/debian
  if image_exists "$name"; then echo "build-images: $name exists (cached)"; return; fi
  local tarball="$CACHE_DIR/debian-$DEBIAN_SUITE-minbase.tar"
  if [ ! -s "$tarball" ] || [ "${WORLDLINE_REBUILD_IMAGES:-0}" = 1 ]; then
    command -v debootstrap >/dev/null || { echo "build-images: debootstrap missing; run infra/install-system.sh" >&2; exit 1; }
    local root="$CACHE_DIR/debian-rootfs"
    rm -rf "$root"
    local mirror
    mirror="$(debian_mirror)"
    echo "build-images: debootstrap $DEBIAN_SUITE from $mirror (a few minutes, once)"
    debootstrap --variant=minbase --include="$DEBIAN_PACKAGES" "$DEBIAN_SUITE" "$root" "$mirror" \
      >"$CACHE_DIR/debootstrap.log" 2>&1 || { tail -n 30 "$CACHE_DIR/debootstrap.log" >&2; exit 1; }
    mkdir -p "$root/work"
    add_sandbox_user "$root"
    # Package caches and lists are not part of any task's initial state; dropping them halves the image.
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    tar -C "$root" --numeric-owner -cf "$tarball.tmp" .
    mv "$tarball.tmp" "$tarball"
    rm -rf "$root"
  elif ! tarball_has_user "$tarball"; then
    # A tarball cached before the sandbox user existed: add the user (no new download).
    echo "build-images: adding the sandbox user $SANDBOX_USER to $tarball"
    local root="$CACHE_DIR/debian-rootfs"
    rm -rf "$root"
    mkdir -p "$root"
    tar -C "$root" --numeric-owner -xf "$tarball"
    add_sandbox_user "$root"
    tar -C "$root" --numeric-owner -cf "$tarball.tmp" .
    mv "$tarball.tmp" "$tarball"
    rm -rf "$root"
  fi
  "$ENGINE_CLI" import -q --change "ENV $ENV_PATH" --change 'ENV LANG=C.UTF-8' --change "LABEL $USER_LABEL" \
    --change 'CMD ["/bin/bash"]' \
    "$tarball" "$name" >/dev/null
  echo "build-images: built $name"
}

mkdir -p "$CACHE_DIR"
build_busybox
build_debian
