#!/bin/bash
# Runs inside the real-BlueZ VM (through run-vm.sh) with bluetoothd up on hci0..hci2:
#   Tests/RealBlueZ/guest-tests.sh BIN-DIR
# BIN-DIR holds the host-built gattway and realbluez-central. Starts peripheral.py (hci1 + hci2),
# then the CLI checks, the CentralManager scenario and the differential recording. Every check is
# one "PASS|FAIL name detail" line, on the console and in $SHARE/results.txt; the status is 1 when
# any check failed.
set -u
BIN=${1:?usage: guest-tests.sh BIN-DIR}
HERE=$(cd "$(dirname "$0")" && pwd)
SHARE=${SHARE:-/tmp}
RESULTS=$SHARE/results.txt
PY=/usr/bin/python3
BATTERY=00:AA:01:01:00:01
OTHER=00:AA:01:02:00:02
: > "$RESULTS"
mkdir -p "$SHARE/out"
t() { cut -d' ' -f1 /proc/uptime; }
result() { echo "$*" | tee -a "$RESULTS"; }

$PY -u "$HERE/peripheral.py" --adapter hci1 --other hci2 > "$LOGS/peripheral.log" 2>&1 &
PERIPHERAL=$!
for _ in $(seq 300); do grep -q 'READY 1' "$LOGS/peripheral.log" && break; kill -0 $PERIPHERAL 2>/dev/null || break; sleep 0.05; done
if grep -q 'READY 1' "$LOGS/peripheral.log"; then
  result "PASS peripheral.registered GattManager1 + LEAdvertisingManager1 on hci1, advertiser on hci2 at guest $(t) s"
else
  result "FAIL peripheral.registered $(tail -n 3 "$LOGS/peripheral.log" | tr '\n' ' ')"
  exit 1
fi

# ---- The CLI against the real bluetoothd (each command connects and disconnects itself).
cli() {  # cli NAME PATTERN [NOT-PATTERN] -- gattway args...
  local name=$1 want=$2 unwanted=$3 out status
  shift 4
  out=$SHARE/out/cli-$name.txt
  timeout 40 "$BIN/gattway" "$@" --adapter hci0 > "$out" 2>&1
  status=$?
  if [ $status -eq 0 ] && grep -qiE -- "$want" "$out" && { [ -z "$unwanted" ] || ! grep -qiE -- "$unwanted" "$out"; }; then
    result "PASS cli.$name $(head -c 160 "$out" | tr '\n' ' ')"
  else
    result "FAIL cli.$name exit $status: $(head -c 400 "$out" | tr '\n' ' ')"
  fi
}
echo "[tests $(t)] CLI"
# Scanning as a user would: until the peripheral shows up (up to 45 s: btvirt's controllers send
# one advertising report per scan or advertising start, which the kernel can miss; the next comes
# when it restarts its LE scan 10.24 s later), then 2 s more in which the 180D device must not.
scan_out=$SHARE/out/cli-scan-180F.txt
"$BIN/gattway" scan --json --services 180F --adapter hci0 > "$scan_out" 2>&1 &
scanner=$!
scan_start=$(date +%s)
while [ "$(date +%s)" -lt $(( scan_start + 45 )) ] && ! grep -q "\"$BATTERY\"" "$scan_out"; do
  kill -0 $scanner 2>/dev/null || break
  sleep 0.2
done
scan_seconds=$(( $(date +%s) - scan_start ))
sleep 2
kill -INT $scanner 2>/dev/null
wait $scanner
scan_status=$?
if grep -q "\"$BATTERY\"" "$scan_out" && ! grep -q "$OTHER" "$scan_out"; then
  result "PASS cli.scan-180F found after ${scan_seconds} s: $(head -c 160 "$scan_out" | tr '\n' ' ')"
else
  result "FAIL cli.scan-180F exit $scan_status: $(head -c 400 "$scan_out" | tr '\n' ' ')"
fi
cli inspect '"180f".*"181a".*"ff00"|180f.*181a.*ff00' "" -- inspect --json $BATTERY
cli read-2A19 '"value"|[0-9a-f]{2}' "" -- read --json $BATTERY 2a19
cli write-request "" "" -- write $BATTERY ff01 0a0b
cli read-state '0a ?0b' "" -- read $BATTERY ff02
cli write-command "" "" -- write --without-response $BATTERY ff01 0c
cli read-state-2 '0c' "" -- read $BATTERY ff02
cli notify-2A19 '.' "" -- notify --json --count 3 $BATTERY 2a19

# ---- The CentralManager scenario.
echo "[tests $(t)] CentralManager scenario"
timeout 260 "$BIN/realbluez-central" 2>&1 | tee "$SHARE/out/central.txt" | grep -E '^(PASS|FAIL) ' >> "$RESULTS"
grep -E '^(PASS|FAIL) |realbluez-central:' "$SHARE/out/central.txt" | sed 's/^/  /'

