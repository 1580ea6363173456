"""Chapter 4 exercises: split a tensor into heads, merge the heads back, a full multi-head attention forward.

The checkers compare the reader's functions with the package's `split_heads`, `merge_heads` and
`MultiHeadAttention` and name the usual mistakes: a reshape without the transpose (heads and positions
interleaved), features dealt out to the heads one by one instead of in blocks, `view` on a transposed
tensor, W_O missing, the scale √d_model instead of √d_k, the mask ignored or inverted.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ...attention import attention_scale
from ...masks import causal_mask, padding_mask
from ...multihead import MultiHeadAttention
from ...multihead import merge_heads as _merge_heads
from ...multihead import split_heads as _split_heads
from ._core import Case, Mistake, Result, checker, compare, solution

# ---------------------------------------------------------------- exercise 4.1: split_heads


@solution
def split_heads(x, n_heads):
    """(B, T, D) -> (B, H, T, D / H): head i gets the block of features i*d_k .. (i+1)*d_k - 1."""
    batch, length, d_model = x.shape
    d_k = d_model // n_heads
    # Cut the feature axis into H blocks of d_k, then move the head axis in front of the positions.
    return x.view(batch, length, n_heads, d_k).transpose(1, 2)


def _split_no_transpose(x, n_heads):
    b, t, d = x.shape
    return x.reshape(b, n_heads, t, d // n_heads)


def _split_heads_last(x, n_heads):
    b, t, d = x.shape
    return x.reshape(b, t, n_heads, d // n_heads)


def _split_strided(x, n_heads):
    b, t, d = x.shape
    return x.reshape(b, t, d // n_heads, n_heads).permute(0, 3, 1, 2)


_SPLIT_MISTAKES = (
    Mistake(
        "no_transpose",
        _split_no_transpose,
        "the shape is right but positions and heads are mixed up: reshaping (B, T, D) straight to (B, H, T, d_k) "
        "cuts across positions. Reshape to (B, T, H, d_k) first, then .transpose(1, 2).",
    ),
    Mistake(
        "heads_axis_not_moved",
        _split_heads_last,
        "you stopped at (B, T, H, d_k): move the head axis in front of the positions with .transpose(1, 2), "
        "so attention runs over T within each head.",
    ),
    Mistake(
        "strided_features",
        _split_strided,
        "your head i gets every H-th feature (i, i + H, i + 2H, ...); it must get a contiguous block, features "
        "i*d_k to (i+1)*d_k - 1: view as (B, T, H, d_k), not (B, T, d_k, H).",
    ),
)


def _numbered(*shape):
    # 0, 1, 2, ... so that a wrong arrangement shows up in every entry.
    return torch.arange(math.prod(shape), dtype=torch.float32).reshape(shape)


@checker
def check_split_heads(fn) -> Result:
    """Check `fn(x, n_heads) -> (B, H, T, d_k)` against the package's split_heads."""
    g = torch.Generator().manual_seed(40)
    cases = [
        Case("x = arange(48) as (2, 3, 8) in 2 heads", (_numbered(2, 3, 8), 2)),
        Case("random x (1, 5, 12) in 3 heads", (torch.randn(1, 5, 12, generator=g), 3)),
        Case("x (2, 4, 8) in 4 heads (T = H)", (torch.randn(2, 4, 8, generator=g), 4)),
        Case("x (2, 3, 6) in 1 head", (torch.randn(2, 3, 6, generator=g), 1)),
    ]
    return compare("split_heads", fn, _split_heads, cases, _SPLIT_MISTAKES)


# ---------------------------------------------------------------- exercise 4.2: merge_heads


@solution
def merge_heads(x):
    """(B, H, T, d_k) -> (B, T, H * d_k): the heads of each position side by side, head 0 first."""
    batch, n_heads, length, d_k = x.shape
    # Positions in front again, then glue the heads; reshape copies, since the transpose is not contiguous.
    return x.transpose(1, 2).reshape(batch, length, n_heads * d_k)


def _merge_no_transpose(x):
    b, h, t, d_k = x.shape
    return x.reshape(b, t, h * d_k)


def _merge_view_after_transpose(x):
    b, h, t, d_k = x.shape
    return x.transpose(1, 2).view(b, t, h * d_k)


def _merge_strided(x):
    b, h, t, d_k = x.shape
    return x.permute(0, 2, 3, 1).reshape(b, t, h * d_k)


