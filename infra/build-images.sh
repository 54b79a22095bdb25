#!/usr/bin/env bash
# Build the sandbox base images offline and import them into the engine:
#   worldline/busybox  a static busybox rootfs (seconds to build; fast tests)
#   worldline/debian   a Debian bookworm minbase rootfs with bash, coreutils, python3, git, procps, less
# Cached: an image that already exists is skipped; the debootstrap tarball is kept in infra/.cache/.
# Set WORLDLINE_REBUILD_IMAGES=1 to rebuild both.
set -euo pipefail

INFRA_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE_DIR="${WORLDLINE_IMAGE_CACHE:-$INFRA_DIR/.cache}"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$INFRA_DIR/containers.conf}"
DEBIAN_SUITE="${WORLDLINE_DEBIAN_SUITE:-bookworm}"
DEBIAN_PACKAGES="bash,coreutils,python3,git,procps,less,ca-certificates"
ENV_PATH="PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# The same images work with a real Docker Engine: use its CLI when podman is absent.
if command -v podman >/dev/null; then ENGINE_CLI=podman; else ENGINE_CLI=docker; fi

image_exists() {
  [ "${WORLDLINE_REBUILD_IMAGES:-0}" != 1 ] && "$ENGINE_CLI" image inspect "$1" >/dev/null 2>&1
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
  tar -C "$root" -cf "$CACHE_DIR/busybox-rootfs.tar" .
  "$ENGINE_CLI" import -q --change "ENV $ENV_PATH" --change 'CMD ["/bin/sh"]' \
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
    # Package caches and lists are not part of any task's initial state; dropping them halves the image.
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    tar -C "$root" --numeric-owner -cf "$tarball.tmp" .
    mv "$tarball.tmp" "$tarball"
    rm -rf "$root"
  fi
  "$ENGINE_CLI" import -q --change "ENV $ENV_PATH" --change 'ENV LANG=C.UTF-8' --change 'CMD ["/bin/bash"]' \
    "$tarball" "$name" >/dev/null
  echo "build-images: built $name"
}

mkdir -p "$CACHE_DIR"
build_busybox
build_debian
