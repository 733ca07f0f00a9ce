#!/bin/sh
# bleak conformance: a private dbus-daemon, `gattway simulate --scenario demo` on it, then
# bleak_conformance.py with DBUS_SYSTEM_BUS_ADDRESS pointing there. Usage: run.sh GATTWAY PYTHON
set -eu
GATTWAY=$1
PYTHON=$2
HERE=$(cd "$(dirname "$0")" && pwd)
DIR=$(mktemp -d /tmp/gattway-conformance.XXXXXX)
DAEMON_PID=""
SIM_PID=""
cleanup() {
    [ -n "$SIM_PID" ] && kill "$SIM_PID" 2>/dev/null || true
    [ -n "$DAEMON_PID" ] && kill "$DAEMON_PID" 2>/dev/null || true
    rm -rf "$DIR"
}
trap cleanup EXIT INT TERM
cat > "$DIR/bus.conf" <<CONF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=$DIR/bus</listen>
  <auth>EXTERNAL</auth>
  <policy context="default"><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/><allow own="*"/></policy>
</busconfig>
CONF
dbus-daemon --config-file="$DIR/bus.conf" --nofork --nopidfile --print-address > "$DIR/address" &
DAEMON_PID=$!
for _ in $(seq 100); do [ -s "$DIR/address" ] && break; sleep 0.05; done
ADDRESS=$(head -n1 "$DIR/address")
"$GATTWAY" simulate --scenario demo --bus-address "$ADDRESS" --quiet > "$DIR/sim.out" 2>&1 &
SIM_PID=$!
for _ in $(seq 200); do grep -q "org.bluez is" "$DIR/sim.out" 2>/dev/null && break; sleep 0.05; done
DBUS_SYSTEM_BUS_ADDRESS=$ADDRESS "$PYTHON" "$HERE/bleak_conformance.py"
