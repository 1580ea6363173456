"""Chapter 19 exercises: rotary positions for a left-padded batch, a fused SwiGLU and grouped-query attention.

Each checker runs the reader's function and the package's (`modern.apply_rope` with `modern.RotaryEmbedding`'s
frequencies, `modern.SwiGLU`'s formula, attention over `modern.repeat_kv`'s heads) on random inputs of several
sizes. The exercises ask for what the chapter does not print: per-row positions (B, T), a gate and an up
projection stored in one matrix, and groups of query heads that read their shared key/value head without the
heads being repeated. The package functions that would answer them are refused while the reader's code runs.
Known wrong variants are recognised and named: interleaved pairs instead of half-split ones, values rotated,
every row given positions 0, 1, ..., the halves of the fused weight swapped, groups tiled instead of
consecutive, a mask one position off, and more.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

import transformer_course

from ... import modern
from ...attention import attention_scale, scaled_dot_product_attention
from ...masks import causal_mask
from ...modern import RotaryEmbedding, apply_rope
from ...modern import repeat_kv as package_repeat_kv
from ._core import Case, Mistake, Result, calls_refused, checker, compare, refused, solution


def _observe_without(functions: tuple[tuple[object, str, str], ...]) -> Callable:
    def observe(fn, case: Case):
        with refused(functions):
            return fn(*case.args, **case.kwargs)

    return observe


# ---------------------------------------------------------------- exercise 19.1: RoPE for a left-padded batch


@solution
def rope_qkv(q, k, v, positions, theta):
    """q, k, v (B, H, T, d); positions (B, T), one row per sequence -> (q, k) rotated, pairs (i, i + d/2); v as is."""
    d = q.shape[-1]
    inv_freq = 1.0 / theta ** (torch.arange(0, d, 2, dtype=torch.float) / d)  # (d/2,): pair i turns at θ^(-2i/d)
    angles = positions[..., None].float() * inv_freq  # (B, T, 1) * (d/2,) -> (B, T, d/2): each row its own
    angles = torch.cat((angles, angles), dim=-1)[:, None]  # (B, 1, T, d): both halves, and one copy for all heads
    cos, sin = angles.cos(), angles.sin()

    def rotate(x):
        x1, x2 = x.chunk(2, dim=-1)  # the two halves: pair i is (x1[..., i], x2[..., i])
        return x * cos + torch.cat((-x2, x1), dim=-1) * sin

    return rotate(q), rotate(k), v  # values carry content, not position: never rotated


def _package_rope_qkv(q, k, v, positions, theta):
    inv_freq = RotaryEmbedding(q.shape[-1], theta).inv_freq  # (d/2,)
    angles = positions[..., None].float() * inv_freq  # (B, T, 1) * (d/2,) -> (B, T, d/2)
    angles = torch.cat((angles, angles), dim=-1)[:, None]  # (B, 1, T, d)
    cos, sin = angles.cos(), angles.sin()
    return apply_rope(q, cos, sin), apply_rope(k, cos, sin), v


_ROPE_REFUSED = (
    (transformer_course, "apply_rope", "tc.apply_rope"),
    (modern, "apply_rope", "modern.apply_rope"),
)


def _cos_sin(q, positions, theta, exponent=2, sign=-1, rows="own", shift=0, interleave=False, heads=True):
    """(B, 1, T, d) cos and sin with one thing changed: the exponent, its sign, the positions, the layout."""
    d, length = q.shape[-1], q.shape[2]
    inv_freq = theta ** (sign * exponent * torch.arange(0, d // 2, dtype=torch.float) / d)  # (d/2,)
    if rows == "arange":  # every row at 0, 1, ..., T - 1
        positions = torch.arange(length).expand_as(positions)
    elif rows == "first":  # every row at the first row's positions
        positions = positions[:1].expand_as(positions)
    angles = (positions + shift)[..., None].float() * inv_freq  # (B, T, d/2)
    angles = angles.repeat_interleave(2, dim=-1) if interleave else torch.cat((angles, angles), dim=-1)
    angles = angles[:, None] if heads else angles  # (B, 1, T, d), or (B, T, d) broadcast against (B, H, T, d)
    return angles.cos(), angles.sin()


def _rope_variant(q, k, v, positions, theta, pairs="half", which="qk", swap=False, turn=1, half=True, **angles):
    angles.setdefault("interleave", pairs == "interleaved")  # the interleaved layout writes each angle twice in a row
    cos, sin = _cos_sin(q, positions, theta, **angles)
    if swap:
        cos, sin = sin, cos

    def rotate(x):
        if pairs == "interleaved":  # the paper's layout: pair i is (x_2i, x_2i+1)
            even, odd = x[..., 0::2], x[..., 1::2]
            turned = torch.stack((-odd, even), dim=-1).flatten(-2)  # (x0, x1, ...) -> (-x1, x0, ...)
        else:
            x1, x2 = x.chunk(2, dim=-1)
            turned = torch.cat((-x2, x1), dim=-1) if half else x
        return x * cos + turn * turned * sin

    return tuple(rotate(t) if name in which else t for name, t in zip("qkv", (q, k, v)))


_ROPE_MISTAKES = (
    Mistake(
        "package_called",
        calls_refused,
        "your function calls the package's tc.apply_rope: this exercise asks you to write the rotation from "
        "tensor operations, x · cos + (the pair's other feature, turned) · sin.",
    ),
    Mistake(
        "interleaved_pairs",
        lambda q, k, v, p, t: _rope_variant(q, k, v, p, t, pairs="interleaved"),
        "you rotated neighbouring features (x_0, x_1), (x_2, x_3), ... as the RoPE paper and Meta's original "
        "Llama code write it; Hugging Face's Llama code (and the package's) pairs feature i with feature i + d/2: "
        "split the vector into two halves.",
    ),
    Mistake(
        "values_rotated",
        lambda q, k, v, p, t: _rope_variant(q, k, v, p, t, which="qkv"),
        "the values were rotated too: only queries and keys carry positions (their dot product is the score); "
        "the values are what is averaged and must stay as they are.",
    ),
    Mistake(
        "keys_not_rotated",
        lambda q, k, v, p, t: _rope_variant(q, k, v, p, t, which="q"),
        "the keys are not rotated: the cache would hold unrotated keys, and q_m · k_n would depend on m, not on "
        "m - n. Rotate the keys once, at their own positions, before they are cached.",
    ),
    Mistake(
        "queries_not_rotated",
        lambda q, k, v, p, t: _rope_variant(q, k, v, p, t, which="k"),
        "the queries are not rotated: rotate both q and k, so that the score depends on their offset m - n.",
    ),
    Mistake(
        "positions_ignored",
        lambda q, k, v, p, t: _rope_variant(q, k, v, p, t, rows="arange"),
        "every row was rotated at positions 0, 1, ..., T - 1: use the positions given, row by row (a left-padded "
        "row starts later, and a step after a cached prefix is at the cache's length).",
    ),
    Mistake(
        "first_row_positions",
        lambda q, k, v, p, t: _rope_variant(q, k, v, p, t, rows="first"),
        "every row got the first row's positions: positions is (B, T), one row per sequence; keep its batch "
        "axis, positions[..., None] · inv_freq -> (B, T, d/2).",
    ),
    Mistake(
        "head_axis_missing",
        lambda q, k, v, p, t: _rope_variant(q, k, v, p, t, heads=False),
        "the angles (B, T, d) were broadcast against q (B, H, T, d) without a head axis, so the batch axis met "
        "the heads: give them shape (B, 1, T, d), angles[:, None], so that every head of a row shares them.",
    ),
    Mistake(
        "off_by_one",
        lambda q, k, v, p, t: _rope_variant(q, k, v, p, t, shift=1),
        "every position is one too far: the token at position 0 is not turned at all (its rotation is the "
        "identity); use the positions as given.",
    ),
    Mistake(
        "exponent_without_2",
        lambda q, k, v, p, t: _rope_variant(q, k, v, p, t, exponent=1),
        "pair i turns at θ^(-i/d): the exponent is 2i/d (arange(0, d, 2) / d), so that the last pair turns "
        "almost θ times slower than the first.",
    ),
    Mistake(
        "frequency_not_inverted",
        lambda q, k, v, p, t: _rope_variant(q, k, v, p, t, sign=1),
        "the frequencies are θ^(+2i/d), growing with i: they are 1 / θ^(2i/d), from 1 down to nearly 1/θ.",
    ),
    Mistake(
        "theta_hardcoded",
        lambda q, k, v, p, t: _package_rope_qkv(q, k, v, p, 10000.0),
        "right when theta is 10000, wrong otherwise: use the theta argument (Llama 3 uses 500000).",
    ),
    Mistake(
        "wrong_direction",
        lambda q, k, v, p, t: _rope_variant(q, k, v, p, t, turn=-1),
        "the rotation turns the wrong way: the turned pair is (-x2, x1), and x·cos + (-x2, x1)·sin turns "
        "(x1, x2) by +angle. Your sign is flipped.",
    ),
    Mistake(
        "cos_sin_swapped",
        lambda q, k, v, p, t: _rope_variant(q, k, v, p, t, swap=True),
        "cos and sin are swapped: x·cos(angle) + (-x2, x1)·sin(angle) is the rotation; at position 0 it must "
        "leave x unchanged.",
    ),
    Mistake(
        "no_rotate_half",
        lambda q, k, v, p, t: _rope_variant(q, k, v, p, t, half=False),
        "x·cos + x·sin only scales each feature: the second term needs the pair's other feature, (-x2, x1).",
    ),
    Mistake(
        "angles_interleaved",
        lambda q, k, v, p, t: _rope_variant(q, k, v, p, t, interleave=True),
        "half-split pairs with the angles laid out for interleaved ones (repeat_interleave): features i and "
        "i + d/2 must share an angle, so concatenate the angles with themselves, torch.cat((a, a), dim=-1).",
    ),
)


@checker
def check_rope_qkv(fn) -> Result:
    """Check `fn(q, k, v, positions, theta)` against modern.apply_rope with per-row positions (B, T)."""
    g = torch.Generator().manual_seed(19)

    def qkv(batch, heads, length, d):
        return tuple(torch.randn(batch, heads, length, d, generator=g) for _ in range(3))

    # Left padding: a row's pads sit at position 0 (their keys are masked anyway), its tokens at 0, 1, ...
    padded = torch.tensor([[0, 0, 0, 1, 2], [0, 1, 2, 3, 4], [0, 0, 1, 2, 3]])
    steps, chunks = torch.tensor([[7], [12]]), torch.tensor([[3, 4, 5, 6], [0, 1, 2, 3]])
    cases = [
        Case("a left-padded batch of 3 rows, 2 heads, d=8, theta=10000", (*qkv(3, 2, 5, 8), padded, 10000.0)),
        Case("one new position per row after 7 and 12 cached ones, d=4, theta=10", (*qkv(2, 3, 1, 4), steps, 10.0)),
        Case("2 rows of 4 positions, from 3 and from 0, d=6, theta=100", (*qkv(2, 2, 4, 6), chunks, 100.0)),
        Case("one row at positions 0..5, d=16, theta=500000", (*qkv(1, 2, 6, 16), torch.arange(6)[None], 500000.0)),
    ]
    return compare(
        "rope_qkv",
        fn,
        _package_rope_qkv,
        cases,
        _ROPE_MISTAKES,
        observe=_observe_without(_ROPE_REFUSED),
        passed=f"passed all {len(cases)} cases (left-padded rows, steps after cached prefixes of different "
        "lengths, theta 10 to 500000): the same queries and keys as modern.apply_rope, the values untouched",
    )


# ---------------------------------------------------------------- exercise 19.2: SwiGLU from a fused weight


@solution
def swiglu(x, w_gate_up, w_down):
    """x (B, T, D); w_gate_up (2·d_ff, D), the gate's rows first, then the up projection's; w_down (D, d_ff)."""
    gate, up = (x @ w_gate_up.T).chunk(2, dim=-1)  # (B, T, 2·d_ff) -> 2 × (B, T, d_ff): the gate first
    return (F.silu(gate) * up) @ w_down.T  # silu on the gate branch only


def _package_swiglu(x, w_gate_up, w_down):
    # modern.SwiGLU's formula, w_down(silu(w_gate(x)) * w_up(x)), with w_gate and w_up the two row blocks.
    w_gate, w_up = w_gate_up.chunk(2, dim=0)  # (2·d_ff, D) -> 2 × (d_ff, D)
    return F.linear(F.silu(F.linear(x, w_gate)) * F.linear(x, w_up), w_down)


def _identity(h):
    return h


def _glu(x, w, w_down, gate=F.silu, up=_identity, combine=torch.mul, after=_identity, split="halves"):
    if split == "interleaved":  # rows 0, 2, 4, ... for the gate, 1, 3, 5, ... for the up projection
        w_gate, w_up = w[0::2], w[1::2]
    else:
        w_gate, w_up = w.chunk(2, dim=0)
        if split == "swapped":
            w_gate, w_up = w_up, w_gate
    return after(combine(gate(x @ w_gate.T), up(x @ w_up.T)) @ w_down.T)


_SWIGLU_MISTAKES = (
    Mistake(
        "halves_swapped",
        lambda x, w, d: _glu(x, w, d, split="swapped"),
        "the halves are swapped: silu went on the second block of rows. The first d_ff rows of w_gate_up are "
        "the gate, silu(x W_gate); the last d_ff are the up projection, x W_up, which the gate multiplies as it "
        "is (a checkpoint's rows are in a fixed order).",
    ),
    Mistake(
        "interleaved_rows",
        lambda x, w, d: _glu(x, w, d, split="interleaved"),
        "you took every other row (w[0::2], w[1::2]): the gate and the up projection are two blocks of d_ff "
        "consecutive rows; split with chunk(2) on the output features.",
    ),
    Mistake(
        "silu_on_both",
        lambda x, w, d: _glu(x, w, d, up=F.silu),
        "silu is applied to both halves: only the gate, silu(x W_gate), goes through it; x W_up stays linear.",
    ),
    Mistake(
        "no_activation",
        lambda x, w, d: _glu(x, w, d, gate=_identity),
        "there is no silu: (x W_gate) ⊙ (x W_up) is a bilinear layer; the gate is silu(x W_gate).",
    ),
    Mistake(
        "relu_gate",
        lambda x, w, d: _glu(x, w, d, gate=F.relu),
        "that is ReGLU (a ReLU gate): SwiGLU's gate is silu(z) = z · sigmoid(z), F.silu.",
    ),
    Mistake(
        "gelu_gate",
        lambda x, w, d: _glu(x, w, d, gate=F.gelu),
        "that is GEGLU (a GELU gate): SwiGLU's gate is silu(z) = z · sigmoid(z), F.silu.",
    ),
    Mistake(
        "sigmoid_gate",
        lambda x, w, d: _glu(x, w, d, gate=torch.sigmoid),
        "a sigmoid gate is the original GLU: Swish (silu) multiplies by z as well, silu(z) = z · sigmoid(z).",
    ),
    Mistake(
        "silu_after_product",
        lambda x, w, d: _glu(x, w, d, gate=_identity, combine=lambda a, b: F.silu(a * b)),
        "silu was applied to the product: it gates one branch, silu(x W_gate) ⊙ (x W_up), before the product.",
    ),
    Mistake(
        "sum_not_product",
        lambda x, w, d: _glu(x, w, d, combine=torch.add),
        "the branches were added: the gate multiplies, feature by feature, silu(x W_gate) ⊙ (x W_up).",
    ),
    Mistake(
        "silu_on_output",
        lambda x, w, d: _glu(x, w, d, gate=_identity, after=F.silu),
        "silu was applied after W_down: it belongs on the gate branch, inside, silu(x W_gate).",
    ),
)


@checker
def check_swiglu(fn) -> Result:
    """Check `fn(x, w_gate_up, w_down)` against modern.SwiGLU's formula on several sizes."""
    g = torch.Generator().manual_seed(192)

    def case(batch, length, d_model, d_ff):
        x = torch.randn(batch, length, d_model, generator=g)
        return x, torch.randn(2 * d_ff, d_model, generator=g), torch.randn(d_model, d_ff, generator=g) / d_ff**0.5

    cases = [
        Case("x (2, 3, 6), d_ff=16", case(2, 3, 6, 16)),
        Case("x (1, 5, 8), d_ff=4 (w_gate_up square)", case(1, 5, 8, 4)),
        Case("x (3, 1, 4), d_ff=12", case(3, 1, 4, 12)),
    ]
    return compare(
        "swiglu",
        fn,
        _package_swiglu,
        cases,
        _SWIGLU_MISTAKES,
        passed=f"passed all {len(cases)} cases (square and rectangular weights): the same output as modern.SwiGLU "
        "with w_gate and w_up the two row blocks of w_gate_up",
    )


