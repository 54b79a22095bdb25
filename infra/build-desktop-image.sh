#!/usr/bin/env bash
# Build worldline/desktop offline after the first download: the os domain's sandbox image.
#   Debian bookworm (the minbase tarball infra/build-images.sh keeps in infra/.cache/) plus Xvfb, a
#   session bus, the AT-SPI bus and pyatspi, xdotool, gedit, gnome-calculator and fonts. The whole
#   desktop runs as the sandbox user agent (uid 1000, as in every image of infra/build-images.sh).
# The packages come from the machine's own Debian mirror (/etc/apt/sources.list.d/debian.sources),
# installed into a chroot of the minbase tree; the result is tarred into infra/.cache/ and imported.
# Cached: skipped when the image exists and was built from the same package list (its label
# worldline.desktop.key); the rootfs tarball is reused when only the import is missing.
# WORLDLINE_REBUILD_IMAGES=1 rebuilds. collectors/atspi_helper.py is not baked in: the collector passes
# its source to python3 in each sandbox, so the image does not go stale when the helper changes.
set -euo pipefail

INFRA_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE_DIR="${WORLDLINE_IMAGE_CACHE:-$INFRA_DIR/.cache}"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$INFRA_DIR/containers.conf}"
DEBIAN_SUITE="${WORLDLINE_DEBIAN_SUITE:-bookworm}"
NAME=worldline/desktop
SANDBOX_USER=agent SANDBOX_UID=1000 SANDBOX_GID=1000 SANDBOX_HOME=/home/agent
USER_LABEL="worldline.sandbox_user=$SANDBOX_USER:$SANDBOX_UID:$SANDBOX_GID"
PACKAGES=(
  xvfb                 # the X display
  xauth                # Xvfb's -auth cookie files
  dbus-x11             # the session bus (dbus-daemon, dbus-launch)
  at-spi2-core         # at-spi-bus-launcher and registryd
  python3-pyatspi      # the AT-SPI client collectors/atspi_helper.py uses
  gir1.2-atspi-2.0
  xdotool              # mouse and keyboard input
  gedit                # a GTK 3 text editor
  gnome-calculator     # a GTK 4 calculator
  adwaita-icon-theme   # GTK's icons (dialogs and buttons fall back to text without them)
  librsvg2-common      # loads those SVG icons
  fonts-dejavu-core    # text
  dconf-gsettings-backend
  procps               # ps / kill, for anyone inspecting a sandbox
)
KEY="$(printf '%s\n' "$DEBIAN_SUITE" "$USER_LABEL" "${PACKAGES[@]}" | sha256sum | cut -c1-16)"
TARBALL="$CACHE_DIR/desktop-$DEBIAN_SUITE-$KEY.tar"
ENV_PATH="PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

if command -v podman >/dev/null; then ENGINE_CLI=podman; else ENGINE_CLI=docker; fi

built_key="$("$ENGINE_CLI" image inspect --format '{{ index .Config.Labels "worldline.desktop.key" }}' "$NAME" 2>/dev/null || true)"
if [ "${WORLDLINE_REBUILD_IMAGES:-0}" != 1 ] && [ "$built_key" = "$KEY" ]; then
  echo "build-desktop-image: $NAME exists (cached)"
  exit 0
fi