# ---- gattway run end to end: mosquitto inside the guest, the gateway on hci0, the peripheral on hci1.
echo "[tests $(t)] gattway run"
GW=$SHARE/out/gateway
mkdir -p "$GW"
cat > "$GW/mosquitto.conf" <<CONF
listener 18833 127.0.0.1
allow_anonymous true
persistence false
CONF
mosquitto -c "$GW/mosquitto.conf" > "$GW/mosquitto.log" 2>&1 &
BROKER=$!
cat > "$GW/config.json" <<CONF
{
  "mqtt": {"server": "mqtt://127.0.0.1:18833", "base_topic": "rbz", "client_id": "rbz-gateway"},
  "bluetooth": {"adapter": "hci0", "scan": {"services": ["180F"]}},
  "homeassistant": {"enabled": false},
  "health": {"enabled": false},
  "parsers": {"lamp_state": {"characteristic": "ff02", "fields": [{"name": "state", "offset": 0, "type": "u8"}]}},
  "devices": [
    {"match": {"address": "$BATTERY"}, "name": "sensor", "connect": true,
     "subscribe": [{"service": "180F", "characteristic": "2A19", "parser": "battery_level"},
                   {"service": "FF00", "characteristic": "FF02", "parser": "lamp_state"}],
     "commands": {"lamp": {"service": "FF00", "characteristic": "FF01", "encoding": "u8"}}}
  ]
}
CONF
for _ in $(seq 100); do grep -q "running\|Opening ipv4 listen socket" "$GW/mosquitto.log" 2>/dev/null && break; sleep 0.05; done
timeout 60 mosquitto_sub -h 127.0.0.1 -p 18833 -t 'rbz/#' -v > "$GW/mqtt.txt" 2>&1 &
SUB=$!
sleep 0.3
"$BIN/gattway" run --config "$GW/config.json" --log-level debug > "$GW/gattway.log" 2>&1 &
GATEWAY=$!
waitfor() {  # waitfor SECONDS PATTERN: until mqtt.txt has a line matching PATTERN
  local deadline=$(( $(date +%s) + $1 ))
  while [ "$(date +%s)" -lt "$deadline" ]; do grep -qE -- "$2" "$GW/mqtt.txt" && return 0; sleep 0.1; done
  return 1
}
if waitfor 45 '^rbz/sensor \{.*"battery":[0-9]+'; then
  result "PASS gateway.readings $(grep -m1 -E '^rbz/sensor ' "$GW/mqtt.txt" | head -c 160)"
else
  result "FAIL gateway.readings $(tail -n 5 "$GW/gattway.log" | tr '\n' ' ' | head -c 400)"
fi
if waitfor 5 '^rbz/sensor/availability \{"state":"online"\}'; then
  result "PASS gateway.availability online"
else
  result "FAIL gateway.availability $(grep -E 'availability' "$GW/mqtt.txt" | tail -n 2 | tr '\n' ' ')"
fi
mosquitto_pub -h 127.0.0.1 -p 18833 -t rbz/sensor/set -m '{"lamp": 7, "transaction": "rbz-1"}'
if waitfor 20 '^rbz/sensor/response .*"transaction":"rbz-1".*"status":"ok"'; then
  result "PASS gateway.command $(grep -m1 -E '^rbz/sensor/response ' "$GW/mqtt.txt" | head -c 200)"
else
  result "FAIL gateway.command $(grep -E '^rbz/sensor/response ' "$GW/mqtt.txt" | tail -n 1) $(tail -n 3 "$GW/gattway.log" | tr '\n' ' ' | head -c 300)"
fi
if waitfor 20 '^rbz/sensor \{.*"state":7'; then
  result "PASS gateway.command-effect the lamp's state characteristic notified 7 back through the gateway"
else
  result "FAIL gateway.command-effect $(grep -E '^rbz/sensor ' "$GW/mqtt.txt" | tail -n 1 | head -c 200)"
fi
kill -TERM $GATEWAY 2>/dev/null
for _ in $(seq 100); do kill -0 $GATEWAY 2>/dev/null || break; sleep 0.1; done
if waitfor 5 '^rbz/bridge/state \{"state":"offline"\}'; then
  result "PASS gateway.stop bridge/state offline after SIGTERM"
else
  result "FAIL gateway.stop $(grep -E 'bridge/state' "$GW/mqtt.txt" | tail -n 1)"
fi
kill $SUB $BROKER 2>/dev/null
kill -9 $GATEWAY 2>/dev/null

# ---- The differential recording (compared with the simulator's on the host).
if [ -x "$HERE/dbus-session.py" ] && [ "${RBZ_DIFF:-1}" = 1 ]; then
  echo "[tests $(t)] differential session"
  if timeout 180 $PY -u "$HERE/dbus-session.py" --out "$SHARE/out/session-bluez.jsonl" > "$SHARE/out/session.txt" 2>&1; then
    result "PASS diff.recorded $(wc -l < "$SHARE/out/session-bluez.jsonl") events"
  else
    result "FAIL diff.recorded $(tail -n 3 "$SHARE/out/session.txt" | tr '\n' ' ')"
  fi
fi

kill $PERIPHERAL 2>/dev/null
echo "[tests $(t)] done"
! grep -q '^FAIL ' "$RESULTS"
