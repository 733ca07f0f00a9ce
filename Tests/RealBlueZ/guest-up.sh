#!/bin/bash
# Guest side of run-vm.sh (copied into the run folder as boot.sh; PID 1 runs it in the chroot of
# the host's root). Starts the system bus, four linked virtual controllers (btvirt -l4: hci0 the
# central, hci1 the test peripheral, hci2 an unrelated advertiser, hci3 a second central), the
# real bluetoothd, powers the controllers on, runs the guest script and records its status in
# /run/share/status.
#
# The guest script gets: SHARE (the shared run folder; write results there), LOGS
# (= $SHARE/logs, where the daemons log) and `rbz-bluetoothd restart|stop|start` on PATH.
export PATH=/run/rbz/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root LANG=C.UTF-8 TERM=dumb
export SHARE=/run/share LOGS=/run/share/logs
mkdir -p "$LOGS" /run/rbz/bin /run/dbus
# devtmpfs has no /dev/fd (udev would add it): bash's process substitution needs it.
[ -e /dev/fd ] || ln -s /proc/self/fd /dev/fd
# shellcheck disable=SC1091
. "$SHARE/env"
export BLUETOOTHD_ARGS
uptime_() { cut -d' ' -f1 /proc/uptime; }
echo "[guest $(uptime_)] bring-up"

