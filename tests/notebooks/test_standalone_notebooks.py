"""Every notebook runs outside the repository: its first code cell installs the package where it is missing.

The cell is written by scripts/prepare_notebooks.py from the version in transformer_course/__init__.py and
the repository in _config.yml; these tests check that every notebook carries the current cell, and what the
cell does in each case (nothing when the package is importable; pip with the pinned version, then the
tagged release, when it is not). tests/release/test_bare_kernel.py runs it for real, in a virtual environment
without the package.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
from script_modules import load

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

import transformer_course

ROOT = Path(__file__).resolve().parents[2]
prepare_notebooks = load("prepare_notebooks")

NOTEBOOKS = prepare_notebooks.notebooks()
VERSION = transformer_course.__version__
URL = prepare_notebooks.repository_url()


def ids(path: Path) -> str:
    return str(path.relative_to(ROOT / "chapters"))


def test_the_version_is_written_in_one_place():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in pyproject["project"] and "version" in pyproject["project"]["dynamic"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "transformer_course.__version__"}
    assert prepare_notebooks.package_version() == VERSION


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_first_code_cell_is_the_current_install_cell(path):
    nb = nbformat.read(path, as_version=4)
    cell = next(cell for cell in nb.cells if cell.cell_type == "code")
    assert cell.get("id") == prepare_notebooks.INSTALL_CELL_ID, "run python scripts/prepare_notebooks.py"
    assert cell.source == prepare_notebooks.install_cell_source(), "run python scripts/prepare_notebooks.py"
    assert f'"transformer-course[notebooks]=={VERSION}"' in cell.source
    assert f"git+{URL}@v{VERSION}" in cell.source
    assert cell.metadata.get("tags") == ["remove-cell"], "the book hides the install cell"
    assert cell.outputs == [], "in a clone the install cell prints nothing"


def test_prepare_notebooks_check_finds_nothing_to_do():
    result = subprocess.run(
        [sys.executable, "scripts/prepare_notebooks.py", "--check"], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_prepare_notebooks_adds_the_cell_to_a_new_notebook(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# A new chapter"), nbformat.v4.new_code_cell("x = 1")]
    path = tmp_path / "new.ipynb"
    nbformat.write(nb, path)
    assert prepare_notebooks.prepare(path) == [
        "install cell added (execute the notebook again: its execution counts moved)"
    ]
    cells = nbformat.read(path, as_version=4).cells
    assert [c.cell_type for c in cells] == ["markdown", "code", "code"]
    assert cells[1].source == prepare_notebooks.install_cell_source() and cells[2].source == "x = 1"
    assert prepare_notebooks.prepare(path) == [], "a second run changes nothing"


def test_install_cell_prints_nothing_where_the_package_is_importable(tmp_path):
    """As in a clone: the cell, run by itself in an empty folder, says and installs nothing."""
    result = subprocess.run(
        [sys.executable, "-c", prepare_notebooks.install_cell_source()],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert list(tmp_path.iterdir()) == []


class FakePip:
    """Stands in for subprocess.run: records each pip command; answers with the given return codes."""

    def __init__(self, *returncodes: int):
        self.returncodes, self.commands = list(returncodes), []

    def __call__(self, command, **kwargs):
        self.commands.append(command)
        return SimpleNamespace(returncode=self.returncodes.pop(0), stdout="", stderr="ERROR: no such version")


def run_install_cell_without_the_package(monkeypatch, pip: FakePip) -> None:
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "transformer_course" else real_find_spec(name, *a)
    )
    monkeypatch.setattr(subprocess, "run", pip)
    exec(prepare_notebooks.install_cell_source(), {})


def test_install_cell_asks_pip_for_the_pinned_version_first(monkeypatch, capsys):
    pip = FakePip(0)
    run_install_cell_without_the_package(monkeypatch, pip)
    assert pip.commands == [
        [sys.executable, "-m", "pip", "install", "--quiet", f"transformer-course[notebooks]=={VERSION}"]
    ]
    assert f"transformer_course {VERSION} is installed." in capsys.readouterr().out


def test_install_cell_falls_back_to_the_tagged_release(monkeypatch):
    pip = FakePip(1, 0)
    run_install_cell_without_the_package(monkeypatch, pip)
    assert pip.commands[1][-1] == f"transformer-course[notebooks] @ git+{URL}@v{VERSION}"


def test_install_cell_says_why_when_pip_fails(monkeypatch):
    with pytest.raises(RuntimeError, match="pip could not install transformer_course:\nERROR: no such version"):
        run_install_cell_without_the_package(monkeypatch, FakePip(1, 1))
