"""Chapter 8 exercises: the sinusoidal positional-encoding table, and the matrix that shifts it by k positions.

Each exercise has a reference solution (`@solution`, shown in the book), a checker (`@checker`) that
compares the reader's function with the package (`tc.sinusoidal_positional_encoding`), and the known
wrong variants that the checker recognises and names.
"""

from __future__ import annotations

import math

import torch

from ...embedding import sinusoidal_positional_encoding
from ._core import Case, Mistake, Result, checker, compare, solution

# ---------------------------------------------------------------- exercise 8.1: sinusoidal_table


@solution
def sinusoidal_table(max_len, d_model):
    """(max_len, d_model): PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(pos / 10000^(2i/d))."""
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]  # positions 0 .. max_len - 1
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # 2i = 0, 2, 4, ...: one value per (sin, cos) pair
    angle = pos / 10000 ** (two_i / d_model)  # (max_len, d_model / 2)
    table = torch.zeros(max_len, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle)
    return table.float()


def _table(max_len, d_model, first=0, exponent=lambda j, d: 2 * (j // 2) / d, swap=False, sign=-1, halves=False):
    """A sinusoidal table built the slow, explicit way, with one knob per known mistake."""
    pos = torch.arange(first, first + max_len, dtype=torch.float64)[:, None]
    j = torch.arange(d_model, dtype=torch.float64)
    angle = pos * torch.tensor(10000.0, dtype=torch.float64) ** (sign * exponent(j, d_model))
    table = torch.empty(max_len, d_model, dtype=torch.float64)
    if halves:  # sines in the first half of the columns, cosines in the second
        half = d_model // 2
        pair_angle = angle[:, 0::2]
        table[:, :half], table[:, half:] = torch.sin(pair_angle), torch.cos(pair_angle)
        return table.float()
    even, odd = (torch.cos, torch.sin) if swap else (torch.sin, torch.cos)
    table[:, 0::2], table[:, 1::2] = even(angle[:, 0::2]), odd(angle[:, 1::2])
    return table.float()


_TABLE_MISTAKES = (
    Mistake(
        "sin_cos_swapped",
        lambda n, d: _table(n, d, swap=True),
        "sine and cosine are swapped: the even columns (2i) hold the sines, the odd columns (2i + 1) the "
        "cosines. Row 0 must read 0, 1, 0, 1, ...",
    ),
    Mistake(
        "exponent_not_doubled",
        lambda n, d: _table(n, d, exponent=lambda j, dm: (j // 2) / dm),
        "the exponent uses i, the index of the (sin, cos) pair, where the formula has 2i: the angle is "
        "pos / 10000^(2i / d_model), so the last pair's wavelength is close to 10000 · 2π, not 100 · 2π.",
    ),
    Mistake(
        "exponent_from_column",
        lambda n, d: _table(n, d, exponent=lambda j, dm: j / dm),
        "the exponent uses the column index j for both columns of a pair, so each cosine has a different "
        "frequency from its sine: columns 2i and 2i + 1 share the exponent 2i / d_model (use 2 * (j // 2)).",
    ),
    Mistake(
        "positions_from_one",
        lambda n, d: _table(n, d, first=1),
        "the positions are off by one: they run from 0 to max_len - 1 (row 0 is sin 0, cos 0 = 0, 1, ...), "
        "not from 1 to max_len as in post 1's code.",
    ),
    Mistake(
        "halves_layout",
        lambda n, d: _table(n, d, halves=True),
        "the sines fill the first half of the columns and the cosines the second: the paper interleaves them, "
        "sines in the even columns (0::2) and cosines in the odd ones (1::2).",
    ),
)


# With the sign flipped the angles reach 10^5 radians and more, where float32 rounding alone moves a sine
# anywhere in [-1, 1]: this mistake is recognised on small tables only, with a tolerance that allows it.
_SIGN_MISTAKE = Mistake(
    "exponent_sign",
    lambda n, d: _table(n, d, sign=1),
    "the angle is pos * 10000^(2i / d_model): the frequency must shrink along the columns, so divide, "
    "pos / 10000^(2i / d_model) (post 0's code drops the minus sign of exp(-2i · ln 10000 / d)).",
)


@checker
def check_sinusoidal_table(fn) -> Result:
    """Check `fn(max_len, d_model)` against tc.sinusoidal_positional_encoding (d_model even)."""
    cases = [
        Case("max_len=4, d_model=4 (post 0's 'I like to code')", (4, 4)),
        Case("max_len=10, d_model=8", (10, 8)),
        Case("max_len=50, d_model=16", (50, 16)),
        Case("max_len=1, d_model=6", (1, 6)),
        Case("max_len=100, d_model=64", (100, 64)),
    ]
    result = compare("sinusoidal_table", fn, sinusoidal_positional_encoding, cases, _TABLE_MISTAKES)
    if result.passed or result.mistake is not None:
        return result
    small = [Case("max_len=4, d_model=4", (4, 4)), Case("max_len=3, d_model=8", (3, 8))]
    if compare("sinusoidal_table", fn, _SIGN_MISTAKE.variant, small, atol=1e-3, rtol=0.0).passed:
        return Result("sinusoidal_table", False, _SIGN_MISTAKE.message, _SIGN_MISTAKE.key)
    return result


# ---------------------------------------------------------------- exercise 8.2: shift_matrix


@solution
def shift_matrix(k, d_model):
    """The (d_model, d_model) matrix M_k with PE(pos + k) = M_k @ PE(pos) for every pos (float64).

    Each (sin, cos) pair turns by the angle k · ω_i: a 2 x 2 rotation block on the diagonal.
    """
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    for i in range(d_model // 2):
        omega = 1 / 10000 ** (2 * i / d_model)
        c, s = math.cos(k * omega), math.sin(k * omega)
        # sin(a + b) = sin a cos b + cos a sin b;  cos(a + b) = cos a cos b - sin a sin b
        m[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = torch.tensor([[c, s], [-s, c]], dtype=torch.float64)
    return m


def _shift_reference(k, d_model):
    # The angles are read off the package's table: M_k maps PE(0) = (0, 1, 0, 1, ...) to PE(k), so row k
    # holds sin(k ω_i) and cos(k ω_i) for every pair i.
    row = sinusoidal_positional_encoding(k + 1, d_model)[k].double()
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    for i in range(d_model // 2):
        s, c = row[2 * i], row[2 * i + 1]
        m[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = torch.stack([torch.stack([c, s]), torch.stack([-s, c])])
    return m


def _rotation(k, d_model, sign=1.0, scale=lambda k: k, exponent=lambda i, d: 2 * i / d):
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    for i in range(d_model // 2):
        angle = scale(k) / 10000 ** exponent(i, d_model)
        c, s = math.cos(angle), sign * math.sin(angle)
        m[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = torch.tensor([[c, s], [-s, c]], dtype=torch.float64)
    return m


_SHIFT_MISTAKES = (
    Mistake(
        "rotates_backwards",
        lambda k, d: _rotation(k, d, sign=-1.0),
        "your matrix shifts by -k: the signs of the sines are swapped, [[cos, -sin], [sin, cos]] instead of "
        "[[cos, sin], [-sin, cos]] for a (sin, cos) pair. Expand sin(a + b) and cos(a + b) to see which.",
    ),
    Mistake(
        "k_ignored",
        lambda k, d: _rotation(k, d, scale=lambda k: 1),
        "your matrix shifts by one position whatever k is: the angle of pair i is k · ω_i, not ω_i.",
    ),
    Mistake(
        "exponent_not_doubled",
        lambda k, d: _rotation(k, d, exponent=lambda i, dm: i / dm),
        "the frequencies are wrong: ω_i = 1 / 10000^(2i / d_model), with 2i, not i.",
    ),
)


@checker
def check_shift_matrix(fn) -> Result:
    """Check `fn(k, d_model)`: PE(pos + k) = M_k @ PE(pos), compared with the matrix the package's table implies."""
    cases = [
        Case("k=1, d_model=4", (1, 4)),
        Case("k=3, d_model=8", (3, 8)),
        Case("k=10, d_model=16", (10, 16)),
        Case("k=0, d_model=6 (no shift: the identity)", (0, 6)),
    ]
    return compare("shift_matrix", fn, _shift_reference, cases, _SHIFT_MISTAKES, atol=1e-4, rtol=1e-4)
