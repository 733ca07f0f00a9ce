#!/bin/bash
# Runs inside the real-BlueZ VM (through run-vm.sh) with bluetoothd up on hci0..hci3:
#   Tests/RealBlueZ/guest-tests.sh BIN-DIR
# BIN-DIR holds the host-built gattway and realbluez-central. Starts peripheral.py (hci1 + hci2),
# then the CLI checks, the CentralManager scenario, gattway run, the differential recording,
# gattway run's Home Assistant Bluetooth proxy with aioesphomeapi and bleak-esphome as its
# clients (RBZ_ESPHOME_PYTHON, the python of .venv-esphome), and gattway serve on hci1 in place
# of peripheral.py with the CLI and bleak (RBZ_BLEAK_PYTHON, a python with bleak) as centrals,
# and `gattway run` in the peripheral role on hci1 with mosquitto and the CLI as the central, and
# `gattway run` with role both (central on hci0, serving and advertising on hci2, the CLI on hci3
# reading it), several adapters (guest-adapters.sh: hci0 + hci2 of one gateway hearing hci3),
# connection parameters (guest-params.sh: hci0 connecting to hci3 under btmon), the virtual
# radio (guest-radio.sh: vhci-radio.py's reports through `gattway run`), and pairing with a
# passkey and with a numeric comparison through MQTT (guest-pairing.sh: hci0 pairs hci3, then hci2),
# notifications cut at an MTU of 48 (guest-mtu.sh). RBZ_MTU=0 skips the last. RBZ_DIFF=0 / RBZ_PROXY=0 / RBZ_SERVE=0 /
# RBZ_PERIPHERAL_RUN=0 / RBZ_BOTH=0 / RBZ_ADAPTERS=0 / RBZ_PARAMS=0 / RBZ_RADIO=0 /
# RBZ_PAIRING=0 leave a section out. Every check is
# one "PASS|FAIL name detail" line, on the console and in $SHARE/results.txt; the status is 1 when
# any check failed.
# shellcheck disable=SC2010,SC2012 # ls /sys/class/bluetooth: its entries (hciN, hciN:HANDLE) have plain names
set -u
BIN=${1:?usage: guest-tests.sh BIN-DIR}
HERE=$(cd "$(dirname "$0")" && pwd)
SHARE=${SHARE:-/tmp}
RESULTS=$SHARE/results.txt
PY=/usr/bin/python3
BATTERY=00:AA:01:01:00:01
OTHER=00:AA:01:02:00:02
# hci3 (00:AA:01:03:00:03), the second central, is only ever named by adapter.
: > "$RESULTS"
mkdir -p "$SHARE/out"
# shellcheck source=Tests/RealBlueZ/guest-lib.sh
. "$HERE/guest-lib.sh"  # t, result, until_true

$PY -u "$HERE/peripheral.py" --adapter hci1 --other hci2 > "$LOGS/peripheral.log" 2>&1 &
PERIPHERAL=$!
export PERIPHERAL_PID=$PERIPHERAL  # realbluez-central nudges it (SIGUSR1: advertise anew)
for _ in $(seq 300); do grep -q 'READY 1' "$LOGS/peripheral.log" && break; kill -0 $PERIPHERAL 2>/dev/null || break; sleep 0.05; done
if grep -q 'READY 1' "$LOGS/peripheral.log"; then
  result "PASS peripheral.registered GattManager1 + LEAdvertisingManager1 on hci1, advertiser on hci2 at guest $(t) s"
else
  result "FAIL peripheral.registered $(tail -n 3 "$LOGS/peripheral.log" | tr '\n' ' ')"
  exit 1
fi

