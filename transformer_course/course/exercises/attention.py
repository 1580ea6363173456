"""Chapter 2 exercises: attention weights, the attention output, self-attention with projections.

Each exercise has a reference solution (`@solution`, shown in the book), a checker (`@checker`) that
compares the reader's function with the package's `tc.scaled_dot_product_attention`, and the known
wrong variants it recognises: the scale missing or wrong, the softmax over the wrong axis, V inside the
softmax (post 0's formula), the scores transposed.
"""

from __future__ import annotations

import math

import torch

from ...attention import attention_scale, scaled_dot_product_attention
from ._core import Case, Mistake, Result, checker, compare, solution

# ---------------------------------------------------------------- exercise 2.1: attention_weights


@solution
def attention_weights(q, k):
    """softmax(q kᵀ / √d_k) over the keys: q (..., T_q, d_k), k (..., T_k, d_k) -> (..., T_q, T_k)."""
    d_k = q.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)  # row i: query i against every key
    return torch.softmax(scores, dim=-1)  # each row sums to 1


def _weights_reference(q, k):
    v = torch.zeros(*k.shape[:-1], 1, dtype=k.dtype)  # the weights do not depend on v
    return scaled_dot_product_attention(q, k, v)[1]


def _scores(q, k):
    return q @ k.transpose(-2, -1)


def _scaled(q, k):
    # The package's scale, so that the variants follow it: only the mistake differs from the reference.
    return _scores(q, k) * attention_scale(q.shape[-1])


_NO_SCALE = (
    "your weights match softmax(q kᵀ) without the scale: did you forget to divide by √d_k? "
    "(d_k = q.shape[-1]; without it the softmax saturates as d_k grows, chapter 2, section 2.6)"
)
_WRONG_AXIS = (
    "the columns sum to 1, not the rows: each query's weights over the keys form a row, so the softmax "
    "runs over the last axis, softmax(scores, dim=-1)."
)

_WEIGHTS_MISTAKES = (
    Mistake("no_scale", lambda q, k: torch.softmax(_scores(q, k), dim=-1), _NO_SCALE),
    Mistake(
        "scale_by_d_k",
        lambda q, k: torch.softmax(_scores(q, k) / q.shape[-1], dim=-1),
        "you divided the scores by d_k; the scale is its square root, √d_k (math.sqrt(q.shape[-1])).",
    ),
    Mistake(
        "scale_after_softmax",
        lambda q, k: torch.softmax(_scores(q, k), dim=-1) * attention_scale(q.shape[-1]),
        "your rows sum to 1/√d_k, not 1: the scale divides the scores before the softmax, not the weights after it.",
    ),
    Mistake(
        "softmax_wrong_axis",
        lambda q, k: torch.softmax(_scaled(q, k), dim=-2),
        _WRONG_AXIS,
    ),
    Mistake(
        "no_softmax",
        lambda q, k: _scaled(q, k),
        "these are the scaled scores, not weights: the weights are their softmax over the keys (dim=-1).",
    ),
    Mistake(
        "k_not_transposed",
        lambda q, k: torch.softmax(q @ k * attention_scale(q.shape[-1]), dim=-1),
        "you multiplied by k itself: the scores are q kᵀ, each query against each key. Use "
        "k.transpose(-2, -1), which also works for batches.",
    ),
    Mistake(
        "batched_T",
        lambda q, k: torch.softmax(q @ k.permute(*range(k.dim() - 1, -1, -1)) * attention_scale(q.shape[-1]), dim=-1),
        "right for a single matrix, wrong for a batch: k.T reverses every axis of a 3-D or 4-D tensor. "
        "Transpose the last two only: k.transpose(-2, -1) (or k.mT).",
    ),
)


@checker
def check_attention_weights(fn) -> Result:
    """Check `fn(q, k) -> weights` against the package on matrices, batches and heads."""
    g = torch.Generator().manual_seed(20)
    cases = [
        Case("3 queries and 4 keys with d_k = 8", (torch.randn(3, 8, generator=g), torch.randn(4, 8, generator=g))),
        Case("4 queries and 4 keys with d_k = 4", (torch.randn(4, 4, generator=g), torch.randn(4, 4, generator=g))),
        Case(
            "a batch (2, 5, 16) of queries and keys",
            (torch.randn(2, 5, 16, generator=g), torch.randn(2, 5, 16, generator=g)),
        ),
        Case(
            "a (2, 3, 4, 64) batch of heads (large d_k)",
            (torch.randn(2, 3, 4, 64, generator=g), torch.randn(2, 3, 6, 64, generator=g)),
        ),
        Case("one query and one key", (torch.randn(1, 5, generator=g), torch.randn(1, 5, generator=g))),
    ]
    return compare("attention_weights", fn, _weights_reference, cases, _WEIGHTS_MISTAKES)


