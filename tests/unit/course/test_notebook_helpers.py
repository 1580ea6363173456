"""The notebook helpers: `show_source` shows the real source, `glue` stores values the way MyST-NB reads them;
and `CHAPTERS`, the course's order, which the table of contents, the exercises and the imports follow."""

import ast
import inspect
from pathlib import Path

import nbformat
import pytest
import yaml
from myst_nb.ext.glue import extract_glue_data
from nbclient import NotebookClient

import transformer_course as tc
from transformer_course.course.notebook import CHAPTERS, glue, show_source

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "transformer_course"
# The course's tools, beside the library: the library never imports them.
COURSE_TOOLS = {"course", "cli", "notebook", "exercises", "benchmark"}  # the last three: deprecated aliases
LIBRARY = sorted(p.stem for p in PACKAGE.glob("*.py") if not p.stem.startswith("_") and p.stem not in COURSE_TOOLS)
# Imports of a later chapter's module that the code has today: chapter 12's decoders and training call the KV
# cache and the fused kernel of chapter 13 (efficient.py), which chapter 12 does not show. None may be added.
FORWARD_IMPORTS = {("decoding", "efficient"), ("translate", "efficient")}


def test_show_source_is_the_real_source_and_renders_as_python():
    shown = show_source(tc.causal_mask)
    assert repr(shown) == inspect.getsource(tc.causal_mask).rstrip()  # decorators included, if any
    assert "\ndef causal_mask(" in f"\n{shown!r}"
    assert shown._repr_markdown_() == f"```python\n{shown!r}\n```"
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
            "from transformer_course.course.notebook import glue\nglue('speedup', f'{2.345:.1f}')\nglue('steps', 120)"
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


def runtime_imports(path: Path) -> set[str]:
    """The package's modules that `path` imports when it runs: at the top or inside a function, but not under
    `if TYPE_CHECKING:` (names for the type checker) nor `if __name__ == "__main__":` (a `python -m` entry point).
    A submodule counts as its top-level module or package: `from .cli.translate import main` is "cli"."""
    package = path.parent.relative_to(ROOT).parts  # ("transformer_course",) or ("transformer_course", "cli")
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        test = ast.unparse(node.test) if isinstance(node, ast.If) else ""
        nodes = node.orelse if "TYPE_CHECKING" in test or "__main__" in test else list(ast.iter_child_nodes(node))
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else ()
            target = (*base, *(node.module or "").split(".")) if node.module else base
            names = [(*target, alias.name) for alias in node.names]
            found.update(name[1] for name in names if name[0] == "transformer_course" and len(name) > 1)
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[1] for a in node.names if a.name.startswith("transformer_course."))
        for child in nodes:
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return found - {package[1] if len(package) > 1 else path.stem}  # a subpackage's imports of itself


def test_runtime_imports_reads_what_a_module_imports():
    assert runtime_imports(PACKAGE / "distributed.py") >= {"translate", "training", "_validate"}
    assert "cli" not in runtime_imports(PACKAGE / "translate.py")  # only its `python -m` entry point imports it
    assert {"encoder", "decoder"} & runtime_imports(PACKAGE / "interop.py") == set()  # TYPE_CHECKING only
    assert {"translate", "distributed", "training"} <= runtime_imports(PACKAGE / "cli" / "translate.py")


def test_every_library_module_belongs_to_one_chapter():
    modules = [m for chapter in CHAPTERS for m in chapter.modules]
    assert sorted(modules) == LIBRARY  # each once, none missing, none that does not exist
    assert len({c.notebook for c in CHAPTERS}) == len(CHAPTERS)


def test_the_table_of_contents_lists_the_chapters_in_order():
    def files(entries):
        for entry in entries or []:
            yield entry["file"]
            yield from files(entry.get("sections"))

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    listed = [f for part in toc["parts"] for f in files(part["chapters"])]
    chapters = [f.removeprefix("chapters/") for f in listed if f.startswith("chapters/") and "/exercises/" not in f]
    exercises = [f.removeprefix("chapters/exercises/") for f in listed if f.startswith("chapters/exercises/")]
    assert chapters == [c.notebook for c in CHAPTERS]
    assert exercises == [c.notebook for c in CHAPTERS if c.exercises is not None]
    on_disk = {p.stem for p in (ROOT / "chapters").glob("*.ipynb")}
    assert on_disk == set(chapters)
    assert {p.stem for p in (ROOT / "chapters" / "exercises").glob("*.ipynb")} == set(exercises)


def test_the_exercises_register_each_chapters_checkers_in_order():
    from transformer_course.course import exercises

    assert tuple(exercises.CHAPTER_MODULES) == tuple(c.exercises for c in CHAPTERS if c.exercises is not None)


def test_a_module_imports_no_module_of_a_later_chapter():
    position = {m: i for i, chapter in enumerate(CHAPTERS) for m in chapter.modules}
    forward = {
        (module, imported)
        for module in LIBRARY
        for imported in runtime_imports(PACKAGE / f"{module}.py")
        if imported in position and position[imported] > position[module]
    }
    assert forward == FORWARD_IMPORTS, "a module imports a later chapter's (or a listed import is gone: unlist it)"


def test_the_library_imports_none_of_the_course_tools():
    for module in [*LIBRARY, "__init__"]:
        assert not runtime_imports(PACKAGE / f"{module}.py") & COURSE_TOOLS, module


def test_no_import_cycle():
    files = {p.stem: p for p in PACKAGE.glob("*.py")} | {"cli": PACKAGE / "cli"}
    graph = {name: runtime_imports(path) if path.is_file() else set().union(*map(runtime_imports, path.glob("*.py")))
             for name, path in files.items() if name != "__init__"}  # fmt: skip
    finished: set[str] = set()

    def walk(name: str, trail: tuple[str, ...]) -> None:
        assert name not in trail, f"import cycle: {' -> '.join([*trail[trail.index(name) :], name])}"
        if name in finished:
            return
        for imported in sorted(graph.get(name, set())):
            walk(imported, (*trail, name))
        finished.add(name)

    for name in sorted(graph):
        walk(name, ())
