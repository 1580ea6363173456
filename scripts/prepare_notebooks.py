"""Make every notebook of the course run on its own, wherever a reader opens it.

    python scripts/prepare_notebooks.py                  # every notebook under chapters/, in place
    python scripts/prepare_notebooks.py chapters/14_gpt.ipynb
    python scripts/prepare_notebooks.py --check          # list what is out of date; exit 1 if anything is

It gives each notebook, as its first code cell, the install cell: it installs the package, pinned to the
version in transformer_course/__init__.py, from the package index or else from the repository named in
_config.yml (repository.url) when `transformer_course` cannot be imported (Colab, Binder, a downloaded
notebook), and does nothing, silently, when it can (a clone with the editable install). It is tagged
`remove-cell`, so the book does not show it. A notebook that gets a new cell must be executed again
(scripts/run_notebook.py): its execution counts move by one. Changing an existing install cell's text
(a new version, a new repository) needs no new run, since the cell prints nothing in a clone.

Exercise notebooks (chapters/exercises/) are also made to read in Jupyter as in the book:

- their solutions stay collapsed until asked for: every code cell between a `{solution-start}` and its
  `{solution-end}` cell is marked source-hidden and outputs-hidden (`jupyter.source_hidden`,
  `jupyter.outputs_hidden`, and the classic Notebook's `collapsed`); the book shows the same cells in a
  collapsed dropdown;
- their links work outside the book: a `{doc}` role becomes a Markdown link to the notebook or page, which
  the book and Jupyter both follow, and a `{ref}` role gets its section's title written out, which the book
  shows anyway and Jupyter (which cannot resolve a label in another notebook) shows instead of the label.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parent.parent
INSTALL_CELL_ID = "install-course"
INSTALL_CELL_TAG = "remove-cell"

INSTALL_CELL = """\
# Installs this course's package, transformer_course, where it is missing (Colab, Binder, a downloaded
# notebook). In a clone of the course's repository it is already installed, and this cell does nothing.
import importlib.util

if importlib.util.find_spec("transformer_course") is None:
    import subprocess
    import sys

    def install_course(*requirements):
        # The first requirement pip can install wins: the package index, else the tagged release.
        for requirement in requirements:
            print(f"pip install {requirement!r} ...")
            pip = subprocess.run(
                [sys.executable, "-m", "pip", "install", "--quiet", requirement],
                capture_output=True,
                text=True,
            )
            if pip.returncode == 0:
                importlib.invalidate_caches()
                print("transformer_course {version} is installed.")
                return
        raise RuntimeError(f"pip could not install transformer_course:\\n{pip.stderr[-3000:]}")

    install_course(
        "transformer-course[notebooks]=={version}",
        "transformer-course[notebooks] @ git+{url}@v{version}",
    )
"""


def package_version(root: Path = ROOT) -> str:
    """`__version__` of transformer_course/__init__.py, read without importing the package."""
    tree = ast.parse((root / "transformer_course" / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__version__" for t in node.targets):
            return ast.literal_eval(node.value)
    raise SystemExit("transformer_course/__init__.py has no __version__ = '...' line")


def repository_url(root: Path = ROOT) -> str:
    """repository.url of _config.yml: the one place the book's launch buttons and the install cell read."""
    url = (yaml.safe_load((root / "_config.yml").read_text()).get("repository") or {}).get("url")
    if not url:
        raise SystemExit("_config.yml has no repository: url:")
    return url.rstrip("/")


def install_cell_source(root: Path = ROOT) -> str:
    # str.replace, not str.format: the cell's own f-strings keep their braces.
    source = INSTALL_CELL.replace("{version}", package_version(root)).replace("{url}", repository_url(root))
    return source.rstrip("\n")


def install_cell(root: Path = ROOT) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(install_cell_source(root), metadata={"tags": [INSTALL_CELL_TAG]})
    cell.id = INSTALL_CELL_ID
    return cell


