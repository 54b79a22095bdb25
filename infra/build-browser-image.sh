#!/usr/bin/env bash
# Build worldline/browser offline: the Debian bookworm minbase rootfs (infra/build-images.sh's cached
# tarball) plus Debian's chromium, fonts-dejavu-core and libatomic1 (the driver's node needs it) from
# bookworm(-security), and the Playwright
# Python package (with its node driver) at the venv's version in /usr/local/lib/python3.11/dist-packages.
# The web domain runs the browser, the driver and the page-driving helper in sandboxes of this image.
# Chromium's managed policy (/etc/chromium/policies/managed/) blocks downloads and file-selection
# dialogs in every profile, and reads its URL allow-list from /tmp/chromium-policy/allow.json, which the
# helper writes per sandbox (every URL but the task's origins blocked, file:, chrome:, view-source: too).
# Cached: skipped when the image exists (the rootfs tarball is kept in infra/.cache);
# WORLDLINE_REBUILD_IMAGES=1 rebuilds both.
set -euo pipefail

INFRA_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(dirname "$INFRA_DIR")"
CACHE_DIR="${WORLDLINE_IMAGE_CACHE:-$INFRA_DIR/.cache}"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$INFRA_DIR/containers.conf}"
NAME=worldline/browser
SUITE="${WORLDLINE_DEBIAN_SUITE:-bookworm}"
BASE="$CACHE_DIR/debian-$SUITE-minbase.tar"
TARBALL="$CACHE_DIR/browser-$SUITE-rootfs.tar"
PYTHON="${WORLDLINE_PYTHON:-$REPO_DIR/.venv/bin/python}"
ENV_PATH="PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
if command -v podman >/dev/null; then ENGINE_CLI=podman; else ENGINE_CLI=docker; fi
rebuild="${WORLDLINE_REBUILD_IMAGES:-0}"

if [ "$rebuild" != 1 ] && "$ENGINE_CLI" image inspect "$NAME" >/dev/null 2>&1; then
  echo "build-browser-image: $NAME exists (cached)"
  exit 0
fi

if [ ! -s "$TARBALL" ] || [ "$rebuild" = 1 ]; then
  [ -s "$BASE" ] || { echo "build-browser-image: $BASE is missing; run infra/build-images.sh" >&2; exit 1; }
  [ -x "$PYTHON" ] || { echo "build-browser-image: $PYTHON is missing; run make venv" >&2; exit 1; }
  version="$("$PYTHON" -c 'import importlib.metadata as m; print(m.version("playwright"))')"
  started=$SECONDS
  root="$(mktemp -d "$CACHE_DIR/browser-rootfs.XXXXXX")"
  wheels="$(mktemp -d "$CACHE_DIR/browser-wheels.XXXXXX")"
  cleanup() {
    umount "$root/proc" 2>/dev/null || true
    # Never delete a tree that still has the host's /proc mounted in it.
    if mountpoint -q "$root/proc"; then echo "build-browser-image: $root/proc is still mounted; left $root" >&2
    else rm -rf "$root"; fi
    rm -rf "$wheels"
  }
  trap cleanup EXIT
  tar -C "$root" -xf "$BASE"
  # apt needs the security suite (it carries the chromium the host runs) and a resolver.
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    mkdir -p "$root/etc/apt/sources.list.d"
    cp /etc/apt/sources.list.d/debian.sources "$root/etc/apt/sources.list.d/debian.sources"
    : >"$root/etc/apt/sources.list"
  fi
  cp -L /etc/resolv.conf "$root/etc/resolv.conf"
  mount -t proc proc "$root/proc"
  echo "build-browser-image: apt-get install chromium fonts-dejavu-core libatomic1 (a few minutes, once)"
  log="$CACHE_DIR/browser-apt.log"
  { chroot "$root" apt-get update &&
    DEBIAN_FRONTEND=noninteractive chroot "$root" apt-get install -y --no-install-recommends \
      chromium fonts-dejavu-core libatomic1; } >"$log" 2>&1 || { tail -n 30 "$log" >&2; exit 1; }
  umount "$root/proc"
  # The Playwright wheel (it carries its node driver) and greenlet, for the rootfs's CPython 3.11.
  platforms=(--platform manylinux1_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64)
  "$PYTHON" -m pip download -q --no-deps --only-binary :all: --dest "$wheels" "${platforms[@]}" \
    --python-version 3.11 --implementation cp "playwright==$version" "greenlet>=3.1.1,<4"
  # The host venv's interpreter is CPython 3.11 on x86-64 as well, so it can install these wheels.
  "$PYTHON" -m pip install -q --no-deps --no-index --no-compile --find-links "$wheels" \
    --target "$root/usr/local/lib/python3.11/dist-packages" "playwright==$version" greenlet
  chmod -R a+rX "$root/usr/local/lib/python3.11/dist-packages"
  # The sandbox user every task runs as (collectors/sandbox.py), as infra/build-images.sh adds it.
  grep -q '^agent:' "$root/etc/passwd" || echo 'agent:x:1000:1000:sandbox user:/home/agent:/bin/bash' >>"$root/etc/passwd"
  grep -q '^agent:' "$root/etc/group" || echo 'agent:x:1000:' >>"$root/etc/group"
  mkdir -p "$root/home/agent" "$root/etc/chromium/policies/managed" "$root/work"
  chown 1000:1000 "$root/home/agent"
  chmod 0700 "$root/home/agent"
  cat >"$root/etc/chromium/policies/managed/worldline.json" <<'POLICY'
{
  "DownloadRestrictions": 3,
  "AllowFileSelectionDialogs": false,
  "PromptForDownloadLocation": false,
  "DownloadDirectory": "/tmp/downloads",
  "DefaultNotificationsSetting": 2,
  "DefaultGeolocationSetting": 2,
  "PasswordManagerEnabled": false,
  "AutofillAddressEnabled": false,
  "AutofillCreditCardEnabled": false,
  "BackgroundModeEnabled": false,
  "MetricsReportingEnabled": false,
  "SafeBrowsingProtectionLevel": 0
}
POLICY
  # The URL allow-list of each sandbox (URLBlocklist "*" plus URLAllowlist, local schemes blocked),
  # written by collectors/browser_helper.py into the sandbox's tmpfs before Chromium starts.
  ln -s /tmp/chromium-policy/allow.json "$root/etc/chromium/policies/managed/allow.json"
  rm -f "$root/etc/resolv.conf"
  : >"$root/etc/resolv.conf"
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
    "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/*
  tar -C "$root" --numeric-owner -cf "$TARBALL.tmp" .
  mv "$TARBALL.tmp" "$TARBALL"
  echo "build-browser-image: rootfs $(du -h "$TARBALL" | cut -f1) in $((SECONDS - started)) s"
fi
"$ENGINE_CLI" import -q --change "ENV $ENV_PATH" --change 'ENV LANG=C.UTF-8' \
  --change "LABEL worldline.sandbox_user=agent:1000:1000" --change 'CMD ["/bin/bash"]' \
  "$TARBALL" "$NAME" >/dev/null
echo "build-browser-image: built $NAME"