# ---------------------------------------------------------------- exercise 2.2: attention


@solution
def attention(q, k, v):
    """softmax(q kᵀ / √d_k) v: q (..., T_q, d_k), k (..., T_k, d_k), v (..., T_k, d_v) -> (..., T_q, d_v)."""
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    return weights @ v  # row i: the average of the values, weighted by query i's weights


def _output_reference(q, k, v):
    return scaled_dot_product_attention(q, k, v)[0]


_ATTENTION_MISTAKES = (
    Mistake(
        "v_inside_softmax",
        lambda q, k, v: torch.softmax(_scaled(q, k) @ v, dim=-1),
        "you applied the softmax after multiplying by V, as post 0's formula softmax(QKᵀ/√d_k · V) reads. "
        "The softmax turns the scores into weights first; the weights then average the values: "
        "softmax(q kᵀ / √d_k) @ v.",
    ),
    Mistake("no_scale", lambda q, k, v: torch.softmax(_scores(q, k), dim=-1) @ v, _NO_SCALE),
    Mistake(
        "scale_by_d_v",
        lambda q, k, v: torch.softmax(_scores(q, k) * attention_scale(v.shape[-1]), dim=-1) @ v,
        "you divided by √d_v, the size of the values; the scale is √d_k, the size of the queries and keys "
        "(q.shape[-1]) whose dot products it tames.",
    ),
    Mistake(
        "scale_by_d_k",
        lambda q, k, v: torch.softmax(_scores(q, k) / q.shape[-1], dim=-1) @ v,
        "you divided the scores by d_k; the scale is its square root, √d_k.",
    ),
    Mistake("softmax_wrong_axis", lambda q, k, v: torch.softmax(_scaled(q, k), dim=-2) @ v, _WRONG_AXIS),
    Mistake(
        "returned_weights",
        lambda q, k, v: torch.softmax(_scaled(q, k), dim=-1),
        "you returned the attention weights (T_q × T_k); the output is the weighted average of the values, "
        "weights @ v (T_q × d_v).",
    ),
    Mistake(
        "returned_pair",
        lambda q, k, v: scaled_dot_product_attention(q, k, v),
        "you returned (output, weights), as tc.scaled_dot_product_attention does; this exercise asks for the "
        "output only.",
    ),
)


@checker
def check_attention(fn) -> Result:
    """Check `fn(q, k, v) -> output` against the package, with d_k different from d_v."""
    g = torch.Generator().manual_seed(21)

    def qkv(*lead, t_q, t_k, d_k, d_v):
        return (
            torch.randn(*lead, t_q, d_k, generator=g),
            torch.randn(*lead, t_k, d_k, generator=g),
            torch.randn(*lead, t_k, d_v, generator=g),
        )

    cases = [
        Case("3 queries and 4 keys with d_k = 8 and d_v = 2", qkv(t_q=3, t_k=4, d_k=8, d_v=2)),
        Case("a batch of 2 with 5 queries and keys (d_k = d_v = 16)", qkv(2, t_q=5, t_k=5, d_k=16, d_v=16)),
        Case("a (2, 3) batch of heads with d_k = 64 and d_v = 3", qkv(2, 3, t_q=4, t_k=6, d_k=64, d_v=3)),
        Case("4 queries and 4 keys with d_k = d_v = 4", qkv(t_q=4, t_k=4, d_k=4, d_v=4)),
    ]
    return compare("attention", fn, _output_reference, cases, _ATTENTION_MISTAKES)


# ---------------------------------------------------------------- exercise 2.3: self_attention


@solution
def self_attention(x, w_q, w_k, w_v):
    """Self-attention of x (..., T, d_model) with projections in post 2's layout (d_model × d_k): Q = x W_Q."""
    q, k, v = x @ w_q, x @ w_k, x @ w_v  # queries, keys and values all come from the same x
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    return weights @ v


def _self_reference(x, w_q, w_k, w_v):
    return scaled_dot_product_attention(x @ w_q, x @ w_k, x @ w_v)[0]


