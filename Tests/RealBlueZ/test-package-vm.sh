#!/usr/bin/env bash
# make test-package: gattway's Debian package under the real systemd, in the real-BlueZ VM (the
# real kernel and bluetoothd 5.66 of `make test-bluez`, with systemd as PID 1: run-vm.sh
# RBZ_SYSTEMD=1). guest-package.sh installs the package with dpkg there and checks the service
# systemd runs from it. Prints every check, then "N passed, N failed"; exits 1 on any failure and
# then shows the tail of gattway's and bluetoothd's journal.
#
#   Tests/RealBlueZ/test-package-vm.sh PACKAGE.deb
#
# Environment: REALBLUEZ_TIMEOUT (VM wall-clock limit, default 1500 s), REALBLUEZ_VERBOSE=1 (echo
# the whole guest console), and those of run-vm.sh.
set -uo pipefail
DEB=$(cd "$(dirname "${1:?usage: test-package-vm.sh PACKAGE.deb}")" && pwd)/$(basename "$1")
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CACHE=${REALBLUEZ_CACHE:-$ROOT/.build/realbluez}
RUN=$CACHE/runs/package
[ -s "$DEB" ] || { echo "test-package-vm: $DEB missing (make deb)" >&2; exit 2; }
"$HERE/build-vm.sh" || { echo "test-package-vm: building the VM failed"; echo "0 passed, 1 failed"; exit 1; }

echo "test-package-vm: booting the VM with systemd as PID 1 (real bluetoothd 5.66, btvirt -l4)"
export REALBLUEZ_RUN=$RUN RBZ_SYSTEMD=1 REALBLUEZ_TIMEOUT=${REALBLUEZ_TIMEOUT:-1500}
[ -n "${REALBLUEZ_VERBOSE:-}" ] || export REALBLUEZ_QUIET=1
"$HERE/run-vm.sh" "$HERE/guest-package.sh" "$DEB"
vm_status=$?
results=$RUN/results.txt
[ -f "$results" ] || : > "$results"
grep -E '\[guest' "$RUN/console.log" | sed -E 's/^\[ *[0-9.]+\] bash\[[0-9]+\]: //' || true
if [ "$vm_status" != 0 ] && ! grep -q '^FAIL ' "$results"; then
  echo "FAIL vm.run status $vm_status (97 bring-up, 99 guest root, 124 wall-clock limit; see $RUN/console.log)" >> "$results"
fi
echo "---- results (run folder $RUN)"
cut -c1-300 "$results"
passed=$(grep -c '^PASS ' "$results")
failed=$(grep -c '^FAIL ' "$results")
if [ "$failed" != 0 ]; then
  echo "---- gattway's journal (last 40 lines of $RUN/out/gattway-journal.txt)"
  tail -n 40 "$RUN/out/gattway-journal.txt" 2>/dev/null
  echo "---- bluetoothd's journal (last 30 lines)"
  tail -n 30 "$RUN/logs/bluetoothd.log" 2>/dev/null
fi
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
