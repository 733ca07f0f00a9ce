#!/usr/bin/env bash
# Checks the layering rules of docs/architecture.md ("Layers") on the source tree; run by `make test`.
#  - C modules are imported only by their wrapper: CDBus by DBus, CMosquitto by MQTT, CCrypto by Parsers
#    (AES-CCM) and ESPHomeAPI (the Noise encryption of the ESPHome native API), CMicroHTTPD by
#    HTTPServer (the web server, docs/web.md).
#  - Those imports are `internal import` (or narrower), so the compiler rejects any C type in a
#    public signature of the wrapper.
#  - Gateway never imports DBus, BlueZ, MQTT, ESPHomeAPI or a C module (it talks to ports only;
#    the Bluetooth proxy reaches it as a GatewayAttachment). It may import EventLoop: the core
#    runs on the loop's executor (docs/architecture.md lists it).
#  - ProxyBackend (the Bluetooth proxy's connections) never imports DBus, BlueZ, MQTT or a C
#    module: it talks to the central through its ProxyBLE port.
#  - BluetoothManagement (the kernel's management protocol codec) is pure: it imports Bluetooth
#    and nothing with I/O (no DBus, BlueZ, EventLoop, MQTT, ESPHomeAPI, Gateway or a C module).
#  - Only GattwayKit (the command line as a library) imports GatewayRuntime, and GatewayRuntime
#    imports neither BlueZSimulator nor Subprocess.
#  - Nothing under Sources/ but the gattway executable imports GattwayKit (users' packages do, as
#    Examples/custom-parser does), and GattwayKit imports no C module: it reaches the C libraries
#    through their wrappers only.
#  - Nothing under Sources/ (every module the gattway executable links) imports Foundation,
#    FoundationEssentials, FoundationInternationalization or FoundationNetworking: linked
#    statically they cost megabytes of resident memory (issue #8); LocalSystem has the file,
#    environment and clock calls instead. Tests and bench may use Foundation.
#  - The repository stands alone: no tracked file cites the private notes kept beside a
#    developer's checkout (the shared folder next to it, or its design, BlueZ D-Bus and byte
#    format notes by file name). Facts from them belong in docs/ in our own words; comments
#    point to files in the repository.
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
allowed() {  # module -> the source folders allowed to import it
  case "$1" in
    CDBus) echo DBus ;;
    CMosquitto) echo MQTT ;;
    CCrypto) echo "Parsers ESPHomeAPI" ;;
    CMicroHTTPD) echo HTTPServer ;;
  esac
}
while IFS= read -r line; do
  file=${line%%:*}
  text=${line#*:}
  text=${text#*:}
  module=$(sed -E 's/.*import[[:space:]]+([A-Za-z]+).*/\1/' <<<"$text")
  folder=$(cut -d/ -f2 <<<"$file")
  if ! grep -qw -- "$folder" <<<"$(allowed "$module")" || [ "${file%%/*}" != Sources ]; then
    echo "layering: $file imports $module; only $(allowed "$module" | sed 's|[^ ]*|Sources/&|g') may" >&2
    status=1
  elif ! grep -Eq '^[[:space:]]*(internal|private|fileprivate)[[:space:]]+import' <<<"$text"; then
    echo "layering: $file must use 'internal import $module' so no C type can become public API" >&2
    status=1
  fi
done < <(grep -rnE '^[[:space:]]*(@_implementationOnly[[:space:]]+)?((public|package|internal|private|fileprivate)[[:space:]]+)?import[[:space:]]+(CDBus|CMosquitto|CCrypto|CMicroHTTPD)\b' Sources Tests bench 2>/dev/null || true)

if [ -d Sources/Gateway ]; then
  if grep -rnE '^[[:space:]]*((public|package|internal|private|fileprivate)[[:space:]]+)?import[[:space:]]+(DBus|BlueZ|MQTT|ESPHomeAPI|HTTPServer|CDBus|CMosquitto|CCrypto|CMicroHTTPD)\b' Sources/Gateway; then
    echo "layering: Gateway must talk to BLE and MQTT through its ports only (docs/architecture.md, section Layers)" >&2
    status=1
  fi
fi
if [ -d Sources/ProxyBackend ]; then
  if grep -rnE '^[[:space:]]*((public|package|internal|private|fileprivate)[[:space:]]+)?import[[:space:]]+(DBus|BlueZ|MQTT|CDBus|CMosquitto|CCrypto)\b' Sources/ProxyBackend; then
    echo "layering: ProxyBackend must reach the central through its ProxyBLE port only (docs/architecture.md, section Layers)" >&2
    status=1
  fi
fi
if [ -d Sources/BluetoothManagement ]; then
  if grep -rnE '^[[:space:]]*((public|package|internal|private|fileprivate)[[:space:]]+)?import[[:space:]]+(DBus|BlueZ|EventLoop|MQTT|ESPHomeAPI|Gateway|GatewayRuntime|LocalSystem|CDBus|CMosquitto|CCrypto)\b' Sources/BluetoothManagement; then
    echo "layering: BluetoothManagement is a codec without I/O; it imports Bluetooth only (docs/architecture.md, section Layers)" >&2
    status=1
  fi
fi
# imports_of MODULES DIR...: the import lines (any access level or attribute) of MODULES (an ERE
# alternation) in the Swift files under DIR.
imports_of() {
  local modules=$1
  shift
  grep -rnE --include='*.swift' \
    "^[[:space:]]*(@[A-Za-z_]+[[:space:]]+)*((public|package|internal|private|fileprivate)[[:space:]]+)?import[[:space:]]+($modules)\\b" "$@"
}
# GatewayRuntime (`gattway run` as a library) sits under the command line only: no other module
# under Sources/ imports it, and it imports neither the simulator nor Subprocess (tools of the CLI
# and the tests, not of the running gateway).
if [ -d Sources/GatewayRuntime ]; then
  runtime_importers=$(imports_of GatewayRuntime Sources | grep -v '^Sources/GattwayKit/' || true)
  if [ -n "$runtime_importers" ]; then
    echo "$runtime_importers"
    echo "layering: only GattwayKit (the command line) imports GatewayRuntime (docs/architecture.md, section Layers)" >&2
    status=1
  fi
  if imports_of 'BlueZSimulator|Subprocess' Sources/GatewayRuntime; then
    echo "layering: GatewayRuntime runs the gateway; the simulator and Subprocess belong to the CLI and the tests" >&2
    status=1
  fi
fi
# GattwayKit (the command line as a library) is on top: under Sources/ only the gattway executable
# imports it (users' packages import it too, from outside), and it imports no C module.
if [ -d Sources/GattwayKit ]; then
  kit_importers=$(imports_of GattwayKit Sources | grep -v '^Sources/gattway/' || true)
  if [ -n "$kit_importers" ]; then
    echo "$kit_importers"
    echo "layering: only the gattway executable imports GattwayKit (docs/architecture.md, section Layers)" >&2
    status=1
  fi
  if imports_of 'CDBus|CMosquitto|CCrypto|CMicroHTTPD' Sources/GattwayKit; then
    echo "layering: GattwayKit reaches the C libraries through their wrappers only (docs/architecture.md, section Layers)" >&2
    status=1
  fi
fi
foundation='^[[:space:]]*(@[A-Za-z_]+[[:space:]]+)*((public|package|internal|private|fileprivate)[[:space:]]+)?import[[:space:]]+((struct|class|enum|protocol|typealias|func|let|var)[[:space:]]+)?(Foundation|FoundationEssentials|FoundationInternationalization|FoundationNetworking|_FoundationCollections)([.[:space:]]|$)'
while IFS= read -r line; do
  [ -n "$line" ] || continue
  file=${line%%:*}
  rest=${line#*:}
  number=${rest%%:*}
  module=$(sed -E 's/.*import[[:space:]]+((struct|class|enum|protocol|typealias|func|let|var)[[:space:]]+)?([A-Za-z_]+).*/\3/' <<<"${rest#*:}")
  echo "layering: $file:$number imports $module; the gattway executable links every module under Sources/ and must link no Foundation (use LocalSystem, or Glibc)" >&2
  status=1
done < <(grep -rnE --include='*.swift' "$foundation" Sources 2>/dev/null || true)

# Self-containment. The patterns are assembled from pieces so this file does not match itself.
dot='\.'
notes="shared"
private=(
  "${dot}${dot}/${notes}"           # the folder beside the checkout
  "/work/${notes}"                  # the same folder by absolute path
  "${notes}/reference"
  "design${dot}md"
  "bluez-dbus${dot}md"
  "formats${dot}md"
)
pattern=$(IFS='|'; echo "${private[*]}")
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  citations=$(git grep -nIE "$pattern" -- . || true)
else  # not a git checkout (e.g. an unpacked archive): every file but build output
  citations=$(grep -rnIE --exclude-dir=.git --exclude-dir=.build "$pattern" . | sed 's|^\./||' || true)
fi
while IFS= read -r line; do
  [ -n "$line" ] || continue
  file=${line%%:*}
  rest=${line#*:}
  number=${rest%%:*}
  found=$(grep -oE "$pattern" <<<"${rest#*:}" | head -1 || true)
  echo "standalone: $file:$number cites '$found', a private note outside the repository; state the fact in docs/ (bluez.md, parsers.md, architecture.md, config.md) and point there" >&2
  status=1
done <<<"$citations"

[ $status -eq 0 ] && echo "layering: ok (C modules confined to their wrappers, imported internally; GatewayRuntime under GattwayKit, GattwayKit under the executable only; no Foundation under Sources/; nothing cites notes outside the repository)"
exit $status
