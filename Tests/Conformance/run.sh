#!/bin/sh
# bleak conformance on private buses (Tests/Scripts/with-simulator.sh), usage: run.sh GATTWAY PYTHON
#  1. bleak_conformance.py: bleak as a client of `gattway simulate --scenario demo`;
#  2. bleak_peripheral.py: bleak as the central on hci0 against `gattway run` in the peripheral
#     role on hci1 of linked-scenario.json, with a mosquitto of its own.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
"$HERE/../Scripts/with-simulator.sh" "$1" demo "$2" "$HERE/bleak_conformance.py"
"$HERE/../Scripts/with-simulator.sh" "$1" "$HERE/linked-scenario.json" "$2" "$HERE/bleak_peripheral.py" "$1"
