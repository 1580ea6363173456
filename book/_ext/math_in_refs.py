"""The book's own Sphinx extension: a cross-reference to a section whose title has math shows that math.

`{ref}` writes the title of the section it points to as plain text, so a reference to "2.6 Why divide by
$\\sqrt{d_k}$" read "Why divide by \\sqrt{d_k}", raw TeX, in the HTML pages and in the PDF. After Sphinx
resolves the references of a page, this puts a copy of the title itself (its text and its math nodes,
which MathJax typesets) in every such reference that shows the title's text (an explicit link text is
left alone).

Enabled in _config.yml under `sphinx: local_extensions`.
"""

from __future__ import annotations

import copy
import posixpath
import re
from typing import Any

from docutils import nodes

TEX_LIKE = re.compile(r"[\\^_{}]")
CACHE = "_course_math_titles"


def math_titles(app) -> dict[tuple[str, str], nodes.title]:
    """(document, anchor) -> the title of each labelled section whose title holds math; once per build."""
    if getattr(app, CACHE, None) is None:
        titles = {}
        labels = app.env.domaindata["std"]["labels"]
        for docname, labelid, sectname in labels.values():
            if not docname or not TEX_LIKE.search(str(sectname or "")):
                continue
            for section in app.env.get_doctree(docname).findall(nodes.section):
                title = section.next_node(nodes.title)
                if labelid in section["ids"] and title is not None and any(title.findall(nodes.math)):
                    titles[docname, labelid] = title
        setattr(app, CACHE, titles)
    return getattr(app, CACHE)


def target_of(reference: nodes.reference, docname: str, suffix: str) -> tuple[str, str] | None:
    if reference.get("refid"):
        return docname, reference["refid"]
    path, _, anchor = reference.get("refuri", "").partition("#")
    if not anchor or "://" in path or not path.endswith(suffix):
        return None
    target = posixpath.normpath(posixpath.join(posixpath.dirname(docname), path[: -len(suffix)]))
    return target, anchor


def show_math_in_references(app, doctree: nodes.document, docname: str) -> None:
    titles = math_titles(app)
    if not titles:
        return
    suffix = getattr(app.builder, "out_suffix", ".html")
    for reference in list(doctree.findall(nodes.reference)):
        inline = reference.children[0] if len(reference.children) == 1 else None
        if not isinstance(inline, nodes.inline) or "std-ref" not in inline["classes"]:
            continue
        title = titles.get(target_of(reference, docname, suffix))
        if title is not None and inline.astext() == title.astext():
            copies = [copy.deepcopy(child) for child in title.children]
            reference.replace(inline, nodes.inline("", "", *copies, classes=inline["classes"]))


def setup(app) -> dict[str, Any]:
    app.connect("doctree-resolved", show_math_in_references)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
