#!/usr/bin/env bash
# Runs the course's tests, in tiers:
#
#   bash scripts/test.sh            # everything (what CI runs): the three tiers, then the notebooks again
#                                   # under a second CPU kernel path
#   bash scripts/test.sh unit       # ruff and the package's tests (tests/unit: one file per module, the course
#                                   # tools under tests/unit/course): no notebook, no browser, no venv build
#   bash scripts/test.sh notebooks  # every notebook under nbval, under this CPU's kernels and a second path,
#                                   # and the tests about notebooks (tests/notebooks)
#   bash scripts/test.sh release    # tests/release: the book (warnings as errors), the browser test of every
#                                   # page, the PDF, the sdist and wheel, every notebook alone in a bare kernel,
#                                   # JupyterLab, mypy over the package, torch.compile
#
# Extra arguments go to pytest (e.g. `bash scripts/test.sh unit -k mlp`, or `-n 0` for one process).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

tier=all
case "${1:-}" in
    unit | notebooks | release | all) tier=$1 && shift ;;
esac

bash scripts/setup.sh
# The browser tests and the PDF need Chromium with CJK and emoji fonts, the PDF test poppler-utils:
# installed from Debian's packages when missing and we may (root, as in CI).
if [ "$tier" = release ] || [ "$tier" = all ]; then
    bash scripts/system_packages.sh --tests
fi

# One thread per process: the tests run two workers on two cores, and more threads than cores
# makes PyTorch many times slower.
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
# Build Matplotlib's font cache now: on a fresh machine the first import logs a message on stderr,
# which would appear in the first notebook's output and fail its nbval comparison.
.venv/bin/python -c "import matplotlib.pyplot"

# The tiers by folder: tests/release, tests/notebooks (with chapters/), and the rest of tests/ (tests/unit).
RELEASE=(tests/release)
NOTEBOOKS=(chapters tests/notebooks)
UNIT=(tests --ignore=tests/release --ignore=tests/notebooks)

# Two workers; --dist loadfile keeps each file (each notebook's cells, the book build and its browser
# checks) on one worker, in order.
pytest() {
    local name=$1 start=$SECONDS status=0
    shift
    .venv/bin/python -m pytest -n 2 --dist loadfile "$@" || status=$?
    echo "tier $name: $((SECONDS - start)) s (exit status $status)"
    return "$status"
}

# PyTorch picks its CPU kernels (AVX-512, AVX2 or generic) by the processor; they add numbers in different
# orders, so printed digits may differ between machines. The notebooks run again under a second path
# (AVX2, what most laptops use, or the generic kernels where AVX2 is already this machine's), so that an
# output that holds on one CPU only cannot land.
second_kernel_path() {
    .venv/bin/python -c "import torch; print('default' if torch.backends.cpu.get_cpu_capability() == 'AVX2' else 'avx2')"
}

case "$tier" in
    unit)
        .venv/bin/python -m ruff check .
        .venv/bin/python -m ruff format --check .
        pytest unit "${UNIT[@]}" "$@"
        ;;
    notebooks)
        pytest notebooks "${NOTEBOOKS[@]}" "$@"
        path=$(second_kernel_path)
        ATEN_CPU_CAPABILITY=$path pytest "notebooks-$path" chapters "$@"
        ;;
    release)
        pytest release "${RELEASE[@]}" "$@"
        ;;
    all)
        .venv/bin/python -m ruff check .
        .venv/bin/python -m ruff format --check .
        # One run of the three tiers, so that the two workers share the slow files.
        pytest all "$@"
        path=$(second_kernel_path)
        ATEN_CPU_CAPABILITY=$path pytest "notebooks-$path" chapters "$@"
        ;;
esac
