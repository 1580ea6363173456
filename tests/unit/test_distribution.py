"""pyproject.toml is the single list of dependencies; requirements.txt and binder/ only point into it.

tests/release/test_bare_kernel.py builds the distribution and checks the wheel itself; these tests read the files.
"""

from __future__ import annotations

import re
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
TOOLING = {"jupyter-book", "pytest", "nbval", "playwright", "ruff", "hypothesis", "build", "twine", "mypy"}


def name(requirement: str) -> str:
    return re.match(r"[A-Za-z0-9_.-]+", requirement).group().lower().replace("_", "-")


def requirement_lines(path: Path) -> list[str]:
    lines = (line.split("#")[0].strip() for line in path.read_text().splitlines())
    return [line for line in lines if line]


def declared() -> set[str]:
    project = PYPROJECT["project"]
    extras = project["optional-dependencies"].values()
    return {name(r) for r in [*project["dependencies"], *(r for extra in extras for r in extra)]}


def test_runtime_dependencies_have_lower_bounds_only():
    for requirement in PYPROJECT["project"]["dependencies"]:
        assert ">=" in requirement and "<" not in requirement.replace("<=", ""), requirement


def test_requirements_txt_installs_the_package_with_every_extra_and_only_bounds_what_it_declares():
    lines = requirement_lines(ROOT / "requirements.txt")
    extras = set(PYPROJECT["project"]["optional-dependencies"])
    (editable,) = [line for line in lines if line.startswith("-e ")]
    assert set(re.fullmatch(r"-e \.\[([a-z,]+)\]", editable).group(1).split(",")) == extras, editable
    others = [name(line) for line in lines if not line.startswith("-")]
    assert set(others) <= declared(), f"not in pyproject.toml: {set(others) - declared()}"


def test_binder_installs_the_runtime_only():
    lines = requirement_lines(ROOT / "binder" / "requirements.txt")
    assert ".[notebooks]" in lines, "Binder installs the package from its checkout, with the notebooks extra"
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in lines, "the CPU build of torch"
    names = {name(line) for line in lines if not line.startswith(("-", "."))}
    assert names == {"torch", "jupyterlab-myst"}, names
    (torch_line,) = [line for line in lines if name(line) == "torch"]
    assert torch_line in PYPROJECT["project"]["dependencies"], f"{torch_line}: not the package's own bound"
    assert not names & TOOLING
    notebooks_extra = {name(r) for r in PYPROJECT["project"]["optional-dependencies"]["notebooks"]}
    assert not notebooks_extra & TOOLING


def test_the_setup_page_names_the_oldest_torch():
    (bound,) = [r.removeprefix("torch>=") for r in PYPROJECT["project"]["dependencies"] if r.startswith("torch>=")]
    setup = " ".join((ROOT / "book" / "setup.md").read_text(encoding="utf-8").split())
    assert f"the PyTorch you have if it is {bound} or newer" in setup
