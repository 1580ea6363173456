"""Chapter 19 exercises: rotary position embeddings, the SwiGLU feed-forward and repeat-KV for grouped-query attention.

Each checker runs the reader's function and the package's (`modern.apply_rope` with `modern.RotaryEmbedding`,
`modern.SwiGLU`'s formula, `modern.repeat_kv`) on random inputs of several sizes, among them a step after a
cached prefix (RoPE) and groups of several sizes (repeat-KV). Known wrong variants are recognised and named:
interleaved pairs instead of half-split ones, values rotated, keys left unrotated, the cache's offset forgotten,
the wrong frequencies, silu on the wrong branch, heads repeated in the wrong order, and more.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..modern import RotaryEmbedding, apply_rope, rotate_half
from ..modern import repeat_kv as package_repeat_kv
from ._core import Case, Mistake, Result, checker, compare, solution

# ---------------------------------------------------------------- exercise 19.1: rotary position embeddings


@solution
def rope_qkv(q, k, v, start, theta):
    """q, k, v (B, H, T, d) at positions start..start+T-1 -> (q, k) rotated pair by pair (i, i + d/2), v as is."""
    d = q.shape[-1]
    inv_freq = 1.0 / theta ** (torch.arange(0, d, 2, dtype=torch.float) / d)  # (d/2,): pair i turns at θ^(-2i/d)
    positions = torch.arange(start, start + q.shape[2], dtype=torch.float)  # the cache's length comes first
    angles = positions[:, None] * inv_freq  # (T, 1) * (d/2,) -> (T, d/2)
    angles = torch.cat((angles, angles), dim=-1)  # (T, d): feature i and feature i + d/2 share an angle
    cos, sin = angles.cos(), angles.sin()

    def rotate(x):
        x1, x2 = x.chunk(2, dim=-1)  # the two halves: pair i is (x1[i], x2[i])
        return x * cos + torch.cat((-x2, x1), dim=-1) * sin

    return rotate(q), rotate(k), v  # values carry content, not position: never rotated


def _package_rope_qkv(q, k, v, start, theta):
    cos, sin = RotaryEmbedding(q.shape[-1], theta)(start, q.shape[2])
    return apply_rope(q, cos, sin), apply_rope(k, cos, sin), v


def _angles(d, length, start, theta, exponent=2, sign=-1, positions_from=None, interleave=False):
    """(T, d) angles with one thing changed: the exponent's factor, its sign, the first position, the layout."""
    inv_freq = theta ** (sign * exponent * torch.arange(0, d // 2, dtype=torch.float) / d)  # (d/2,)
    first = start if positions_from is None else positions_from
    angles = torch.arange(first, first + length, dtype=torch.float)[:, None] * inv_freq  # (T, d/2)
    return angles.repeat_interleave(2, dim=-1) if interleave else torch.cat((angles, angles), dim=-1)


def _rope_variant(q, k, v, start, theta, pairs="half", which="qk", angle=None, swap=False, turn=1, half=True):
    angles = angle(q.shape[-1], q.shape[2], start, theta) if angle else _angles(q.shape[-1], q.shape[2], start, theta)
    cos, sin = (angles.sin(), angles.cos()) if swap else (angles.cos(), angles.sin())
    if pairs == "interleaved":  # the paper's layout: pair i is (x_2i, x_2i+1)
        angles = _angles(q.shape[-1], q.shape[2], start, theta, interleave=True)
        cos, sin = angles.cos(), angles.sin()

    def rotate(x):
        if pairs == "interleaved":
            even, odd = x[..., 0::2], x[..., 1::2]
            turned = torch.stack((-odd, even), dim=-1).flatten(-2)  # (x0, x1, ...) -> (-x1, x0, ...)
        else:
            turned = rotate_half(x) if half else x
        return x * cos + turn * turned * sin

    return tuple(rotate(t) if name in which else t for name, t in zip("qkv", (q, k, v)))


_ROPE_MISTAKES = (
    Mistake(
        "interleaved_pairs",
        lambda q, k, v, s, t: _rope_variant(q, k, v, s, t, pairs="interleaved"),
        "you rotated neighbouring features (x_0, x_1), (x_2, x_3), ... as the RoPE paper writes it; Llama's code "
        "(and Hugging Face's) pairs feature i with feature i + d/2: split the vector into two halves (rotate_half).",
    ),
    Mistake(
        "values_rotated",
        lambda q, k, v, s, t: _rope_variant(q, k, v, s, t, which="qkv"),
        "the values were rotated too: only queries and keys carry positions (their dot product is the score); "
        "the values are what is averaged and must stay as they are.",
    ),
    Mistake(
        "keys_not_rotated",
        lambda q, k, v, s, t: _rope_variant(q, k, v, s, t, which="q"),
        "the keys are not rotated: the cache would hold unrotated keys, and q_m · k_n would depend on m, not on "
        "m - n. Rotate the keys once, at their own positions, before they are cached.",
    ),
    Mistake(
        "queries_not_rotated",
        lambda q, k, v, s, t: _rope_variant(q, k, v, s, t, which="k"),
        "the queries are not rotated: rotate both q and k, so that the score depends on their distance.",
    ),
    Mistake(
        "start_ignored",
        lambda q, k, v, s, t: _rope_variant(q, k, v, s, t, angle=lambda d, n, s_, t_: _angles(d, n, 0, t_)),
        "right for a full sequence, wrong after a cached prefix: the new positions are start, start + 1, ..., "
        "not 0, 1, ... (with a KV cache, start is the cache's length).",
    ),
    Mistake(
        "off_by_one",
        lambda q, k, v, s, t: _rope_variant(q, k, v, s, t, angle=lambda d, n, s_, t_: _angles(d, n, s_ + 1, t_)),
        "every position is one too far: the first token is at position start (0 for a fresh sequence), where "
        "the rotation is the identity.",
    ),
    Mistake(
        "exponent_without_2",
        lambda q, k, v, s, t: _rope_variant(q, k, v, s, t, angle=lambda d, n, s_, t_: _angles(d, n, s_, t_, 1)),
        "pair i turns at θ^(-i/d): the exponent is 2i/d (arange(0, d, 2) / d), so that the last pair turns "
        "almost θ times slower than the first.",
    ),
    Mistake(
        "frequency_not_inverted",
        lambda q, k, v, s, t: _rope_variant(q, k, v, s, t, angle=lambda d, n, s_, t_: _angles(d, n, s_, t_, 2, 1)),
        "the frequencies are θ^(+2i/d), growing with i: they are 1 / θ^(2i/d), from 1 down to nearly 1/θ.",
    ),
    Mistake(
        "theta_hardcoded",
        lambda q, k, v, s, t: _rope_use_theta(q, k, v, s, 10000.0),
        "right when theta is 10000, wrong otherwise: use the theta argument (Llama 3 uses 500000).",
    ),
    Mistake(
        "wrong_direction",
        lambda q, k, v, s, t: _rope_variant(q, k, v, s, t, turn=-1),
        "the rotation turns the wrong way: rotate_half(x) is (-x2, x1), and x·cos + rotate_half(x)·sin turns "
        "(x1, x2) by +angle. Your sign is flipped.",
    ),
    Mistake(
        "cos_sin_swapped",
        lambda q, k, v, s, t: _rope_variant(q, k, v, s, t, swap=True),
        "cos and sin are swapped: x·cos(angle) + rotate_half(x)·sin(angle) is the rotation; at position 0 it "
        "must leave x unchanged.",
    ),
    Mistake(
        "no_rotate_half",
        lambda q, k, v, s, t: _rope_variant(q, k, v, s, t, half=False),
        "x·cos + x·sin only scales each feature: the second term needs the pair's other feature, rotate_half(x) "
        "= (-x2, x1).",
    ),
    Mistake(
        "angles_interleaved",
        lambda q, k, v, s, t: _rope_variant(
            q, k, v, s, t, angle=lambda d, n, s_, t_: _angles(d, n, s_, t_, interleave=True)
        ),
        "half-split pairs with the angles laid out for interleaved ones (repeat_interleave): features i and "
        "i + d/2 must share an angle, so concatenate the angles with themselves, torch.cat((a, a), dim=-1).",
    ),
)


def _rope_use_theta(q, k, v, start, theta):
    return _package_rope_qkv(q, k, v, start, theta)


@checker
def check_rope_qkv(fn) -> Result:
    """Check `fn(q, k, v, start, theta)` against modern.apply_rope, including steps after a cached prefix."""
    g = torch.Generator().manual_seed(19)

    def qkv(batch, heads, length, d):
        return tuple(torch.randn(batch, heads, length, d, generator=g) for _ in range(3))

    cases = [
        Case("a fresh sequence of 5 positions, d=8, theta=10000", (*qkv(1, 2, 5, 8), 0, 10000.0)),
        Case("4 positions after 7 cached ones, d=6, theta=100", (*qkv(2, 3, 4, 6), 7, 100.0)),
        Case("one new position after 12 cached ones, d=4, theta=10", (*qkv(1, 1, 1, 4), 12, 10.0)),
        Case("6 positions after 3 cached ones, d=16, theta=500000", (*qkv(2, 2, 6, 16), 3, 500000.0)),
    ]
    return compare(
        "rope_qkv",
        fn,
        _package_rope_qkv,
        cases,
        _ROPE_MISTAKES,
        passed=f"passed all {len(cases)} cases (fresh sequences and steps after a cached prefix, theta 10 to "
        "500000): the same queries and keys as modern.apply_rope, the values untouched",
    )


# ---------------------------------------------------------------- exercise 19.2: the SwiGLU feed-forward


@solution
def swiglu(x, w_gate, w_up, w_down):
    """x (B, T, D); w_gate, w_up (d_ff, D) and w_down (D, d_ff) in nn.Linear's layout -> (B, T, D)."""
    gate = F.silu(x @ w_gate.T)  # silu on the gate branch only
    return (gate * (x @ w_up.T)) @ w_down.T


def _package_swiglu(x, w_gate, w_up, w_down):
    # modern.SwiGLU's formula, w_down(silu(w_gate(x)) * w_up(x)), with the given weights.
    return F.linear(F.silu(F.linear(x, w_gate)) * F.linear(x, w_up), w_down)


def _glu(x, w_gate, w_up, w_down, gate=F.silu, up=lambda h: h, combine=torch.mul, after=lambda h: h):
    return after(combine(gate(x @ w_gate.T), up(x @ w_up.T)) @ w_down.T)


def _identity(h):
    return h


_SWIGLU_MISTAKES = (
    Mistake(
        "silu_on_up",
        lambda x, g, u, d: _glu(x, g, u, d, gate=_identity, up=F.silu),
        "silu is on the wrong branch: it goes on the gate, silu(x W_gate), which then multiplies x W_up as it is. "
        "(With the weights swapped the model could learn either, but a checkpoint's weights are not swapped.)",
    ),
    Mistake(
        "silu_on_both",
        lambda x, g, u, d: _glu(x, g, u, d, up=F.silu),
        "silu is applied to both branches: only the gate, silu(x W_gate), goes through it; x W_up stays linear.",
    ),
    Mistake(
        "no_activation",
        lambda x, g, u, d: _glu(x, g, u, d, gate=_identity),
        "there is no silu: (x W_gate) ⊙ (x W_up) is a bilinear layer; the gate is silu(x W_gate).",
    ),
    Mistake(
        "relu_gate",
        lambda x, g, u, d: _glu(x, g, u, d, gate=F.relu),
        "that is ReGLU (a ReLU gate): SwiGLU's gate is silu(z) = z · sigmoid(z), F.silu.",
    ),
    Mistake(
        "gelu_gate",
        lambda x, g, u, d: _glu(x, g, u, d, gate=F.gelu),
        "that is GEGLU (a GELU gate): SwiGLU's gate is silu(z) = z · sigmoid(z), F.silu.",
    ),
    Mistake(
        "sigmoid_gate",
        lambda x, g, u, d: _glu(x, g, u, d, gate=torch.sigmoid),
        "a sigmoid gate is the original GLU: Swish (silu) multiplies by z as well, silu(z) = z · sigmoid(z).",
    ),
    Mistake(
        "silu_after_product",
        lambda x, g, u, d: _glu(x, g, u, d, gate=_identity, after=_identity, combine=lambda a, b: F.silu(a * b)),
        "silu was applied to the product: it gates one branch, silu(x W_gate) ⊙ (x W_up), before the product.",
    ),
    Mistake(
        "sum_not_product",
        lambda x, g, u, d: _glu(x, g, u, d, combine=torch.add),
        "the branches were added: the gate multiplies, feature by feature, silu(x W_gate) ⊙ (x W_up).",
    ),
    Mistake(
        "silu_on_output",
        lambda x, g, u, d: _glu(x, g, u, d, gate=_identity, after=F.silu),
        "silu was applied after W_down: it belongs on the gate branch, inside, silu(x W_gate).",
    ),
)


@checker
def check_swiglu(fn) -> Result:
    """Check `fn(x, w_gate, w_up, w_down)` against modern.SwiGLU's formula on several sizes."""
    g = torch.Generator().manual_seed(192)

    def case(batch, length, d_model, d_ff):
        x = torch.randn(batch, length, d_model, generator=g)
        weights = [torch.randn(d_ff, d_model, generator=g), torch.randn(d_ff, d_model, generator=g)]
        return (x, *weights, torch.randn(d_model, d_ff, generator=g) / d_ff**0.5)

    cases = [
        Case("x (2, 3, 6), d_ff=16", case(2, 3, 6, 16)),
        Case("x (1, 5, 8), d_ff=8 (square weights)", case(1, 5, 8, 8)),
        Case("x (3, 1, 4), d_ff=12", case(3, 1, 4, 12)),
    ]
    return compare(
        "swiglu",
        fn,
        _package_swiglu,
        cases,
        _SWIGLU_MISTAKES,
        passed=f"passed all {len(cases)} cases (square and rectangular weights): the same output as modern.SwiGLU",
    )


# ---------------------------------------------------------------- exercise 19.3: repeat-KV


@solution
def repeat_kv(x, n_rep):
    """(B, H_kv, T, d) -> (B, H_kv · n_rep, T, d): query heads j · n_rep .. j · n_rep + n_rep - 1 share KV head j."""
    batch, n_kv_heads, length, d = x.shape
    x = x[:, :, None].expand(batch, n_kv_heads, n_rep, length, d)  # (B, H_kv, n_rep, T, d): a view, no copy
    return x.reshape(batch, n_kv_heads * n_rep, length, d)  # (B, H_kv, n_rep, T, d) -> (B, H, T, d)


_REPEAT_MISTAKES = (
    Mistake(
        "tiled",
        lambda x, n: x.repeat(1, n, 1, 1),
        "the heads are repeated in the wrong order: you tiled them (0, 1, 0, 1, ...), so query head j reads KV "
        "head j % H_kv; Llama's groups are consecutive (0, 0, 1, 1, ...): query head j reads KV head j // n_rep. "
        "Insert the new axis after the heads, x[:, :, None], or use repeat_interleave(n_rep, dim=1).",
    ),
    Mistake(
        "time_axis",
        lambda x, n: x.repeat_interleave(n, dim=2),
        "you repeated along the time axis (dim 2): the heads are dim 1 of (B, H_kv, T, d).",
    ),
    Mistake(
        "batch_axis",
        lambda x, n: x.repeat_interleave(n, dim=0),
        "you repeated along the batch axis (dim 0): the heads are dim 1 of (B, H_kv, T, d).",
    ),
    Mistake(
        "feature_axis",
        lambda x, n: x.repeat_interleave(n, dim=-1),
        "you repeated the features (the last axis): each head keeps its d features; the heads, dim 1, repeat.",
    ),
    Mistake(
        "divided_by_group",
        lambda x, n: x.repeat_interleave(n, dim=1) / n,
        "the repeated heads were divided by n_rep: each query head reads its KV head unchanged (the softmax "
        "already averages; nothing is split between the heads of a group).",
    ),
    Mistake(
        "n_rep_as_heads",
        lambda x, n: x.repeat_interleave(max(n // x.shape[1], 1), dim=1),
        "n_rep is the group size (query heads per KV head), not the number of query heads: repeat each KV head "
        "n_rep times.",
    ),
    Mistake(
        "not_repeated",
        lambda x, n: x,
        "the heads were not repeated: the result must have H_kv · n_rep heads, one for each query head.",
    ),
)


@checker
def check_repeat_kv(fn) -> Result:
    """Check `fn(x, n_rep)` against modern.repeat_kv for groups of 1 to 4 heads."""
    g = torch.Generator().manual_seed(193)
    cases = [
        Case("2 KV heads in groups of 2", (torch.randn(1, 2, 3, 4, generator=g), 2)),
        Case("3 KV heads in groups of 4, batch 2", (torch.randn(2, 3, 5, 6, generator=g), 4)),
        Case("1 KV head shared by 4 query heads (multi-query)", (torch.randn(2, 1, 3, 2, generator=g), 4)),
        Case("4 KV heads, n_rep=1 (multi-head: nothing to repeat)", (torch.randn(1, 4, 2, 3, generator=g), 1)),
        Case("2 KV heads in groups of 6", (torch.randn(1, 2, 4, 8, generator=g), 6)),
    ]
    return compare(
        "repeat_kv",
        fn,
        package_repeat_kv,
        cases,
        _REPEAT_MISTAKES,
        passed=f"passed all {len(cases)} cases (groups of 1 to 6, multi-query): the same heads, in the same "
        "order, as modern.repeat_kv",
    )
