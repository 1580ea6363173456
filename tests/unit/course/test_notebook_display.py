"""transformer_course.course.notebook's display helpers: widgets under ipywidgets 7 and 8, folded solutions."""

from __future__ import annotations

import ipywidgets
import pytest
from IPython.core.formatters import format_display_data

import transformer_course as tc
from transformer_course.course.exercises import solutions
from transformer_course.course.notebook import show_source, stack


def pictures(n: int) -> list:
    return [ipywidgets.HTML(f"picture {i}") for i in range(n)]


@pytest.mark.skipif(not hasattr(ipywidgets, "Stack"), reason="ipywidgets 7 has no Stack (the next test's case)")
def test_stack_is_an_ipywidgets_stack_where_there_is_one():
    widget = stack(pictures(3), selected_index=1)
    assert type(widget) is ipywidgets.Stack
    assert widget.selected_index == 1 and len(widget.children) == 3


def test_stack_falls_back_to_tabs_without_stack(monkeypatch):
    """ipywidgets 7 has no Stack: the same children in a Tab, with the same selected_index to link to."""
    monkeypatch.delattr(ipywidgets, "Stack", raising=False)  # under ipywidgets 8, made to look like 7
    widget = stack(pictures(3), selected_index=2)
    assert type(widget) is ipywidgets.Tab
    assert widget.selected_index == 2 and len(widget.children) == 3
    assert [widget.get_title(i) for i in range(3)] == ["1", "2", "3"]
    titled = stack(pictures(2), titles=["d_k = 4", "d_k = 64"])
    assert [titled.get_title(i) for i in range(2)] == ["d_k = 4", "d_k = 64"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"children": []}, "children must hold at least one widget"),
        ({"children": pictures(2), "selected_index": 2}, r"selected_index must be in \[0, 2\), got 2"),
        ({"children": pictures(2), "titles": ["a"]}, r"titles must have one entry per child \(2\), got 1"),
    ],
)
def test_stack_rejects_bad_input(kwargs, message):
    with pytest.raises(ValueError, match=message):
        stack(**kwargs)


def test_package_code_shows_as_markdown_only():
    data, _ = format_display_data(show_source(tc.MLP))
    assert set(data) == {"text/plain", "text/markdown"}
    assert data["text/markdown"].startswith("```python\nclass MLP(")


def test_reference_solutions_also_come_folded_in_html():
    """Jupyter prefers the HTML: a closed <details>; the book prefers the Markdown (_config.yml)."""
    data, _ = format_display_data(show_source(solutions.split_heads))
    assert set(data) == {"text/plain", "text/markdown", "text/html"}
    html = data["text/html"]
    assert html.startswith("<details><summary>") and "<details open" not in html
    assert "def split_heads(x, n_heads):" in html and "&quot;&quot;&quot;(B, T, D)" in html
    assert data["text/markdown"] == f"```python\n{show_source(solutions.split_heads).source}\n```"
