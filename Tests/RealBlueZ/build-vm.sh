#!/usr/bin/env bash
# Builds (once) what the real-BlueZ VM boots: Debian's kernel and a small initramfs.
#
#   Tests/RealBlueZ/build-vm.sh            # idempotent; REBUILD=1 rebuilds the initramfs
#
# The VM runs no image of its own: its root file system is this machine's / exported read-only
# over virtio-9p with a RAM overlay on top, so bluetoothd, btvirt, dbus-daemon, python3 and the
# host-built gattway binaries run in the guest unchanged. The initramfs only has to load the
# kernel modules, mount that root and hand over to the per-run script (see run-vm.sh).
#
# Output (git-ignored): $REALBLUEZ_CACHE, default .build/realbluez/ in the repository:
#   kernel/vmlinuz, kernel/version, initrd.img, stamp (inputs the initrd was built from)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CACHE=${REALBLUEZ_CACHE:-$ROOT/.build/realbluez}
note() { echo "[build-vm] $*" >&2; }

# Debian packages: the emulator, the initramfs tools, and what the guest runs (from the host root).
"$ROOT/scripts/install-deps.sh" qemu-system-x86 busybox-static cpio kmod gzip \
  bluez bluez-test-tools dbus dbus-daemon python3 python3-dbus python3-gi

mkdir -p "$CACHE/kernel"
cd "$CACHE"

# The kernel: whatever linux-image-amd64 currently points at, fetched with apt (no install).
if [ ! -s kernel/vmlinuz ] || [ ! -s kernel/version ]; then
  pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*\)$/\1/p' | head -n1)
  if [ -z "$pkg" ]; then
    apt-get update -qq >/dev/null
    pkg=$(apt-cache depends linux-image-amd64 | sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*\)$/\1/p' | head -n1)
  fi
  [ -n "$pkg" ] || { note "cannot resolve linux-image-amd64"; exit 1; }
  note "downloading $pkg"
  rm -rf kernel/tree kernel/*.deb
  (cd kernel && apt-get download "$pkg" >/dev/null 2>&1) \
    || { apt-get update -qq >/dev/null; (cd kernel && apt-get download "$pkg" >/dev/null); }
  dpkg-deb -x kernel/"$pkg"_*.deb kernel/tree
  rm -f kernel/*.deb
  # shellcheck disable=SC2012 # one directory, named by the kernel version (plain characters)
  version=$(ls kernel/tree/lib/modules | head -n1)
  cp "kernel/tree/boot/vmlinuz-$version" kernel/vmlinuz
  echo "$version" > kernel/version
  rm -f initrd.img
fi
version=$(cat kernel/version)
modules=kernel/tree/lib/modules/$version

# The initramfs is rebuilt when this script changes (its hash is the stamp).
stamp="$version $(sha256sum "$HERE/build-vm.sh" | cut -c1-16)"
if [ -s initrd.img ] && [ "$(cat stamp 2>/dev/null)" = "$stamp" ] && [ "${REBUILD:-0}" != 1 ]; then
  exit 0
fi
[ -d "$modules" ] || { rm -f kernel/version; note "kernel modules missing; run again"; exit 1; }

# Modules the guest needs, in dependency order (Debian ships no modules.dep for a bare tree, so
# the order comes from modinfo). 9p + virtio for the shared folders, overlay for the writable
# root, bluetooth + hci_vhci for btvirt, and the AF_ALG hashes btvirt's SMP crypto opens. The
# random number generator (drbg, seeded by jitterentropy_rng; hmac(sha512), ctr(aes)) comes before
# bluetooth: the kernel's ECDH (ecdh_generic, loaded with bluetooth) takes its private keys from
# it, and without it its self-test fails and every controller logs "Unable to create ECDH crypto
# context": no SMP, so no LE pairing at all (guest-pairing.sh).
wanted="sha512_generic ctr jitterentropy_rng drbg virtio_pci 9pnet_virtio 9p overlay bluetooth hci_vhci af_alg algif_hash algif_skcipher cmac ecb"
declare -A done_=()
order=()
find_ko() { find "$modules" -name "$1.ko" -print -quit; }
add() {
  local name=$1 file dep
  [ -n "${done_[$name]:-}" ] && return 0
  done_[$name]=1
  file=$(find_ko "$name")
  if [ -z "$file" ]; then
    grep -q "/$name.ko\$" "$modules/modules.builtin" && return 0
    note "kernel module $name not found"; exit 1
  fi
  for dep in $(modinfo -F depends "$file" | tr ',' ' '); do add "$dep"; done
  order+=("$name")
}
for m in $wanted; do add "$m"; done

rm -rf initrd && mkdir -p initrd/bin initrd/proc initrd/sys initrd/dev initrd/mods initrd/host initrd/mem initrd/root
cp "$(command -v busybox)" initrd/bin/busybox
for m in "${order[@]}"; do cp "$(find_ko "$m")" initrd/mods/; done
printf '%s\n' "${order[@]}" > initrd/mods/load-order

# PID 1: modules, host root (ro) + RAM overlay, the per-run share, then the run's boot script.
# Whatever happens it prints "GUEST-DONE <status>" on the console and powers off.
cat > initrd/init <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc none /proc
mount -t sysfs none /sys
mount -t devtmpfs none /dev
finish() { echo "GUEST-DONE $1"; sync; poweroff -f; sleep 5; }
for m in $(cat /mods/load-order); do insmod /mods/$m.ko || echo "[init] insmod $m failed"; done
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=loose,ro hostroot /host || finish 99
mount -t tmpfs -o size=70% none /mem && mkdir -p /mem/upper /mem/work
mount -t overlay -o lowerdir=/host,upperdir=/mem/upper,workdir=/mem/work none /root || finish 99
for d in proc sys dev; do mount --move /$d /root/$d 2>/dev/null || mount -t $d none /root/$d; done
mkdir -p /root/dev/pts /root/dev/shm
mount -t devpts none /root/dev/pts
mount -t tmpfs none /root/dev/shm
mount -t tmpfs -o mode=755 none /root/run
mount -t tmpfs -o mode=700 none /root/var/lib/bluetooth 2>/dev/null
mkdir -p /root/run/share
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 share /root/run/share || finish 99
# run-vm.sh RBZ_SYSTEMD=1: systemd becomes PID 1 on the overlay root, with the run's units in
# /etc/systemd/system; its target starts boot.sh as a service, which powers off at the end.
if [ -d /root/run/share/systemd ]; then
  cp -r /root/run/share/systemd/. /root/etc/systemd/system/ || finish 99
  rm -f /root/.dockerenv
  exec switch_root /root /lib/systemd/systemd --unit=rbz.target --show-status=auto
fi
chroot /root /bin/bash /run/share/boot.sh
finish $?
INIT
chmod 755 initrd/init
(cd initrd && find . | cpio -o -H newc --quiet | gzip -1) > initrd.img.tmp
mv initrd.img.tmp initrd.img
echo "$stamp" > stamp
rm -rf initrd
note "initrd.img $(du -h initrd.img | cut -f1) for kernel $version; modules: ${order[*]}"
