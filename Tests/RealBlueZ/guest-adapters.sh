#!/bin/bash
# Several adapters of one gateway on the real kernel and bluetoothd (issue 30, items 4 and 5),
# inside the real-BlueZ VM:
#   Tests/RealBlueZ/run-vm.sh Tests/RealBlueZ/guest-adapters.sh BIN-DIR
# btvirt's controllers share one medium, so an advertiser on hci3 is heard by hci0 and hci2.
# `gattway run` scans with "adapters": ["hci0", "hci2"]; hci3 (a central only in guest-tests.sh,
# advertising nothing else) advertises a BTHome v2 frame (btmgmt add-adv, instance 1, connectable
# so that it uses hci3's public address) whose packet id
# changes every RBZ_ADAPTERS_STEP seconds (default 5), for
# RBZ_ADAPTERS_IDS ids (default 8). Both adapters hear the advertising events of every id (the
# kernel's default interval for such an instance is about 2 s under emulation: one to three
# reports per id and adapter); every id must reach MQTT exactly once, and bridge/health must list both adapters with
# reports. Once per path of RBZ_ADAPTERS_PATHS (default "mgmt dbus").
#
# Checks (one "PASS|FAIL adapters.P.name detail" line each, appended to $RESULTS): once (no packet
# id published twice), ids (at least all but one of the ids reached MQTT), health (both adapters
# in radio.adapters, each with reports).
set -u
BIN=${1:?usage: guest-adapters.sh BIN-DIR}
HERE=$(cd "$(dirname "$0")" && pwd)
SHARE=${SHARE:-/tmp}
LOGS=${LOGS:-$SHARE/logs}
RESULTS=${RESULTS:-$SHARE/results.txt}
PY=/usr/bin/python3
IDS=${RBZ_ADAPTERS_IDS:-8}
STEP=${RBZ_ADAPTERS_STEP:-5}
mkdir -p "$SHARE/out/adapters" "$LOGS"
# shellcheck source=Tests/RealBlueZ/guest-lib.sh
. "$HERE/guest-lib.sh"
address() { busctl --system get-property org.bluez "/org/bluez/$1" org.bluez.Adapter1 Address 2>/dev/null | cut -d'"' -f2; }
port=18870

advertiser=$(address hci3)
for path in ${RBZ_ADAPTERS_PATHS:-mgmt dbus}; do
  name=adapters.$path
  R=$SHARE/out/adapters/$path
  rm -rf "$R"; mkdir -p "$R"
  echo "[adapters $(t)] path $path: hci3 ($advertiser) advertises $IDS packet ids, $STEP s each; gattway scans hci0 + hci2"
  port=$((port + 1))
  start_broker "$R" "$port"
  cat > "$R/config.json" <<CONF
{
  "mqtt": {"server": "mqtt://127.0.0.1:$port", "base_topic": "rbza", "client_id": "rbz-adapters"},
  "bluetooth": {"adapters": ["hci0", "hci2"], "radio": "$path"},
  "homeassistant": {"enabled": false},
  "health": {"interval": "2s"},
  "devices": [{"match": {"address": "$advertiser"}, "name": "bthome"}]
}
CONF
  mosquitto_sub -h 127.0.0.1 -p "$port" -q 1 -t 'rbza/bthome' -t 'rbza/bridge/health' -F '%t %p' > "$R/mqtt.txt" 2>&1 &
  SUB=$!
  sleep 0.3
  start_gateway "$R/config.json" "$LOGS/gattway-adapters-$path.log"
  sleep 2
  for id in $(seq 1 "$IDS"); do
    # BTHome v2, unencrypted: device info 0x40, packet id (0x00), temperature 21.50 °C (0x02).
    data=$(printf '0916d2fc4000%02x026608' "$id")
    btmgmt --index 3 add-adv -c -g -d "$data" 1 > /dev/null 2>> "$R/btmgmt.stderr"
    sleep "$STEP"
  done
  btmgmt --index 3 rm-adv 1 > /dev/null 2>> "$R/btmgmt.stderr"
  sleep 3  # a health message after the last id
  stop_gateway
  kill "$SUB" "$BROKER" 2>/dev/null
  wait "$SUB" "$BROKER" 2>/dev/null
  $PY - "$R/mqtt.txt" "$IDS" "$name" > "$R/checks.txt" <<'CHECK'
import json, sys
lines, ids, name = open(sys.argv[1]).read().splitlines(), int(sys.argv[2]), sys.argv[3]
published, health = [], None
for line in lines:
    topic, _, payload = line.partition(' ')
    try:
        value = json.loads(payload)
    except ValueError:
        continue
    if topic == 'rbza/bthome' and 'packet_id' in value:
        published.append(value['packet_id'])
    elif topic == 'rbza/bridge/health':
        health = value
twice = sorted({i for i in published if published.count(i) > 1})
print(('PASS' if not twice else 'FAIL') + f' {name}.once {len(published)} states, packet ids {published}'
      + (f'; published twice: {twice}' if twice else ''))
seen = set(published)
print(('PASS' if len(seen) >= ids - 1 else 'FAIL') + f' {name}.ids {len(seen)} of {ids} packet ids reached MQTT')
adapters = ((health or {}).get('radio') or {}).get('adapters') or []
each = {a.get('name'): a.get('reports', 0) for a in adapters}
ok = set(each) == {'hci0', 'hci2'} and all(r > 0 for r in each.values())
repeats = ((health or {}).get('dropped') or {}).get('repeated_frame')
print(('PASS' if ok else 'FAIL') + f' {name}.health radio.adapters reports {each}, path {(health or {}).get("radio", {}).get("path")},'
      + f' dropped.repeated_frame {repeats}')
CHECK
  while read -r line; do result "$line"; done < "$R/checks.txt"
  [ -s "$R/checks.txt" ] || result "FAIL $name.checks no result: $(tail -n 3 "$R/mqtt.txt" | tr '\n' ' ')"
  [ -s "$R/btmgmt.stderr" ] && echo "[adapters] btmgmt: $(head -n 3 "$R/btmgmt.stderr" | tr '\n' ' ')"
done
! grep -q '^FAIL adapters' "$RESULTS"
