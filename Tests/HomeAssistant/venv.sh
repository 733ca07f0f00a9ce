#!/bin/sh
# The Home Assistant venv of make test-homeassistant: DIR made with PYTHON (3.13) when missing or
# made with another Python, and requirements.txt installed with -c package_constraints.txt only
# when either file changed since (copies kept in DIR to compare), as the Makefile's pinned_venv.
# The first install takes a few minutes (about 130 packages, some built from source); later runs
# reuse the venv. Usage: venv.sh PYTHON DIR
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
PYTHON=$1
DIR=$2
version() { "$1" -c 'import sys; print(sys.version.split()[0])' 2>/dev/null || true; }
if [ ! -x "$DIR/bin/python" ] || [ "$(version "$DIR/bin/python")" != "$(version "$PYTHON")" ]; then
    rm -rf "$DIR"
    "$PYTHON" -m venv "$DIR"
fi
if ! cmp -s "$HERE/requirements.txt" "$DIR/requirements.txt" \
        || ! cmp -s "$HERE/package_constraints.txt" "$DIR/package_constraints.txt"; then
    echo "installing Home Assistant and the lane's integrations' requirements into $DIR (minutes the first time)"
    "$DIR/bin/pip" install -q -r "$HERE/requirements.txt" -c "$HERE/package_constraints.txt"
    cp "$HERE/requirements.txt" "$HERE/package_constraints.txt" "$DIR/"
fi
