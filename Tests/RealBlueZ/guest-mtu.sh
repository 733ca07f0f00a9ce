#!/bin/bash
# Notifications cut at the MTU (issue 34, item 4) on the real kernel and bluetoothd, inside the
# real-BlueZ VM:
#   Tests/RealBlueZ/run-vm.sh Tests/RealBlueZ/guest-mtu.sh BIN-DIR
# bluetoothd restarts with ExchangeMTU = 48 (it serves both ends: the links are MTU 48; below 48
# its BR/EDR listening socket is refused, L2CAP's minimum, and no adapter comes up), peripheral.py
# on hci1 adds FF06, a 60-byte read+notify value that changes every 0.5 s; `gattway run` on hci0
# subscribes to it with a parser that needs 51 bytes. bluetoothd, serving hci1, sends each
# notification cut, without a word to either side: to MTU − 5 = 43 bytes, as it sends a Multiple
# Handle Value Notification to a client that supports them (bluetoothd on hci0 does; measured
# 2026-12-06, bluetoothd 5.66), MTU − 3 = 45 in a single one.
# Checks (one "PASS|FAIL mtu.name detail" line each, appended to $RESULTS): property (the MTU
# property on hci0's side is 48), warning (gattway's log has one warning naming FF06, 43
# or 45 bytes and MTU 48), counted (bridge/health's dropped.notification_cut is above 0, parse_errors 0),
# read (a read of FF06 with the CLI gets all 60 bytes: the value is whole on the peer, Read Blob).
set -u
BIN=${1:?usage: guest-mtu.sh BIN-DIR}
HERE=$(cd "$(dirname "$0")" && pwd)
SHARE=${SHARE:-/tmp}
LOGS=${LOGS:-$SHARE/logs}
RESULTS=${RESULTS:-$SHARE/results.txt}
R=$SHARE/out/mtu
rm -rf "$R"; mkdir -p "$R" "$LOGS"
# shellcheck source=Tests/RealBlueZ/guest-lib.sh
. "$HERE/guest-lib.sh"
PERIPHERAL_ADDRESS=00:AA:01:01:00:01
port=18895

printf '[General]\n\n[GATT]\nChannels = 1\nExchangeMTU = 48\n\n[Policy]\nAutoEnable = true\n' > /run/rbz/main.conf
if ! /run/rbz/bin/rbz-bluetoothd restart > "$R/restart.txt" 2>&1; then
  result "FAIL mtu.bluetoothd restart with ExchangeMTU = 48: $(tail -n 3 "$R/restart.txt" | tr '\n' ' ')"
  exit 1
fi
/usr/bin/python3 -u "$HERE/peripheral.py" --adapter hci1 --other "" --period 0.5 --long-value \
  > "$LOGS/peripheral-mtu.log" 2>&1 &
PERIPHERAL=$!
until_true 30 grep -q 'READY 1' "$LOGS/peripheral-mtu.log" \
  || { result "FAIL mtu.peripheral $(tail -n 3 "$LOGS/peripheral-mtu.log" | tr '\n' ' ')"; exit 1; }