build_rootfs() {
  local minbase="$CACHE_DIR/debian-$DEBIAN_SUITE-minbase.tar"
  [ -s "$minbase" ] || { echo "build-desktop-image: $minbase is missing; run infra/build-images.sh" >&2; exit 1; }
  [ "$(id -u)" -eq 0 ] || { echo "build-desktop-image: building the rootfs needs root (chroot)" >&2; exit 1; }
  local root
  root="$(mktemp -d "$CACHE_DIR/desktop-rootfs.XXXXXX")"
  # shellcheck disable=SC2064  # expand $root now: the trap runs after the function returned
  trap "umount '$root/proc' 2>/dev/null || true; rm -rf --one-file-system '$root'" EXIT
  tar -C "$root" -xf "$minbase"
  mkdir -p "$root/etc/apt/sources.list.d"
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    cp /etc/apt/sources.list.d/debian.sources "$root/etc/apt/sources.list.d/debian.sources"
    rm -f "$root/etc/apt/sources.list"
  elif [ -f /etc/apt/sources.list ]; then
    cp /etc/apt/sources.list "$root/etc/apt/sources.list"
  fi
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  # No service starts inside the chroot (dbus' postinst would try).
  printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
  chmod 755 "$root/usr/sbin/policy-rc.d"
  mount -t proc proc "$root/proc"
  echo "build-desktop-image: installing ${#PACKAGES[@]} packages into $DEBIAN_SUITE (a few minutes, once)"
  if ! chroot "$root" /usr/bin/env -i DEBIAN_FRONTEND=noninteractive "$ENV_PATH" /bin/sh -c \
    "apt-get update -qq && apt-get install -y -qq --no-install-recommends ${PACKAGES[*]}" \
    >"$CACHE_DIR/desktop-apt.log" 2>&1; then
    tail -n 30 "$CACHE_DIR/desktop-apt.log" >&2
    exit 1
  fi
  umount "$root/proc"
  # The sandbox user (the minbase tarball has it once infra/build-images.sh added it; older ones not).
  if ! grep -q "^$SANDBOX_USER:" "$root/etc/passwd"; then
    chroot "$root" /usr/sbin/groupadd --gid "$SANDBOX_GID" "$SANDBOX_USER"
    chroot "$root" /usr/sbin/useradd --uid "$SANDBOX_UID" --gid "$SANDBOX_GID" --home-dir "$SANDBOX_HOME" \
      --no-create-home --shell /bin/bash "$SANDBOX_USER"
  fi
  mkdir -p "$root$SANDBOX_HOME"
  chown "$SANDBOX_UID:$SANDBOX_GID" "$root$SANDBOX_HOME"
  chmod 0700 "$root$SANDBOX_HOME"
  # libdbus refuses to run without a machine id; one fixed id for every sandbox reveals nothing.
  chroot "$root" /usr/bin/dbus-uuidgen --ensure=/etc/machine-id
  # Xvfb writes its compiled keymap to /var/lib/xkb, which is on the read-only root: point it at /tmp.
  rm -rf "$root/var/lib/xkb"
  ln -s /tmp "$root/var/lib/xkb"
  mkdir -p "$root/work"
  rm -f "$root/usr/sbin/policy-rc.d" "$root/etc/resolv.conf"
  : >"$root/etc/resolv.conf"
  # Package caches, documentation and translations (the desktop runs in C.UTF-8) are no task's
  # business; dropping them takes a third off the image.
  rm -rf "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* \
    "$root"/var/log/apt/* "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* \
    "$root"/usr/share/help/* "$root"/usr/share/locale/*/LC_MESSAGES
  tar -C "$root" --numeric-owner -cf "$TARBALL.tmp" .
  mv "$TARBALL.tmp" "$TARBALL"
  rm -rf "$root"
  trap - EXIT
}

mkdir -p "$CACHE_DIR"
started=$SECONDS
if [ ! -s "$TARBALL" ] || [ "${WORLDLINE_REBUILD_IMAGES:-0}" = 1 ]; then
  rm -f "$CACHE_DIR"/desktop-"$DEBIAN_SUITE"-*.tar  # tarballs of older package lists
  build_rootfs
fi
"$ENGINE_CLI" import -q --change "ENV $ENV_PATH" --change 'ENV LANG=C.UTF-8' \
  --change "LABEL worldline.desktop.key=$KEY" \
  --change "LABEL $USER_LABEL" --change 'CMD ["/bin/bash"]' "$TARBALL" "$NAME" >/dev/null
echo "build-desktop-image: built $NAME in $((SECONDS - started)) s ($(du -h "$TARBALL" | cut -f1) rootfs)"
