#!/bin/sh
# Prints a Python 3.13 that runs (Home Assistant 2025.4.4 requires >= 3.13.0, and the wheels its
# pins resolve to are for 3.13), or nothing. Tries CANDIDATE when given (make's HA_PYTHON), then
# python3.13 on PATH (a pyenv shim only counts when it runs), pyenv's 3.13.x, then python3.
# Usage: python.sh [CANDIDATE]
is_313() {
    [ -n "$1" ] && "$1" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 13))' 2>/dev/null
}
# shellcheck disable=SC2012 # pyenv's version directories (3.13.N) have plain names; sort -r puts the newest first
for candidate in "${1:-}" "$(command -v python3.13 2>/dev/null)" \
        $(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.13*/bin/python3.13 2>/dev/null | sort -r) \
        "$(command -v python3 2>/dev/null)"; do
    if is_313 "$candidate"; then
        echo "$candidate"
        exit 0
    fi
    [ -n "${1:-}" ] && [ "$candidate" = "$1" ] && echo "HA_PYTHON=$1 is not a Python 3.13 that runs" >&2
done
exit 0