# ---- The CLI against the real bluetoothd (each command connects and disconnects itself).
# Each command connects and disconnects itself. A connection needs an advertising report of the
# peripheral after the Connect, and btvirt's controllers send one per scan or advertising start
# (the kernel restarts its LE scan every 10.24 s during discovery), which the kernel now and then
# drops (a report in the moment the scan starts): --timeout 90s covers eight such windows. CI once
# saw the read after the bluetoothd restart in the peripheral-role section get no report of hci1
# in 45 s although discovery ran throughout. While peripheral.py runs (the CLI section), it also
# advertises anew every 10 s of a command (SIGUSR1); `gattway serve` and `gattway run` serve hci1
# later and register their advertisement anew after each disconnection by themselves.
# CLI_ADAPTER (default hci0) is the controller the command uses.
cli() {  # cli NAME PATTERN [NOT-PATTERN] -- gattway args...
  local name=$1 want=$2 unwanted=$3 out status command started
  shift 4
  out=$SHARE/out/cli-$name.txt
  timeout 120 "$BIN/gattway" "$@" --adapter "${CLI_ADAPTER:-hci0}" --timeout 90s > "$out" 2>&1 &
  command=$!
  started=$(date +%s)
  while kill -0 $command 2>/dev/null; do
    sleep 0.2
    if [ $(( $(date +%s) - started )) -ge 10 ]; then
      started=$(date +%s)
      kill -USR1 "$PERIPHERAL" 2>/dev/null
    fi
  done
  wait $command
  status=$?
  if [ $status -eq 0 ] && grep -qiE -- "$want" "$out" && { [ -z "$unwanted" ] || ! grep -qiE -- "$unwanted" "$out"; }; then
    result "PASS cli.$name $(head -c 160 "$out" | tr '\n' ' ')"
  else
    result "FAIL cli.$name exit $status: $(head -c 400 "$out" | tr '\n' ' ')"
  fi
}
echo "[tests $(t)] CLI"
# Scanning as a user would: until the peripheral shows up (up to 90 s: btvirt's controllers send
# one advertising report per scan or advertising start, which the kernel can miss; the next comes
# when it restarts its LE scan 10.24 s later), then 2 s more in which the 180D device must not.
scan_for() {  # scan_for OUT SERVICE PATTERN: `gattway scan` until PATTERN shows (≤ 90 s), then 2 s more
  local out=$1 scanner scan_start
  "$BIN/gattway" scan --json --services "$2" --adapter hci0 > "$out" 2>&1 &
  scanner=$!
  scan_start=$(date +%s)
  while [ "$(date +%s)" -lt $(( scan_start + 90 )) ] && ! grep -qiE -- "$3" "$out"; do
    kill -0 $scanner 2>/dev/null || break
    sleep 0.2
    # Every 10 s without it, peripheral.py advertises anew (a report per advertising start).
    if [ -n "${NUDGE_PID:-}" ] && [ $(( ($(date +%s) - scan_start) % 10 )) -eq 9 ] \
        && [ "$(date +%s)" -gt "${last_nudge:-0}" ]; then
      last_nudge=$(( $(date +%s) + 1 ))
      kill -USR1 "$NUDGE_PID" 2>/dev/null
    fi
  done
  scan_seconds=$(( $(date +%s) - scan_start ))
  sleep 2
  kill -INT $scanner 2>/dev/null
  wait $scanner
  scan_status=$?
}
scan_out=$SHARE/out/cli-scan-180F.txt
NUDGE_PID=$PERIPHERAL scan_for "$scan_out" 180F "\"$BATTERY\""
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
timeout 380 "$BIN/realbluez-central" 2>&1 | tee "$SHARE/out/central.txt" | grep -E '^(PASS|FAIL) ' >> "$RESULTS"
grep -E '^(PASS|FAIL) |realbluez-central:' "$SHARE/out/central.txt" | sed 's/^/  /'
# A scenario cut short in its bluetoothd-restart step (timed out under a slow emulation) leaves
# bluetoothd stopped, and every section after it would fail for that alone: start it again and
# say so (the scenario's own FAIL lines stay).
ensure_bluetoothd() {
  if ! busctl --system --list tree org.bluez 2>/dev/null | grep -q '^/org/bluez/hci0$'; then
    echo "[tests $(t)] bluetoothd is not serving hci0 after $1: starting it again"
    rbz-bluetoothd restart || echo "[tests $(t)] rbz-bluetoothd restart failed"
  fi
}
ensure_bluetoothd "the CentralManager scenario"

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
timeout 240 mosquitto_sub -h 127.0.0.1 -p 18833 -t 'rbz/#' -v > "$GW/mqtt.txt" 2>&1 &
SUB=$!
sleep 0.3
"$BIN/gattway" run --config "$GW/config.json" --log-level debug > "$GW/gattway.log" 2>&1 &
GATEWAY=$!
waitfor() {  # waitfor SECONDS PATTERN: until mqtt.txt has a line matching PATTERN
  local deadline=$(( $(date +%s) + $1 ))
  while [ "$(date +%s)" -lt "$deadline" ]; do grep -qE -- "$2" "$GW/mqtt.txt" && return 0; sleep 0.1; done
  return 1
}
# 75 s: one connect attempt that stalls (seen once: bluetoothd resolved the services at once but
# the attempt waited out connect_timeout, 30 s; the retry connected) and its retry fit.
if waitfor 75 '^rbz/sensor \{.*"battery":[0-9]+'; then
  result "PASS gateway.readings $(grep -m1 -E '^rbz/sensor ' "$GW/mqtt.txt" | head -c 160)"
else
  result "FAIL gateway.readings $(tail -n 5 "$GW/gattway.log" | tr '\n' ' ' | head -c 400)"
fi
# The first reading may come from the advertisement (its 180F service data is the battery
# level), before the connection: the link itself gets the same 75 s.
if waitfor 75 '^rbz/sensor/availability \{"state":"online"\}'; then
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

ensure_bluetoothd "gattway run"

# ---- The differential recording (compared with the simulator's on the host).
if [ -x "$HERE/dbus-session.py" ] && [ "${RBZ_DIFF:-1}" = 1 ]; then
  echo "[tests $(t)] differential session"
  if timeout 180 $PY -u "$HERE/dbus-session.py" --out "$SHARE/out/session-bluez.jsonl" > "$SHARE/out/session.txt" 2>&1; then
    result "PASS diff.recorded $(wc -l < "$SHARE/out/session-bluez.jsonl") events"
  else
    result "FAIL diff.recorded $(tail -n 3 "$SHARE/out/session.txt" | tr '\n' ' ')"
  fi
fi

