#!/bin/bash
# Pairing beyond Just Works on the real kernel and bluetoothd (issue 31, item 3), inside the
# real-BlueZ VM:
#   Tests/RealBlueZ/run-vm.sh Tests/RealBlueZ/guest-pairing.sh BIN-DIR
# Two peripherals serve pairing-tree.json (FF31: read needs encryption) with `gattway serve`: hci3
# with IO capability DisplayOnly (btmgmt io-cap 0: the central must type the passkey it shows,
# passkey entry) and hci2 with DisplayYesNo and Secure Connections (both show a number: numeric
# comparison). gattway pairs with MITM as KeyboardDisplay, so the kernel picks those methods.
# pairing-agent.py is bluetoothd's default agent: for the peripherals' side it prints the passkey
# hci3 shows (DisplayPasskey) and accepts hci2's comparison, printing the number.
# `gattway run` on hci0 (bridge topics under rbzp/) pairs the lock through MQTT: bridge/request/
# device/pair, the pairing_request on bridge/event, the answer on …/pair/confirm with the passkey
# the agent printed. Then: paired and bonded (Device1 Paired, Bonded; a LongTermKey in
# /var/lib/bluetooth); a restarted gateway connects it and reads FF31 (encryption needed) without
# being asked anything, the link encrypted (hcitool con); unpair removes the bond (no device
# object, no key file). With RBZ_PAIRING_COMPARISON=1 it then pairs the panel by numeric
# comparison, accepted after checking the numbers agree — not part of the lane: in this VM that
# link carried nothing for 30 s after it came up and the pairing was cancelled.
#
# Checks (one "PASS|FAIL pairing.name detail" line each, appended to $RESULTS).
set -u
BIN=${1:?usage: guest-pairing.sh BIN-DIR}
HERE=$(cd "$(dirname "$0")" && pwd)
SHARE=${SHARE:-/tmp}
LOGS=${LOGS:-$SHARE/logs}
RESULTS=${RESULTS:-$SHARE/results.txt}
R=$SHARE/out/pairing
rm -rf "$R"; mkdir -p "$R" "$LOGS"
# shellcheck source=Tests/RealBlueZ/guest-lib.sh
. "$HERE/guest-lib.sh"
address() { busctl --system get-property org.bluez "/org/bluez/$1" org.bluez.Adapter1 Address 2>/dev/null | cut -d'"' -f2; }
central=$(address hci0)
lock=$(address hci3)
panel=$(address hci2)
path() { echo "/org/bluez/hci0/dev_${1//:/_}"; }
property() { busctl --system get-property org.bluez "$(path "$1")" org.bluez.Device1 "$2" 2>/dev/null | cut -d' ' -f2; }
port=18890
MQTT="$R/mqtt.txt"

printf 'listener %s 127.0.0.1\nallow_anonymous true\npersistence false\n' "$port" > "$R/mosquitto.conf"
mosquitto -c "$R/mosquitto.conf" > "$R/mosquitto.log" 2>&1 &
BROKER=$!
for _ in $(seq 100); do grep -q "running\|Opening ipv4 listen socket" "$R/mosquitto.log" 2>/dev/null && break; sleep 0.05; done
mosquitto_sub -h 127.0.0.1 -p "$port" -q 1 -t 'rbzp/#' -F '%t %p' > "$MQTT" 2>&1 &
SUB=$!

# RBZ_PAIRING_BTMON=1: the HCI traffic of every controller to out/pairing/btmon.snoop (btmon -r).
[ "${RBZ_PAIRING_BTMON:-0}" = 1 ] && { btmon -w "$R/btmon.snoop" > /dev/null 2>&1 & }
/usr/bin/python3 "$HERE/pairing-agent.py" DisplayYesNo > "$R/agent.txt" 2>&1 &
AGENT=$!
until_true 20 grep -q READY "$R/agent.txt"
# The default agent's capability went to every adapter; the peripherals' own come after it.
{
  # LE only: a peer whose advertisement does not say "BR/EDR not supported" gets bluetoothd's
  # reverse service discovery over BR/EDR after the bonding, and closing that failed socket hits a
  # list corruption BUG in hci_chan_del of the guest's kernel (6.1.0-57), which takes bluetoothd down.
  for index in 2 3; do
    btmgmt --index $index power off
    btmgmt --index $index bredr off
    btmgmt --index $index power on
    btmgmt --index $index bondable on
    btmgmt --index $index sc on
  done
  btmgmt --index 3 io-cap 0
  btmgmt --index 2 io-cap 1
  btmgmt --index 0 sc on
} >> "$R/btmgmt.txt" 2>&1
"$BIN/gattway" serve --tree "$HERE/pairing-tree.json" --adapter hci2 > "$R/serve-hci2.log" 2>&1 &
SERVE2=$!
"$BIN/gattway" serve --tree "$HERE/pairing-tree.json" --adapter hci3 > "$R/serve-hci3.log" 2>&1 &
SERVE3=$!
served() { grep -q '^serving' "$R/serve-hci2.log" && grep -q '^serving' "$R/serve-hci3.log"; }
until_true 60 served
echo "[pairing $(t)] peripherals: lock $lock (DisplayOnly), panel $panel (DisplayYesNo, SC); central $central"

