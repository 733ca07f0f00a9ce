#!/bin/bash
# Pairing beyond Just Works on the real kernel and bluetoothd (issue 31, item 3), inside the
# real-BlueZ VM:
#   Tests/RealBlueZ/run-vm.sh Tests/RealBlueZ/guest-pairing.sh BIN-DIR
# Two peripherals serve pairing-tree.json (FF31: read needs encryption) with `gattway serve`, both
# LE only with Secure Connections: hci3, the lock, with IO capability DisplayOnly (btmgmt io-cap 0:
# the central must type the passkey it shows — passkey entry) and hci2, the panel, with
# DisplayYesNo (both show a number — numeric comparison). gattway pairs with MITM as
# KeyboardDisplay, so the kernel picks those methods. pairing-agent.py is bluetoothd's default
# agent: for the peripherals' side it prints the passkey hci3 shows (DisplayPasskey) and accepts
# hci2's comparison, printing the number.
# For each of the two, `gattway run` on hci0 (bridge topics under rbzp/):
#   - pairs it through MQTT: bridge/request/device/pair, the pairing_request on bridge/event, the
#     answer on …/pair/confirm (the passkey the agent printed; for the comparison an accept, after
#     checking that the number asked is the one the panel shows). Paired and bonded: Device1
#     Paired, Bonded, a LongTermKey in /var/lib/bluetooth;
#   - restarted with "connect": true for it, connects it again and reads FF31 (encryption needed)
#     without being asked anything, the link encrypted (hcitool con: AUTH ENCRYPT);
#   - unpairs it: no device object, no key folder.
# Each link is made while hci0, hci2 and hci3 have no other: btvirt gives the two ends of a link
# each its own lowest free handle but tells both the central's, so a link made beside another one
# of either controller loses the peripheral's packets (README, "btvirt and a second link").
#
# Checks (one "PASS|FAIL pairing.METHOD.name detail" line each, appended to $RESULTS; METHOD is
# passkey or comparison): asked, paired, reconnect-read, reconnect-encrypted, unpair.
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
AGENT_OUT="$R/agent.txt"

start_broker "$R" "$port"
mosquitto_sub -h 127.0.0.1 -p "$port" -q 1 -t 'rbzp/#' -F '%t %p' > "$MQTT" 2>&1 &
SUB=$!

# RBZ_PAIRING_BTMON=1: the HCI traffic of every controller to out/pairing/btmon.snoop (btmon -r).
MON=""
if [ "${RBZ_PAIRING_BTMON:-0}" = 1 ]; then btmon -w "$R/btmon.snoop" > /dev/null 2>&1 & MON=$!; fi
/usr/bin/python3 "$HERE/pairing-agent.py" DisplayYesNo > "$AGENT_OUT" 2>&1 &
AGENT=$!
until_true 20 grep -q READY "$AGENT_OUT"
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
echo "[pairing $(t)] peripherals: lock $lock (DisplayOnly), panel $panel (DisplayYesNo); central $central"