start_broker "$R" "$port"
timeout 240 mosquitto_sub -h 127.0.0.1 -p "$port" -t 'rbzm/#' -v > "$R/mqtt.txt" 2>&1 &
SUB=$!
cat > "$R/config.json" <<CONF
{
  "mqtt": {"server": "mqtt://127.0.0.1:$port", "base_topic": "rbzm", "client_id": "rbz-mtu"},
  "bluetooth": {"adapter": "hci0", "scan": {"services": ["180F"]}},
  "homeassistant": {"enabled": false},
  "health": {"interval": "2s"},
  "parsers": {"long_value": {"characteristic": "ff06", "fields": [
    {"name": "first", "offset": 0, "type": "u8"}, {"name": "tail", "offset": 50, "type": "u8"}]}},
  "devices": [{"match": {"address": "$PERIPHERAL_ADDRESS"}, "name": "long", "connect": true,
               "subscribe": [{"service": "FF00", "characteristic": "FF06", "parser": "long_value"}]}]
}
CONF
# A connection needs an advertising report after the Connect; btvirt sends one per advertising
# start: peripheral.py advertises anew every 10 s until the link is up (README, Traps).
( while sleep 10; do grep -q 'long: connected' "$LOGS/gattway-mtu.log" 2>/dev/null && break; kill -USR1 "$PERIPHERAL" 2>/dev/null; done ) &
NUDGE=$!
start_gateway "$R/config.json" "$LOGS/gattway-mtu.log" 'long: connected' 90
waitfor() {  # waitfor SECONDS PATTERN: until mqtt.txt has a line matching PATTERN
  until_true "$1" grep -qE -- "$2" "$R/mqtt.txt"
}
waitfor 30 '^rbzm/bridge/health .*"notification_cut":[1-9]'
mtu=$(busctl --system get-property org.bluez \
  "$(busctl --system tree org.bluez --list 2>/dev/null | grep -m1 "^/org/bluez/hci0/dev_${PERIPHERAL_ADDRESS//:/_}/service[0-9a-f]*/char[0-9a-f]*$" | head -n 1)" \
  org.bluez.GattCharacteristic1 MTU 2>/dev/null | awk '{print $2}')
if [ "$mtu" = 48 ]; then result "PASS mtu.property the link's MTU property is 48"
else result "FAIL mtu.property MTU property '${mtu:-none}' (expected 48 with ExchangeMTU = 48)"; fi
warning=$(grep -cE 'long: notification of FF06 cut to (45|43) bytes by the link.s ATT MTU of 48' "$LOGS/gattway-mtu.log")
if [ "$warning" = 1 ]; then result "PASS mtu.warning $(grep -m1 'notification of FF06 cut' "$LOGS/gattway-mtu.log" | head -c 200)"
else result "FAIL mtu.warning $warning warning line(s): $(grep -E 'FF06|ff06|not decoded' "$LOGS/gattway-mtu.log" | tail -n 2 | tr '\n' ' ' | head -c 300)"; fi
health=$(grep -E '^rbzm/bridge/health ' "$R/mqtt.txt" | tail -n 1)
if echo "$health" | grep -qE '"notification_cut":[1-9]' && echo "$health" | grep -q '"parse_errors":0'; then
  result "PASS mtu.counted $(echo "$health" | grep -oE '"notification_cut":[0-9]+'), parse_errors 0"
else result "FAIL mtu.counted $(echo "$health" | grep -oE '"(notification_cut|parse_errors|notifications)":[0-9]+' | tr '\n' ' ')"; fi
stop_gateway
kill "$NUDGE" 2>/dev/null
timeout 120 "$BIN/gattway" read --json --adapter hci0 --timeout 90s "$PERIPHERAL_ADDRESS" ff06 > "$R/read.txt" 2>&1
if grep -qiE '"hex" *: *"[0-9a-f]{2}0102030405060708090a0b0c0d0e0f10[0-9a-f]{86}"' "$R/read.txt"; then
  result "PASS mtu.read a read gets the whole value: $(head -c 160 "$R/read.txt" | tr '\n' ' ')"
else result "FAIL mtu.read $(head -c 300 "$R/read.txt" | tr '\n' ' ')"; fi
kill "$SUB" "$BROKER" "$PERIPHERAL" 2>/dev/null
wait "$SUB" "$BROKER" "$PERIPHERAL" 2>/dev/null
# bluetoothd as guest-up.sh configured it, for whatever runs next.
printf '[General]\n\n[GATT]\nChannels = 1\n\n[Policy]\nAutoEnable = true\n' > /run/rbz/main.conf
/run/rbz/bin/rbz-bluetoothd restart > /dev/null 2>&1 || echo "[mtu] bluetoothd restart with the usual configuration failed"
! grep -q '^FAIL mtu' "$RESULTS"
