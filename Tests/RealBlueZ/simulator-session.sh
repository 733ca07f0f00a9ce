#!/bin/sh
# The differential session on the host: dbus-session.py against `gattway simulate` with
# simulator-scenario.json (the VM's test peripheral as a scenario) on a private bus.
#   Tests/RealBlueZ/simulator-session.sh GATTWAY OUT.jsonl
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
exec "$HERE/../Scripts/with-simulator.sh" "$1" "$HERE/simulator-scenario.json" \
    timeout 90 /usr/bin/python3 "$HERE/dbus-session.py" --out "$2"
