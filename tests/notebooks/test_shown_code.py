"""The code a chapter displays teaches that chapter's idea: no KV cache, no fused kernel before chapter 13.

Chapters show the package's real source with `show_source(obj)`. This test finds every such call in
chapters 1-12, resolves `obj` the way the notebook does (its import lines, then the expression), and
reads the source the reader sees. The cache and the fused path are taught in chapter 13
(13_efficient_attention), so no source displayed before it may mention them; and every reshape or
transpose shown carries a comment with the shapes, as nanoGPT's attention does.
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from pathlib import Path

import nbformat
import pytest

CHAPTERS = Path(__file__).resolve().parents[2] / "chapters"
BEFORE_CHAPTER_13 = sorted(p for p in CHAPTERS.glob("[0-9][0-9]_*.ipynb") if int(p.name[:2]) <= 12)

# Words that belong to chapter 13's extensions: the KV cache and the fused attention kernel.
FORBIDDEN = re.compile(
    r"cache|KVCache|fused|F\.scaled_dot_product_attention|keep_attention_weights|attached|incremental", re.IGNORECASE
)
RESHAPES = re.compile(r"\.(view|reshape|transpose|permute|flatten|unflatten)\(")


def shown_objects(path: Path) -> list[tuple[str, object]]:
    """(expression, object) for every `show_source(expression)` in the notebook's code cells."""
    nb = nbformat.read(path, as_version=4)
    code = [cell.source for cell in nb.cells if cell.cell_type == "code"]
    namespace: dict = {}
    for source in code:  # the notebook's own imports, so that `tc.X` or `split_heads` mean what they mean there
        for node in ast.parse(_python_only(source)).body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                exec(compile(ast.Module([node], []), str(path), "exec"), namespace)
    shown = []
    for source in code:
        for node in ast.walk(ast.parse(_python_only(source))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "show_source":
                expression = ast.unparse(node.args[0])
                shown.append((expression, eval(expression, namespace)))
    return shown


def _python_only(source: str) -> str:
    """The cell without IPython magics (`%xmode ...`), which are not Python."""
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())


def test_every_chapter_before_chapter_13_is_checked():
    assert [p.name[:2] for p in BEFORE_CHAPTER_13] == [f"{i:02d}" for i in range(1, 13)]


@pytest.mark.parametrize("path", BEFORE_CHAPTER_13, ids=lambda p: p.stem)
def test_shown_code_never_mentions_the_cache_or_the_fused_path(path):
    shown = shown_objects(path)
    assert shown, f"{path.name} shows no package code"
    for expression, obj in shown:
        source = textwrap.dedent(inspect.getsource(obj))
        found = sorted({m.group(0) for m in FORBIDDEN.finditer(source)})
        assert not found, f"{path.name}: show_source({expression}) mentions {found}, which chapter 13 teaches"


@pytest.mark.parametrize("path", BEFORE_CHAPTER_13, ids=lambda p: p.stem)
def test_every_reshape_shown_carries_a_shape_comment(path):
    for expression, obj in shown_objects(path):
        for line in inspect.getsource(obj).splitlines():
            code, _, comment = line.partition("#")
            if RESHAPES.search(code):
                assert "(" in comment and ")" in comment, (
                    f"{path.name}: show_source({expression}) reshapes without a shape comment: {line.strip()}"
                )


def test_the_check_catches_a_cache():
    # The test's own check, on code that mentions the cache: it must be found.
    source = "def step(self, x, cache):\n    return self.attend(x, kv=cache.keys)\n"
    assert FORBIDDEN.search(source)
    assert RESHAPES.search("x.view(b, t, h, d)") and not RESHAPES.search("x.overview()")
