"""Helpers for the course's notebooks: show the package's real source in a cell, widgets that work under
every ipywidgets a reader may have, and numbers glued into the book's text.

    from transformer_course.course.notebook import glue, show_source, stack
    show_source(tc.MultiHeadAttention.forward)
    pictures = stack([widgets.Image(value=png) for png in pngs])
    glue("speedup", speedup)  # the markdown says {glue:text}`speedup:.1f`

The book displays the package's code this way, so the text and the package cannot drift apart.

`CHAPTERS` is the course's order, written once: each chapter's notebook, the library modules it introduces
and its exercise checkers, in the order of the book. `_toc.yml` lists the same notebooks in the same order,
`transformer_course.course.exercises` registers the same checkers, and a library module imports only modules of its
own or earlier chapters (tests/unit/course/test_notebook_helpers.py holds all three to it).
"""

from __future__ import annotations

import html
import inspect
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Chapter:
    """One chapter: `chapters/<notebook>.ipynb`, the library modules it introduces, its exercise checkers.

    exercises names the module of `transformer_course.course.exercises` whose checkers go with the exercise
    notebook `chapters/exercises/<notebook>.ipynb`; None for a chapter without exercises.
    """

    notebook: str
    modules: tuple[str, ...]
    exercises: str | None = None


# In the order of the book. A chapter's modules may import those of the chapters above it, never below.
CHAPTERS = (
    Chapter("01_mlp", ("mlp",), "mlp"),
    Chapter("02_attention", ("attention",), "attention"),
    Chapter("03_masks", ("masks",), "masks"),
    Chapter("04_multihead", ("multihead",), "multihead"),
    Chapter("05_ffn", ("ffn",), "ffn"),
    Chapter("06_layernorm", ("norm",), "norm"),
    Chapter("07_residual", ("residual",), "residual"),
    Chapter("08_positions", ("embedding",), "embedding"),
    Chapter("09_encoder", ("interop", "encoder"), "encoder"),
    Chapter("10_decoder", ("decoder",), "decoder"),
    Chapter("11_transformer", ("model",), "model"),
    Chapter(
        "12_translation", ("training", "data", "datasets", "decoding", "checkpoint", "translate", "demo"), "decoding"
    ),
    Chapter("13_efficient_attention", ("efficient",)),
    Chapter("14_gpt", ("grammar", "gpt"), "gpt"),
    Chapter("15_bert", ("bert",), "bert"),
    Chapter("17_tokenization", ("bpe", "corpus"), "bpe"),
    Chapter("18_gpt_on_text", ("textlm",), "textlm"),
    Chapter("19_modern_decoder", ("modern", "hf"), "modern"),
    Chapter("16_distributed", ("distributed",)),  # appendix B, after the chapters
)


class SourceCode:
    """Displays as a highlighted Python block in Jupyter and in the book; as plain text elsewhere.

    Folded (the reference solutions of the exercises), it also has an HTML form, the code inside a closed
    <details>: Jupyter and Colab prefer HTML, so a learner who runs every cell still sees the solution only
    by clicking it open, while the book (_config.yml prefers Markdown) shows it highlighted in the
    exercise's solution dropdown.
    """

    def __init__(self, source: str, folded: bool = False):
        self.source = source
        self.folded = folded

    def __repr__(self) -> str:
        return self.source

    def _repr_markdown_(self) -> str:
        return f"```python\n{self.source}\n```"

    def _repr_html_(self) -> str | None:
        if not self.folded:
            return None  # no HTML form: Jupyter shows the Markdown
        return (
            "<details><summary>The reference solution (click to show it)</summary>"
            f"<pre><code>{html.escape(self.source)}</code></pre></details>"
        )


_EXERCISES = "transformer_course.course.exercises."  # the exercises' reference solutions come folded


def show_source(obj: Any) -> SourceCode:
    """The real source of a function, class or method, to display in a notebook cell.

    The code of transformer_course.course.exercises (the exercises' reference solutions) comes folded.
    """
    try:
        source = inspect.getsource(obj)
    except (TypeError, OSError) as error:
        raise TypeError(f"obj must be a function, class or method defined in a file, got {obj!r}") from error
    module = getattr(inspect.getmodule(obj), "__name__", "")
    folded = module == "transformer_course.course.exercises" or module.startswith(_EXERCISES)
    return SourceCode(textwrap.dedent(source).rstrip(), folded=folded)


def stack(children: Sequence[Any], selected_index: int = 0, titles: Sequence[str] | None = None) -> Any:
    """Widgets shown one at a time, the one at `selected_index`: an `ipywidgets.Stack`.

    A control linked to `selected_index` (`widgets.jslink((slider, "index"), (pictures, "selected_index"))`)
    flips through them in the browser, without a kernel. `Stack` is new in ipywidgets 8; under ipywidgets 7
    (Colab shipped 7.7.1 for years) this returns a `Tab` instead, which has the same `selected_index`, so the
    link still works and the tabs, labelled with `titles` (default "1", "2", ...), flip through the children too.
    """
    import ipywidgets as widgets  # only the notebooks need ipywidgets, not the package

    children = list(children)
    if not children:
        raise ValueError("children must hold at least one widget, got none")
    if not 0 <= selected_index < len(children):
        raise ValueError(f"selected_index must be in [0, {len(children)}), got {selected_index}")
    if titles is not None and len(titles) != len(children):
        raise ValueError(f"titles must have one entry per child ({len(children)}), got {len(titles)}")
    if hasattr(widgets, "Stack"):
        return widgets.Stack(children, selected_index=selected_index)
    tabs = widgets.Tab(children, selected_index=selected_index)
    for i, title in enumerate(titles if titles is not None else [str(i + 1) for i in range(len(children))]):
        tabs.set_title(i, str(title))
    return tabs


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
