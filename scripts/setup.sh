#!/usr/bin/env bash
# Creates .venv (if missing) and installs everything the course needs from requirements.txt.
# Sourced by build_book.sh and test.sh; safe to run again (pip skips what is installed).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
.venv/bin/python -m pip install --quiet -r requirements.txt 2>&1 | grep -v "^WARNING: Location" || true
# pip's exit status is hidden by the filter above: check the install really happened.
.venv/bin/python -c "import torch, transformer_course, jupyter_book, nbval" || {
    echo "setup: the install from requirements.txt failed" >&2
    exit 1
}
