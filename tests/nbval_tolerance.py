"""nbval, with numbers compared within a tolerance that the cell declares, and mismatches that say which number.

Strict nbval compares every output text character by character. That is right for what a chapter computes
exactly (shapes, masks, counts, tokens of a deterministic decoder), and wrong for the last digits of a long
floating-point computation (a model trained for 800 steps): those depend on the order in which the CPU's or
GPU's kernels add numbers, so they differ between an AVX-512 machine, an AVX2 laptop and a GPU, while the
chapter's claim (an assertion with a range) holds on all of them.

A cell that prints such numbers declares its tolerance in its own metadata, where the output is produced:

    "metadata": {"nbval-tolerance": {"rel": 0.01, "abs": 0.005, "counts": 1}}

Then every number of the cell's text outputs is compared within ``abs + rel * |expected|`` (a number written
without a decimal point, a count, within ``counts`` instead, where the cell sets it) and everything between
the numbers exactly (the same count of numbers, the same words). Cells without the key are compared
exactly, as before. Either way, a mismatch reports the cell, the first number that differs (expected, actual,
tolerance) or the first text that differs, so a reader can tell rounding from a bug.

Loaded by pytest through ``-p nbval_tolerance`` (pyproject.toml); nbval's own sanitising and skipping rules
apply unchanged.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass

import nbval.plugin

KEY = "nbval-tolerance"
# A decimal number: optional sign, digits with optional thousands commas, optional fraction and exponent.
# Not inside a name (`W1`, `d_k`); a trailing "x" (a ratio, `1.8x`) still ends a number.
NUMBER = re.compile(r"(?<![\w.])[-+−]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+|\d)(?:[eE][-+]?\d+)?(?![0-9A-Za-wyz_])")


@dataclass(frozen=True)
class Tolerance:
    """|actual - expected| <= abs + rel * |expected|; integers (counts) within `counts` instead, when it is set."""

    rel: float = 0.0
    abs: float = 0.0
    counts: float | None = None

    def allows(self, expected: str, actual: str) -> bool:
        a, b = _value(expected), _value(actual)
        if self.counts is not None and _is_integer(expected) and _is_integer(actual):
            return abs(a - b) <= self.counts
        return abs(a - b) <= self.abs + self.rel * abs(a)

    def __str__(self) -> str:
        text = f"abs {self.abs:g} + rel {self.rel:g} × |expected|"
        return text if self.counts is None else f"{text}; integers ± {self.counts:g}"


EXACT = Tolerance()


def tolerance_of(metadata) -> Tolerance:
    """The cell's declared tolerance (EXACT when it declares none); a malformed declaration is an error."""
    declared = metadata.get(KEY)
    if declared is None:
        return EXACT
    if not isinstance(declared, dict) or not set(declared) <= {"rel", "abs", "counts"} or not declared:
        raise ValueError(f'cell metadata "{KEY}" must be a dict with "rel", "abs" and/or "counts", got {declared!r}')
    values = {k: float(v) for k, v in declared.items()}
    if any(not 0 <= v < math.inf for v in values.values()):
        raise ValueError(f'cell metadata "{KEY}": tolerances must be finite and >= 0, got {declared!r}')
    return Tolerance(**values)


def _value(token: str) -> float:
    return float(token.replace(",", "").replace("−", "-"))


def _is_integer(token: str) -> bool:
    return not any(c in token for c in ".eE")


def split_numbers(text: str) -> tuple[list[str], list[str]]:
    """The text between the numbers (one more piece than numbers) and the numbers, as written."""
    pieces, numbers, last = [], [], 0
    for match in NUMBER.finditer(text):
        pieces.append(text[last : match.start()])
        numbers.append(match.group())
        last = match.end()
    pieces.append(text[last:])
    return pieces, numbers


def _context(text: str, start: int, width: int = 40) -> str:
    return text[max(0, start - width) : start + width].replace("\n", "⏎")


