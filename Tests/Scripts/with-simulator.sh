#!/bin/sh
# Runs a command against the BlueZ simulator on a private bus:
#   Tests/Scripts/with-simulator.sh GATTWAY SCENARIO COMMAND [ARGS...]
# starts a private dbus-daemon (session policy, so the simulator may own org.bluez),
# `GATTWAY simulate --scenario SCENARIO` on it, then COMMAND with DBUS_SYSTEM_BUS_ADDRESS set
# (and BLUEZ_SIMULATOR_PID, the simulator's process, for a test that freezes it with SIGSTOP).
# Everything it started is stopped on exit; the exit status is COMMAND's.
set -eu
GATTWAY=$1
SCENARIO=$2
shift 2
DIR=$(mktemp -d /tmp/gattway-sim.XXXXXX)
DAEMON=""
SIM=""
cleanup() {
    if [ -n "$SIM" ]; then kill "$SIM" 2>/dev/null || true; fi
    if [ -n "$DAEMON" ]; then kill "$DAEMON" 2>/dev/null || true; fi
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
DAEMON=$!
for _ in $(seq 100); do [ -s "$DIR/address" ] && break; sleep 0.05; done
ADDRESS=$(head -n1 "$DIR/address")
# With WITH_MGMT_SOCKET set, the simulator also serves the kernel's management protocol there, for
# gattway runs started with GATTWAY_MGMT_SOCKET (its path is passed on as SIMULATOR_MGMT_SOCKET).
MGMT=""
if [ -n "${WITH_MGMT_SOCKET:-}" ]; then MGMT="$DIR/mgmt.sock"; fi
"$GATTWAY" simulate --scenario "$SCENARIO" --bus-address "$ADDRESS" ${MGMT:+--mgmt-socket "$MGMT"} --quiet \
    > "$DIR/sim.out" 2>&1 &
SIM=$!
for _ in $(seq 200); do grep -q "org.bluez is" "$DIR/sim.out" 2>/dev/null && break; sleep 0.05; done
BLUEZ_SIMULATOR_PID=$SIM SIMULATOR_MGMT_SOCKET=$MGMT DBUS_SYSTEM_BUS_ADDRESS=$ADDRESS "$@"
