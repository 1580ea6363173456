"""Chapter 8's wrong answers (`WRONG_ANSWERS`) and the tests specific to its checkers.

The wrong answers below are written the way a reader might write them (several after the source posts' own
code), independently of the variants the checkers use to recognise the mistakes.

test_exercise_checkers.py runs every row of the table against its checker (the mistake's key and the
words of its message), with the reference solution and the checks common to every checker.
"""

import math

import numpy as np
import pytest
import torch

import transformer_course as tc
from transformer_course.course.exercises import check, solutions


@pytest.mark.parametrize("k", [1, 2, 7, 30])
def test_shift_matrix_moves_the_package_table_by_k(k):
    table = tc.sinusoidal_positional_encoding(200, 32).double()
    moved = table[:-k] @ solutions.shift_matrix(k, 32).T
    assert torch.allclose(moved, table[k:], atol=1e-6)


def test_sinusoidal_table_equals_the_package():
    assert torch.allclose(solutions.sinusoidal_table(64, 20), tc.sinusoidal_positional_encoding(64, 20), atol=1e-6)


# ---- exercise 8.1: tables a reader might build


def table_loop(max_len, d_model, first=0, power=lambda j, d: 2 * (j // 2) / d, sin_even=True):
    """A double loop in the manner of post 1's get_sin_enc_table, with the knobs a reader gets wrong."""
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
    # Post 1 builds a table of length + 1 and looks up positions 1 .. length.
    return table_loop(max_len + 1, d_model)[1:]


def table_post_0_sign(max_len, d_model):
    # Post 0's PositionalEncoding: exp(+2i · ln(10000) / d) multiplies the position.
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


def table_in_float64(max_len, d_model):
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]
    angle = pos / 10000 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    table = torch.zeros(max_len, d_model, dtype=torch.float64)
    table[:, 0::2], table[:, 1::2] = torch.sin(angle), torch.cos(angle)
    return table  # the .float() at the end forgotten


def table_transposed(max_len, d_model):
    return solutions.sinusoidal_table(max_len, d_model).T


def table_sines_only(max_len, d_model):  # the cosines forgotten: a sine in every column
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]
    return torch.sin(pos / 10000 ** (2 * (torch.arange(d_model) // 2) / d_model)).float()


def table_base_1000(max_len, d_model):
    return table_loop(max_len, d_model, power=lambda j, d: 2 * (j // 2) / d * math.log(1000) / math.log(10000))


def table_without_return(max_len, d_model):
    table = solutions.sinusoidal_table(max_len, d_model)  # noqa: F841


def table_as_embedding(max_len, d_model):
    return torch.nn.Embedding(max_len, d_model).weight.detach()  # learned positions, not the sinusoids


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


def shift_transposed(k, d_model):
    return solutions.shift_matrix(k, d_model).T


def shift_in_float32(k, d_model):
    m = torch.zeros(d_model, d_model)  # the default dtype, float32
    for i in range(d_model // 2):
        a = k / 10000 ** (2 * i / d_model)
        m[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = torch.tensor(
            [[math.cos(a), math.sin(a)], [-math.sin(a), math.cos(a)]]
        )
    return m


def shift_identity(k, d_model):
    return torch.eye(d_model, dtype=torch.float64)


def shift_block_rows_swapped(k, d_model):
    blocks = []
    for i in range(d_model // 2):
        a = k / 10000 ** (2 * i / d_model)
        blocks.append(torch.tensor([[-math.sin(a), math.cos(a)], [math.cos(a), math.sin(a)]], dtype=torch.float64))
    return torch.block_diag(*blocks)


def shift_from_numpy(k, d_model):
    return solutions.shift_matrix(k, d_model).numpy()


def shift_without_return(k, d_model):
    m = solutions.shift_matrix(k, d_model)  # noqa: F841


def shift_blocks_not_assembled(k, d_model):
    blocks = []
    for i in range(d_model // 2):
        a = k / 10000 ** (2 * i / d_model)
        blocks.append(torch.tensor([[math.cos(a), math.sin(a)], [-math.sin(a), math.cos(a)]], dtype=torch.float64))
    return torch.stack(blocks)  # (d_model / 2, 2, 2): the blocks, not the matrix


def shift_squared_offset(k, d_model):
    return solutions.shift_matrix(k * k, d_model)


# Each exercise's wrong answers and the diagnosis each must get: (answer, mistake key or None, words of the message).
WRONG_ANSWERS = {
    "sinusoidal_table": [
        (table_cos_first, "sin_cos_swapped", "sine and cosine are swapped"),
        (table_pair_index, "exponent_not_doubled", "where the formula has 2i"),
        (table_column_index, "exponent_from_column", "column index j"),
        (table_seed_001_positions, "positions_from_one", "off by one"),
        (table_post_0_sign, "exponent_sign", "minus sign"),
        (table_concatenated, "halves_layout", "interleaves"),
        (lambda n, d: table_loop(n, d).numpy(), None, "type ndarray"),
        (table_in_float64, "dtype", "returned dtype torch.float64 on max_len=4, d_model=4"),
        (table_transposed, None, "returned shape (8, 10) on max_len=10, d_model=8, expected (10, 8)"),
        (table_sines_only, None, "wrong values on max_len=4, d_model=4"),
        (table_base_1000, None, "wrong values on max_len=4, d_model=4"),
        (table_without_return, None, "is the `return` missing?"),
        (table_as_embedding, "nondeterministic", "draw no random numbers"),  # learned, not sinusoids
    ],
    "shift_matrix": [
        (shift_wrong_signs, "rotates_backwards", "shifts by -k"),
        (shift_by_one, "k_ignored", "whatever k is"),
        (shift_pair_frequency, "exponent_not_doubled", "with 2i, not i"),
        (shift_transposed, "rotates_backwards", "shifts by -k"),
        (shift_in_float32, "dtype", "returned dtype torch.float32 on k=1, d_model=4, expected torch.float64"),
        (shift_identity, None, "wrong values on k=1, d_model=4"),
        (shift_block_rows_swapped, None, "wrong values on k=1, d_model=4"),
        (shift_from_numpy, None, "returned an object of type ndarray on k=1, d_model=4"),
        (shift_without_return, None, "is the `return` missing?"),
        (shift_blocks_not_assembled, None, "returned shape (2, 2, 2) on k=1, d_model=4, expected (4, 4)"),
        (shift_squared_offset, None, "wrong values on k=3, d_model=8"),
    ],
}


def test_the_seed_001_loop_is_right():
    assert check.sinusoidal_table(table_loop).passed