# ---------------------------------------------------------------- exercise 19.3: grouped-query attention


@solution
def grouped_attention(q, k, v):
    """Causal attention, q (B, H, T, d), k and v (B, H_kv, T, d) -> (B, H, T, d); query head j reads KV head
    j // (H / H_kv), and the key/value heads are never copied n_rep times: the n_rep query heads of a group are
    folded into one sequence n_rep · T long, which meets its key/value head in one matrix product. A contiguous
    k or v is not copied at all; one whose batch axes cannot be merged, such as a .transpose(1, 2) view of a
    (B, T, H_kv, d) tensor with B, T and H_kv all above 1, is copied once by torch.matmul."""
    batch, n_heads, length, d = q.shape
    n_kv_heads = k.shape[1]
    n_rep = n_heads // n_kv_heads
    # A group's n_rep heads, end to end: one query sequence n_rep · T long per key/value head.
    q = q.reshape(batch, n_kv_heads, n_rep * length, d)  # (B, H, T, d) -> (B, H_kv, n_rep · T, d)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d)  # (B, H_kv, n_rep · T, T): k's own axes, nothing broadcast
    future = torch.ones(length, length, dtype=torch.bool, device=q.device).triu(1)  # True: a later position
    future = future.repeat(n_rep, 1)  # (n_rep · T, T): row r · T + t holds the query at position t
    weights = scores.masked_fill(future, float("-inf")).softmax(dim=-1)
    return (weights @ v).reshape(batch, n_heads, length, d)  # (B, H_kv, n_rep · T, d) -> (B, H, T, d)


