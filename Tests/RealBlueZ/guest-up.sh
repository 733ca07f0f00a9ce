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
  if [ -d /run/systemd/system ]; then
    # Under systemd (RBZ_SYSTEMD=1) bluetoothd is Debian's bluetooth.service.
    if [ "$sig" = KILL ]; then systemctl kill -s KILL bluetooth; fi
    timeout 30 systemctl stop bluetooth || echo "rbz-bluetoothd: systemctl stop bluetooth failed" >&2
    return 0
  fi
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
  if [ -d /run/systemd/system ]; then
    # Debian's unit as it is, but for the options the lane gives bluetoothd (a drop-in), with
    # its log in the journal (copied to $LOGS/bluetoothd.log at the end).
    mkdir -p /run/systemd/system/bluetooth.service.d
    printf '[Service]\nExecStart=\nExecStart=/usr/libexec/bluetooth/bluetoothd -f /run/rbz/main.conf %s\n' \
      "$BLUETOOTHD_ARGS" > /run/systemd/system/bluetooth.service.d/rbz.conf
    systemctl daemon-reload
    systemctl start bluetooth || { echo "rbz-bluetoothd: systemctl start bluetooth failed" >&2; return 1; }
    pid=$(systemctl show -P MainPID bluetooth)
  else
    setsid ${RBZ_BLUETOOTHD_WRAPPER:-} /usr/libexec/bluetooth/bluetoothd -n -f /run/rbz/main.conf $BLUETOOTHD_ARGS > >(
      while IFS= read -r line; do read -r up _ < /proc/uptime; printf '%s %s\n' "$up" "$line"; done >> "$LOGS/bluetoothd.log"
    ) 2>&1 < /dev/null &
    pid=$!
  fi
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

fail() {
  echo "[guest] BRING-UP FAILED: $*"
  dmesg | grep -E 'Bluetooth: hci[0-9]+: .*failed' | tail -n 4
  [ -d /run/systemd/system ] && journalctl -b --no-pager -u bluetooth -u dbus > "$LOGS/bluetoothd.log" 2>&1
  echo "--- bluetoothd.log"; tail -n 40 "$LOGS/bluetoothd.log" 2>/dev/null; echo 97 > "$SHARE/status"
  [ -d /run/systemd/system ] && { sync; systemctl poweroff -ff; }
  exit 97
}
ip link set lo up 2>/dev/null
# RBZ_DBUS_WRAPPER: a tool to run the system bus under, as RBZ_BLUETOOTHD_WRAPPER for bluetoothd
# shellcheck disable=SC2086
if [ -d /run/systemd/system ]; then
  # Under systemd the system bus is Debian's dbus.service (socket-activated).
  systemctl start dbus.service || fail "dbus.service"
  systemctl show -P MainPID dbus.service > /run/rbz/dbus.pid
else
  ${RBZ_DBUS_WRAPPER:-} dbus-daemon --system --fork --print-pid=3 3> /run/rbz/dbus.pid > "$LOGS/dbus.log" 2>&1 \
    || fail "dbus-daemon"
fi
t_dbus=$(uptime_)
start_btvirt() {
  btvirt -l4 >> "$LOGS/btvirt.log" 2>&1 &
  btvirt_pid=$!
  for _ in $(seq 100); do [ -e /sys/class/bluetooth/hci3 ] && break; sleep 0.05; done
  [ -e /sys/class/bluetooth/hci3 ] || fail "btvirt did not create hci0..hci3"
}
start_btvirt
t_btvirt=$(uptime_)
if ! rbz-bluetoothd start; then
  # The kernel gives a controller 2 s to answer each setup command; on a loaded host btvirt has
  # missed that ("hci0: Opcode 0x0c03 failed: -110") and the controller never came up. Once more
  # with fresh controllers.
  echo "[guest $(uptime_)] bluetoothd did not get every controller; btvirt and bluetoothd once more"
  dmesg | grep -E 'Bluetooth: hci[0-9]+: .*failed' | tail -n 4
  rbz-bluetoothd stop
  kill "$btvirt_pid" 2>/dev/null
  wait "$btvirt_pid" 2>/dev/null
  for _ in $(seq 200); do [ -e /sys/class/bluetooth/hci0 ] || break; sleep 0.05; done
  start_btvirt
  rbz-bluetoothd start || fail "bluetoothd"
fi
echo "[guest $(uptime_)] ready: dbus $t_dbus, btvirt $t_btvirt, bluetoothd + powered $(uptime_) (guest uptime, s)"
uptime_ > "$SHARE/ready-uptime"

cd "$GUEST_CWD" 2>/dev/null || cd /
"$GUEST_SCRIPT" "${GUEST_ARGS[@]}"
status=$?
echo "$status" > "$SHARE/status"
rbz-bluetoothd stop
echo "[guest $(uptime_)] guest script exited with $status"
if [ -d /run/systemd/system ]; then
  # PID 1 is systemd: keep its journal, then power off at once (the status is in the share).
  journalctl -b --no-pager -o short-monotonic > "$LOGS/journal.log" 2>&1
  journalctl -b --no-pager -o short-monotonic -u bluetooth > "$LOGS/bluetoothd.log" 2>&1
  kill "$btvirt_pid" 2>/dev/null
  sync
  echo "GUEST-DONE $status"
  systemctl poweroff -ff
fi
kill "$btvirt_pid" "$(cat /run/rbz/dbus.pid)" 2>/dev/null
exit "$status"
