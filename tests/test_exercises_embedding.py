"""Chapter 8's checkers: the reference solutions pass, and each known mistake gets its own diagnosis.

The wrong answers below are written the way a reader might write them (several after the seeds' own
code), independently of the variants the checkers use to recognise the mistakes.
"""

import math

import numpy as np
import pytest
import torch

import transformer_course as tc
from transformer_course.exercises import check, solutions


@pytest.mark.parametrize("name", ["sinusoidal_table", "shift_matrix"])
def test_reference_solution_passes(name):
    result = getattr(check, name)(getattr(solutions, name))
    assert result.passed and result.mistake is None, result
    assert repr(result).startswith(f"✅ {name}: passed all")


@pytest.mark.parametrize("k", [1, 2, 7, 30])
def test_shift_matrix_moves_the_package_table_by_k(k):
    table = tc.sinusoidal_positional_encoding(200, 32).double()
    moved = table[:-k] @ solutions.shift_matrix(k, 32).T
    assert torch.allclose(moved, table[k:], atol=1e-6)


def test_sinusoidal_table_equals_the_package():
    assert torch.allclose(solutions.sinusoidal_table(64, 20), tc.sinusoidal_positional_encoding(64, 20), atol=1e-6)


# ---- exercise 8.1: tables a reader might build


def table_loop(max_len, d_model, first=0, power=lambda j, d: 2 * (j // 2) / d, sin_even=True):
    """A double loop in the manner of seed 001's get_sin_enc_table, with the knobs a reader gets wrong."""
    table = np.zeros((max_len, d_model))
    for row, pos in enumerate(range(first, first + max_len)):
        for j in range(d_model):
            table[row, j] = pos / np.power(10000, power(j, d_model))
    even, odd = (np.sin, np.cos) if sin_even else (np.cos, np.sin)
    table[:, 0::2] = even(table[:, 0::2])
    table[:, 1::2] = odd(table[:, 1::2])
    return torch.tensor(table, dtype=torch.float32)


def table_cos_first(max_len, d_model):
    return table_loop(max_len, d_model, sin_even=False)


def table_pair_index(max_len, d_model):
    return table_loop(max_len, d_model, power=lambda j, d: (j // 2) / d)


def table_column_index(max_len, d_model):
    return table_loop(max_len, d_model, power=lambda j, d: j / d)


def table_seed_001_positions(max_len, d_model):
    # Seed 001 builds a table of length + 1 and looks up positions 1 .. length.
    return table_loop(max_len + 1, d_model)[1:]


def table_seed_000_sign(max_len, d_model):
    # Seed 000's PositionalEncoding: exp(+2i · ln(10000) / d) multiplies the position.
    position = torch.arange(max_len).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2) * (math.log(10000) / d_model))
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe


def table_concatenated(max_len, d_model):
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]
    freq = 10000 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    return torch.cat([torch.sin(pos * freq), torch.cos(pos * freq)], dim=1).float()


@pytest.mark.parametrize(
    ("reader", "mistake", "words"),
    [
        (table_cos_first, "sin_cos_swapped", "sine and cosine are swapped"),
        (table_pair_index, "exponent_not_doubled", "where the formula has 2i"),
        (table_column_index, "exponent_from_column", "column index j"),
        (table_seed_001_positions, "positions_from_one", "off by one"),
        (table_seed_000_sign, "exponent_sign", "minus sign"),
        (table_concatenated, "halves_layout", "interleaves"),
    ],
)
def test_sinusoidal_table_mistakes_are_named(reader, mistake, words):
    result = check.sinusoidal_table(reader)
    assert not result.passed and result.mistake == mistake and words in result.message, result


def test_the_seed_001_loop_is_right_and_numpy_output_is_explained():
    assert check.sinusoidal_table(table_loop).passed
    as_numpy = check.sinusoidal_table(lambda n, d: table_loop(n, d).numpy())
    assert not as_numpy.passed and "type ndarray" in as_numpy.message


# ---- exercise 8.2


def shift_wrong_signs(k, d_model):
    blocks = []
    for i in range(d_model // 2):
        a = k / 10000 ** (2 * i / d_model)
        blocks.append(torch.tensor([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]], dtype=torch.float64))
    return torch.block_diag(*blocks)


def shift_by_one(k, d_model):
    return solutions.shift_matrix(1, d_model)


def shift_pair_frequency(k, d_model):
    blocks = []
    for i in range(d_model // 2):
        a = k * 10000 ** (-i / d_model)
        blocks.append(torch.tensor([[math.cos(a), math.sin(a)], [-math.sin(a), math.cos(a)]], dtype=torch.float64))
    return torch.block_diag(*blocks)


@pytest.mark.parametrize(
    ("reader", "mistake", "words"),
    [
        (shift_wrong_signs, "rotates_backwards", "shifts by -k"),
        (shift_by_one, "k_ignored", "whatever k is"),
        (shift_pair_frequency, "exponent_not_doubled", "with 2i, not i"),
    ],
)
def test_shift_matrix_mistakes_are_named(reader, mistake, words):
    result = check.shift_matrix(reader)
    assert not result.passed and result.mistake == mistake and words in result.message, result
