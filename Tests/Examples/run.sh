#!/bin/sh
# Examples/custom-parser end to end (make test-examples): the example package's binary against the
# BlueZ simulator playing the example's scenario on a private bus (started by
# Tests/Scripts/with-simulator.sh with plain gattway) and a mosquitto on loopback; see
# custom_parser.py. Usage: run.sh EXAMPLE_BINARY GATTWAY_BINARY [PYTHON]
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
"$HERE/../Scripts/with-simulator.sh" "$2" "$HERE/../../Examples/custom-parser/scenario.json" \
    "${3:-python3}" "$HERE/custom_parser.py" "$1" "$2"
