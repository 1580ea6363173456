"""Checked exercises: the reader writes a function, a checker compares it with the package.

    from transformer_course.course.exercises import check, solutions
    check.mlp_forward(my_mlp_forward)      # ✅ passed ... or ❌ a diagnosis, never a traceback
    check.mlp_forward(solutions.mlp_forward)

Each chapter's module registers its checkers (`@checker def check_NAME(fn)`) and reference
solutions (`@solution def NAME(...)`); adding its name to CHAPTER_MODULES is all it takes. Every
checker built on `compare` also stops an answer that runs past a time limit, names dropout or noise,
inputs changed in place and a wrong dtype, and leaves the global random state as it found it (_core).
"""

import importlib

from ._core import (
    Case,
    Crash,
    Mistake,
    Registry,
    Result,
    check,
    checker,
    compare,
    describe_difference,
    show_source,
    solution,
    solutions,
)

# One line per chapter, in chapter order: importing a module registers its checkers and solutions.
CHAPTER_MODULES = (
    "mlp",  # chapter 1
    "attention",  # chapter 2
    "masks",  # chapter 3
    "multihead",  # chapter 4
    "ffn",  # chapter 5
    "norm",  # chapter 6
    "residual",  # chapter 7
    "embedding",  # chapter 8
    "encoder",  # chapter 9
    "decoder",  # chapter 10
    "model",  # chapter 11
    "decoding",  # chapter 12
    "gpt",  # chapter 14
    "bert",  # chapter 15
    "bpe",  # chapter 17
    "textlm",  # chapter 18
    "modern",  # chapter 19
)
for _name in CHAPTER_MODULES:
    importlib.import_module(f"{__name__}.{_name}")

__all__ = [
    "Case", "Crash", "Mistake", "Registry", "Result", "check", "checker", "compare", "describe_difference",
    "show_source", "solution", "solutions",
]  # fmt: skip
