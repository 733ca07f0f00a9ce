#!/usr/bin/env bash
# Boots the real-BlueZ VM (qemu, software emulation), brings up dbus-daemon, btvirt and the
# real bluetoothd inside it, runs one guest script and exits with that script's status.
#
#   Tests/RealBlueZ/run-vm.sh GUEST-SCRIPT [ARGS...]
#
# The guest sees this machine's / read-only (with a RAM overlay), so GUEST-SCRIPT and every
# binary it starts are given by their host paths. The guest has no network device: results come
# back through the console (printed here and saved as console.log) and a per-run shared folder
# (/run/share in the guest, $RUN_DIR here; the guest script writes its files to $SHARE).
#
# Environment:
#   REALBLUEZ_TIMEOUT  wall-clock limit in seconds (default 1500); exit 124 when it is reached
#   REALBLUEZ_CACHE    where build-vm.sh put the kernel and initramfs (default .build/realbluez)
#   REALBLUEZ_RUN      run directory to use (default: a new $CACHE/runs/run-XXXX); kept afterwards
#   REALBLUEZ_MEM      guest memory in MiB (default 1024); REALBLUEZ_CPUS guest CPUs (default 2)
#   BLUETOOTHD_ARGS    bluetoothd's options (default "-d -P battery": debug log, no battery plugin)
#   REALBLUEZ_QUIET=1  do not echo the console (it is still saved)
#   RBZ_SYSTEMD=1      boot systemd as PID 1 (Debian's units for the bus and bluetoothd; the guest
#                      script runs as the service rbz-guest.service)
#   Any variable named RBZ_* is passed to the guest script; RBZ_BLUETOOTHD_WRAPPER is a command
#   bluetoothd runs under (e.g. valgrind's callgrind; guest-up.sh)
#
# Exit status: the guest script's; 97 bring-up failed (dbus, btvirt or bluetoothd); 99 the
# guest could not mount its root; 124 wall-clock limit; 125 usage error or VM not built.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CACHE=${REALBLUEZ_CACHE:-$ROOT/.build/realbluez}
[ $# -ge 1 ] || { echo "usage: $0 GUEST-SCRIPT [ARGS...]" >&2; exit 125; }
# shellcheck disable=SC2015 # the message and exit are meant to run when either file is missing
[ -s "$CACHE/kernel/vmlinuz" ] && [ -s "$CACHE/initrd.img" ] \
  || { echo "[run-vm] the VM is not built: run Tests/RealBlueZ/build-vm.sh" >&2; exit 125; }
command -v qemu-system-x86_64 >/dev/null || { echo "[run-vm] qemu-system-x86_64 missing" >&2; exit 125; }

if [ -n "${REALBLUEZ_RUN:-}" ]; then RUN=$REALBLUEZ_RUN; rm -rf "$RUN"; mkdir -p "$RUN"
else mkdir -p "$CACHE/runs"; RUN=$(mktemp -d "$CACHE/runs/run-XXXX"); fi
RUN=$(cd "$RUN" && pwd)
mkdir -p "$RUN/logs"
cp "$HERE/guest-up.sh" "$RUN/boot.sh"
# RBZ_SYSTEMD=1: the guest boots systemd as PID 1 with the units of systemd/ (build-vm.sh's init).
if [ "${RBZ_SYSTEMD:-}" = 1 ]; then
  mkdir -p "$RUN/systemd"
  cp "$HERE"/systemd/*.target "$HERE"/systemd/*.service "$RUN/systemd/"
  grep -v '^#' "$HERE/systemd/masked.txt" | while read -r unit; do ln -s /dev/null "$RUN/systemd/$unit"; done
fi
script=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
shift
{
  printf 'GUEST_SCRIPT=%q\n' "$script"
  printf 'GUEST_ARGS=(%s)\n' "$(printf '%q ' "$@")"
  printf 'GUEST_CWD=%q\n' "$PWD"
  printf 'BLUETOOTHD_ARGS=%q\n' "${BLUETOOTHD_ARGS--d -P battery}"
  for v in $(compgen -e | grep '^RBZ_' || true); do printf 'export %s=%q\n' "$v" "${!v}"; done
} > "$RUN/env"

start=$(date +%s%N)
# -nodefaults: no NIC, no VGA, no default devices. Only the serial console and two 9p shares.
timeout -k 5 "${REALBLUEZ_TIMEOUT:-1500}" qemu-system-x86_64 \
  -accel tcg -m "${REALBLUEZ_MEM:-1024}" -smp "${REALBLUEZ_CPUS:-2}" \
  -nodefaults -no-user-config -display none -no-reboot -serial stdio \
  -kernel "$CACHE/kernel/vmlinuz" -initrd "$CACHE/initrd.img" \
  -append "console=ttyS0 quiet loglevel=3 panic=-1" \
  -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
  -virtfs "local,path=$RUN,mount_tag=share,security_model=none" \
  < /dev/null 2> "$RUN/qemu.stderr" \
  | tr -d '\r' | tee "$RUN/console.log" | { if [ -n "${REALBLUEZ_QUIET:-}" ]; then cat >/dev/null; else cat; fi; }
qemu=${PIPESTATUS[0]}
tenths=$(( ($(date +%s%N) - start) / 100000000 ))
wall="$((tenths / 10)).$((tenths % 10))"
echo "$wall" > "$RUN/wall-seconds"

if [ "$qemu" = 124 ] || [ "$qemu" = 137 ]; then
  echo "[run-vm] wall-clock limit of ${REALBLUEZ_TIMEOUT:-1500} s reached (run dir $RUN)" >&2
  status=124
elif [ -s "$RUN/status" ]; then
  status=$(cat "$RUN/status")
else
  status=$(sed -n 's/^GUEST-DONE \([0-9]*\)$/\1/p' "$RUN/console.log" | tail -n1)
  status=${status:-99}
  [ "$qemu" = 0 ] || { echo "[run-vm] qemu exited with $qemu:" >&2; tail -n 5 "$RUN/qemu.stderr" >&2; }
fi
echo "[run-vm] $wall s wall, guest status $status, run dir $RUN" >&2
exit "$status"
