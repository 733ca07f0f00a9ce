#!/usr/bin/env bash
# make test-bluez: the real-BlueZ lane. Builds (once) the VM, boots it with the real bluetoothd
# 5.66, runs guest-tests.sh inside (test peripheral, CLI checks, the CentralManager scenario, the
# differential session, the Bluetooth proxy, gattway serve, gattway run as the peripheral and
# with role both, several adapters, the virtual radio, pairing), runs the same session against `gattway simulate`
# here and compares.
# Prints every check, then "N passed, N failed"; exits 1 on any failure, and then shows the tail
# of the guest's bluetoothd log (and of the gattway log of a failed peripheral-role, role-both or
# proxy check).
#
#   Tests/RealBlueZ/test-bluez.sh BIN-DIR     (BIN-DIR: gattway and realbluez-central, host-built)
#
# Environment: REALBLUEZ_TIMEOUT (VM wall-clock limit, default 1500 s), REALBLUEZ_VERBOSE=1
# (echo the whole guest console), and those of run-vm.sh.
set -uo pipefail
BIN=$(cd "${1:?usage: test-bluez.sh BIN-DIR}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CACHE=${REALBLUEZ_CACHE:-$ROOT/.build/realbluez}
RUN=$CACHE/runs/last
start=$(date +%s)
for tool in gattway realbluez-central; do
  [ -x "$BIN/$tool" ] || { echo "test-bluez: $BIN/$tool missing (swift build --product $tool)" >&2; exit 2; }
done

"$HERE/build-vm.sh" || { echo "test-bluez: building the VM failed"; echo "0 passed, 1 failed"; exit 1; }

echo "test-bluez: booting the VM (real bluetoothd 5.66, btvirt -l4)"
export REALBLUEZ_RUN=$RUN
[ -n "${REALBLUEZ_VERBOSE:-}" ] || export REALBLUEZ_QUIET=1
"$HERE/run-vm.sh" "$HERE/guest-tests.sh" "$BIN"
vm_status=$?
results=$RUN/results.txt
[ -f "$results" ] || : > "$results"
if [ -z "${REALBLUEZ_VERBOSE:-}" ]; then
  grep -E '^\[guest|^\[tests [0-9.]*\] radio |^(PASS|FAIL) |BRING-UP' "$RUN/console.log" | grep -vE '^(PASS|FAIL) ' || true
fi
if [ "$vm_status" != 0 ] && ! grep -q '^FAIL ' "$results"; then
  echo "FAIL vm.run status $vm_status (97 bring-up, 99 guest root, 124 wall-clock limit; see $RUN/console.log)" >> "$results"
fi

# The differential check: the same session against the simulator, then the comparison.
if [ -s "$RUN/out/session-bluez.jsonl" ]; then
  if "$HERE/simulator-session.sh" "$BIN/gattway" "$RUN/out/session-simulator.jsonl" > "$RUN/out/simulator-session.txt" 2>&1; then
    /usr/bin/python3 "$HERE/compare-sessions.py" "$RUN/out/session-bluez.jsonl" "$RUN/out/session-simulator.jsonl" \
      "$HERE/known-differences.json" > "$RUN/out/differences.txt" 2>&1
    grep -E '^(PASS|FAIL) ' "$RUN/out/differences.txt" >> "$results"
  else
    echo "FAIL diff.simulator-session $(tail -n 3 "$RUN/out/simulator-session.txt" | tr '\n' ' ')" >> "$results"
  fi
fi

echo "---- results (run folder $RUN)"
cut -c1-300 "$results"
if grep -q '^FAIL diff\.' "$results"; then
  echo "---- unexpected differences, real bluetoothd vs simulator ($RUN/out/differences.txt)"
  grep -E '^FAIL |only in' "$RUN/out/differences.txt" | cut -c1-400
fi
passed=$(grep -c '^PASS ' "$results")
failed=$(grep -c '^FAIL ' "$results")
if [ "$failed" != 0 ]; then
  echo "---- guest bluetoothd log (last 60 lines of $RUN/logs/bluetoothd.log)"
  tail -n 60 "$RUN/logs/bluetoothd.log" 2>/dev/null
  # What the tail cannot show (CI keeps nothing but this output): when hci0 scanned, got reports
  # of hci1, connected and disconnected, and when advertisements were (un)registered.
  echo "---- guest bluetoothd: the last 80 scans, reports of hci1, links and advertisements"
  grep -E '==== bluetoothd start|start_discovery_timeout\(\) sending|device_found_callback\(\) hci0 addr 00:AA:01:01:00:01|connected_callback|dev_disconnected|register_advertisement\(\)|device_svc_resolved' \
    "$RUN/logs/bluetoothd.log" 2>/dev/null | tail -n 80 | sed -E 's/bluetoothd\[[0-9]+\]: //' | cut -c1-130
  echo "---- test peripheral log (last 15 lines)"
  tail -n 15 "$RUN/logs/peripheral.log" 2>/dev/null
  if grep -qE '^FAIL (prun|cli\.prun)' "$results"; then
    echo "---- gattway run, role peripheral (last 30 lines of $RUN/logs/gattway-peripheral.log)"
    tail -n 30 "$RUN/logs/gattway-peripheral.log" 2>/dev/null
  fi
  if grep -qE '^FAIL (both|cli\.both)' "$results"; then
    echo "---- gattway run, role both (last 30 lines of $RUN/logs/gattway-both.log)"
    tail -n 30 "$RUN/logs/gattway-both.log" 2>/dev/null
  fi
  if grep -qE '^FAIL radio\.' "$results"; then
    echo "---- virtual radio: what it printed and the gateway's log (last 20 lines each)"
    tail -n 20 "$RUN"/out/radio/*/radio.txt "$RUN"/logs/gattway-radio-*.log 2>/dev/null
  fi
  if grep -qE '^FAIL proxy\.' "$results"; then
    echo "---- Bluetooth proxy: the client ($RUN/out/proxy/client.txt, last 15 lines)"
    tail -n 15 "$RUN/out/proxy/client.txt" 2>/dev/null
    echo "---- Bluetooth proxy: gattway run (last 30 lines of $RUN/logs/gattway-proxy.log)"
    tail -n 30 "$RUN/logs/gattway-proxy.log" 2>/dev/null
  fi
  # Last, where CI's cut output still shows it: the failed method's steps and, when its reconnect
  # read nothing, what guest-pairing.sh's diagnose found then.
  if grep -qE '^FAIL pairing\.' "$results"; then
    echo "---- pairing: the peripherals' agent (last 8 lines)"
    tail -n 8 "$RUN/out/pairing/agent.txt" 2>/dev/null
    for method in passkey comparison; do
      grep -qE "^FAIL pairing\.$method\." "$results" || continue
      for step in pair reconnect unpair; do
        echo "---- pairing, $method: gattway run to $step (last 10 lines of gattway-pairing-$method-$step.log)"
        tail -n 10 "$RUN/logs/gattway-pairing-$method-$step.log" 2>/dev/null | cut -c1-200
      done
      if [ -f "$RUN/out/pairing/diag-$method.txt" ]; then
        echo "---- pairing, $method: after the reconnect read nothing"
        cat "$RUN/out/pairing/diag-$method.txt"
      fi
    done
  fi
fi
echo "test-bluez: VM $(cat "$RUN/wall-seconds" 2>/dev/null || echo '?') s, whole lane $(( $(date +%s) - start )) s"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