# ---- The Home Assistant Bluetooth proxy (docs/ha-bluetooth-proxy.md) through the real bluetoothd:
# `gattway run` with bluetooth_proxy (Noise key, on the guest's loopback) scans hci0, and Home
# Assistant's clients — aioesphomeapi and bleak-esphome over habluetooth, from .venv-esphome
# (RBZ_ESPHOME_PYTHON) — read peripheral.py's advertisement and connect it through the proxy
# (proxy-client.py: one line per check; a check without its line is a FAIL).
if [ "${RBZ_PROXY:-1}" = 1 ]; then
  if [ -z "${RBZ_ESPHOME_PYTHON:-}" ]; then
    echo "[tests $(t)] Bluetooth proxy not run: RBZ_ESPHOME_PYTHON is not set (make test-bluez sets it)"
  else
    echo "[tests $(t)] gattway run, Bluetooth proxy"
    PX=$SHARE/out/proxy
    PXLOG=$LOGS/gattway-proxy.log
    mkdir -p "$PX"
    printf 'listener 18836 127.0.0.1\nallow_anonymous true\npersistence false\n' > "$PX/mosquitto.conf"
    mosquitto -c "$PX/mosquitto.conf" > "$PX/mosquitto.log" 2>&1 &
    BROKER=$!
    for _ in $(seq 100); do grep -q "running\|Opening ipv4 listen socket" "$PX/mosquitto.log" 2>/dev/null && break; sleep 0.05; done
    PROXY_KEY=$(head -c 32 /dev/urandom | base64)
    ( umask 077; cat > "$PX/config.json" <<CONF
{
  "mqtt": {"server": "mqtt://127.0.0.1:18836", "base_topic": "rbzp", "client_id": "rbz-proxy"},
  "bluetooth": {"adapter": "hci0", "radio": "mgmt"},
  "homeassistant": {"enabled": false},
  "health": {"enabled": false},
  "bluetooth_proxy": {"enabled": true, "listen": "127.0.0.1:16053", "name": "rbz-proxy",
                      "encryption_key": "$PROXY_KEY", "connection_slots": 2}
}
CONF
    )
    "$BIN/gattway" run --config "$PX/config.json" --log-level debug > "$PXLOG" 2>&1 &
    GATEWAY=$!
    for _ in $(seq 300); do grep -q 'ESPHome API on' "$PXLOG" && break; kill -0 $GATEWAY 2>/dev/null || break; sleep 0.1; done
    if grep -q 'ESPHome API on 127.0.0.1:16053 as "rbz-proxy" (Noise encryption)' "$PXLOG"; then
      result "PASS proxy.started $(grep -m1 'ESPHome API on' "$PXLOG" | head -c 160)"
      timeout 240 "$RBZ_ESPHOME_PYTHON" -u "$HERE/proxy-client.py" --port 16053 --key "$PROXY_KEY" --name rbz-proxy \
        --nudge $PERIPHERAL --radio mgmt > "$PX/client.txt" 2>&1
      grep -E '^(PASS|FAIL) proxy\.' "$PX/client.txt" | tee -a "$RESULTS"
      checks=$("$RBZ_ESPHOME_PYTHON" "$HERE/proxy-client.py" --checks)
      [ -n "$checks" ] || result "FAIL proxy.client no list of checks: $("$RBZ_ESPHOME_PYTHON" "$HERE/proxy-client.py" --checks 2>&1 | tail -n 2 | tr '\n' ' ')"
      for name in $checks; do
        grep -qE "^(PASS|FAIL) proxy\.$name( |$)" "$PX/client.txt" \
          || result "FAIL proxy.$name no result: $(tail -n 3 "$PX/client.txt" | tr '\n' ' ' | head -c 300)"
      done
    else
      result "FAIL proxy.started $(tail -n 3 "$PXLOG" | tr '\n' ' ' | head -c 400)"
    fi
    kill -TERM $GATEWAY 2>/dev/null
    for _ in $(seq 100); do kill -0 $GATEWAY 2>/dev/null || break; sleep 0.1; done
    kill -9 $GATEWAY $BROKER 2>/dev/null
    # The proxy disconnects what its clients connected, at the latest when it stops: no link of
    # hci0 is left for the next section.
    for _ in $(seq 100); do ls /sys/class/bluetooth | grep -q '^hci0:' || break; sleep 0.1; done
    if ls /sys/class/bluetooth | grep -q '^hci0:'; then
      result "FAIL proxy.no-link-left a link is still up: $(ls /sys/class/bluetooth | tr '\n' ' ')"
    else
      result "PASS proxy.no-link-left no link of hci0 after the proxy's stop"
    fi
  fi
  ensure_bluetoothd "the Bluetooth proxy"
fi

