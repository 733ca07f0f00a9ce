#!/usr/bin/env bash
# Installs gattway as a systemd service on Raspberry Pi OS / Debian.
#
#   sudo deploy/install.sh            build (release, static Swift stdlib), install, enable and start
#   sudo deploy/install.sh --no-start install and enable, but do not start
#
# Environment:
#   DESTDIR=/tmp/root   install into a staging root instead of / (no user creation, no systemctl)
#   GATTWAY_BINARY=…    install this binary instead of building one
#
# What it does: installs the Debian packages gattway needs at run time (BlueZ, D-Bus, the MQTT
# and D-Bus client libraries), builds `swift build -c release --static-swift-stdlib` with the link options of
# scripts/release-flags.sh (BENCHMARKS.md, resident memory), creates the
# `gattway` system user (in the `bluetooth` group), and installs
#   /usr/local/bin/gattway
#   /etc/gattway/config.json            (only when absent; mode 0640 root:gattway — it may hold secrets)
#   /var/lib/gattway                    (state: known devices, the store-and-forward queue)
#   /etc/systemd/system/gattway.service
#   /etc/dbus-1/system.d/gattway.conf
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
destdir=${DESTDIR:-}
start=yes
for argument in "$@"; do
  case "$argument" in
    --no-start) start=no ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown option $argument" >&2; exit 64 ;;
  esac
done

if [ -z "$destdir" ] && [ "$(id -u)" -ne 0 ]; then
  echo "install.sh: run as root (sudo), or set DESTDIR to stage the files" >&2
  exit 1
fi

if [ -z "$destdir" ]; then
  "$repo/scripts/install-deps.sh" bluez dbus libdbus-1-3 libmosquitto1 libssl3 libmicrohttpd12
fi

binary=${GATTWAY_BINARY:-}
if [ -z "$binary" ]; then
  "$repo/scripts/install-deps.sh" pkg-config libdbus-1-dev libmosquitto-dev libssl-dev
  mapfile -t flags < <("$repo/scripts/release-flags.sh")
  (cd "$repo" && swift build "${flags[@]}" --product gattway)
  binary="$(cd "$repo" && swift build "${flags[@]}" --show-bin-path)/gattway"
fi

install -D -m 0755 "$binary" "$destdir/usr/local/bin/gattway"
install -D -m 0644 "$here/gattway.service" "$destdir/etc/systemd/system/gattway.service"
install -D -m 0644 "$here/gattway-dbus.conf" "$destdir/etc/dbus-1/system.d/gattway.conf"
install -d -m 0750 "$destdir/var/lib/gattway"
install -d -m 0755 "$destdir/etc/gattway"
if [ ! -e "$destdir/etc/gattway/config.json" ]; then
  install -m 0640 "$repo/config.json" "$destdir/etc/gattway/config.json"
  echo "installed the default configuration: edit $destdir/etc/gattway/config.json"
else
  echo "kept the existing $destdir/etc/gattway/config.json"
fi

if [ -n "$destdir" ]; then
  echo "staged into $destdir (no user, no systemctl)"
  exit 0
fi

if ! id gattway >/dev/null 2>&1; then
  useradd --system --no-create-home --home-dir /var/lib/gattway --shell /usr/sbin/nologin gattway
fi
getent group bluetooth >/dev/null && usermod -a -G bluetooth gattway
chown root:gattway /etc/gattway/config.json
chown gattway:gattway /var/lib/gattway
systemctl reload dbus 2>/dev/null || true
systemctl daemon-reload
"/usr/local/bin/gattway" config check /etc/gattway/config.json || {
  echo "install.sh: the configuration has errors (above); fix it, then: sudo systemctl enable --now gattway" >&2
  exit 78
}
if [ "$start" = yes ]; then
  systemctl enable --now gattway
  systemctl --no-pager status gattway || true
else
  systemctl enable gattway
fi
