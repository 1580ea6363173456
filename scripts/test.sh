#!/usr/bin/env bash
# Runs every test of the course: the package's unit and property tests, every notebook under nbval,
# the book build with warnings as errors, and the browser test of the built pages.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
# One thread per process: the tests run two workers on two cores, and more threads than cores
# makes PyTorch many times slower.
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
.venv/bin/python -m ruff check transformer_course tests scripts
.venv/bin/python -m pytest "$@"