# ---- gattway as the peripheral (issue #10): `gattway serve` on hci1 instead of peripheral.py;
# gattway's CLI and bleak (from the project's .venv, when given) as centrals on hci0.
kill $PERIPHERAL 2>/dev/null
wait $PERIPHERAL 2>/dev/null
if [ "${RBZ_SERVE:-1}" = 1 ]; then
  echo "[tests $(t)] gattway serve"
  SV=$SHARE/out/serve
  mkdir -p "$SV"
  # hci0 keeps the device object of the same address: its GATT cache is checked against the
  # new server's Database Hash (a mismatch makes bluetoothd discover the services again).
  "$BIN/gattway" serve --tree "$HERE/serve-tree.json" --adapter hci1 > "$SV/serve.log" 2>&1 &
  SERVER=$!
  for _ in $(seq 300); do grep -q '^serving' "$SV/serve.log" && break; kill -0 $SERVER 2>/dev/null || break; sleep 0.1; done
  if grep -q '^serving 2 service(s), 3 characteristic(s) as 00:AA:01:01:00:01, advertising' "$SV/serve.log"; then
    result "PASS serve.started $(head -n 1 "$SV/serve.log")"
    cli serve-read '"hex":"4d"' "" -- read --json $BATTERY 2a19
    cli serve-write "" "" -- write $BATTERY ff11 0a0b
    cli serve-read-back '0a ?0b' "" -- read $BATTERY ff11
    cli serve-write-command "" "" -- write --without-response $BATTERY ff11 0c
    cli serve-read-back-2 '0c' "" -- read $BATTERY ff11
    # A read the server answers with ATT 0x80: the CLI fails and says so.
    timeout 120 "$BIN/gattway" read $BATTERY ff12 --adapter hci0 --timeout 90s > "$SHARE/out/cli-serve-read-error.txt" 2>&1
    status=$?
    if [ $status -ne 0 ] && grep -q '0x80' "$SHARE/out/cli-serve-read-error.txt"; then
      result "PASS cli.serve-read-error exit $status: $(head -c 160 "$SHARE/out/cli-serve-read-error.txt" | tr '\n' ' ')"
    else
      result "FAIL cli.serve-read-error exit $status: $(head -c 300 "$SHARE/out/cli-serve-read-error.txt" | tr '\n' ' ')"
    fi
    # Notifications: a subscribed CLI sees the value another CLI writes (the server notifies writes).
    timeout 150 "$BIN/gattway" notify --json --count 1 $BATTERY ff11 --adapter hci0 --timeout 90s > "$SHARE/out/cli-serve-notify.txt" 2>&1 &
    NOTIFIER=$!
    serve_subscribed_or_gone() { grep -q 'subscribed FF11' "$SV/serve.log" || ! kill -0 "$NOTIFIER" 2>/dev/null; }
    until_true 100 serve_subscribed_or_gone
    timeout 120 "$BIN/gattway" write $BATTERY ff11 0d --adapter hci0 --timeout 90s > /dev/null 2>&1
    wait $NOTIFIER
    if grep -qi '"hex":"0d"' "$SHARE/out/cli-serve-notify.txt"; then
      result "PASS cli.serve-notify $(head -c 160 "$SHARE/out/cli-serve-notify.txt" | tr '\n' ' ')"
    else
      result "FAIL cli.serve-notify $(head -c 300 "$SHARE/out/cli-serve-notify.txt" | tr '\n' ' ')"
    fi
    if grep -q 'write FF11 by 00:AA:01:00:00:00 .*0a 0b' "$SV/serve.log"; then
      result "PASS serve.saw-writes $(grep -c '^write ' "$SV/serve.log") writes, $(grep -c '^read ' "$SV/serve.log") reads printed"
    else
      result "FAIL serve.saw-writes $(grep -E '^(write|read) ' "$SV/serve.log" | head -n 3 | tr '\n' ' ')"
    fi
    if [ -n "${RBZ_BLEAK_PYTHON:-}" ]; then
      # The last CLI's link goes down about 2 s after it exits (bluetoothd's disconnect timer);
      # bleak scanning and connecting meanwhile got that dying link and failed its service
      # discovery with "device disconnected" (README, Open issues).
      for _ in $(seq 100); do ls /sys/class/bluetooth | grep -q '^hci0:' || break; sleep 0.1; done
      timeout 220 "$RBZ_BLEAK_PYTHON" -u "$HERE/bleak-central.py" > "$SV/bleak.txt" 2>&1
      grep -E '^(PASS|FAIL) ' "$SV/bleak.txt" | tee -a "$RESULTS"
      grep -qE '^(PASS|FAIL) serve.bleak-disconnect' "$SV/bleak.txt" \
        || result "FAIL serve.bleak $(tail -n 3 "$SV/bleak.txt" | tr '\n' ' ' | head -c 400)"
    else
      echo "[tests $(t)] bleak not run: RBZ_BLEAK_PYTHON is not set (make test-bluez sets it)"
    fi
  else
    result "FAIL serve.started $(tail -n 3 "$SV/serve.log" | tr '\n' ' ')"
  fi
  kill -INT $SERVER 2>/dev/null
  wait $SERVER 2>/dev/null
fi

