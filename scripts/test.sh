#!/usr/bin/env bash
# Runs every test of the course: the package's unit and property tests, every notebook under nbval,
# the book build with warnings as errors, the browser test of the built pages, the PDF, the distribution
# (sdist and wheel), every notebook run alone in a bare kernel from the wheel, and JupyterLab.
# Extra arguments go to pytest (e.g. `bash scripts/test.sh -k mlp`, or `-n 0` for one process).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh

# The browser tests and the PDF need Chromium with CJK and emoji fonts, the PDF test poppler-utils:
# installed from Debian's packages when missing and we may (root, as in CI).
bash scripts/system_packages.sh --tests

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
