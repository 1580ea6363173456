"""Freeze the course's real-text corpus into transformer_course/corpus_data/documents.jsonl (run once, by hand).

    .venv/bin/python scripts/build_corpus.py --fortunes /path/to/usr/share/games/fortunes

Three sources, one JSON line per document ({"source", "name", "split", "text"}):

- ``python-docs``: the docstrings of a fixed list of pure-Python standard-library modules, read from their
  source with ``ast`` (nothing imported), one document per module, docstrings of 40 characters or fewer left
  out (Python Software Foundation License);
- ``course``: the markdown cells of ``chapters/*.ipynb`` and the pages ``book/*.md`` of this course, one
  document per file (the course's own text);
- ``poems``: the Tang poems (唐诗三百首) and Song-dynasty poems (宋诗) of Debian's ``fortunes-zh`` package
  (files ``tang300`` and ``song100``), one document per poem, colour codes removed (the poems are in the public
  domain; the transcription is fortunes-zh's, GPL-3.0-or-later: see corpus_data/NOTICE.md).

In each source, documents are sorted by name and every tenth one (positions 9, 19, 29, ...) is held out.
The output is committed: the package never runs this script, and installing it needs no network.
"""

import argparse
import ast
import json
import re
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "transformer_course" / "corpus_data" / "documents.jsonl"

# Pure-Python modules of CPython 3.11 whose docstrings are prose (C modules have their docstrings elsewhere).
MODULES = (
    "argparse", "ast", "base64", "bisect", "calendar", "cmd", "code", "codecs", "collections/__init__",
    "configparser", "contextlib", "copy", "csv", "dataclasses", "datetime", "difflib", "doctest",
    "email/message", "enum", "fileinput", "fnmatch", "fractions", "ftplib", "functools", "getopt", "gettext",
    "glob", "gzip", "heapq", "hmac", "html/parser", "http/client", "http/server", "imaplib", "inspect",
    "ipaddress", "json/__init__", "json/decoder", "json/encoder", "logging/__init__", "mailbox", "netrc",
    "numbers", "operator", "optparse", "os", "pathlib", "pdb", "pickle", "pprint", "queue", "quopri",
    "random", "re/__init__", "sched", "secrets", "selectors", "shlex", "shutil", "smtplib", "socket",
    "socketserver", "statistics", "string", "subprocess", "tarfile", "tempfile", "textwrap", "threading",
    "timeit", "traceback", "typing", "unittest/case", "urllib/parse", "urllib/request", "uuid", "warnings",
    "weakref", "wave", "zipfile",
)  # fmt: skip

HELD_OUT_EVERY = 10


def module_docs(name: str) -> str:
    """All docstrings of one module (module, classes, functions), in source order, separated by blank lines."""
    path = Path(sysconfig.get_paths()["stdlib"]) / f"{name}.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef))]
    nodes.sort(key=lambda n: getattr(n, "lineno", 0))
    docs = [doc.strip() for n in nodes if (doc := ast.get_docstring(n, clean=True))]
    return "\n\n".join(d for d in docs if len(d) > 40)  # one-line stubs ("Return self.") add nothing


def course_prose() -> dict[str, str]:
    """The markdown of every chapter notebook and every book page, one text per file."""
    texts = {}
    for path in sorted((ROOT / "chapters").glob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        texts[f"chapters/{path.name}"] = "\n\n".join(
            "".join(c["source"]) for c in cells if c["cell_type"] == "markdown"
        )
    for path in sorted((ROOT / "book").glob("*.md")):
        texts[f"book/{path.name}"] = path.read_text(encoding="utf-8")
    return texts


def poems(fortunes: Path) -> dict[str, str]:
    """One text per poem of tang300 and song100; the fortune files separate entries with a line '%'."""
    texts = {}
    for file in ("tang300", "song100"):
        raw = re.sub(r"\x1b\[[0-9;]*m", "", (fortunes / file).read_text(encoding="utf-8"))  # terminal colours
        for i, entry in enumerate(raw.split("\n%\n")):
            if entry.strip():
                texts[f"{file}/{i:04d}"] = entry.strip()
    return texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fortunes", type=Path, required=True, help="folder holding fortunes-zh's tang300, song100")
    args = parser.parse_args()
    sources = {
        "python-docs": {m.removesuffix("/__init__"): module_docs(m) for m in MODULES},
        "course": course_prose(),
        "poems": poems(args.fortunes),
    }
    seen = set()
    OUT.parent.mkdir(exist_ok=True)
    with OUT.open("w", encoding="utf-8", newline="\n") as f:
        for source, texts in sources.items():
            for i, name in enumerate(sorted(texts)):
                text = texts[name].replace("\r\n", "\n").strip()
                if not text or text in seen:  # an exact duplicate would leak between the splits
                    continue
                seen.add(text)
                split = "heldout" if i % HELD_OUT_EVERY == HELD_OUT_EVERY - 1 else "train"
                record = {"source": source, "name": name, "split": split, "text": text}
                f.write(json.dumps(record, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