def _attend(q, k, v):
    return torch.softmax(_scaled(q, k), dim=-1) @ v


_SELF_MISTAKES = (
    Mistake(
        "no_projection",
        lambda x, w_q, w_k, w_v: _attend(x, x, x),
        "your output does not use W_Q, W_K, W_V: project first, Q = x @ w_q, K = x @ w_k, V = x @ w_v, then "
        "attend. attention(x, x, x) is self-attention without the learned projections.",
    ),
    Mistake(
        "scores_transposed",
        lambda x, w_q, w_k, w_v: torch.softmax(_scaled(x @ w_k, x @ w_q), dim=-1) @ (x @ w_v),
        "you computed K Qᵀ, the transposed score matrix (or swapped W_Q and W_K): row i must hold query i "
        "against every key, Q @ K.transpose(-2, -1).",
    ),
    Mistake(
        "value_not_projected",
        lambda x, w_q, w_k, w_v: torch.softmax(_scaled(x @ w_q, x @ w_k), dim=-1) @ x,
        "the weights average x itself: they must average the values V = x @ w_v.",
    ),
    Mistake(
        "linear_layout",
        lambda x, w_q, w_k, w_v: _attend(x @ w_q.T, x @ w_k.T, x @ w_v.T),
        "you used nn.Linear's layout, x @ w.T; here the matrices are in post 2's layout, d_model × d_k, and "
        "the projection is x @ w_q.",
    ),
    Mistake(
        "v_inside_softmax",
        lambda x, w_q, w_k, w_v: torch.softmax(_scaled(x @ w_q, x @ w_k) @ (x @ w_v), dim=-1),
        "you applied the softmax after multiplying by V (post 0's formula): the weights are "
        "softmax(Q Kᵀ / √d_k), and they multiply V afterwards.",
    ),
    Mistake(
        "no_scale",
        lambda x, w_q, w_k, w_v: torch.softmax(_scores(x @ w_q, x @ w_k), dim=-1) @ (x @ w_v),
        _NO_SCALE,
    ),
    Mistake(
        "scale_by_d_model",
        lambda x, w_q, w_k, w_v: (
            torch.softmax(_scores(x @ w_q, x @ w_k) * attention_scale(x.shape[-1]), dim=-1) @ (x @ w_v)
        ),
        "you divided by √d_model (x.shape[-1]), the size of the input; the scale is √d_k, the size of the "
        "projected queries and keys (q.shape[-1], w_q.shape[1]) whose dot products it tames.",
    ),
    Mistake(
        "softmax_wrong_axis",
        lambda x, w_q, w_k, w_v: torch.softmax(_scaled(x @ w_q, x @ w_k), dim=-2) @ (x @ w_v),
        _WRONG_AXIS,
    ),
    Mistake(
        "returned_weights",
        lambda x, w_q, w_k, w_v: torch.softmax(_scaled(x @ w_q, x @ w_k), dim=-1),
        "you returned the attention weights (T × T); the output is the weighted average of the values, "
        "weights @ (x @ w_v).",
    ),
)


def post_2_example() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """X, W_Q, W_K, W_V of post 2's worked example (three tokens A, B, C of 4 features, d_k = d_v = 3)."""
    x = torch.tensor([[1.0, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]])
    w_q = torch.tensor([[1.0, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 1]])
    w_k = torch.tensor([[0.0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 0]])
    w_v = torch.tensor([[0.0, 2, 0], [0, 3, 0], [1, 0, 3], [1, 1, 0]])
    return x, w_q, w_k, w_v


@checker
def check_self_attention(fn) -> Result:
    """Check `fn(x, w_q, w_k, w_v) -> output` on post 2's worked example and on random inputs."""
    g = torch.Generator().manual_seed(22)

    def weights(d_model, d_k, d_v):
        scale = d_model**-0.5
        return tuple(scale * torch.randn(d_model, d, generator=g) for d in (d_k, d_k, d_v))

    cases = [
        Case("post 2's worked example (X is 3 × 4 and d_k = 3)", post_2_example()),
        Case(
            "5 tokens of 6 features projected to d_k = 4 and d_v = 3",
            (torch.randn(5, 6, generator=g), *weights(6, 4, 3)),
        ),
        Case("a batch (2, 4, 8) with d_k = d_v = 8", (torch.randn(2, 4, 8, generator=g), *weights(8, 8, 8))),
    ]
    return compare("self_attention", fn, _self_reference, cases, _SELF_MISTAKES)
