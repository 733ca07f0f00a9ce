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
cli scan-180F "\"$BATTERY\"" "$OTHER" -- scan --json --services 180F --duration 4s
cli inspect '"180f".*"181a".*"ff00"|180f.*181a.*ff00' "" -- inspect --json $BATTERY
# Open issue: the first connection of a fresh device sometimes lists no services although
# bluetoothd exported them before ServicesResolved. Shown as FLAKY (not hidden), then retried.
if tail -n 1 "$RESULTS" | grep -q '^FAIL cli.inspect .*"services":\[\]'; then
  sed -i '$ s/^FAIL /FLAKY /' "$RESULTS"
  cli inspect-retry '"180f".*"181a".*"ff00"|180f.*181a.*ff00' "" -- inspect --json $BATTERY
fi
cli read-2A19 '"value"|[0-9a-f]{2}' "" -- read --json $BATTERY 2a19
cli write-request "" "" -- write $BATTERY ff01 0a0b
cli read-state '0a ?0b' "" -- read $BATTERY ff02
cli write-command "" "" -- write --without-response $BATTERY ff01 0c
cli read-state-2 '0c' "" -- read $BATTERY ff02
cli notify-2A19 '.' "" -- notify --json --count 3 $BATTERY 2a19

# ---- The CentralManager scenario.
echo "[tests $(t)] CentralManager scenario"
timeout 170 "$BIN/realbluez-central" 2>&1 | tee "$SHARE/out/central.txt" | grep -E '^(PASS|FAIL) ' >> "$RESULTS"
grep -E '^(PASS|FAIL) |realbluez-central:' "$SHARE/out/central.txt" | sed 's/^/  /'

# ---- The differential recording (compared with the simulator's on the host).
if [ -x "$HERE/dbus-session.py" ] && [ "${RBZ_DIFF:-1}" = 1 ]; then
  echo "[tests $(t)] differential session"
  if timeout 90 $PY -u "$HERE/dbus-session.py" --out "$SHARE/out/session-bluez.jsonl" > "$SHARE/out/session.txt" 2>&1; then
    result "PASS diff.recorded $(wc -l < "$SHARE/out/session-bluez.jsonl") events"
  else
    result "FAIL diff.recorded $(tail -n 3 "$SHARE/out/session.txt" | tr '\n' ' ')"
  fi
fi

kill $PERIPHERAL 2>/dev/null
echo "[tests $(t)] done"
! grep -q '^FAIL ' "$RESULTS"
