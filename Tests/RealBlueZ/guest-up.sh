#!/bin/bash
# Guest side of run-vm.sh (copied into the run folder as boot.sh; PID 1 runs it in the chroot of
# the host's root). Starts the system bus, three linked virtual controllers (btvirt -l3: hci0 the
# central, hci1 the test peripheral, hci2 an unrelated advertiser), the real bluetoothd, powers
# the controllers on, runs the guest script and records its status in /run/share/status.
#
# The guest script gets: SHARE (the shared run folder; write results there), LOGS
# (= $SHARE/logs, where the daemons log) and `rbz-bluetoothd restart|stop|start` on PATH.
export PATH=/run/rbz/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root LANG=C.UTF-8 TERM=dumb
export SHARE=/run/share LOGS=/run/share/logs
mkdir -p "$LOGS" /run/rbz/bin /run/dbus
# shellcheck disable=SC1091
. "$SHARE/env"
export BLUETOOTHD_ARGS
uptime_() { cut -d' ' -f1 /proc/uptime; }
echo "[guest $(uptime_)] bring-up"

# The bluetoothd helper (also used by tests for a restart). Every start appends to one log.
cat > /run/rbz/bin/rbz-bluetoothd <<'HELPER'
#!/bin/bash
# rbz-bluetoothd start|stop|restart [--crash]: bluetoothd with $BLUETOOTHD_ARGS; start waits until
# every controller has its Adapter1 object and powers them on.
pidfile=/run/rbz/bluetoothd.pid
stop() {
  local pid sig=TERM
  [ "${1:-}" = --crash ] && sig=KILL
  pid=$(cat $pidfile 2>/dev/null) || return 0
  kill -$sig "$pid" 2>/dev/null
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  rm -f $pidfile
}
start() {
  local n=0 want
  want=$(ls /sys/class/bluetooth | grep -c '^hci')
  echo "==== bluetoothd start $(cut -d' ' -f1 /proc/uptime)" >> "$LOGS/bluetoothd.log"
  # shellcheck disable=SC2086
  setsid /usr/libexec/bluetooth/bluetoothd -n $BLUETOOTHD_ARGS >> "$LOGS/bluetoothd.log" 2>&1 < /dev/null &
  echo $! > $pidfile
  for _ in $(seq 300); do
    n=$(busctl --system --list tree org.bluez 2>/dev/null | grep -c '^/org/bluez/hci[0-9]*$')
    [ "$n" -ge "$want" ] && break
    sleep 0.05
  done
  [ "$n" -ge "$want" ] || { echo "bluetoothd exposes $n of $want adapters" >&2; return 1; }
  # bluetoothd may be powering them on itself (AutoEnable); Set then answers Busy: retry.
  local h ok
  for h in $(ls /sys/class/bluetooth | grep '^hci'); do
    ok=""
    for _ in $(seq 100); do
      if [ "$(busctl --system get-property org.bluez /org/bluez/$h org.bluez.Adapter1 Powered 2>/dev/null)" = "b true" ]; then
        ok=1; break
      fi
      busctl --system set-property org.bluez /org/bluez/$h org.bluez.Adapter1 Powered b true 2>/dev/null
      sleep 0.05
    done
    [ -n "$ok" ] || { echo "cannot power $h on" >&2; return 1; }
  done
}
case "${1:-}" in
  start) start ;;
  stop) stop "${2:-}" ;;
  restart) stop "${2:-}"; start ;;
  *) echo "usage: rbz-bluetoothd start|stop|restart [--crash]" >&2; exit 2 ;;
esac
HELPER
chmod 755 /run/rbz/bin/rbz-bluetoothd

fail() { echo "[guest] BRING-UP FAILED: $*"; echo "--- bluetoothd.log"; tail -n 40 "$LOGS/bluetoothd.log" 2>/dev/null; echo 97 > "$SHARE/status"; exit 97; }
ip link set lo up 2>/dev/null
dbus-daemon --system --fork --print-pid=3 3> /run/rbz/dbus.pid > "$LOGS/dbus.log" 2>&1 || fail "dbus-daemon"
t_dbus=$(uptime_)
btvirt -l3 > "$LOGS/btvirt.log" 2>&1 &
btvirt_pid=$!
for _ in $(seq 100); do [ -e /sys/class/bluetooth/hci2 ] && break; sleep 0.05; done
[ -e /sys/class/bluetooth/hci2 ] || fail "btvirt did not create hci0..hci2"
t_btvirt=$(uptime_)
rbz-bluetoothd start || fail "bluetoothd"
echo "[guest $(uptime_)] ready: dbus $t_dbus, btvirt $t_btvirt, bluetoothd + powered $(uptime_) (guest uptime, s)"
echo "$(uptime_)" > "$SHARE/ready-uptime"

cd "$GUEST_CWD" 2>/dev/null || cd /
"$GUEST_SCRIPT" "${GUEST_ARGS[@]}"
status=$?
echo "$status" > "$SHARE/status"
rbz-bluetoothd stop
kill "$btvirt_pid" "$(cat /run/rbz/dbus.pid)" 2>/dev/null
echo "[guest $(uptime_)] guest script exited with $status"
exit "$status"