# ---- gattway run in the peripheral role (issue #10): the gateway serves and advertises on hci1,
# its characteristics bridged to mosquitto in the guest; gattway's CLI is the central on hci0.
if [ "${RBZ_PERIPHERAL_RUN:-1}" = 1 ]; then
  echo "[tests $(t)] gattway run, role peripheral"
  PR=$SHARE/out/peripheral-run
  PRLOG=$LOGS/gattway-peripheral.log
  mkdir -p "$PR"
  printf 'listener 18834 127.0.0.1\nallow_anonymous true\npersistence false\n' > "$PR/mosquitto.conf"
  mosquitto -c "$PR/mosquitto.conf" > "$PR/mosquitto.log" 2>&1 &
  BROKER=$!
  for _ in $(seq 100); do grep -q "running\|Opening ipv4 listen socket" "$PR/mosquitto.log" 2>/dev/null && break; sleep 0.05; done
  pub() { mosquitto_pub -h 127.0.0.1 -p 18834 -r -t home/state -m "{\"temperature\": $1}"; }
  pub 21.57                                   # retained: 2157 = 0x086D → 6d 08
  cat > "$PR/config.json" <<'CONF'
{
  "mqtt": {"server": "mqtt://127.0.0.1:18834", "base_topic": "rbz", "client_id": "rbz-peripheral"},
  "homeassistant": {"enabled": false},
  "health": {"enabled": false},
  "role": "peripheral",
  "peripheral": {
    "adapter": "hci1",
    "advertising": {"local_name": "rbz-gw", "service_uuids": ["181A"], "service_data": [{"uuid": "181A", "value": "2a"}]},
    "services": [
      {"uuid": "181A", "characteristics": [
        {"uuid": "2A6E", "properties": ["read", "notify"], "from_topic": "home/state",
         "json_key": "temperature", "encoding": "s16le", "scale": 100}]},
      {"uuid": "FF20", "characteristics": [
        {"uuid": "FF21", "properties": ["read", "write", "write-without-response"],
         "to_topic": "phone/lamp", "encoding": "u8", "value": 0}]}
    ]
  }
}
CONF
  "$BIN/gattway" run --config "$PR/config.json" --log-level debug > "$PRLOG" 2>&1 &
  GATEWAY=$!
  for _ in $(seq 300); do grep -q 'peripheral: advertising' "$PRLOG" && break; kill -0 $GATEWAY 2>/dev/null || break; sleep 0.1; done
  if grep -q 'peripheral: advertising' "$PRLOG"; then
    result "PASS prun.started $(grep -m1 'peripheral: serving' "$PRLOG" | head -c 160)"
  else
    result "FAIL prun.started $(tail -n 3 "$PRLOG" | tr '\n' ' ' | head -c 400)"
  fi
  # hci0 still has the device object of this address with the GATT services it resolved from
  # `gattway serve`: bluetoothd then keeps those as its UUIDs and ignores the advertised ones
  # (181A would not show; see README "Open issues"). A central meeting the gateway anew:
  dbus-send --system --print-reply --dest=org.bluez /org/bluez/hci0 org.bluez.Adapter1.RemoveDevice \
    objpath:/org/bluez/hci0/dev_${BATTERY//:/_} > /dev/null 2>&1
  scan_for "$PR/scan.txt" 181A "\"$BATTERY\".*\"181a\":\"2a\""
  if grep -qiE "\"$BATTERY\".*\"services\":\[[^]]*\"181a\".*\"service_data\":\{\"181a\":\"2a\"\}" "$PR/scan.txt"; then
    result "PASS prun.scan found after ${scan_seconds} s: $(grep -m1 "$BATTERY" "$PR/scan.txt" | head -c 200)"
  else
    result "FAIL prun.scan exit $scan_status: $(head -c 400 "$PR/scan.txt" | tr '\n' ' ')"
  fi
  cli prun-read '"hex":"6d ?08"' "" -- read --json $BATTERY 2a6e
  # A subscribed CLI gets the value of the next MQTT message as a notification.
  timeout 150 "$BIN/gattway" notify --json --count 1 $BATTERY 2a6e --adapter hci0 --timeout 90s > "$PR/notify.txt" 2>&1 &
  NOTIFIER=$!
  prun_subscribed_or_gone() { grep -q 'subscribed to 2A6E' "$PRLOG" || ! kill -0 "$NOTIFIER" 2>/dev/null; }
  until_true 100 prun_subscribed_or_gone
  pub 22.5                                    # 2250 = 0x08CA
  wait $NOTIFIER
  if grep -qiE '"hex":"ca ?08"' "$PR/notify.txt"; then
    result "PASS prun.notify MQTT 22.5 → $(head -c 160 "$PR/notify.txt" | tr '\n' ' ')"
  else
    result "FAIL prun.notify $(head -c 300 "$PR/notify.txt" | tr '\n' ' ')"
  fi
  written() {  # written NAME VALUE [--without-response]: a CLI write of FF21 arrives on phone/lamp
    timeout 100 mosquitto_sub -h 127.0.0.1 -p 18834 -t phone/lamp -C 1 -W 90 > "$PR/lamp-$1.txt" 2>&1 &
    local sub=$!
    sleep 0.3
    timeout 120 "$BIN/gattway" write ${3:+"$3"} $BATTERY ff21 "0$2" --adapter hci0 --timeout 90s > "$PR/write-$1.txt" 2>&1
    wait $sub
    if grep -qiE '"central":"00:AA:01:00:00:00".*"value":'"$2"'[,}]' "$PR/lamp-$1.txt"; then
      result "PASS prun.$1 $(head -c 200 "$PR/lamp-$1.txt")"
    else
      result "FAIL prun.$1 write: $(head -c 200 "$PR/write-$1.txt" | tr '\n' ' ') phone/lamp: $(head -c 200 "$PR/lamp-$1.txt")"
    fi
  }
  written write-request 1
  written write-command 0 --without-response
  # Every CLI command disconnects when it is done: no link of hci0 is left.
  for _ in $(seq 100); do ls /sys/class/bluetooth | grep -q '^hci0:' || break; sleep 0.1; done
  if ls /sys/class/bluetooth | grep -q '^hci0:'; then
    result "FAIL prun.disconnect a link is still up: $(ls /sys/class/bluetooth | tr '\n' ' ')"
  else
    result "PASS prun.disconnect no link left on hci0"
  fi
  # bluetoothd goes away; a value published meanwhile is what the re-registered service serves.
  lines=$(wc -l < "$PRLOG")
  rbz-bluetoothd stop > "$LOGS/rbz-bluetoothd-prun.txt" 2>&1
  pub 23                                      # 2300 = 0x08FC
  if rbz-bluetoothd start >> "$LOGS/rbz-bluetoothd-prun.txt" 2>&1; then
    readvertised() { tail -n +$((lines + 1)) "$PRLOG" | grep -qE 'peripheral: advertising( as|\s*$)'; }
    until_true 60 readvertised
    if tail -n +$((lines + 1)) "$PRLOG" | grep -q 'peripheral: BlueZ serves' \
      && tail -n +$((lines + 1)) "$PRLOG" | grep -qE 'peripheral: advertising( as|\s*$)'; then
      result "PASS prun.re-registered after the bluetoothd restart: $(tail -n +$((lines + 1)) "$PRLOG" | grep -m1 'BlueZ serves' | head -c 160)"
    else
      result "FAIL prun.re-registered $(tail -n +$((lines + 1)) "$PRLOG" | tail -n 4 | tr '\n' ' ' | head -c 400)"
    fi
    cli prun-read-after-restart '"hex":"fc ?08"' "" -- read --json $BATTERY 2a6e
  else
    result "FAIL prun.re-registered rbz-bluetoothd: $(tail -n 2 "$LOGS/rbz-bluetoothd-prun.txt" | tr '\n' ' ')"
  fi
  kill -TERM $GATEWAY 2>/dev/null
  for _ in $(seq 100); do kill -0 $GATEWAY 2>/dev/null || break; sleep 0.1; done
  kill -9 $GATEWAY $BROKER 2>/dev/null
fi
# ---- gattway run with role both (issue #18): the central on hci0 reads peripheral.py on hci1,
# the peripheral role on hci2 serves the reading (FF30/FF31 from the sensor's state topic) and
# advertises it (service data FF30); a scan on hci0 sees the advertisement, and the CLI on hci3
# reads FF31 and gets a notification of it over GATT. One link per controller: a second link of
# hci0 (hci0 reading hci2's GATT while connected to hci1) ended in an ATT timeout inside
# bluetoothd (README, Open issues), so the GATT central is the fourth controller.
if [ "${RBZ_BOTH:-1}" = 1 ]; then
  echo "[tests $(t)] gattway run, role both"
  BO=$SHARE/out/both
  BOLOG=$LOGS/gattway-both.log
  mkdir -p "$BO"
  # --period 0: the level stays until a SIGUSR2 steps it (100, 99, …), so a value read over
  # GATT can be compared with the one last published, with nothing changing in between.
  $PY -u "$HERE/peripheral.py" --adapter hci1 --other "" --period 0 > "$LOGS/peripheral-both.log" 2>&1 &
  SENSOR=$!
  for _ in $(seq 300); do grep -q 'READY 1' "$LOGS/peripheral-both.log" && break; kill -0 $SENSOR 2>/dev/null || break; sleep 0.05; done
  printf 'listener 18835 127.0.0.1\nallow_anonymous true\npersistence false\n' > "$BO/mosquitto.conf"
  mosquitto -c "$BO/mosquitto.conf" > "$BO/mosquitto.log" 2>&1 &
  BROKER=$!
  for _ in $(seq 100); do grep -q "running\|Opening ipv4 listen socket" "$BO/mosquitto.log" 2>/dev/null && break; sleep 0.05; done
  cat > "$BO/config.json" <<CONF
{
  "mqtt": {"server": "mqtt://127.0.0.1:18835", "base_topic": "rbz2", "client_id": "rbz-both"},
  "bluetooth": {"adapter": "hci0", "scan": {"services": ["180F"]}},
  "homeassistant": {"enabled": false},
  "health": {"enabled": false},
  "role": "both",
  "devices": [
    {"match": {"address": "$BATTERY"}, "name": "sensor", "connect": true,
     "subscribe": [{"service": "180F", "characteristic": "2A19", "parser": "battery_level"}]}
  ],
  "peripheral": {
    "adapter": "hci2",
    "advertising": {"service_data": [{"uuid": "FF30", "from_topic": "rbz2/sensor", "json_key": "battery", "encoding": "u8", "value": 0}]},
    "services": [{"uuid": "FF30", "characteristics": [
      {"uuid": "FF31", "properties": ["read", "notify"], "from_topic": "rbz2/sensor", "json_key": "battery", "encoding": "u8", "value": 0}]}]
  }
}
CONF
  timeout 600 mosquitto_sub -h 127.0.0.1 -p 18835 -t 'rbz2/#' -v > "$BO/mqtt.txt" 2>&1 &
  SUB=$!
  sleep 0.3
  "$BIN/gattway" run --config "$BO/config.json" --log-level debug > "$BOLOG" 2>&1 &
  GATEWAY=$!
  # The level the gateway published last, in hex as FF31 serves it (u8); empty before any.
  published() { grep -oE '^rbz2/sensor \{.*"battery":[0-9]+' "$BO/mqtt.txt" | tail -n 1 | sed -E 's/.*"battery":([0-9]+)$/\1/'; }
  published_hex() { local level; level=$(published); [ -n "$level" ] && printf '%02x' "$level"; }
  published_is() { [ "$(published)" = "$1" ]; }
  # The central is up when it has published a reading and subscribed to the sensor's 2A19 (the
  # first reading may come from the advertisement). 90 s: a first connect attempt that stalls
  # (seen: service discovery waited out connect_timeout, as in the gateway run above) and its retry.
  central_up() { grep -qE '^rbz2/sensor \{.*"battery":[0-9]+' "$BO/mqtt.txt" && grep -q 'subscribed 2a19' "$LOGS/peripheral-both.log"; }
  until_true 90 central_up
  if central_up && grep -q 'peripheral: advertising' "$BOLOG"; then
    result "PASS both.central-and-peripheral $(grep -m1 -E '^rbz2/sensor ' "$BO/mqtt.txt" | head -c 120); 2A19 subscribed; $(grep -m1 'peripheral: advertising' "$BOLOG" | head -c 100)"
  else
    result "FAIL both.central-and-peripheral $(grep -c 'subscribed 2a19' "$LOGS/peripheral-both.log") subscriptions of 2A19; $(tail -n 5 "$BOLOG" | tr '\n' ' ' | head -c 400)"
  fi
  # The advertised service data is the sensor's level (100, never the configured 00, which the
  # gateway advertises until the first reading).
  relayed="\"$OTHER\".*\"ff30\":\"(0[1-9a-f]|[1-9a-f][0-9a-f])\""
  scan_for "$BO/scan.txt" FF30 "$relayed"
  if grep -qiE "$relayed" "$BO/scan.txt"; then
    result "PASS both.relayed-advertisement after ${scan_seconds} s: $(grep -m1 -iE "$relayed" "$BO/scan.txt" | head -c 200)"
  else
    result "FAIL both.relayed-advertisement exit $scan_status: $(head -c 400 "$BO/scan.txt" | tr '\n' ' ')"
  fi
  # The GATT server of the same process, read by the CLI on hci3 (hci0 keeps its one link, to
  # hci1): after a step of the sensor (a value that comes from the central's subscription, not
  # from peripheral.py's advertisement, which says 100), FF31 serves the level published last.
  kill -USR2 $SENSOR
  if until_true 30 published_is 99; then
    CLI_ADAPTER=hci3 cli both-read '"hex":"[0-9a-f]{2}"' "" -- read --json $OTHER ff31
    served=$(grep -oiE '"hex":"[0-9a-f]{2}"' "$SHARE/out/cli-both-read.txt" | head -n 1 | cut -d'"' -f4)
    if [ -n "$served" ] && [ "$served" = "$(published_hex)" ]; then
      result "PASS both.read-equals-published FF31 read on hci3 = $served, rbz2/sensor battery $(published)"
    else
      result "FAIL both.read-equals-published FF31 read on hci3: '${served}', rbz2/sensor battery $(published)"
    fi
  else
    result "FAIL both.read-equals-published the gateway did not publish the stepped level 99: $(grep -E '^rbz2/sensor ' "$BO/mqtt.txt" | tail -n 1 | head -c 200)"
  fi
  # A subscribed CLI on hci3 gets the next reading as a notification of FF31.
  timeout 150 "$BIN/gattway" notify --json --count 1 $OTHER ff31 --adapter hci3 --timeout 90s > "$BO/notify.txt" 2>&1 &
  NOTIFIER=$!
  subscribed_or_gone() { grep -q 'subscribed to FF31' "$BOLOG" || ! kill -0 "$NOTIFIER" 2>/dev/null; }
  until_true 100 subscribed_or_gone
  kill -USR2 $SENSOR
  wait $NOTIFIER
  notify_status=$?
  until_true 10 published_is 98
  notified=$(grep -oiE '"hex":"[0-9a-f]{2}"' "$BO/notify.txt" | head -n 1 | cut -d'"' -f4)
  if [ $notify_status -eq 0 ] && [ "$notified" = 62 ] && [ "$notified" = "$(published_hex)" ]; then
    result "PASS both.notify-equals-published FF31 notified on hci3 = $notified, rbz2/sensor battery $(published); $(grep -m1 'subscribed to FF31' "$BOLOG" | head -c 120)"
  else
    result "FAIL both.notify-equals-published exit $notify_status, notified '${notified}', rbz2/sensor battery $(published): $(head -c 300 "$BO/notify.txt" | tr '\n' ' ')"
  fi
  # Every CLI command disconnects when it is done: no link of hci3 is left, and the gateway's
  # central still has its link to the sensor (hci0:N).
  for _ in $(seq 100); do ls /sys/class/bluetooth | grep -q '^hci3:' || break; sleep 0.1; done
  links=$(ls /sys/class/bluetooth | grep ':' | tr '\n' ' ')
  if ! echo "$links" | grep -q 'hci3:' && echo "$links" | grep -q 'hci0:'; then
    result "PASS both.disconnect no link left on hci3, the gateway's on hci0 still up: $links"
  else
    result "FAIL both.disconnect links: $links (want none of hci3, one of hci0)"
  fi
  kill -TERM $GATEWAY 2>/dev/null
  for _ in $(seq 100); do kill -0 $GATEWAY 2>/dev/null || break; sleep 0.1; done
  kill -9 $GATEWAY $BROKER $SUB $SENSOR 2>/dev/null
fi
# ---- Several adapters (guest-adapters.sh): `gattway run` with "adapters": ["hci0", "hci2"] while
# hci3 advertises a BTHome frame whose packet id changes every 5 s (btvirt's medium: both adapters
# hear it); every packet id reaches MQTT once, and bridge/health lists both adapters with reports,
# on each path (adapters.mgmt.*, adapters.dbus.*).
if [ "${RBZ_ADAPTERS:-1}" = 1 ]; then
  echo "[tests $(t)] several adapters"
  RESULTS=$RESULTS "$HERE/guest-adapters.sh" "$BIN"
fi
# ---- Connection parameters (guest-params.sh): `gattway run` on hci0 connects to hci3 (advertising
# connectable) with connection_params 7.5–15 ms, latency 2, 4000 ms; btmon on hci0 shows the kernel
# asking for them in LE Extended Create Connection and the link getting them; then a proxy client
# (params-client.py, RBZ_ESPHOME_PYTHON) asks for parameters on its live link (params.*).
if [ "${RBZ_PARAMS:-1}" = 1 ]; then
  echo "[tests $(t)] connection parameters"
  RESULTS=$RESULTS "$HERE/guest-params.sh" "$BIN"
fi
# ---- The virtual radio (guest-radio.sh, vhci-radio.py): a controller of its own on /dev/vhci
# (hci4) sends BTHome reports of 10 devices at 100 per second for 5 s while `gattway run` scans
# it, once on each path (bluetooth.radio dbus, then mgmt); btmon counts what the controller
# delivered, mosquitto_sub what reached MQTT. The checks: the adapter came up, the gateway's scan
# enabled it, reports reached MQTT intact, and on the management path at least 99 % of the
# delivered ones (issue 30). The D-Bus path's percentage is printed beside it, not asserted: the
# lane's bluetoothd runs with -d, whose log of every report limits it to a few reports per second
# under emulation. 5 s stays inside the kernel's first 10.24 s discovery, so bluetoothd's late
# restart of the discovery under -d does not count against the management path either. The full
# measurement at 100 and 1,000 per second is `make bench SUITES=radio` (BENCHMARKS.md).
if [ "${RBZ_RADIO:-1}" = 1 ]; then
  echo "[tests $(t)] virtual radio"
  RESULTS=$RESULTS RBZ_RADIO_PATHS=dbus RBZ_RADIO_RATES=${RBZ_RADIO_RATES:-100} \
    RBZ_RADIO_SECONDS=${RBZ_RADIO_SECONDS:-5} "$HERE/guest-radio.sh" "$BIN"
  RESULTS=$RESULTS RBZ_RADIO_PATHS=mgmt RBZ_RADIO_RATES=${RBZ_RADIO_RATES:-100} \
    RBZ_RADIO_SECONDS=${RBZ_RADIO_SECONDS:-5} RBZ_RADIO_MIN_PERCENT=${RBZ_RADIO_MIN_PERCENT:-99} \
    "$HERE/guest-radio.sh" "$BIN"
  for rate in ${RBZ_RADIO_RATES:-100}; do
    percent() { /usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['percent'])" "$1" 2>/dev/null || echo '?'; }
    echo "[tests $(t)] radio $rate/s reached MQTT: management path $(percent "$SHARE/out/radio/mgmt-$rate/figures.json") %," \
      "D-Bus path $(percent "$SHARE/out/radio/dbus-$rate/figures.json") % (bluetoothd -d)"
  done
  # Passive mode shown by the controller's scan type: `gattway run` with scan_mode passive on the
  # management path; the radio must be told LE Set Scan Parameters type 0x00 only, and the
  # readings still reach MQTT (radio.passive.100.*).
  echo "[tests $(t)] virtual radio, scan_mode passive"
  RESULTS=$RESULTS RBZ_RADIO_RATES=${RBZ_RADIO_RATES:-100} RBZ_RADIO_SECONDS=${RBZ_RADIO_SECONDS:-5} \
    RBZ_RADIO_PATH=mgmt RBZ_RADIO_SCAN_MODE=passive "$HERE/guest-radio.sh" "$BIN"
fi
# ---- Pairing beyond Just Works (guest-pairing.sh): `gattway run` on hci0 pairs a peripheral that
# demands passkey entry (hci3, DisplayOnly) and one that demands a numeric comparison (hci2,
# DisplayYesNo) through MQTT; each bonded, read encrypted after a restart, unpair removes the bond
# (pairing.passkey.*, pairing.comparison.*).
if [ "${RBZ_PAIRING:-1}" = 1 ]; then
  echo "[tests $(t)] pairing"
  RESULTS=$RESULTS "$HERE/guest-pairing.sh" "$BIN"
fi
# ---- Notifications cut at the MTU (guest-mtu.sh): bluetoothd restarted with ExchangeMTU = 48;
# peripheral.py's 60-byte FF06 reaches hci0 cut to 43 bytes (MTU − 5), and `gattway run` warns once and
# counts it in bridge/health (mtu.*). It changes bluetoothd's configuration (and restores it).
if [ "${RBZ_MTU:-1}" = 1 ]; then
  echo "[tests $(t)] notifications cut at the MTU"
  RESULTS=$RESULTS "$HERE/guest-mtu.sh" "$BIN"
fi
echo "[tests $(t)] done"
! grep -q '^FAIL ' "$RESULTS"
