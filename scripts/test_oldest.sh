#!/usr/bin/env bash
# Runs the unit tier under the oldest releases the package says it supports: the lower bounds of
# pyproject.toml (its dependencies and the `notebooks` extra, each `name>=X` installed as the newest `X.*`:
# the oldest release series, with its bug fixes), in a virtual environment of its own, .venv-oldest.
# A release check, not part of CI: PyPI's torch for Linux is the CUDA build (about 4 GB with its libraries, a
# few minutes to install); the tests then take about two minutes on two cores.
#
#   bash scripts/test_oldest.sh            # create .venv-oldest if missing, install, run tests/unit
#   bash scripts/test_oldest.sh -k mlp     # extra arguments go to pytest
#   PYTHON=python3.10 bash scripts/test_oldest.sh   # Python 3.10 or 3.11: NumPy 1.24 has no wheels for 3.12+
#
# Raise a lower bound in pyproject.toml when this fails for a reason of the old release, and say why there.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON=${PYTHON:-python3}
VENV=.venv-oldest
if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -c 'import sys; sys.exit(not (3, 10) <= sys.version_info[:2] <= (3, 11))' || {
    echo "test_oldest: needs Python 3.10 or 3.11 (NumPy 1.24 has no wheels for newer ones):" \
        "rm -rf $VENV; PYTHON=python3.11 bash scripts/test_oldest.sh" >&2
    exit 1
}
pins=$(mktemp)
trap 'rm -f "$pins"' EXIT
# The lower bounds as pins (tomllib: Python 3.11; on 3.10 pip's own copy of tomli, as nothing else is installed yet).
"$VENV/bin/python" - "$pins" <<'EOF'
import re
import sys

try:
    import tomllib
except ModuleNotFoundError:
    from pip._vendor import tomli as tomllib

with open("pyproject.toml", "rb") as f:
    project = tomllib.load(f)["project"]
lines = []
for requirement in project["dependencies"] + project["optional-dependencies"]["notebooks"]:
    match = re.fullmatch(r"([A-Za-z0-9_.-]+)>=([0-9][0-9A-Za-z.]*)", requirement)
    if not match:
        sys.exit(f"test_oldest: no lower bound to pin in {requirement!r}")
    lines.append(f"{match[1]}=={match[2]}.*")
with open(sys.argv[1], "w") as f:
    f.write("\n".join(lines) + "\n")
EOF
echo "test_oldest: installing $(tr '\n' ' ' < "$pins")"
"$VENV/bin/python" -m pip install --quiet --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
# The pins as constraints: the package's extras (the test tools, the book's for the notebook helpers' tests)
# resolve around them.
PIP_CONSTRAINT="$pins" "$VENV/bin/python" -m pip install --quiet -e ".[notebooks,book,test]" 2>&1 |
    grep -v "^WARNING: Location" || true
# pip's exit status is hidden by the filter above: check that each lower bound's series is what got installed.
"$VENV/bin/python" - "$pins" <<'EOF'
import sys
from importlib.metadata import PackageNotFoundError, version

from pip._vendor.packaging.version import Version  # pip's copy: there even when the install failed

installed = []
for line in open(sys.argv[1]).read().split():
    name, series = line.removesuffix(".*").split("==")
    try:
        got = Version(version(name))
    except PackageNotFoundError:
        sys.exit(f"test_oldest: {name} is not installed: the install failed")
    if got.release[: len(Version(series).release)] != Version(series).release:  # 2.6.0+cpu is of 2.6 too
        sys.exit(f"test_oldest: {name} {got} is installed, not of the lower bound's series {series}")
    installed.append(f"{name} {got}")
print("test_oldest: installed", ", ".join(installed))
EOF
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
"$VENV/bin/python" -m pytest -n 2 --dist loadfile -p no:cacheprovider tests --ignore=tests/release \
    --ignore=tests/notebooks "$@"
