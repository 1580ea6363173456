"""Pairwise covering arrays: few test cases that still meet every pair of option values.

A grid over six options of 2-6 values each has hundreds of combinations, but a bug in code like `from_torch`
almost always needs one option's value, or two options' values together, to show. `pairwise(*options)` returns
rows (one value per option) in which every value of every option, and every pair of values of any two options,
occurs at least once: about as many rows as the two largest options' sizes multiplied, not all of their product.

    rows = pairwise([True, False], ["relu", "gelu", "silu"], [(0.0, "eval"), (0.3, "train")],
                    required=[(False, "relu", (0.3, "train"))])

`required` rows come first and in the given order (the combinations the code branches on, or that a mutant in
tests/mutants.py needs); the rest are chosen greedily to cover the pairs still missing. Deterministic: the same
options give the same rows in the same order, so test ids are stable.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence


def _pairs(row: Sequence[int]) -> set[tuple[int, int, int, int]]:
    """The (option, value index, option, value index) pairs that one row of value indices covers."""
    return {(i, row[i], j, row[j]) for i, j in itertools.combinations(range(len(row)), 2)}


def missing_pairs(rows: Iterable[Sequence], options: Sequence[Sequence]) -> list[tuple[int, object, int, object]]:
    """Every pair (option i, value a, option j, value b) with i < j that no row holds; [] when the rows cover all.

    Also reports single values no row holds (as (i, a, i, a)), which matters for an option alone."""
    rows = [tuple(row) for row in rows]
    missing = []
    for i, values in enumerate(options):
        missing += [(i, a, i, a) for a in values if not any(row[i] == a for row in rows)]
    for (i, first), (j, second) in itertools.combinations(enumerate(options), 2):
        for a, b in itertools.product(first, second):
            if not any(row[i] == a and row[j] == b for row in rows):
                missing.append((i, a, j, b))
    return missing


def pairwise(*options: Sequence, required: Iterable[Sequence] = ()) -> list[tuple]:
    """Rows (tuples, one value per option) covering every pair of values of any two options; `required` first."""
    if not options or any(len(values) == 0 for values in options):
        raise ValueError("pairwise needs at least one option, each with at least one value")
    sizes = [len(values) for values in options]

    def index(i: int, value: object) -> int:
        for k, candidate in enumerate(options[i]):
            if candidate is value or candidate == value:
                return k
        raise ValueError(f"required row: {value!r} is not a value of option {i} ({list(options[i])!r})")

    rows: list[tuple[int, ...]] = []
    for row in required:
        if len(row) != len(options):
            raise ValueError(f"required row {tuple(row)!r} has {len(row)} values for {len(options)} options")
        rows.append(tuple(index(i, value) for i, value in enumerate(row)))
    if len(options) == 1:
        covered = {row[0] for row in rows}
        rows += [(k,) for k in range(sizes[0]) if k not in covered]
    else:
        uncovered = {
            (i, a, j, b)
            for i, j in itertools.combinations(range(len(options)), 2)
            for a in range(sizes[i])
            for b in range(sizes[j])
        }
        for row in rows:
            uncovered -= _pairs(row)
        while uncovered:
            uses = [[sum(row[i] == k for row in rows) for k in range(size)] for i, size in enumerate(sizes)]
            rows.append(_best_row(uncovered, sizes, uses))
            uncovered -= _pairs(rows[-1])
    return [tuple(options[i][k] for i, k in enumerate(row)) for row in rows]


def _best_row(uncovered: set[tuple[int, int, int, int]], sizes: list[int], uses: list[list[int]]) -> tuple[int, ...]:
    """A greedy row: for each still-missing pair as a seed, fill the other options one by one (largest first)
    with the value that covers the most missing pairs; keep the row that covers the most. Ties go to the value
    the rows so far use least (so values an option does not care about are spread), then to the lowest index."""
    order = sorted(range(len(sizes)), key=lambda i: (-sizes[i], i))
    best: tuple[int, ...] = ()
    best_gain = -1
    for i, a, j, b in sorted(uncovered):
        row: dict[int, int] = {i: a, j: b}
        for option in order:
            if option in row:
                continue
            gains = [
                sum(_key(option, value, other, row[other]) in uncovered for other in row)
                for value in range(sizes[option])
            ]
            row[option] = max(range(sizes[option]), key=lambda value: (gains[value], -uses[option][value], -value))
        candidate = tuple(row[k] for k in range(len(sizes)))
        gain = len(_pairs(candidate) & uncovered)
        if gain > best_gain:
            best, best_gain = candidate, gain
    return best


def _key(option: int, value: int, other: int, other_value: int) -> tuple[int, int, int, int]:
    """The pair's key with the smaller option first, as `_pairs` writes it."""
    return (option, value, other, other_value) if option < other else (other, other_value, option, value)
