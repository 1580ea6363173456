"""A small corpus of real, redistributable text, shipped inside the package (no download).

    import transformer_course as tc
    train = tc.corpus.load_text("train")      # about 0.96 MB of UTF-8: English prose, code words, Chinese poems
    heldout = tc.corpus.load_text("heldout")  # about 0.13 MB: whole documents no training step reads

Three sources (``corpus_data/NOTICE.md`` gives their licences): the docstrings of 80 pure-Python modules of
the standard library, the prose of this course, and Tang and Song poems. The split is fixed in the data file:
every tenth document of each source is held out, whole, so held-out text is text the model never saw, not
the end of a document it trained on.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

DATA = Path(__file__).resolve().parent / "corpus_data" / "documents.jsonl"
SPLITS = ("train", "heldout")
SOURCES = ("python-docs", "course", "poems")
SEPARATOR = "\n\n"  # between documents in load_text: a paragraph break, as inside a document


@cache
def _records() -> tuple[dict, ...]:
    with DATA.open(encoding="utf-8") as f:
        return tuple(json.loads(line) for line in f)


def _check(split: str, source: str | None) -> None:
    if split not in SPLITS:
        raise ValueError(f"split={split!r} must be one of {SPLITS}")
    if source is not None and source not in SOURCES:
        raise ValueError(f"source={source!r} must be None or one of {SOURCES}")


def load_documents(split: str, source: str | None = None) -> list[str]:
    """The documents of one split ("train" or "heldout"), of one source or all, in the file's fixed order."""
    _check(split, source)
    return [r["text"] for r in _records() if r["split"] == split and source in (None, r["source"])]


def load_text(split: str, source: str | None = None) -> str:
    """The documents of one split joined by a blank line: one str to tokenize or to cut into blocks."""
    return SEPARATOR.join(load_documents(split, source))