def _attend(q, k, v, scale=None, diagonal=1, fill=float("-inf"), softmax_dim=-1, after_softmax=False, causal=True):
    """Causal attention over heads already paired (B, H, T, d), with one thing changed."""
    length, d = q.shape[2], q.shape[-1]
    # Unchanged, the package's scale (1/√d), so that a variant differs from the reference by its mistake only.
    scores = q @ k.transpose(-2, -1) * (attention_scale(d) if scale is None else 1.0 / scale)
    future = torch.ones(length, length, dtype=torch.bool).triu(diagonal) & causal  # True: hidden
    if after_softmax:  # the future weights zeroed after the softmax, which is not taken again
        return scores.softmax(dim=-1).masked_fill(future, 0.0) @ v
    return scores.masked_fill(future, fill).softmax(dim=softmax_dim) @ v


def _repeated_attend(q, k, v, **changes):
    """Attention over modern.repeat_kv's heads with one thing changed: the known mistakes."""
    n_rep = q.shape[1] // k.shape[1]
    return _attend(q, package_repeat_kv(k, n_rep), package_repeat_kv(v, n_rep), **changes)


def _package_grouped_attention(q, k, v):
    # The package's causal attention over the repeated heads: its scale and masking, not a copy of them.
    n_rep = q.shape[1] // k.shape[1]
    k, v = package_repeat_kv(k, n_rep), package_repeat_kv(v, n_rep)  # (B, H_kv, T, d) -> (B, H, T, d)
    return scaled_dot_product_attention(q, k, v, causal_mask(q.shape[2]))[0]