_MERGE_MISTAKES = (
    Mistake(
        "transpose_forgotten",
        _merge_no_transpose,
        "the heads are merged in the wrong order: reshaping (B, H, T, d_k) straight to (B, T, H*d_k) glues "
        "positions of one head together instead of the heads of one position. Transpose first: "
        "x.transpose(1, 2).reshape(B, T, H * d_k).",
    ),
    Mistake(
        "view_not_contiguous",
        _merge_view_after_transpose,
        "view() cannot follow transpose(): the transposed tensor is not contiguous in memory. Use "
        ".reshape(...), or .contiguous().view(...) as post 1 does.",
    ),
    Mistake(
        "strided_features",
        _merge_strided,
        "your features alternate between heads (head 0's first feature, head 1's first feature, ...); "
        "the concatenation puts head 0's d_k features first, then head 1's: transpose(1, 2), not a permute "
        "that moves the head axis last.",
    ),
    Mistake(
        "heads_summed",
        lambda x: x.sum(dim=1),
        "you added the heads together; multi-head attention concatenates them: (B, T, H * d_k).",
    ),
    Mistake(
        "heads_averaged",
        lambda x: x.mean(dim=1),
        "you averaged the heads; multi-head attention concatenates them: (B, T, H * d_k).",
    ),
)


@checker
def check_merge_heads(fn) -> Result:
    """Check `fn(x) -> (B, T, H * d_k)` against the package's merge_heads."""
    g = torch.Generator().manual_seed(41)
    cases = [
        Case("x = arange(48) as (2, 2, 3, 4)", (_numbered(2, 2, 3, 4),)),
        Case("random x (1, 3, 5, 4)", (torch.randn(1, 3, 5, 4, generator=g),)),
        Case("random x (2, 4, 4, 2) (T = H)", (torch.randn(2, 4, 4, 2, generator=g),)),
        Case("random x (2, 1, 3, 6) with 1 head", (torch.randn(2, 1, 3, 6, generator=g),)),
    ]
    return compare("merge_heads", fn, _merge_heads, cases, _MERGE_MISTAKES)


# ---------------------------------------------------------------- exercise 4.3: multi_head_attention


@solution
def multi_head_attention(query, key, value, w_q, w_k, w_v, w_o, n_heads, mask=None):
    """Multi-head attention with the nn.Linear projections given: (B, T_q, D), (B, T_k, D) x 2 -> (B, T_q, D)."""
    batch, length, d_model = query.shape
    d_k = d_model // n_heads
    # 1. Project, then cut the features into heads: (B, H, T, d_k).
    q = w_q(query).view(batch, -1, n_heads, d_k).transpose(1, 2)
    k = w_k(key).view(batch, -1, n_heads, d_k).transpose(1, 2)
    v = w_v(value).view(batch, -1, n_heads, d_k).transpose(1, 2)
    # 2. Scaled dot-product attention in every head at once; the scale uses the head size d_k.
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)  # (B, H, T_q, T_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)  # a query with nothing to attend to gets zeros
    heads = weights @ v  # (B, H, T_q, d_k)
    # 3. Concatenate the heads of each position, then mix them with W_O.
    return w_o(heads.transpose(1, 2).reshape(batch, length, d_model))


def _mha_reference(query, key, value, w_q, w_k, w_v, w_o, n_heads, mask=None):
    mha = MultiHeadAttention(query.shape[-1], n_heads)
    with torch.no_grad():
        for mine, given in ((mha.w_q, w_q), (mha.w_k, w_k), (mha.w_v, w_v), (mha.w_o, w_o)):
            mine.weight.copy_(given.weight)
            mine.bias.copy_(given.bias)
        return mha(query, key, value, mask)


