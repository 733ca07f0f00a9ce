#!/bin/sh
# Home Assistant Core (the venv's, pinned in requirements.txt) adopts the Bluetooth proxy of
# `gattway run`: homeassistant_lane.py, on a private bus with the BlueZ simulator playing
# scenario.json. Usage: run.sh GATTWAY PYTHON (PYTHON: the Home Assistant venv's).
#
# The lane runs in a network namespace of its own with only a loopback interface (multicast routed
# to it, for Home Assistant's zeroconf, which would otherwise listen on port 5353 of every
# interface): Home Assistant and everything else the lane starts can reach no network and listen
# nowhere else. As root with `unshare --net`; otherwise in a user namespace
# (`unshare --map-root-user --net`). Where neither is allowed the lane does not run: SKIPPED, or a
# failure under CI=true.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
LANE="$HERE/../Scripts/with-simulator.sh $1 $HERE/scenario.json $2 $HERE/homeassistant_lane.py $1"
SETUP="ip link set lo up && ip link set lo multicast on && ip route add 224.0.0.0/4 dev lo"
for unshare in "unshare --net" "unshare --map-root-user --net"; do
    if $unshare sh -c "$SETUP" 2>/dev/null; then
        exec $unshare sh -c "$SETUP && exec $LANE"
    fi
done
echo "test-homeassistant: SKIPPED - no network namespace (unshare --net needs root, or user namespaces for" \
     "--map-root-user): Home Assistant's zeroconf would listen beyond loopback" >&2
[ "${CI:-}" = true ] && exit 1
exit 0