config() {  # config FILE CONNECT: the gateway's configuration; the rule named CONNECT connects and polls FF31
  local rule name address poll
  {
    printf '{\n  "mqtt": {"server": "mqtt://127.0.0.1:%s", "base_topic": "rbzp", "client_id": "rbz-pairing"},\n' "$port"
    printf '  "homeassistant": {"enabled": false},\n  "bluetooth": {"pairing_timeout": "25s"},\n'
    printf '  "parsers": {"secret": {"characteristic": "ff31", "fields": [{"name": "secret", "offset": 0, "type": "u8"}]}},\n'
    printf '  "devices": ['
    for rule in "lock $lock" "panel $panel"; do
      name=${rule% *} address=${rule#* }
      poll='"connect": false'
      [ "$name" = "$2" ] && poll='"connect": true, "poll": [{"service": "FF30", "characteristic": "FF31", "interval": "3s", "parser": "secret"}]'
      printf '%s{"match": {"address": "%s"}, "name": "%s", %s}' "$([ "$name" = lock ] || echo ', ')" "$address" "$name" "$poll"
    done
    printf ']\n}\n'
  } > "$1"
}
gateway() {  # gateway NAME [CONNECT]: `gattway run` with config NAME.json, its log gattway-pairing-NAME.log (debug)
  config "$R/$1.json" "${2:-}"
  GATEWAY_ARGS="--log-level debug" start_gateway "$R/$1.json" "$LOGS/gattway-pairing-$1.log"
}
publish() { mosquitto_pub -h 127.0.0.1 -p "$port" -q 1 -t "rbzp/bridge/request/$1" -m "$2"; }
# since MARK FILE PATTERN: the last line of FILE after line MARK that matches PATTERN (ERE)
since() { tail -n +"$(( $1 + 1 ))" "$2" | grep -E -- "$3" | tail -n 1; }
# wait_line SECONDS MARK FILE PATTERN: waits for such a line and prints it (nothing after SECONDS)
wait_line() {
  until_true "$1" has_line "${@:2}"
  since "${@:2}"
}
has_line() { since "$@" | grep -q .; }
check() {  # check NAME CONDITION-STATUS DETAIL
  if [ "$2" = 0 ]; then result "PASS pairing.$1 $3"; else result "FAIL pairing.$1 $3"; fi
}
bonded() {  # bonded ADDRESS: Paired and Bonded true, a LongTermKey stored
  [ "$(property "$1" Paired)" = true ] && [ "$(property "$1" Bonded)" = true ] \
    && grep -q 'LongTermKey\]' "/var/lib/bluetooth/$central/$1/info" 2>/dev/null
}
known() { busctl --system get-property org.bluez "$(path "$1")" org.bluez.Device1 Address > /dev/null 2>&1; }
# The links of hci0, hci2 and hci3 ("hciN < LE ADDRESS handle H state S ..."), pending ones too.
links() { for i in 0 2 3; do hcitool -i "hci$i" con 2>/dev/null | grep -E '^\s*[<>]' | sed "s/^\s*/hci$i /"; done; }
no_links() { [ -z "$(links)" ]; }
# quiet: until none of the three controllers has a link (the next link is alone on both of its
# ends). bluetoothd keeps the link a pairing made: what is left after 20 s is disconnected.
quiet() {
  until_true 20 no_links && return 0
  local peer
  for peer in $(hcitool -i hci0 con 2>/dev/null | grep -oE 'LE ([0-9A-F]{2}:){5}[0-9A-F]{2}' | cut -d' ' -f2); do
    btmgmt --index 0 disconnect -t 1 "$peer" >> "$R/btmgmt.txt" 2>&1
  done
  until_true 30 no_links || echo "[pairing $(t)] links left: $(links | tr '\n' ';')"
}

# diagnose METHOD ADDRESS NAME: what a reconnect that read nothing leaves to look at, in
# out/pairing/diag-METHOD.txt (test-bluez.sh prints it last, where CI's cut output still shows it):
# the links, whether the peripheral advertises, what bluetoothd and the gateway said of it.
diagnose() {
  local index=2
  [ "$3" = lock ] && index=3
  {
    echo "links: $(links | tr '\n' ';')"
    echo "hci$index $(btmgmt --index $index info 2>&1 | grep -m1 'current settings')"
    echo "hci$index advertising instances: $(btmgmt --index $index advinfo 2>&1 | grep -m1 -i 'instances')"
    echo "hci0's Device1: Paired $(property "$2" Paired) Bonded $(property "$2" Bonded) Connected $(property "$2" Connected) RSSI $(property "$2" RSSI)"
    echo "key folder: $(find "/var/lib/bluetooth/$central/$2" -maxdepth 1 2>&1 | tr "\n" " ")"
    echo "serve on hci$index (last 5 lines):"; tail -n 5 "$R/serve-hci$index.log"
    echo "the gateway on $3 (last 12 lines):"; grep -E -- "$3|$2|adapter|scan" "$LOGS/gattway-pairing-$1-reconnect.log" | tail -n 12 | cut -c1-200
    echo "bluetoothd on $2 (last 12 lines):"
    grep -F -- "$2" "$LOGS/bluetoothd.log" 2>/dev/null | tail -n 12 | sed -E 's/.*bluetoothd\[[0-9]+\]: //' | cut -c1-160
  } > "$R/diag-$1.txt" 2>&1
}

# pairing METHOD NAME ADDRESS: pair (the question, the answer), reconnect after a restart, unpair.
# METHOD passkey: the peripheral shows a passkey (the agent prints "passkey N"), MQTT enters it;
# METHOD comparison: both show a number (the agent prints "confirm N" and accepts), MQTT accepts.
pairing() {
  local method=$1 name=$2 address=$3 mark agent_mark asked shown number answer confirmed paired
  echo "[pairing $(t)] $method: $name ($address)"
  quiet
  gateway "$method-pair"
  # bluetoothd must know the device again (it forgets it at an unpair): its Device1 object.
  until_true 90 known "$address" || echo "[pairing $(t)] bluetoothd has no device object of $address"
  mark=$(wc -l < "$MQTT")
  agent_mark=$(wc -l < "$AGENT_OUT")
  publish device/pair "{\"device\": \"$name\", \"transaction\": \"$method-p\"}"
  asked=$(wait_line 40 "$mark" "$MQTT" "^rbzp/bridge/event .*\"pairing_request\".*\"name\":\"$name\"")
  asked=${asked#* }
  if [ "$method" = passkey ]; then
    shown=$(wait_line 40 "$agent_mark" "$AGENT_OUT" '^passkey ' | cut -d' ' -f2)
    echo "$asked" | grep -q '"method":"passkey_entry"' && [ -n "$shown" ]
    check "$method.asked" $? "question: $asked; the $name shows ${shown:-nothing}"
    answer="\"passkey\": $((10#${shown:-0}))"
  else
    shown=$(wait_line 40 "$agent_mark" "$AGENT_OUT" '^confirm ' | cut -d' ' -f2)
    number=$(echo "$asked" | sed -n 's/.*"passkey":\([0-9]*\).*/\1/p')
    echo "$asked" | grep -q '"method":"numeric_comparison"' && [ -n "$shown" ] \
      && [ "${number:-x}" = "$((10#$shown))" ]
    check "$method.asked" $? "question: $asked; the $name shows ${shown:-nothing}"
    answer='"accept": true'
  fi
  publish device/pair/confirm "{\"device\": \"$name\", $answer, \"transaction\": \"$method-c\"}"
  confirmed=$(wait_line 60 "$mark" "$MQTT" "^rbzp/bridge/response/device/pair/confirm .*\"transaction\":\"$method-c\"")
  paired=$(wait_line 60 "$mark" "$MQTT" "^rbzp/bridge/response/device/pair .*\"transaction\":\"$method-p\"")
  echo "$paired" | grep -q '"status":"ok"' && bonded "$address"
  check "$method.paired" $? "confirm: ${confirmed#* }; pair: ${paired#* }; Paired $(property "$address" Paired), Bonded $(property "$address" Bonded)"
  stop_gateway
  if ! grep -q "^PASS pairing\.$method\.paired" "$RESULTS"; then
    result "FAIL pairing.$method.reconnect-read not tried: nothing was paired"
    return
  fi

  # A restarted gateway connects it (a new link) and reads FF31 (encryption needed) without a question.
  quiet
  mark=$(wc -l < "$MQTT")
  gateway "$method-reconnect" "$name"
  read_value() { since "$mark" "$MQTT" "^rbzp/$name \{.*\"secret\":42" | grep -q .; }
  until_true 90 read_value
  local con
  con=$(hcitool -i hci0 con 2>&1 | tr '\n\t' '  ')
  read_value && ! since "$mark" "$MQTT" '"pairing_request"' | grep -q .
  check "$method.reconnect-read" $? "FF31 read after the restart, no question asked: $(since "$mark" "$MQTT" "^rbzp/$name ")"
  echo "$con" | grep -q "$address.*AUTH ENCRYPT"
  check "$method.reconnect-encrypted" $? "hcitool con: $con"
  grep -q "^PASS pairing\.$method\.reconnect-read" "$RESULTS" || diagnose "$method" "$address" "$name"
  stop_gateway

  # Unpair removes the bond.
  quiet
  mark=$(wc -l < "$MQTT")
  gateway "$method-unpair"
  publish device/unpair "{\"device\": \"$name\", \"transaction\": \"$method-u\"}"
  local unpaired
  unpaired=$(wait_line 60 "$mark" "$MQTT" "^rbzp/bridge/response/device/unpair .*\"transaction\":\"$method-u\"")
  echo "$unpaired" | grep -q '"status":"ok"' && ! known "$address" \
    && [ ! -e "/var/lib/bluetooth/$central/$address" ]
  check "$method.unpair" $? "unpair: ${unpaired#* }; device object: $(known "$address" && echo present || echo gone); key folder $(ls -d "/var/lib/bluetooth/$central/$address" 2>&1)"
  stop_gateway
}

pairing passkey lock "$lock"
pairing comparison panel "$panel"

kill "$AGENT" "$SERVE2" "$SERVE3" "$SUB" "$BROKER" $MON 2>/dev/null
wait 2>/dev/null
for index in 2 3; do
  { btmgmt --index $index power off; btmgmt --index $index bredr on; btmgmt --index $index power on; } >> "$R/btmgmt.txt" 2>&1
done
! grep -q '^FAIL pairing' "$RESULTS"
