"""Every notebook under chapters/ is committed the way scripts/run_notebook.py leaves it.

nbval (configured in pyproject.toml) re-runs each notebook and compares the outputs; these tests check
what nbval does not: an H1 title first, a clean top-to-bottom run (execution counts 1, 2, 3, ...),
errors only where a cell is tagged to expect one, and saved state for every widget shown.
"""

from pathlib import Path

import nbformat
import pytest

CHAPTERS = Path(__file__).resolve().parents[2] / "chapters"
NOTEBOOKS = sorted(p for p in CHAPTERS.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
MAX_BYTES = 2_000_000  # outputs and widget state included: keep the repository light


def ids(path: Path) -> str:
    return str(path.relative_to(CHAPTERS))


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebook found under chapters/"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_notebook_is_committed_as_run_notebook_leaves_it(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    first = next(cell for cell in nb.cells if cell.source.strip())
    assert first.cell_type == "markdown" and first.source.lstrip().startswith("# "), "the first cell must be an H1"
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    counts = [cell.execution_count for cell in code]
    assert counts == list(range(1, len(code) + 1)), (
        f"execution counts {counts}: run it with scripts/run_notebook.py (top to bottom, fresh kernel)"
    )
    for i, cell in enumerate(code, start=1):
        tags = cell.metadata.get("tags", [])
        errors = [out for out in cell.outputs if out.output_type == "error"]
        if "raises-exception" in tags:
            assert errors, f"cell [{i}] is tagged raises-exception but raised nothing"
        else:
            assert not errors, f"cell [{i}] raised {errors[0].ename}: {errors[0].evalue}"
    assert path.stat().st_size < MAX_BYTES, f"{path.name} is {path.stat().st_size} bytes"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_every_widget_shown_has_saved_state(path):
    nb = nbformat.read(path, as_version=4)
    shown = {
        out.data[WIDGET_VIEW]["model_id"]
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.outputs
        if WIDGET_VIEW in out.get("data", {})
    }
    saved = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    assert shown <= set(saved), "widgets without saved state: run the notebook with scripts/run_notebook.py"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_no_cell_warns(path):
    # A warning in a committed output (a deprecated name the chapter still uses, say) is a bug of the chapter, and
    # its text holds the kernel's temporary path, which differs on every run.
    nb = nbformat.read(path, as_version=4)
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            text = output.get("text", "") if output.get("name") == "stderr" else ""
            assert "Warning" not in text, f"{path.name} cell {index} warns: {text.strip()[:200]}"
