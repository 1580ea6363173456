"""Helpers for the course's notebooks: show the package's real source in a cell.

    from transformer_course.notebook import show_source
    show_source(tc.MultiHeadAttention.forward)

The book displays the package's code this way, so the text and the package cannot drift apart.
"""

from __future__ import annotations

import inspect
import textwrap
from typing import Any


class SourceCode:
    """Displays as a highlighted Python block in Jupyter and in the book; as plain text elsewhere."""

    def __init__(self, source: str):
        self.source = source

    def __repr__(self) -> str:
        return self.source

    def _repr_markdown_(self) -> str:
        return f"```python\n{self.source}\n```"


def show_source(obj: Any) -> SourceCode:
    """The real source of a function, class or method, to display in a notebook cell."""
    try:
        source = inspect.getsource(obj)
    except (TypeError, OSError) as error:
        raise TypeError(f"obj must be a function, class or method defined in a file, got {obj!r}") from error
    return SourceCode(textwrap.dedent(source).rstrip())


GLUE_PREFIX = "application/papermill.record/"


def glue(name: str, value: Any) -> None:
    """Store `value` under `name` for the book's text, as MyST-NB's `myst_nb.glue(name, value, display=False)`.

    The chapter's markdown writes {glue:}`name` where the number belongs, so a sentence always quotes the
    output of the cell that computed it. Written here (the same output format as MyST-NB's) so that a
    notebook run outside the book's environment, on Colab or a bare kernel, needs no MyST-NB.
    """
    from IPython.core.formatters import format_display_data
    from IPython.display import display

    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a non-empty str, got {name!r}")
    bundle, metadata = format_display_data(value)
    metadata["scrapbook"] = {"name": name, "mime_prefix": GLUE_PREFIX}
    display({GLUE_PREFIX + mime: data for mime, data in bundle.items()}, raw=True, metadata=metadata)
