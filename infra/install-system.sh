#!/usr/bin/env bash
# Install the system packages the collectors need on a Debian 12 machine (run as root).
# Idempotent: when every package is already installed it exits without touching apt.
set -euo pipefail

PACKAGES=(
  podman          # Docker-API container engine (its `system service` speaks the Docker API)
  runc            # OCI runtime that works on cgroups-v1 hybrid hosts (crun does not)
  conmon          # podman's container monitor
  slirp4netns     # podman networking helper (only used by tasks that ask for a network)
  uidmap          # newuidmap/newgidmap, needed by podman even as root on some setups
  debootstrap     # builds the Debian minbase rootfs for worldline/debian offline (from the mirror)
  busybox-static  # a static busybox: the whole worldline/busybox image
  tmux            # terminal multiplexer used by terminal-recording tools
  catatonit       # tiny init (--init) that reaps zombies left by background jobs in sandboxes
  iptables        # bridge networking for the rare task that asks for a network
  curl            # engine.sh probes the Docker API socket with it
  ca-certificates
  python3-venv    # `make setup` creates .venv with the machine's python3 (Debian splits venv out)
  chromium        # web domain: the browser Playwright drives and autoresearch's report test (executable_path=/usr/bin/chromium)
  xvfb            # os domain: a virtual X display for the desktop applications
  dbus-x11        # os domain: dbus-launch, the session bus the AT-SPI bus registers on
  at-spi2-core    # os domain: the accessibility bus (at-spi-bus-launcher, registryd)
  python3-pyatspi # os domain: the AT-SPI client the tree-dump helper runs under /usr/bin/python3
  xdotool         # os domain: mouse and keyboard input
  gedit           # os domain: a GTK 3 text editor to act in
  gnome-calculator # os domain: a second GTK application (GTK 4)
  python3-doc     # the search domain's local corpus: Python's HTML documentation, indexed offline by make setup
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-system: all ${#PACKAGES[@]} system packages already installed"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-system: missing packages: ${missing[*]}; re-run as root (sudo $0)" >&2
  exit 1
fi

echo "install-system: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-system: done"