def _mha_variant(
    split=_split_heads, merge=_merge_heads, scale="d_k", use_w_o=True, mask_mode="apply", fill="min", zero_hidden=True
):
    """Multi-head attention with one step done wrong, for recognising the reader's mistake.

    fill and zero_hidden are the masking style: hidden scores set to the dtype's smallest number ("min"; -1e9
    gives the same weights) or to -inf ("-inf"), and the hidden weights set to 0 after the softmax or not. They
    differ only on a query that may attend to nothing: zeros, uniform weights, or NaN.
    """

    def variant(query, key, value, w_q, w_k, w_v, w_o, n_heads, mask=None):
        q, k, v = (split(w(x), n_heads) for w, x in ((w_q, query), (w_k, key), (w_v, value)))
        # The package's scale, 1/√d_k, or that scale of the wrong width, or none.
        factor = {"d_k": attention_scale(q.shape[-1]), "d_model": attention_scale(query.shape[-1]), "none": 1.0}[scale]
        scores = q @ k.transpose(-2, -1) * factor
        hide = None if mask is None or mask_mode == "ignore" else (mask if mask_mode == "invert" else ~mask)
        if hide is not None:
            scores = scores.masked_fill(hide, torch.finfo(scores.dtype).min if fill == "min" else float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        if hide is not None and zero_hidden:
            weights = weights.masked_fill(hide, 0.0)
        merged = merge(weights @ v)
        return w_o(merged) if use_w_o else merged

    return variant


_MHA_MISTAKES = (
    Mistake(
        "no_w_o",
        _mha_variant(use_w_o=False),
        "W_O is missing: after concatenating the heads, apply the output projection w_o. Without it each "
        "output feature comes from one head only; W_O mixes the heads (chapter 4, section 4.5).",
    ),
    Mistake(
        "merge_transpose_forgotten",
        _mha_variant(merge=_merge_no_transpose),
        "the heads are merged in the wrong order: reshaping (B, H, T, d_k) straight to (B, T, D) glues "
        "positions of one head together. Transpose first: heads.transpose(1, 2).reshape(B, T, D).",
    ),
    Mistake(
        "split_no_transpose",
        _mha_variant(split=_split_no_transpose),
        "the split into heads mixes positions: reshape to (B, T, H, d_k) and then .transpose(1, 2); a "
        "reshape straight to (B, H, T, d_k) cuts across positions.",
    ),
    Mistake(
        "scale_d_model",
        _mha_variant(scale="d_model"),
        "you divided the scores by √d_model; each head works on d_k = d_model / n_heads features and its "
        "scores are divided by √d_k.",
    ),
    Mistake(
        "no_scale",
        _mha_variant(scale="none"),
        "your output matches multi-head attention without the scale: divide each head's scores by √d_k.",
    ),
    Mistake(
        "mask_ignored",
        _mha_variant(mask_mode="ignore"),
        "the mask changes nothing in your output: apply it to every head's scores before the softmax. "
        "(Post 0's MultiHeadAttention has the same bug: it accepts is_causal and never uses it.)",
    ),
    # An inverted causal mask leaves the last query nothing to attend to: each masking style shows it differently
    # (zeros, uniform weights, NaN), and each is named as the inversion it is.
    *(
        Mistake(
            "mask_inverted",
            _mha_variant(mask_mode="invert", fill=fill, zero_hidden=zero_hidden),
            "your mask is inverted: the package's masks say True = may attend (PyTorch's scaled_dot_product_"
            "attention); hide where the mask is False, scores.masked_fill(~mask, ...).",
        )
        for fill, zero_hidden in (("min", True), ("min", False), ("-inf", False))
    ),
    Mistake(
        "key_value_swapped",
        lambda query, key, value, *rest: _mha_reference(query, value, key, *rest),
        "your keys come from `value` and your values from `key`: project each from its own argument, "
        "k = w_k(key) and v = w_v(value). In self-attention (and in the decoder's cross-attention) key is value, "
        "so the swap shows only when the two differ.",
    ),
    Mistake(
        "value_from_key",
        lambda query, key, value, *rest: _mha_reference(query, key, key, *rest),
        "your values are projected from `key`: v = w_v(value). Key and value are the same tensor in "
        "self-attention and in the decoder's cross-attention, but the function takes them apart.",
    ),
    Mistake(
        "key_from_value",
        lambda query, key, value, *rest: _mha_reference(query, value, value, *rest),
        "your keys are projected from `value`: k = w_k(key). Key and value are the same tensor in "
        "self-attention and in the decoder's cross-attention, but the function takes them apart.",
    ),
    Mistake(
        "no_split",
        _mha_variant(split=lambda x, n_heads: _split_heads(x, 1)),  # one head of size d_model, scale √d_model
        "your output matches one head of size d_model: split the projected queries, keys and values into "
        "n_heads heads of d_k = d_model / n_heads features before attending.",
    ),
)


def _linear(d_in, d_out, g):
    layer = nn.Linear(d_in, d_out)
    with torch.no_grad():
        layer.weight.copy_(torch.randn(d_out, d_in, generator=g) / math.sqrt(d_in))
        layer.bias.copy_(0.1 * torch.randn(d_out, generator=g))
    return layer


@checker
def check_multi_head_attention(fn) -> Result:
    """Check `fn(query, key, value, w_q, w_k, w_v, w_o, n_heads, mask)` against tc.MultiHeadAttention."""
    g = torch.Generator().manual_seed(42)

    def layers(d_model):
        return tuple(_linear(d_model, d_model, g) for _ in range(4))

    x = torch.randn(2, 4, 8, generator=g)
    queries, memory = torch.randn(1, 3, 12, generator=g), torch.randn(1, 5, 12, generator=g)
    tokens = torch.tensor([[3, 4, 5, 0], [6, 7, 0, 0]])
    y = torch.randn(2, 4, 8, generator=g)
    z = torch.randn(1, 5, 8, generator=g)
    # Everywhere else key is value (self- and cross-attention): here they differ, so that an answer which
    # projects the keys from `value` (or the values from `key`) shows.
    y_key, y_value = torch.randn(2, 4, 8, generator=g), torch.randn(2, 4, 8, generator=g)
    cases = [
        Case("self-attention on x (2, 4, 8) with 2 heads", (x, x, x, *layers(8), 2)),
        Case("cross-attention from (1, 3, 12) to (1, 5, 12) with 3 heads", (queries, memory, memory, *layers(12), 3)),
        Case("a padding mask (2, 1, 1, 4) with 4 heads", (y, y_key, y_value, *layers(8), 4, padding_mask(tokens))),
        Case("a causal mask (5, 5) with 2 heads", (z, z, z, *layers(8), 2, causal_mask(5))),
    ]
    return compare("multi_head_attention", fn, _mha_reference, cases, _MHA_MISTAKES)
