#!/usr/bin/env bash
# Builds the book into _build/html and prints it into one PDF, _build/pdf/transformer-course.pdf:
# installs everything (scripts/setup.sh, and Chromium with CJK fonts as root on Debian), fetches the
# JavaScript that lets the pages work offline (scripts/fetch_assets.py, cached in book/_vendor/), runs
# Jupyter Book with warnings as errors, then prints the pages with headless Chromium (scripts/build_pdf.py). The notebooks are not re-executed: their committed outputs are used
# (scripts/run_notebook.py writes them; the tests prove a fresh run reproduces them).
# Extra arguments go to `jupyter-book build`, e.g. `bash scripts/build_book.sh --all` for a clean rebuild.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
.venv/bin/python scripts/fetch_assets.py
.venv/bin/jupyter-book build . -W -n --keep-going "$@"
echo "The book is in _build/html/index.html"
bash scripts/system_packages.sh
.venv/bin/python scripts/build_pdf.py