config() {  # config FILE CONNECT: the gateway's configuration, polling FF31 when CONNECT is true
  local poll=''
  [ "$2" = true ] && poll=', "poll": [{"service": "FF30", "characteristic": "FF31", "interval": "3s", "parser": "secret"}]'
  cat > "$1" <<CONF
{
  "mqtt": {"server": "mqtt://127.0.0.1:$port", "base_topic": "rbzp", "client_id": "rbz-pairing"},
  "homeassistant": {"enabled": false},
  "bluetooth": {"pairing_timeout": "25s"},
  "parsers": {"secret": {"characteristic": "ff31", "fields": [{"name": "secret", "offset": 0, "type": "u8"}]}},
  "devices": [{"match": {"address": "$lock"}, "name": "lock", "connect": $2$poll},
              {"match": {"address": "$panel"}, "name": "panel", "connect": $2$poll}]
}
CONF
}
GATEWAY=""
start_gateway() {  # start_gateway NAME CONNECT
  config "$R/$1.json" "$2"
  GATEWAY_LOG=$LOGS/gattway-pairing-$1.log
  "$BIN/gattway" run --config "$R/$1.json" > "$GATEWAY_LOG" 2>&1 &
  GATEWAY=$!
  started() { grep -q 'gateway started' "$GATEWAY_LOG" || ! kill -0 "$GATEWAY" 2>/dev/null; }
  until_true 60 started
}
stop_gateway() {
  kill -TERM "$GATEWAY" 2>/dev/null
  for _ in $(seq 100); do kill -0 "$GATEWAY" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$GATEWAY" 2>/dev/null
}
publish() { mosquitto_pub -h 127.0.0.1 -p "$port" -q 1 -t "rbzp/bridge/request/$1" -m "$2"; }
# response VERB TRANSACTION: waits (60 s) for the response and prints it
response() {
  local line=""
  for _ in $(seq 600); do
    line=$(grep "^rbzp/bridge/response/$1 " "$MQTT" | grep "\"transaction\":\"$2\"" | tail -n 1)
    [ -n "$line" ] && break
    sleep 0.1
  done
  echo "${line#* }"
}
# question NAME: waits (40 s) for the pairing_request about NAME and prints its payload
question() {
  local line=""
  for _ in $(seq 400); do
    line=$(grep '^rbzp/bridge/event ' "$MQTT" | grep '"pairing_request"' | grep "\"name\":\"$1\"" | tail -n 1)
    [ -n "$line" ] && break
    sleep 0.1
  done
  echo "${line#* }"
}
check() {  # check NAME CONDITION-STATUS DETAIL
  if [ "$2" = 0 ]; then result "PASS pairing.$1 $3"; else result "FAIL pairing.$1 $3"; fi
}
bonded() {  # bonded ADDRESS: Paired and Bonded true, a LongTermKey stored
  [ "$(property "$1" Paired)" = true ] && [ "$(property "$1" Bonded)" = true ] \
    && grep -q 'LongTermKey\]' "/var/lib/bluetooth/$central/$1/info" 2>/dev/null
}

start_gateway pair false
seen() { grep '^rbzp/bridge/devices ' "$MQTT" | tail -n 1 | grep -q "$lock" && grep '^rbzp/bridge/devices ' "$MQTT" | tail -n 1 | grep -q "$panel"; }
until_true 60 seen

# Passkey entry: the lock shows it (the agent prints it), gattway asks for it on MQTT.
publish device/pair '{"device": "lock", "transaction": "p1"}'
asked=$(question lock)
shown=""
for _ in $(seq 400); do
  shown=$(grep -m 1 '^passkey ' "$R/agent.txt" | cut -d' ' -f2)
  [ -n "$shown" ] && break
  sleep 0.1