# The bluetoothd helper (also used by tests for a restart). Every start appends to one log.
cat > /run/rbz/bin/rbz-bluetoothd <<'HELPER'
#!/bin/bash
# rbz-bluetoothd start|stop|restart [--crash]: bluetoothd with $BLUETOOTHD_ARGS; start waits until
# every controller has its Adapter1 object and powers them on. Deadlines are wall-clock seconds
# (under software emulation on a loaded host one busctl call alone can take a second); every
# failure says why on stderr and exits 1.
pidfile=/run/rbz/bluetoothd.pid
now() { date +%s; }
controllers() { ls /sys/class/bluetooth | grep -E '^hci[0-9]+$'; }
stop() {
  local pid sig=TERM deadline
  [ "${1:-}" = --crash ] && sig=KILL
  pid=$(cat $pidfile 2>/dev/null) || return 0
  kill -$sig "$pid" 2>/dev/null
  # A SIGTERM'd bluetoothd powers the controllers off before it exits: seconds under emulation.
  # A second bluetoothd started meanwhile would lose the bus name to it and exit.
  deadline=$(( $(now) + 30 ))
  while kill -0 "$pid" 2>/dev/null && [ "$(now)" -lt "$deadline" ]; do sleep 0.05; done
  if kill -0 "$pid" 2>/dev/null; then
    echo "rbz-bluetoothd: bluetoothd $pid still running 30 s after SIG$sig; killing it" >&2
    kill -KILL "$pid" 2>/dev/null
    while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
  fi
  rm -f $pidfile
}
start() {
  local n=0 want pid deadline limit
  # Controllers only: a live link shows up next to them as hciN:HANDLE.
  want=$(controllers | wc -l)
  echo "==== bluetoothd start $(cut -d' ' -f1 /proc/uptime)" >> "$LOGS/bluetoothd.log"
  # Each line gets the guest uptime in front (the tests print theirs), read without a fork.
  # RBZ_BLUETOOTHD_WRAPPER (e.g. "valgrind --tool=callgrind --instr-atstart=no ...") runs it under a
  # tool; the pid stays bluetoothd's (valgrind runs the program in its own process).
  # shellcheck disable=SC2086
  setsid ${RBZ_BLUETOOTHD_WRAPPER:-} /usr/libexec/bluetooth/bluetoothd -n -f /run/rbz/main.conf $BLUETOOTHD_ARGS > >(
    while IFS= read -r line; do read -r up _ < /proc/uptime; printf '%s %s\n' "$up" "$line"; done >> "$LOGS/bluetoothd.log"
  ) 2>&1 < /dev/null &
  pid=$!
  echo $pid > $pidfile
  limit=60
  [ -n "${RBZ_BLUETOOTHD_WRAPPER:-}" ] && limit=300  # a tool's start-up under emulation
  deadline=$(( $(now) + limit ))
  while [ "$(now)" -lt "$deadline" ]; do
    kill -0 $pid 2>/dev/null || { echo "rbz-bluetoothd: bluetoothd exited: $(tail -n 2 "$LOGS/bluetoothd.log" | tr '\n' ' ')" >&2; return 1; }
    n=$(busctl --system --list tree org.bluez 2>/dev/null | grep -c '^/org/bluez/hci[0-9]*$')
    [ "$n" -ge "$want" ] && break
    sleep 0.05
  done
  [ "$n" -ge "$want" ] || { echo "rbz-bluetoothd: bluetoothd exposes $n of $want adapters after $limit s" >&2; return 1; }
  # bluetoothd may be powering them on itself (AutoEnable); Set then answers Busy: retry.
  local h ok
  for h in $(controllers); do
    ok=""
    deadline=$(( $(now) + 30 ))
    while [ "$(now)" -lt "$deadline" ]; do
      if [ "$(busctl --system get-property org.bluez /org/bluez/$h org.bluez.Adapter1 Powered 2>/dev/null)" = "b true" ]; then
        ok=1; break
      fi
      busctl --system set-property org.bluez /org/bluez/$h org.bluez.Adapter1 Powered b true 2>/dev/null
      sleep 0.05
    done
    [ -n "$ok" ] || { echo "rbz-bluetoothd: cannot power $h on within 30 s" >&2; return 1; }
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
# bluetoothd's configuration: the defaults, except no EATT (Channels = 1). With both ends of a
# link in this one bluetoothd, 5.66 opened EATT channels at once from both sides and now and then
# took a response on the wrong one ("Received unexpected ATT response"), dropped that channel and
# with it the link 2 s later: bleak's service discovery of `gattway serve` failed with "device
# disconnected" (README, Traps). The sensors a gateway meets do not do EATT; one ATT bearer is
# what they use.
printf '[General]\n\n[GATT]\nChannels = 1\n\n[Policy]\nAutoEnable = true\n' > /run/rbz/main.conf

fail() { echo "[guest] BRING-UP FAILED: $*"; echo "--- bluetoothd.log"; tail -n 40 "$LOGS/bluetoothd.log" 2>/dev/null; echo 97 > "$SHARE/status"; exit 97; }
ip link set lo up 2>/dev/null
# RBZ_DBUS_WRAPPER: a tool to run the system bus under, as RBZ_BLUETOOTHD_WRAPPER for bluetoothd
# shellcheck disable=SC2086
${RBZ_DBUS_WRAPPER:-} dbus-daemon --system --fork --print-pid=3 3> /run/rbz/dbus.pid > "$LOGS/dbus.log" 2>&1 \
  || fail "dbus-daemon"
t_dbus=$(uptime_)
btvirt -l4 > "$LOGS/btvirt.log" 2>&1 &
btvirt_pid=$!
for _ in $(seq 100); do [ -e /sys/class/bluetooth/hci3 ] && break; sleep 0.05; done
[ -e /sys/class/bluetooth/hci3 ] || fail "btvirt did not create hci0..hci3"
t_btvirt=$(uptime_)
rbz-bluetoothd start || fail "bluetoothd"
echo "[guest $(uptime_)] ready: dbus $t_dbus, btvirt $t_btvirt, bluetoothd + powered $(uptime_) (guest uptime, s)"
uptime_ > "$SHARE/ready-uptime"

cd "$GUEST_CWD" 2>/dev/null || cd /
"$GUEST_SCRIPT" "${GUEST_ARGS[@]}"
status=$?
echo "$status" > "$SHARE/status"
rbz-bluetoothd stop
kill "$btvirt_pid" "$(cat /run/rbz/dbus.pid)" 2>/dev/null
echo "[guest $(uptime_)] guest script exited with $status"
exit "$status"
