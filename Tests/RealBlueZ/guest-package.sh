#!/bin/bash
# Runs inside the real-BlueZ VM booted with systemd as PID 1 (run-vm.sh with RBZ_SYSTEMD=1; see
# test-package-vm.sh): installs gattway's Debian package with dpkg as a user would, so that its
# maintainer scripts create the user and enable and start gattway.service under the real
# systemd, then checks the running service: its user, capability set, sandbox, the kernel's
# management socket as its radio, a battery reading from the test peripheral on hci1 reaching
# Debian's mosquitto, the adapter's state on the web page (powered off and on again), the
# watchdog (a stopped process is killed and restarted), a clean stop, and remove and purge.
#
#   Tests/RealBlueZ/guest-package.sh PACKAGE.deb
#
# Every check is one "PASS|FAIL name detail" line, on the console and in $SHARE/results.txt;
# the status is 1 when any check failed.
set -u
DEB=${1:?usage: guest-package.sh PACKAGE.deb}
HERE=$(cd "$(dirname "$0")" && pwd)
SHARE=${SHARE:-/tmp}
RESULTS=$SHARE/results.txt
R=$SHARE/out
: > "$RESULTS"
mkdir -p "$R"
# shellcheck source=Tests/RealBlueZ/guest-lib.sh
. "$HERE/guest-lib.sh"  # t, result, until_true
check() {  # check NAME DETAIL COMMAND...: PASS when COMMAND succeeds
  local name=$1 detail=$2
  shift 2
  if "$@"; then result "PASS $name $detail"; else result "FAIL $name $detail"; fi
}
main_pid() { systemctl show -P MainPID gattway; }
status_field() { sed -n "s/^$2:[[:space:]]*//p" "/proc/$1/status"; }  # status_field PID FIELD
is_active() { [ "$(systemctl is-active gattway)" = active ]; }
health() { curl -s --max-time 5 http://127.0.0.1:8080/api/health; }
adapter_state_is() { health | python3 -c 'import json,sys; sys.exit(json.load(sys.stdin)["adapter"]["state"] != sys.argv[1])' "$1" 2>/dev/null; }

# The broker the default config.json names (127.0.0.1:1883): Debian's mosquitto.service.
systemctl start mosquitto || result "FAIL pkg.broker systemctl start mosquitto"
timeout 600 mosquitto_sub -h 127.0.0.1 -t 'gattway/#' -v > "$R/mqtt.txt" 2>&1 &
# The test peripheral on hci1: the battery service the default config.json connects to.
/usr/bin/python3 -u "$HERE/peripheral.py" --adapter hci1 --other hci2 > "$LOGS/peripheral.log" 2>&1 &
until_true 60 grep -q 'READY 1' "$LOGS/peripheral.log" || result "FAIL pkg.peripheral $(tail -n 2 "$LOGS/peripheral.log" | tr '\n' ' ')"

# ---- Install: the maintainer scripts under a running systemd.
# The guest's root is this machine's (a container image): its policy-rc.d forbids starting services
# from maintainer scripts, which no Pi has; and man-db's trigger would index every manual page of
# the host over 9p under emulation (minutes). The guest's writes go to RAM: nothing here changes.
rm -f /usr/sbin/policy-rc.d /var/lib/man-db/auto-update
if dpkg -i "$DEB" > "$R/dpkg-install.txt" 2>&1; then
  result "PASS pkg.install dpkg -i $(basename "$DEB")"
else
  result "FAIL pkg.install $(tail -n 5 "$R/dpkg-install.txt" | tr '\n' ' ')"
  exit 1
fi
check pkg.enabled "systemctl is-enabled: $(systemctl is-enabled gattway 2>&1)" test "$(systemctl is-enabled gattway 2>&1)" = enabled
# Type=notify: active only after gattway's READY=1.
if until_true 120 is_active; then
  result "PASS pkg.active started by the package, READY=1 at guest $(t) s: $(systemctl show -P StatusText gattway)"
else
  result "FAIL pkg.active $(systemctl is-active gattway): $(journalctl -u gattway --no-pager | tail -n 5 | tr '\n' ' ')"
  journalctl -u gattway --no-pager > "$R/gattway-journal.txt" 2>&1
  exit 1
fi
pid=$(main_pid)

# ---- What systemd gave the process.
uid=$(status_field "$pid" Uid | cut -f1)
check pkg.user "uid $uid, user $(id -un "$uid" 2>/dev/null), groups $(id -Gn gattway 2>/dev/null)" \
  bash -c "[ '$uid' = \"\$(id -u gattway)\" ] && id -Gn gattway | grep -qw bluetooth"
# CAP_NET_ADMIN (bit 12) and nothing else, in every set that matters, ambient included (the
# kernel sends advertising reports only to a management socket bound with it).
caps="eff $(status_field "$pid" CapEff) prm $(status_field "$pid" CapPrm) bnd $(status_field "$pid" CapBnd) amb $(status_field "$pid" CapAmb)"
check pkg.capabilities "$caps" test "$caps" = "eff 0000000000001000 prm 0000000000001000 bnd 0000000000001000 amb 0000000000001000"
sandbox="NoNewPrivs $(status_field "$pid" NoNewPrivs), Seccomp $(status_field "$pid" Seccomp), mount namespace $(readlink "/proc/$pid/ns/mnt") (PID 1: $(readlink /proc/1/ns/mnt))"
check pkg.sandbox "$sandbox" bash -c "[ '$(status_field "$pid" NoNewPrivs)' = 1 ] && [ '$(status_field "$pid" Seccomp)' = 2 ] && [ '$(readlink "/proc/$pid/ns/mnt")' != '$(readlink /proc/1/ns/mnt)' ]"
# ProtectSystem=strict: the root is read-only for it, its state directory is not.
ro_root=$(awk '$5 == "/" { print $6 }' "/proc/$pid/mountinfo" | head -n1)
state_rw=$(awk '$5 == "/var/lib/gattway" { print $6 }' "/proc/$pid/mountinfo" | head -n1)
check pkg.protect-system "/ mounted $ro_root, /var/lib/gattway $state_rw for the service" \
  bash -c "[[ '$ro_root' == ro* ]] && [[ '$state_rw' == rw* ]]"
systemd-analyze security gattway --no-pager > "$R/security.txt" 2>&1
result "INFO pkg.exposure $(tail -n 1 "$R/security.txt")"
watchdog=$(systemctl show -P WatchdogUSec gattway)
check pkg.watchdog-set "WatchdogUSec $watchdog" test "$watchdog" = 30s

# ---- What it does: the management socket as its radio, a reading on MQTT.
radio_is_mgmt() { health | python3 -c 'import json,sys; sys.exit(json.load(sys.stdin)["radio"]["path"] != "mgmt")' 2>/dev/null; }
if until_true 60 radio_is_mgmt; then
  result "PASS pkg.radio the kernel's management socket (CAP_NET_ADMIN from the unit)"
else
  result "FAIL pkg.radio $(health | head -c 400)"
fi
reading() { grep -qE '^gattway/[^/ ]+ .*"battery":[0-9]+' "$R/mqtt.txt"; }
if until_true 180 reading; then
  result "PASS pkg.reading $(grep -E '"battery":' "$R/mqtt.txt" | head -n1 | cut -c1-160)"
else
  result "FAIL pkg.reading no battery level on gattway/# in 180 s: $(tail -n 3 "$R/mqtt.txt" | tr '\n' ' ')"
fi

# ---- The adapter's state on the web page: off and on again.
check pkg.web.adapter-on "$(health | python3 -c 'import json,sys; print(json.load(sys.stdin)["adapter"])' 2>&1)" adapter_state_is powered_on
busctl --system set-property org.bluez /org/bluez/hci0 org.bluez.Adapter1 Powered b false
if until_true 60 adapter_state_is powered_off; then
  result "PASS pkg.web.adapter-off the page shows powered_off; systemd status: $(systemctl show -P StatusText gattway)"
else
  result "FAIL pkg.web.adapter-off $(health | head -c 300)"
fi
busctl --system set-property org.bluez /org/bluez/hci0 org.bluez.Adapter1 Powered b true
check pkg.web.adapter-on-again "after bluetoothctl power on" until_true 60 adapter_state_is powered_on

# ---- The watchdog: a process that stops answering is killed and started again.
restarts_before=$(systemctl show -P NRestarts gattway)
kill -STOP "$pid"
restarted() { [ "$(systemctl show -P NRestarts gattway)" -gt "$restarts_before" ] && is_active && [ "$(main_pid)" != "$pid" ]; }
if until_true 150 restarted; then
  result "PASS pkg.watchdog stopped process replaced by $(main_pid) at guest $(t) s: $(journalctl -u gattway --no-pager | grep -m1 -o 'Watchdog timeout.*')"
else
  result "FAIL pkg.watchdog NRestarts $(systemctl show -P NRestarts gattway), $(systemctl is-active gattway): $(journalctl -u gattway --no-pager | tail -n 4 | tr '\n' ' ')"
fi

# ---- A clean stop within TimeoutStopSec, then remove and purge with systemd running.
started=$(date +%s%N)
systemctl stop gattway
stopped_ms=$(( ($(date +%s%N) - started) / 1000000 ))
check pkg.stop "in $stopped_ms ms, result $(systemctl show -P Result gattway), exit status $(systemctl show -P ExecMainStatus gattway)" \
  test "$(systemctl show -P Result gattway)" = success
systemctl start gattway
until_true 120 is_active
dpkg -r gattway > "$R/dpkg-remove.txt" 2>&1
check pkg.remove "service $(systemctl is-active gattway 2>&1), binary $( [ -e /usr/bin/gattway ] && echo kept || echo gone), config $( [ -e /etc/gattway/config.json ] && echo kept || echo gone)" \
  bash -c "! systemctl is-active -q gattway && [ ! -e /usr/bin/gattway ] && [ -e /etc/gattway/config.json ]"
dpkg --purge gattway > "$R/dpkg-purge.txt" 2>&1
check pkg.purge "user $(id -u gattway 2>&1 | head -c 40), /etc/gattway $( [ -e /etc/gattway ] && echo kept || echo gone), /var/lib/gattway $( [ -e /var/lib/gattway ] && echo kept || echo gone)" \
  bash -c "! id gattway >/dev/null 2>&1 && [ ! -e /etc/gattway ] && [ ! -e /var/lib/gattway ]"

journalctl -u gattway --no-pager -o short-monotonic > "$R/gattway-journal.txt" 2>&1
! grep -q '^FAIL ' "$RESULTS"