def _grouped_variant(q, k, v, keys="consecutive", values="consecutive", output="consecutive", **attend):
    n_rep = q.shape[1] // k.shape[1]

    def heads(x, order):  # (B, H_kv, T, d) -> (B, H, T, d): groups consecutive (0, 0, 1, 1) or tiled (0, 1, 0, 1)
        return x.repeat(1, n_rep, 1, 1) if order == "tiled" else x.repeat_interleave(n_rep, dim=1)

    out = _attend(q, heads(k, keys), heads(v, values), **attend)
    if output == "tiled":  # the right groups, the output's heads put back in the order (rep, group)
        batch, n_heads, length, d = out.shape
        out = out.view(batch, k.shape[1], n_rep, length, d).transpose(1, 2).reshape(batch, n_heads, length, d)
    return out


_GROUPED_REFUSED = (
    (transformer_course, "repeat_kv", "tc.repeat_kv"),
    (modern, "repeat_kv", "modern.repeat_kv"),
    (F, "scaled_dot_product_attention", "F.scaled_dot_product_attention"),
)

_GROUPED_MISTAKES = (
    Mistake(
        "package_called",
        calls_refused,
        "your function calls tc.repeat_kv or F.scaled_dot_product_attention (whose enable_gqa option does the "
        "grouping): this exercise asks you to write the grouping and the attention from tensor operations.",
    ),
    Mistake(
        "tiled_groups",
        lambda q, k, v: _grouped_variant(q, k, v, keys="tiled", values="tiled"),
        "the groups are tiled: query head j read key/value head j % H_kv (0, 1, 0, 1, ...); Llama's groups are "
        "consecutive (0, 0, 1, 1, ...), query head j reads head j // n_rep. Reshape q to (B, H_kv, n_rep · T, "
        "d): the group axis comes before the heads within it.",
    ),
    Mistake(
        "output_heads_tiled",
        lambda q, k, v: _grouped_variant(q, k, v, output="tiled"),
        "each query head reads the right key/value head, but the output's heads come back in another order: "
        "(B, H_kv, n_rep · T, d) reshapes to (B, H, T, d) directly, without a transpose, to undo the reshape of q.",
    ),
    Mistake(
        "values_tiled",
        lambda q, k, v: _grouped_variant(q, k, v, values="tiled"),
        "the keys are grouped right but the values tiled (0, 1, 0, 1, ...): a query head reads the values of the "
        "same key/value head as its keys, j // n_rep.",
    ),
    Mistake(
        "not_causal",
        lambda q, k, v: _repeated_attend(q, k, v, causal=False),
        "no causal mask: position t must not see later positions; fill the scores above the diagonal with -inf "
        "before the softmax.",
    ),
    Mistake(
        "diagonal_masked",
        lambda q, k, v: _repeated_attend(q, k, v, diagonal=0),
        "the mask hides the diagonal too (triu(0)): each position may see itself, so the first row is all -inf "
        "and its softmax is NaN. Mask strictly above the diagonal, triu(1).",
    ),
    Mistake(
        "future_by_one",
        lambda q, k, v: _repeated_attend(q, k, v, diagonal=2),
        "each position sees the next one too (triu(2)): mask every later position, triu(1).",
    ),
    Mistake(
        "mask_with_zero",
        lambda q, k, v: _repeated_attend(q, k, v, fill=0.0),
        "the future scores were set to 0, which still gets weight exp(0) in the softmax: fill them with -inf.",
    ),
    Mistake(
        "mask_after_softmax",
        lambda q, k, v: _repeated_attend(q, k, v, after_softmax=True),
        "the future weights were zeroed after the softmax, so each row no longer sums to 1: mask the scores "
        "(-inf) before the softmax.",
    ),
    Mistake(
        "softmax_over_queries",
        lambda q, k, v: _repeated_attend(q, k, v, softmax_dim=-2),
        "the softmax ran over the queries (dim -2): each query's weights over the keys must sum to 1, dim -1.",
    ),
    Mistake(
        "no_scale",
        lambda q, k, v: _repeated_attend(q, k, v, scale=1.0),
        "the scores are not scaled: divide q kᵀ by √d (d = q.shape[-1]).",
    ),
    Mistake(
        "scale_by_d",
        lambda q, k, v: _repeated_attend(q, k, v, scale=float(q.shape[-1])),
        "the scores were divided by d: the scale is 1/√d.",
    ),
    Mistake(
        "scale_by_model_width",
        lambda q, k, v: _repeated_attend(q, k, v, scale=math.sqrt(q.shape[1] * q.shape[-1])),
        "the scores were divided by √(H · d), the model's width: each head scales by its own width, 1/√d.",
    ),
)


