#!/bin/sh
# aioesphomeapi (Home Assistant's ESPHome client, pinned in requirements.txt) against the Bluetooth
# proxy of `gattway run`, on a private bus with the BlueZ simulator (scenario.json: a BTHome and a
# Ruuvi advertiser with constant readings, a stamped advertiser, and connectable devices with GATT
# services for connections through the proxy). Usage: run.sh GATTWAY PYTHON
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
# The simulator serves the management protocol too, for the proxy on the management path (14.).
WITH_MGMT_SOCKET=1 "$HERE/../Scripts/with-simulator.sh" "$1" "$HERE/scenario.json" "$2" "$HERE/esphome_proxy.py" "$1"
