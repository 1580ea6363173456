#!/usr/bin/env bash
# Runs every test of the course: the package's unit and property tests, every notebook under nbval,
# the book build with warnings as errors, and the browser test of the built pages.
# Extra arguments go to pytest (e.g. `bash scripts/test.sh -k mlp`, or `-n 0` for one process).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh

# The browser test needs Chromium (and CJK and emoji fonts, so the Chinese terms and the checkers'
# ✅/❌ render in the screenshots).
# Install Debian's packages when they are missing and we may (root, as in CI); otherwise the test
# says what is missing (and fails in CI).
if [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null; then
    missing=()
    command -v chromium > /dev/null || missing+=(chromium)
    if command -v fc-list > /dev/null; then
        [ -n "$(fc-list :lang=zh 2> /dev/null)" ] || missing+=(fonts-wqy-microhei)
        fc-list 2> /dev/null | grep -qi emoji || missing+=(fonts-noto-color-emoji)
    fi
    if [ ${#missing[@]} -gt 0 ]; then
        echo "test.sh: installing ${missing[*]} with apt-get"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" > /dev/null
    fi
fi

# One thread per process: the tests run two workers on two cores, and more threads than cores
# makes PyTorch many times slower.
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
# Build Matplotlib's font cache now: on a fresh machine the first import logs a message on stderr,
# which would appear in the first notebook's output and fail its nbval comparison.
.venv/bin/python -c "import matplotlib.pyplot"
.venv/bin/python -m ruff check .
.venv/bin/python -m ruff format --check .
# Two workers; --dist loadfile keeps each file (each notebook's cells, the book build and its browser
# checks) on one worker, in order.
.venv/bin/python -m pytest -n 2 --dist loadfile "$@"