@checker
def check_grouped_attention(fn) -> Result:
    """Check `fn(q, k, v)` against causal attention over modern.repeat_kv's heads, MQA to MHA."""
    g = torch.Generator().manual_seed(193)

    def qkv(batch, n_heads, n_kv_heads, length, d):
        q = torch.randn(batch, n_heads, length, d, generator=g)
        return q, *(torch.randn(batch, n_kv_heads, length, d, generator=g) for _ in range(2))

    cases = [
        Case("4 query heads in 2 groups, batch 2, T=5, d=8", qkv(2, 4, 2, 5, 8)),
        Case("6 query heads in 3 groups, T=4, d=4", qkv(1, 6, 3, 4, 4)),
        Case("6 query heads in 2 groups, T=3, d=6", qkv(1, 6, 2, 3, 6)),
        Case("4 query heads sharing 1 key/value head (multi-query)", qkv(2, 4, 1, 4, 4)),
        Case("3 query heads, 3 key/value heads (multi-head: groups of 1)", qkv(1, 3, 3, 4, 2)),
    ]
    return compare(
        "grouped_attention",
        fn,
        _package_grouped_attention,
        cases,
        _GROUPED_MISTAKES,
        observe=_observe_without(_GROUPED_REFUSED),
        passed=f"passed all {len(cases)} cases (groups of 1 to 4, multi-query): the same output as causal "
        "attention over modern.repeat_kv's heads",
    )
