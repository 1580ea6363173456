"""The notebook helpers: `show_source` shows the real source, `glue` stores values the way MyST-NB reads them."""

import nbformat
import pytest
from myst_nb.ext.glue import extract_glue_data
from nbclient import NotebookClient

import transformer_course as tc
from transformer_course.notebook import glue, show_source


def test_show_source_is_the_real_source_and_renders_as_python():
    shown = show_source(tc.causal_mask)
    assert repr(shown).startswith("def causal_mask(")
    assert shown._repr_markdown_().startswith("```python\ndef causal_mask(")
    with pytest.raises(TypeError, match="obj must be"):
        show_source(42)


class _Logger:
    def warning(self, *args, **kwargs):
        raise AssertionError(f"MyST-NB warned: {args}")

    error = warning


def test_glue_writes_what_myst_nb_reads():
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            "from transformer_course.notebook import glue\nglue('speedup', f'{2.345:.1f}')\nglue('steps', 120)"
        )
    ]
    NotebookClient(nb, timeout=60, kernel_name="python3").execute()
    # Nothing visible in the cell (only the hidden records), and MyST-NB finds both values.
    outputs = nb.cells[0].outputs
    assert outputs and all(not any(k.startswith("text/") for k in out.get("data", {})) for out in outputs)
    data = extract_glue_data(nb, [0], _Logger())
    assert data["speedup"]["data"]["text/plain"] == "'2.3'"
    assert data["steps"]["data"]["text/plain"] == "120"


def test_glue_refuses_a_nameless_value():
    with pytest.raises(TypeError, match="name"):
        glue("", 1)
