#!/bin/sh
# bleak conformance: bleak_conformance.py against `gattway simulate --scenario demo` on a private
# bus (Tests/Scripts/with-simulator.sh). Usage: run.sh GATTWAY PYTHON
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
exec "$HERE/../Scripts/with-simulator.sh" "$1" demo "$2" "$HERE/bleak_conformance.py"
