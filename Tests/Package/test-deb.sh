#!/usr/bin/env bash
# The Debian package in a fresh Debian 12 root (`make test-deb`; docs/raspberry-pi.md, "The
# Debian package"). Needs root (chroot, mounts).
#
#   Tests/Package/test-deb.sh
#
# 1. Builds the package twice with scripts/build-deb.sh: the release build's version, and the same
#    binary as a newer version (DEB_VERSION) for the upgrade.
# 2. lintian: no errors.
# 3. A Debian 12 root made by mmdebstrap (variant apt: the essential packages and apt, no Swift)
#    from the mirror this machine's apt uses, cached as .build/deb/root-cache/bookworm-ARCH.tar
#    (DEB_TEST_FRESH=1 makes it again) and unpacked afresh on every run; apt's downloads are kept
#    in .build/deb/root-cache/archives.
# 4. In the root: apt-get install ./gattway_V1.deb (the Depends come from Debian's mirror), then
#    what a user would check: gattway version and config check run, the user, the enabled unit,
#    the permissions; an upgrade to V2 keeps an edited config.json and the state directory's files;
#    apt-get purge leaves nothing of the package, its user, its directories or its enable link.
#
# GATTWAY_BINARY=… packages that binary (default: build-deb.sh makes the release build).
# Ends with "N passed, M failed"; exits 1 when anything failed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
work="$repo/.build/deb/test"
cache="$repo/.build/deb/root-cache"
root="$work/root"
arch=$(dpkg --print-architecture)
passed=0
failed=0
started=$(date +%s)

note() { echo "[test-deb] $*"; }
pass() { passed=$((passed + 1)); echo "ok   $*"; }
fail() { failed=$((failed + 1)); echo "FAIL $*"; }
# check NAME COMMAND…: passes when COMMAND succeeds.
check() {
  local name=$1
  shift
  if "$@"; then pass "$name"; else fail "$name"; fi
}
finish() {
  echo "$passed passed, $failed failed ($(($(date +%s) - started)) s)"
  [ "$failed" -eq 0 ]
  exit $?
}

if [ "$(id -u)" -ne 0 ]; then
  echo "test-deb: needs root (chroot and mounts)" >&2
  exit 1
fi
"$repo/scripts/install-deps.sh" mmdebstrap lintian dpkg-dev util-linux

# Runs a shell command line inside the root, with /proc, /dev and apt's download cache mounted in
# a mount namespace of its own (nothing stays mounted when it returns). No systemd runs there,
# as in a chroot or an image being built: the unit must be enabled, not started.
in_root() {
  # shellcheck disable=SC2016 # the inner script expands its own arguments
  unshare --mount --propagation private --fork -- sh -c '
    root=$1 archives=$2 command=$3
    mount -t proc proc "$root/proc" && mount --rbind /dev "$root/dev" \
      && mount --bind "$archives" "$root/var/cache/apt/archives" || exit 125
    exec chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C.UTF-8 \
      DEBIAN_FRONTEND=noninteractive /bin/sh -c "$command"
  ' in_root "$root" "$cache/archives" "$1"
}
# not COMMAND…: succeeds when COMMAND fails.
# shellcheck disable=SC2317 # called through check
not() { ! "$@"; }
# any_output COMMAND…: succeeds when COMMAND prints anything.
# shellcheck disable=SC2317 # called through check
any_output() { [ -n "$("$@" 2>/dev/null)" ]; }
# root_out COMMAND: its standard output, trimmed of the last newline.
root_out() { in_root "$1" 2>/dev/null; }

# 1. The packages.
mkdir -p "$work"
rm -f "$work"/gattway_*.deb
t0=$(date +%s)
# GATTWAY_BINARY: the release binary (`make test-deb` builds it as the calling user); without it
# build-deb.sh makes the release build.
deb1=$(DEB_OUTDIR="$work" "$repo/scripts/build-deb.sh" | tail -n1) || { fail "build the package"; finish; }
version1=$(dpkg-deb -f "$deb1" Version)
version2="$version1+upgrade1"
binary="$repo/.build/deb/stage/usr/bin/gattway"
cp "$binary" "$work/gattway.bin"
deb2=$(DEB_OUTDIR="$work" DEB_VERSION="$version2" GATTWAY_BINARY="$work/gattway.bin" DEB_COMPRESS=gzip \
  "$repo/scripts/build-deb.sh" | tail -n1) || { fail "build the upgrade package"; finish; }
note "packages built in $(($(date +%s) - t0)) s: $(basename "$deb1"), $(basename "$deb2")"
check "$version2 sorts after $version1" dpkg --compare-versions "$version2" gt "$version1"
check "the package is named gattway_<version>_$arch.deb" test "$(basename "$deb1")" = "gattway_${version1}_$arch.deb"
depends=$(dpkg-deb -f "$deb1" Depends)
note "Depends: $depends"
for package in libc6 libdbus-1-3 libmosquitto1 'libmicrohttpd12 (>= ' bluez dbus adduser; do
  check "Depends names $package" grep -qF "$package" <<<"$depends"