def with_install_cell(nb: nbformat.NotebookNode, root: Path = ROOT) -> list[str]:
    """Put the install cell first among the code cells (or bring it up to date); returns what changed."""
    code = [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code"]
    existing = [i for i, cell in enumerate(nb.cells) if cell.get("id") == INSTALL_CELL_ID]
    if not existing:
        nb.cells.insert(code[0] if code else len(nb.cells), install_cell(root))
        return ["install cell added (execute the notebook again: its execution counts moved)"]
    (index,) = existing
    if index != code[0]:
        raise SystemExit(f"the install cell (id {INSTALL_CELL_ID}) must be the first code cell")
    cell, changes = nb.cells[index], []
    if cell.source != install_cell_source(root):
        cell.source = install_cell_source(root)
        changes.append("install cell updated")
    if cell.metadata.get("tags") != [INSTALL_CELL_TAG]:
        cell.metadata["tags"] = [INSTALL_CELL_TAG]
        changes.append(f"install cell tagged {INSTALL_CELL_TAG}")
    return changes


def collapse_solutions(nb: nbformat.NotebookNode) -> list[str]:
    """Hide the source and outputs of every code cell of a solution; returns what changed."""
    inside, collapsed = False, 0
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            inside = (inside or "{solution-start}" in cell.source) and "{solution-end}" not in cell.source
            continue
        if not inside or cell.cell_type != "code":
            continue
        jupyter = cell.metadata.get("jupyter", {})
        if not (jupyter.get("source_hidden") and jupyter.get("outputs_hidden") and cell.metadata.get("collapsed")):
            cell.metadata["jupyter"] = {**jupyter, "source_hidden": True, "outputs_hidden": True}
            cell.metadata["collapsed"] = True
            collapsed += 1
    return [f"{collapsed} solution cell(s) collapsed"] if collapsed else []


LABEL = re.compile(r"^\(([\w.:-]+)\)=[ \t]*\n+#+[ \t]+(.+?)[ \t]*$", re.M)
REF_ROLE = re.compile(r"\{ref\}`([^`]*)`")
DOC_ROLE = re.compile(r"\{doc\}`([^`]*)`")


def markdown_sources(path: Path) -> list[str]:
    if path.suffix == ".md":
        return [path.read_text()]
    return [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown"]


def section_titles(root: Path = ROOT) -> dict[str, str]:
    """label -> the title of the heading it labels, over the chapters and the book's pages."""
    titles = {}
    for path in [*notebooks(root), *sorted((root / "book").glob("*.md"))]:
        for source in markdown_sources(path):
            titles.update((m.group(1), m.group(2).replace("`", "")) for m in LABEL.finditer(source))
    return titles


def document_title(path: Path) -> str:
    for source in markdown_sources(path):
        for line in source.splitlines():
            if line.startswith("# "):
                return line[2:].strip()
    raise SystemExit(f"{path} has no H1 title")


def role_target(content: str) -> tuple[str | None, str]:
    """`text <target>` -> (text, target); `target` -> (None, target)."""
    match = re.fullmatch(r"(.*?)\s*<([^<>]+)>", content.strip())
    return (match.group(1), match.group(2)) if match else (None, content.strip())


def links_for_jupyter(nb: nbformat.NotebookNode, folder: Path, root: Path = ROOT) -> list[str]:
    """{doc} roles as Markdown links; {ref} roles with their section's current title; returns what changed."""
    titles = section_titles(root)

    def doc_link(match: re.Match) -> str:
        text, target = role_target(match.group(1))
        path = next((p for p in (folder / f"{target}.ipynb", folder / f"{target}.md") if p.is_file()), None)
        if path is None:
            return match.group(0)  # the book build reports an unknown document
        return f"[{text or document_title(path)}]({target}{path.suffix})"

    def ref_with_title(match: re.Match) -> str:
        label = role_target(match.group(1))[1]
        return f"{{ref}}`{titles[label]} <{label}>`" if label in titles else match.group(0)

    changed = 0
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            source = REF_ROLE.sub(ref_with_title, DOC_ROLE.sub(doc_link, cell.source))
            changed += source != cell.source
            cell.source = source
    return [f"links in {changed} cell(s) written for Jupyter"] if changed else []


def prepare(path: Path, root: Path = ROOT, write: bool = True) -> list[str]:
    """Bring one notebook up to date; returns what changed (nothing: it already was)."""
    nb = nbformat.read(path, as_version=4)
    changes = with_install_cell(nb, root)
    if path.resolve().parent == (root / "chapters" / "exercises").resolve():
        changes += collapse_solutions(nb) + links_for_jupyter(nb, path.parent, root)
    if changes and write:
        nbformat.validate(nb)
        nbformat.write(nb, path)
    return changes


def notebooks(root: Path = ROOT) -> list[Path]:
    return sorted(p for p in (root / "chapters").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: every notebook under chapters/")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a notebook is out of date")
    args = parser.parse_args()
    stale = 0
    for path in args.notebooks or notebooks():
        changes = prepare(path, write=not args.check)
        stale += bool(changes)
        for change in changes:
            print(f"{path}: {change}")
    if args.check and stale:
        print(f"{stale} notebook(s) out of date: run python scripts/prepare_notebooks.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