done
echo "$asked" | grep -q '"method":"passkey_entry"' && [ -n "$shown" ]
check passkey.asked $? "question: $asked; the lock shows ${shown:-nothing}"
publish device/pair/confirm "{\"device\": \"lock\", \"passkey\": $((10#${shown:-0})), \"transaction\": \"c1\"}"
confirmed=$(response device/pair/confirm c1)
paired=$(response device/pair p1)
echo "$paired" | grep -q '"status":"ok"' && bonded "$lock"
check passkey.paired $? "confirm: $confirmed; pair: $paired; Paired $(property "$lock" Paired), Bonded $(property "$lock" Bonded)"
stop_gateway
if ! grep -q '^PASS pairing\.passkey\.paired' "$RESULTS"; then
  result "FAIL pairing.reconnect not tried: nothing was paired"
  kill "$AGENT" "$SERVE2" "$SERVE3" "$SUB" "$BROKER" 2>/dev/null
  for index in 2 3; do
    { btmgmt --index $index power off; btmgmt --index $index bredr on; btmgmt --index $index power on; } >> "$R/btmgmt.txt" 2>&1
  done
  exit 1
fi

# A restarted gateway connects the lock and reads FF31 (encryption needed) without a question.
mark=$(wc -l < "$MQTT")
start_gateway reconnect true
read_lock() { tail -n +"$mark" "$MQTT" | grep -q '^rbzp/lock {.*"secret":42'; }
until_true 60 read_lock
links=$(hcitool -i hci0 con 2>&1 | tr '\n\t' '  ')
read_lock && ! tail -n +"$mark" "$MQTT" | grep -q '"pairing_request"'
check reconnect.read $? "FF31 read after the restart, no question asked: $(tail -n +"$mark" "$MQTT" | grep -E '^rbzp/(lock|panel) ' | tail -n 2 | tr '\n' ' ')"
echo "$links" | grep -q "$lock.*ENCRYPT"
check reconnect.encrypted $? "hcitool con: $links"
stop_gateway

# Unpair removes the bond.
start_gateway unpair false
publish device/unpair '{"device": "lock", "transaction": "u1"}'
unpaired=$(response device/unpair u1)
echo "$unpaired" | grep -q '"status":"ok"' && [ "$(property "$lock" Paired)" != true ] \
  && [ ! -e "/var/lib/bluetooth/$central/$lock" ]
check unpair $? "unpair: $unpaired; Paired $(property "$lock" Paired); key folder $(ls -d "/var/lib/bluetooth/$central/$lock" 2>&1)"
stop_gateway

# Numeric comparison (RBZ_PAIRING_COMPARISON=1; not part of the lane yet): in this VM hci0's link
# to hci2 carried nothing — no ATT, no SMP — for 30 s after it came up, and the pairing was
# cancelled (see Tests/RealBlueZ/README.md).
if [ "${RBZ_PAIRING_COMPARISON:-0}" = 1 ]; then
  # Both show a number; the agent accepts the panel's side, MQTT the gateway's.
  start_gateway comparison false
  until_true 60 seen
publish device/pair '{"device": "panel", "transaction": "p2"}'
asked=$(question panel)
shown=""
for _ in $(seq 400); do
  shown=$(grep -m 1 '^confirm ' "$R/agent.txt" | cut -d' ' -f2)
  [ -n "$shown" ] && break
  sleep 0.1
done
number=$(echo "$asked" | sed -n 's/.*"passkey":\([0-9]*\).*/\1/p')
echo "$asked" | grep -q '"method":"numeric_comparison"' && [ -n "$shown" ] && [ "${number:-x}" = "$((10#$shown))" ]
check comparison.asked $? "question: $asked; the panel shows ${shown:-nothing}"
publish device/pair/confirm '{"device": "panel", "accept": true, "transaction": "c2"}'
confirmed=$(response device/pair/confirm c2)
paired=$(response device/pair p2)
echo "$paired" | grep -q '"status":"ok"' && bonded "$panel"
check comparison.paired $? "confirm: $confirmed; pair: $paired; Paired $(property "$panel" Paired), Bonded $(property "$panel" Bonded)"
stop_gateway
fi

kill "$AGENT" "$SERVE2" "$SERVE3" "$SUB" "$BROKER" 2>/dev/null
wait 2>/dev/null
for index in 2 3; do
  { btmgmt --index $index power off; btmgmt --index $index bredr on; btmgmt --index $index power on; } >> "$R/btmgmt.txt" 2>&1
done
! grep -q '^FAIL pairing' "$RESULTS"
