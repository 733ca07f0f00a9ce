#!/usr/bin/env bash
# Builds the Debian package of gattway with dpkg-deb (docs/raspberry-pi.md, "The Debian package").
#
#   scripts/build-deb.sh        (`make deb`) release build, then ./gattway_<version>_<arch>.deb
#
# Environment:
#   DEB_VERSION=…      the package's version (default: BuildInfo.version as a Debian version,
#                      0.1.0-dev → 0.1.0~dev-1: "~" sorts a pre-release before its release)
#   DEB_OUTDIR=…       where the .deb goes (default: the repository's root)
#   GATTWAY_BINARY=…   package this binary instead of making the release build
#   DEB_COMPRESS=…     dpkg-deb's compressor (default xz, Debian's; the tests use gzip, faster)
#
# The staging tree is .build/deb/stage; dpkg-shlibdeps runs in .build/deb/shlibdeps (it wants a
# debian/control). Prints the package's path on the last line.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
deploy="$repo/deploy"
work="$repo/.build/deb"
stage="$work/stage"
outdir=${DEB_OUTDIR:-$repo}
note() { echo "build-deb: $*" >&2; }

"$repo/scripts/install-deps.sh" dpkg-dev binutils pkg-config libmicrohttpd-dev

# The version: BuildInfo.version, "-" (a pre-release in gattway's versions) as "~", revision 1.
buildinfo="$repo/Sources/GatewayRuntime/Process/BuildInfo.swift"
upstream=$(sed -n 's/^ *public static let version = "\([^"]*\)".*/\1/p' "$buildinfo")
[ -n "$upstream" ] || { note "no version in $buildinfo"; exit 1; }
version=${DEB_VERSION:-${upstream//-/\~}-1}
# dpkg-deb checks the syntax too, but this names the culprit.
dpkg --validate-version "$version" || { note "not a Debian version: $version"; exit 1; }
arch=$(dpkg --print-architecture)

binary=${GATTWAY_BINARY:-}
if [ -z "$binary" ]; then
  mapfile -t flags < <(SWIFT="${SWIFT:-swift}" "$repo/scripts/release-flags.sh")
  (cd "$repo" && "${SWIFT:-swift}" build "${flags[@]}" --product gattway)
  binary="$(cd "$repo" && "${SWIFT:-swift}" build "${flags[@]}" --show-bin-path)/gattway"
fi
[ -x "$binary" ] || { note "no binary at $binary"; exit 1; }
# The Swift runtime must be inside the binary: the target has no Swift.
if ldd "$binary" | grep -q 'libswift'; then
  note "$binary links a shared Swift runtime (build with --static-swift-stdlib)"
  ldd "$binary" | grep libswift >&2
  exit 1
fi

rm -rf "$stage" "$work/shlibdeps"
mkdir -p "$stage/DEBIAN"
# Files as Debian installs them: root-owned (dpkg-deb --root-owner-group), 0755/0644.
umask 022

install -D -m 0755 "$binary" "$stage/usr/bin/gattway"
# Debian ships binaries without their symbol tables (Policy 10.1); the Swift runtime's metadata
# lives in sections of its own, which strip keeps.
strip --strip-unneeded --remove-section=.comment "$stage/usr/bin/gattway"

# The unit: deploy/gattway.service with the package's path. One source: install.sh copies it as is.
unit="$stage/lib/systemd/system/gattway.service"
install -d "$(dirname "$unit")"
sed -e 's|/usr/local/bin/gattway|/usr/bin/gattway|g' \
    -e '1s|Installed by deploy/install.sh to /etc/systemd/system/.|Installed by the gattway Debian package to /lib/systemd/system/.|' \
    -e 's|^Description=.*|&\nDocumentation=man:gattway(1)|' \
    "$deploy/gattway.service" >"$unit"
grep -q '^ExecStart=/usr/bin/gattway ' "$unit" || { note "ExecStart of $unit is not /usr/bin/gattway"; exit 1; }
if grep -q '/usr/local' "$unit"; then note "$unit still names /usr/local"; exit 1; fi
chmod 0644 "$unit"

install -D -m 0644 "$deploy/gattway-dbus.conf" "$stage/usr/share/dbus-1/system.d/gattway.conf"
# 0644 in the package (it holds no secret as shipped); postinst makes it 0640 root:gattway.
install -D -m 0644 "$repo/config.json" "$stage/etc/gattway/config.json"
install -D -m 0644 "$deploy/debian/gattway.1" "$stage/usr/share/man/man1/gattway.1"
gzip -9n "$stage/usr/share/man/man1/gattway.1"

doc="$stage/usr/share/doc/gattway"
install -D -m 0644 "$deploy/debian/copyright" "$doc/copyright"
# changelog.Debian: one entry for this build, dated by the commit (the same tree gives the same file).
date=$(git -C "$repo" log -1 --format=%cD 2>/dev/null || date -R)
commit=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)
maintainer=$(sed -n 's/^Maintainer: //p' "$deploy/debian/control.in")
{
  printf 'gattway (%s) unstable; urgency=medium\n\n' "$version"
  printf '  * Built from gattway %s (commit %s) with scripts/build-deb.sh.\n\n' "$upstream" "$commit"
  printf ' -- %s  %s\n' "$maintainer" "$date"
} >"$doc/changelog.Debian"
gzip -9n "$doc/changelog.Debian"

for script in postinst prerm postrm; do
  install -m 0755 "$deploy/debian/$script" "$stage/DEBIAN/$script"
done
printf '/etc/gattway/config.json\n' >"$stage/DEBIAN/conffiles"
chmod 0644 "$stage/DEBIAN/conffiles"

# Depends: the shared libraries the binary links (dpkg-shlibdeps, from Debian's symbols files)…
mkdir -p "$work/shlibdeps/debian"
printf 'Source: gattway\n\nPackage: gattway\nArchitecture: any\n' >"$work/shlibdeps/debian/control"
shlibs=$(cd "$work/shlibdeps" && dpkg-shlibdeps -O "$stage/usr/bin/gattway" | sed -n 's/^shlibs:Depends=//p')
[ -n "$shlibs" ] || { note "dpkg-shlibdeps found no libraries"; exit 1; }
# Packed relocations (release-flags.sh) need GLIBC_ABI_DT_RELR, glibc 2.36: a version the binary
# needs without naming a symbol of it, which dpkg-shlibdeps does not count.
libc=$(sed -n 's/.*libc6 (>= \([^)]*\)).*/\1/p' <<<"$shlibs")
if objdump -p "$stage/usr/bin/gattway" | grep -q 'GLIBC_ABI_DT_RELR' && [ -n "$libc" ] \
    && dpkg --compare-versions "$libc" lt 2.36; then
  shlibs=${shlibs/"libc6 (>= $libc)"/"libc6 (>= 2.36)"}
fi
# …and libmicrohttpd, which gattway dlopens at the first web visit (Sources/CMicroHTTPD/shim.h), so
# no tool can see it: at least the version of the header it was built against (MHD_VERSION,
# 0x00097500 is 0.9.75; the symbols it calls are older, but the options and flags are the header's).
header="$(pkg-config --variable=includedir libmicrohttpd)/microhttpd.h"
mhd=$(sed -n 's/^#define MHD_VERSION 0x\([0-9]\{8\}\).*/\1/p' "$header")
[ -n "$mhd" ] || { note "no MHD_VERSION in $header"; exit 1; }
mhd_version=$(printf '%d.%d.%d' "$((10#${mhd:0:2}))" "$((10#${mhd:2:2}))" "$((10#${mhd:4:2}))")
[ "${mhd:6:2}" = 00 ] || mhd_version="$mhd_version.$((10#${mhd:6:2}))"
depends="$shlibs, libmicrohttpd12 (>= $mhd_version), adduser, bluez, dbus"

installed_size=$(du -sk --apparent-size --exclude=DEBIAN "$stage" | cut -f1)
sed -e "s|@VERSION@|$version|" -e "s|@ARCH@|$arch|" -e "s|@DEPENDS@|$depends|" \
    -e "s|@INSTALLED_SIZE@|$installed_size|" "$deploy/debian/control.in" >"$stage/DEBIAN/control"
# md5sums of every file but the conffiles (dpkg keeps their sums itself).
(cd "$stage" && find usr lib -type f -print0 | sort -z | xargs -0 md5sum >DEBIAN/md5sums)
chmod 0644 "$stage/DEBIAN/control" "$stage/DEBIAN/md5sums"

mkdir -p "$outdir"
deb="$outdir/gattway_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Z"${DEB_COMPRESS:-xz}" --build "$stage" "$deb" >&2
note "Depends: $depends"
echo "$deb"
