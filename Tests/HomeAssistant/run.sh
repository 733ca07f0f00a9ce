#!/bin/sh
# Home Assistant Core (the venv's, pinned in requirements.txt) adopts the Bluetooth proxy of
# `gattway run`: homeassistant_lane.py, on a private bus with the BlueZ simulator playing
# scenario.json. Usage: run.sh GATTWAY PYTHON (PYTHON: the Home Assistant venv's).
#
# Where it can (root, as in CI), the lane runs in a network namespace of its own that has only a
# loopback interface (multicast routed to it, for Home Assistant's zeroconf): Home Assistant, its
# mDNS and everything else the lane starts cannot reach any network. Without unshare's rights it
# runs in the machine's namespace, everything still on 127.0.0.1 (Home Assistant's zeroconf then
# joins the multicast group on the machine's interfaces).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
LANE="$HERE/../Scripts/with-simulator.sh $1 $HERE/scenario.json $2 $HERE/homeassistant_lane.py $1"
if [ "${HA_LANE_NETNS:-1}" = 1 ] && unshare --net true 2>/dev/null; then
    exec unshare --net sh -c "ip link set lo up && ip link set lo multicast on \
        && ip route add 224.0.0.0/4 dev lo && exec $LANE"
fi
echo "note: no network namespace (unshare --net needs root); the lane runs on the machine's loopback"
exec $LANE