done
listing=$(dpkg-deb -c "$deb1")
for path in ./usr/bin/gattway ./lib/systemd/system/gattway.service ./etc/gattway/config.json \
  ./usr/share/dbus-1/system.d/gattway.conf ./usr/share/doc/gattway/copyright \
  ./usr/share/doc/gattway/changelog.Debian.gz ./usr/share/man/man1/gattway.1.gz; do
  check "the package holds $path" grep -qE " $path\$" <<<"$listing"
done
check "every file in the package is root:root" not grep -qv ' root/root ' <<<"$listing"
conffiles=$(dpkg-deb --ctrl-tarfile "$deb1" | tar -xO ./conffiles)
check "config.json is the conffile" test "$conffiles" = /etc/gattway/config.json

# 2. lintian: errors fail, warnings are listed (docs/raspberry-pi.md justifies each).
t0=$(date +%s)
lintian_out=$(lintian --tag-display-limit 0 "$deb1" 2>&1)
note "lintian ($(($(date +%s) - t0)) s):"
[ -n "$lintian_out" ] && printf '%s\n' "$lintian_out" | sed 's/^/    /'
check "lintian reports no errors" not grep -q '^E: ' <<<"$lintian_out"

# 3. The root.
t0=$(date +%s)
mkdir -p "$cache/archives/partial"
tarball="$cache/bookworm-$arch.tar"
if [ -n "${DEB_TEST_FRESH:-}" ] || [ ! -s "$tarball" ]; then
  # The Debian mirror of this machine's apt sources (the deb822 file that names bookworm), or
  # DEB_TEST_SOURCES (a sources.list or deb822 file).
  sources=${DEB_TEST_SOURCES:-}
  if [ -z "$sources" ]; then
    sources=$(grep -lE '^Suites:.*\bbookworm\b' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1)
    [ -n "$sources" ] || sources=/etc/apt/sources.list
  fi
  note "making the Debian 12 root with mmdebstrap from $sources"
  rm -f "$tarball.tmp"
  if ! mmdebstrap --quiet --format=tar --variant=apt --arch="$arch" --skip=cleanup/apt/lists \
      bookworm "$tarball.tmp" "$sources"; then
    fail "mmdebstrap makes a Debian 12 root"
    finish
  fi
  mv "$tarball.tmp" "$tarball"
  cache_state=made
else
  cache_state=cached
fi
rm -rf "$root"
mkdir -p "$root"
tar -xf "$tarball" -C "$root" || { fail "unpack the root"; finish; }
cp /etc/resolv.conf "$root/etc/resolv.conf"
note "root ready in $(($(date +%s) - t0)) s ($cache_state)"
check "the root is Debian 12" grep -q '^VERSION_ID="12"' "$root/etc/os-release"
check "the root has no Swift runtime" not any_output find "$root/usr" -name 'libswift*'
check "the root has no swift command" test ! -e "$root/usr/bin/swift"

# 4. Install, as a user would: apt-get install ./file.deb fetches the Depends from Debian.
t0=$(date +%s)
cp "$deb1" "$deb2" "$root/tmp/"
if in_root "apt-get -qq update && apt-get install -y -q --no-install-recommends /tmp/$(basename "$deb1")" \
    >"$work/install.log" 2>&1; then
  pass "apt-get install ./$(basename "$deb1") in the root"
else
  fail "apt-get install ./$(basename "$deb1") in the root (log: $work/install.log)"
  tail -n 30 "$work/install.log"
  finish
fi
note "installed with its Depends in $(($(date +%s) - t0)) s"
check "dpkg says gattway $version1 is installed" \
  test "$(root_out "dpkg-query -W -f='\${Status} \${Version}' gattway")" = "install ok installed $version1"
for package in bluez dbus libmicrohttpd12; do
  check "$package came from Debian as a Depends" \
    test "$(root_out "dpkg-query -W -f='\${Status}' $package")" = "install ok installed"
done
check "no Swift runtime came with it" not any_output find "$root/usr" -name 'libswift*'
check "ldd finds every library of /usr/bin/gattway in the root, none of Swift" \
  in_root "ldd /usr/bin/gattway >/tmp/ldd.txt && ! grep -qE 'not found|libswift' /tmp/ldd.txt"
out=$(root_out "gattway version")
check "gattway version runs in the root and says $version1's version ($out)" \
  grep -qF "$(sed 's/-[^-]*$//; s/~/-/g' <<<"$version1")" <<<"$out"
check "gattway config check /etc/gattway/config.json passes" \
  in_root "gattway config check /etc/gattway/config.json >/dev/null"
check "gattway config check fails on a broken config (exit 78)" \
  in_root "echo '{\"mqtt\": 3}' >/tmp/bad.json; gattway config check /tmp/bad.json >/dev/null 2>&1; test \$? -eq 78"