def explain_difference(expected: str, actual: str, tolerance: Tolerance) -> str | None:
    """None when actual matches expected (numbers within the tolerance, the rest exactly); else what differs."""
    if expected == actual:
        return None
    exp_pieces, exp_numbers = split_numbers(expected)
    act_pieces, act_numbers = split_numbers(actual)
    exp_at = act_at = 0  # where the current piece starts in each text
    for i, (exp_piece, act_piece) in enumerate(zip(exp_pieces, act_pieces)):
        if exp_piece != act_piece:
            common = next((j for j, (a, b) in enumerate(zip(exp_piece, act_piece)) if a != b), None)
            if common is None:
                common = min(len(exp_piece), len(act_piece))
            return (
                f"the text differs (not a number): expected …{_context(expected, exp_at + common)}…, "
                f"got …{_context(actual, act_at + common)}…"
            )
        exp_at, act_at = exp_at + len(exp_piece), act_at + len(act_piece)
        if i < min(len(exp_numbers), len(act_numbers)):
            exp_n, act_n = exp_numbers[i], act_numbers[i]
            if exp_n != act_n and not tolerance.allows(exp_n, act_n):
                kind = "exact (the cell declares no tolerance)" if tolerance == EXACT else str(tolerance)
                return (
                    f"number {i + 1} of the output differs: expected {exp_n}, got {act_n}; tolerance: {kind}; "
                    f"near …{_context(expected, exp_at)}…"
                )
            exp_at, act_at = exp_at + len(exp_n), act_at + len(act_n)
    if len(exp_numbers) != len(act_numbers):
        return f"the output has {len(act_numbers)} numbers, the committed one {len(exp_numbers)}"
    return None


def _flatten(cell_item, outputs, skip_compare) -> dict[str, list]:
    """nbval's layout: output key (or MIME type inside data) -> the sanitised values, in order."""
    flat = defaultdict(list)
    for output in nbval.plugin.transform_streams_for_comparison(outputs):
        for key, value in output.items():
            if key in skip_compare:
                continue
            if key == "data":
                for mime, data in value.items():
                    if mime not in skip_compare:
                        flat[mime].append(cell_item.sanitize(data))
            else:
                flat[key].append(cell_item.sanitize(value))
    return flat


def compare_outputs(self, test, ref, skip_compare=None):
    """nbval's comparison, with the cell's declared tolerance for numbers and a message naming what differs."""
    skip_compare = skip_compare or self.parent.skip_compare
    tolerance = tolerance_of(self.cell.metadata)
    testing, reference = _flatten(self, test, skip_compare), _flatten(self, ref, skip_compare)
    self.comparison_traceback = []
    label = f"cell {self.cell_num} of {self.parent.name}"
    if set(testing) != set(reference):
        missing, unexpected = set(reference) - set(testing), set(testing) - set(reference)
        self.comparison_traceback.append(f"{label}: missing outputs {sorted(missing)}, unexpected {sorted(unexpected)}")
        for key in sorted(unexpected):  # what appeared, so that a rare message (a warning, a log line) can be traced
            self.comparison_traceback.append(f"{key}: {' '.join(map(str, testing[key]))[:2000]!r}")
        return False
    for key, ref_values in reference.items():
        test_values = testing[key]
        if len(ref_values) != len(test_values):
            self.comparison_traceback.append(
                f"{label}: {len(test_values)} outputs of type {key!r}, the committed notebook has {len(ref_values)}"
            )
            return False
        for ref_out, test_out in zip(ref_values, test_values):
            if isinstance(ref_out, str) and isinstance(test_out, str):
                difference = explain_difference(ref_out, test_out, tolerance)
            else:
                difference = None if ref_out == test_out else "the values differ"
            if difference is not None:
                self.comparison_traceback.append(f"{label}, output {key!r}: {difference}")
                self.format_output_compare(key, ref_out, test_out)
                return False
    return True


nbval.plugin.IPyNbCell.compare_outputs = compare_outputs
