"""Every registered checker's wrong answers, for the tests generated in tests/unit/course/test_exercise_checkers.py.

Two kinds:

- written by hand, the way a reader would write them: each chapter's `tests/test_exercises_<module>.py` holds a
  `WRONG_ANSWERS` table, {checker name: [(answer, expected mistake key or None, words of the message)]};
  `wrong_answer_cases()` gathers them all;
- generated from the reference solution: answers that swap two interchangeable arguments (W_Q and W_K, the
  self- and the cross-attention, a LayerNorm's gain and bias, key and value) or reuse one where the other
  belongs. `INTERCHANGEABLE` lists those arguments per checker; the reference test checks the list against
  the arguments each checker really passes (`interchangeable_pairs`), so a new checker cannot be left out.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import itertools
from pathlib import Path

import pytest
import torch
from torch import nn

from transformer_course.course.exercises import check, solutions

ARGNAMES = ("name", "reader", "mistake", "words")

# Per checker, the groups of arguments that an answer could put in one another's place: tensors of one shape
# or modules of one kind with weights of the same shapes, in at least one of the checker's cases.
INTERCHANGEABLE: dict[str, tuple[tuple[str, ...], ...]] = {
    "attention": (("q", "k", "v"),),
    "attention_weights": (("q", "k"),),
    "collapse_two": (("w1", "w2"), ("b1", "b2")),
    "decoder_layer": (("x", "memory"), ("self_attn", "cross_attn"), ("norm1", "norm2", "norm3")),
    "encoder_layer": (("norm1", "norm2"),),
    "ffn_forward": (("w1", "w2"), ("b1", "b2")),
    "grouped_attention": (("q", "k", "v"),),
    "layer_norm": (("gamma", "beta"),),
    "masked_attention": (("q", "k", "v"),),
    "multi_head_attention": (("query", "key", "value"), ("w_q", "w_k", "w_v", "w_o")),
    "rope_qkv": (("q", "k", "v"),),
    "self_attention": (("w_q", "w_k", "w_v"),),
}


def wrong_answer_tables() -> dict[str, list]:
    """{checker name: rows} from every chapter's tests/test_exercises_<module>.py, each checker in one file."""
    tables: dict[str, list] = {}
    for path in sorted((Path(__file__).parent / "unit" / "course").glob("test_exercises_*.py")):
        for name, rows in getattr(importlib.import_module(path.stem), "WRONG_ANSWERS", {}).items():
            if name not in check.names() or name in tables:
                raise ValueError(f"{path.name}: WRONG_ANSWERS[{name!r}] is not a checker's name, or listed twice")
            tables[name] = rows
    return tables


def wrong_answer_cases(tables: dict[str, list]) -> list:
    """pytest params (name, reader, mistake, words), one per (checker, wrong answer) of `wrong_answer_tables()`."""
    return [
        pytest.param(name, reader, mistake, words, id=f"{name}-{reader.__name__}-{mistake}-{i}")
        for name, rows in tables.items()
        for i, (reader, mistake, words) in enumerate(rows)
    ]


def _alike(a, b) -> bool:
    """Could one stand in for the other: float tensors of one shape, or modules of one kind and weight shapes."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.is_floating_point() and b.is_floating_point() and a.shape == b.shape
    if isinstance(a, nn.Module) and isinstance(b, nn.Module) and type(a) is type(b):
        shapes = [[p.shape for p in m.state_dict().values()] for m in (a, b)]
        return bool(shapes[0]) and shapes[0] == shapes[1]
    return False


def recording(name: str) -> tuple[object, list[dict]]:
    """The reference solution, and the list into which it records the arguments of every call, by name."""
    reference = getattr(solutions, name)
    signature = inspect.signature(reference)
    calls: list[dict] = []

    @functools.wraps(reference)
    def records(*args, **kwargs):
        calls.append(dict(signature.bind(*args, **kwargs).arguments))
        return reference(*args, **kwargs)

    return records, calls


def interchangeable_pairs(calls: list[dict]) -> set[tuple[str, str]]:
    """The pairs of arguments (in signature order) that are alike in at least one recorded call."""
    return {
        (a, b)
        for arguments in calls
        for a, b in itertools.combinations(arguments, 2)
        if _alike(arguments[a], arguments[b])
    }


def declared_pairs(name: str) -> set[tuple[str, str]]:
    return {pair for group in INTERCHANGEABLE.get(name, ()) for pair in itertools.combinations(group, 2)}


def confused_answer(name: str, first: str, second: str, how: str):
    """The reference solution given `first` and `second` swapped (how="swap"), or `first` in both places
    (how="reuse": first is used where second belongs)."""
    reference = getattr(solutions, name)
    signature = inspect.signature(reference)

    def answer(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()  # an argument left to its default can be confused too
        arguments = bound.arguments
        a, b = arguments[first], arguments[second]
        arguments[first], arguments[second] = (b, a) if how == "swap" else (a, a)
        return reference(**arguments)

    answer.__name__ = f"{first}_{second}_swapped" if how == "swap" else f"{first}_for_{second}"
    return answer


def confused_answer_cases() -> list:
    """pytest params (name, first, second, how): every pair of INTERCHANGEABLE swapped, and each reused."""
    return [
        pytest.param(name, first, second, how, id=f"{name}-{first}-{how}-{second}")
        for name in sorted(INTERCHANGEABLE)
        for a, b in sorted(declared_pairs(name))
        for first, second, how in ((a, b, "swap"), (a, b, "reuse"), (b, a, "reuse"))
    ]
