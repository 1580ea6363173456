"""tests/pairwise.py: the covering arrays that trim the from_torch grids keep every pair of option values."""

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pairwise import missing_pairs, pairwise

MODES = [(0.0, "eval"), (0.3, "eval"), (0.0, "train"), (0.3, "train")]
LAYER_OPTIONS = [
    [True, False],
    [False, True],
    ["relu", "gelu", "F.relu", "F.gelu", "GELU(tanh)", "F.silu"],
    [1e-5, 1e-3],
    [True, False],
    MODES,
]


def every_pair_is_in_a_row(rows, options):
    """Brute force, independent of `missing_pairs`: each value pair of each two options occurs in some row."""
    for i, j in itertools.combinations(range(len(options)), 2):
        seen = {(row[i], row[j]) for row in rows}
        if not all(pair in seen for pair in itertools.product(options[i], options[j])):
            return False
    return all(set(values) <= {row[i] for row in rows} for i, values in enumerate(options))


@given(st.lists(st.integers(1, 5), min_size=1, max_size=6), st.integers(0, 3))
def test_every_pair_of_values_is_covered(sizes, n_required):
    options = [[f"o{i}v{k}" for k in range(size)] for i, size in enumerate(sizes)]
    required = [
        tuple(values[(r * (i + 1)) % len(values)] for i, values in enumerate(options)) for r in range(n_required)
    ]
    rows = pairwise(*options, required=required)
    assert every_pair_is_in_a_row(rows, options) and missing_pairs(rows, options) == []
    assert rows[:n_required] == required  # the required rows first, in order
    assert all(len(row) == len(options) and all(v in options[i] for i, v in enumerate(row)) for row in rows)
    assert len(rows) <= n_required + len(list(itertools.product(*options)))


def test_the_layer_grid_is_far_smaller_than_the_product_and_covers_every_pair():
    rows = pairwise(*LAYER_OPTIONS)
    assert every_pair_is_in_a_row(rows, LAYER_OPTIONS)
    assert 24 <= len(rows) <= 30  # 6 activations x 4 modes is the least any covering array can have; 384 in all
    assert len(set(rows)) == len(rows)


def test_the_rows_are_deterministic():
    assert pairwise(*LAYER_OPTIONS) == pairwise(*LAYER_OPTIONS)


def test_a_dropped_row_leaves_a_pair_uncovered():
    """The checker is not vacuous: without one row of the full product of two options, a pair is missing."""
    options = [[True, False], ["a", "b", "c"]]
    rows = pairwise(*options)
    assert sorted(rows) == sorted(itertools.product(*options))  # two options: pairwise is the full product
    assert missing_pairs(rows[1:], options) == [(0, rows[0][0], 1, rows[0][1])]
    assert not every_pair_is_in_a_row(rows[1:], options)


def test_values_compared_by_equality_and_tuples_work():
    rows = pairwise([1, 2], MODES, required=[(2, (0.3, "train"))])
    assert rows[0] == (2, (0.3, "train")) and every_pair_is_in_a_row(rows, [[1, 2], MODES])


@pytest.mark.parametrize(
    ("options", "required", "message"),
    [
        ([], [], "at least one option"),
        ([[1, 2], []], [], "at least one value"),
        ([[1, 2], [3]], [(1,)], "has 1 values for 2 options"),
        ([[1, 2], [3]], [(1, 4)], "4 is not a value of option 1"),
    ],
)
def test_bad_arguments_are_refused(options, required, message):
    with pytest.raises(ValueError, match=message):
        pairwise(*options, required=required)
