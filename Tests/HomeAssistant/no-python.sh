#!/bin/sh
# make test-homeassistant without a Python 3.13: loud; a failure under CI=true, else SKIPPED.
cat >&2 <<'TEXT'

################################################################################################
test-homeassistant: SKIPPED - no Python 3.13 found (Home Assistant 2025.4.4 needs >= 3.13.0).
  Looked for HA_PYTHON, python3.13 on PATH, ~/.pyenv/versions/3.13*/bin/python3.13, python3.
  Get one:   pyenv install 3.13     (or your distribution's python3.13 with its venv module)
  Or name it: make test-homeassistant HA_PYTHON=/path/to/python3.13
################################################################################################

TEXT
if [ "${CI:-}" = true ]; then
    echo "test-homeassistant: FAILED - CI=true and no Python 3.13: the Home Assistant lane cannot be skipped in CI" >&2
    exit 1
fi
exit 0