passwd=$(grep '^gattway:' "$root/etc/passwd")
check "the system user gattway: home /var/lib/gattway, nologin ($passwd)" \
  test "$(cut -d: -f6,7 <<<"$passwd")" = /var/lib/gattway:/usr/sbin/nologin
check "gattway is a system user (uid < 1000)" test "$(cut -d: -f3 <<<"$passwd")" -lt 1000
check "gattway is in the bluetooth group" grep -qE '^bluetooth:[^:]*:[0-9]+:(.*,)?gattway(,|$)' "$root/etc/group"
link="$root/etc/systemd/system/multi-user.target.wants/gattway.service"
check "the unit is enabled (multi-user.target.wants link)" \
  test "$(readlink "$link")" = /lib/systemd/system/gattway.service
check "the unit runs /usr/bin/gattway" grep -q '^ExecStart=/usr/bin/gattway run ' "$root/lib/systemd/system/gattway.service"
# mode owner group, as the chroot names them.
perm() { root_out "stat -c '%a %U %G' $1"; }
check "config.json is 0640 root:gattway" test "$(perm /etc/gattway/config.json)" = "640 root gattway"
check "/var/lib/gattway is 0750 gattway:gattway" test "$(perm /var/lib/gattway)" = "750 gattway gattway"
check "/usr/bin/gattway is 0755 root:root" test "$(perm /usr/bin/gattway)" = "755 root root"
check "the D-Bus policy is where dbus-daemon reads it" \
  test -f "$root/usr/share/dbus-1/system.d/gattway.conf"

# 5. Upgrade: an edited configuration and the state stay.
in_root "sed -i 's/\"base_topic\": \"gattway\"/\"base_topic\": \"edited-by-test\"/' /etc/gattway/config.json \
  && echo '{\"kept\": true}' >/var/lib/gattway/test-state.json && chown gattway:gattway /var/lib/gattway/test-state.json"
check "the test edited config.json" grep -q edited-by-test "$root/etc/gattway/config.json"
if in_root "apt-get install -y -q --no-install-recommends /tmp/$(basename "$deb2")" >"$work/upgrade.log" 2>&1; then
  pass "apt-get install ./$(basename "$deb2") upgrades"
else
  fail "apt-get install ./$(basename "$deb2") upgrades (log: $work/upgrade.log)"
  tail -n 30 "$work/upgrade.log"
fi
check "dpkg says gattway $version2 is installed" \
  test "$(root_out "dpkg-query -W -f='\${Version}' gattway")" = "$version2"
check "the edited config.json is kept" grep -q edited-by-test "$root/etc/gattway/config.json"
check "no config.json.dpkg-* left beside it" not any_output find "$root/etc/gattway" -name 'config.json.dpkg-*'
check "config.json is still 0640 root:gattway" test "$(perm /etc/gattway/config.json)" = "640 root gattway"
check "the state directory's file is kept" grep -q kept "$root/var/lib/gattway/test-state.json"
check "the unit is still enabled" test -L "$link"
check "gattway config check still passes" in_root "gattway config check /etc/gattway/config.json >/dev/null"

# 6. Purge: nothing of the package, its user or its directories remains.
files=$(root_out "dpkg-query -L gattway")
if in_root "apt-get purge -y -q gattway" >"$work/purge.log" 2>&1; then
  pass "apt-get purge gattway"
else
  fail "apt-get purge gattway (log: $work/purge.log)"
  tail -n 30 "$work/purge.log"
fi
check "dpkg no longer knows gattway" not grep -qx 'Package: gattway' "$root/var/lib/dpkg/status"
left=()
while IFS= read -r path; do
  if [ -z "$path" ] || [ "$path" = /. ]; then continue; fi
  # Directories other packages share (/usr/bin, /etc, /lib → usr/lib, …) stay; every file and
  # every directory of gattway's own goes.
  if [ -e "$root$path" ] || [ -L "$root$path" ]; then
    if [ -d "$root$path" ] && [ -n "$(ls -A "$root$path")" ]; then continue; fi
    left+=("$path")
  fi
done <<<"$files"
check "no file of the package remains (${left[*]:-none})" test "${#left[@]}" -eq 0
check "/etc/gattway is gone" test ! -e "$root/etc/gattway"
check "/var/lib/gattway is gone" test ! -e "$root/var/lib/gattway"
check "the user gattway is gone" not grep -q '^gattway:' "$root/etc/passwd"
check "the group gattway is gone" not grep -q '^gattway:' "$root/etc/group"
check "gattway left the bluetooth group" not grep -qE '^bluetooth:.*gattway' "$root/etc/group"
check "the enable link is gone" test ! -e "$link" -a ! -L "$link"
check "deb-systemd-helper keeps no state of the unit" \
  not any_output find "$root/var/lib/systemd" -name '*gattway*'

rm -rf "$root"
finish
