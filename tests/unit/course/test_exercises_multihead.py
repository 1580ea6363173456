"""Chapter 4's wrong answers (`WRONG_ANSWERS`) and the tests specific to its checkers.

The wrong answers below are written the way a reader might write them, independently of the
variants the checkers use to recognise the mistakes.

test_exercise_checkers.py runs every row of the table against its checker (the mistake's key and the
words of its message), with the reference solution and the checks common to every checker.
"""

import math

import pytest
import torch
import torch.nn.functional as F

import transformer_course as tc
from transformer_course.course.exercises import check, solutions


def test_solutions_agree_with_the_package_and_with_pytorch():
    torch.manual_seed(0)
    x = torch.randn(2, 5, 12)
    heads = solutions.split_heads(x, 3)
    assert torch.equal(heads, tc.multihead.split_heads(x, 3))
    assert torch.equal(solutions.merge_heads(heads), x)
    reference = torch.nn.MultiheadAttention(12, 3, batch_first=True)
    mha = tc.MultiHeadAttention.from_torch(reference)
    mask = tc.causal_mask(5)
    out = solutions.multi_head_attention(x, x, x, mha.w_q, mha.w_k, mha.w_v, mha.w_o, 3, mask)
    expected, _ = reference(x, x, x, attn_mask=~mask, need_weights=False)  # PyTorch's module: True = hide
    assert torch.allclose(out, expected, atol=1e-5)
    # Keys and values of their own, and longer than the queries: each projection reads its own argument.
    key, value = torch.randn(2, 7, 12), torch.randn(2, 7, 12)
    out = solutions.multi_head_attention(x, key, value, mha.w_q, mha.w_k, mha.w_v, mha.w_o, 3)
    assert torch.allclose(out, reference(x, key, value, need_weights=False)[0], atol=1e-5)


# ---- exercise 4.1


def split_straight(x, n_heads):
    b, t, d = x.shape
    return x.view(b, n_heads, t, d // n_heads)


def split_without_moving_heads(x, n_heads):
    return x.unflatten(-1, (n_heads, -1))


def split_dealing_features(x, n_heads):
    b, t, _ = x.shape
    return x.view(b, t, -1, n_heads).permute(0, 3, 1, 2)


def split_unchanged(x, n_heads):
    return x


def split_along_positions(x, n_heads):
    return torch.stack(x.chunk(n_heads, dim=1), dim=1)  # chunks of positions, not of features


def split_head_size_last(x, n_heads):
    b, t, d = x.shape
    return x.view(b, t, n_heads, d // n_heads).transpose(1, 3)


def split_into_a_tuple(x, n_heads):
    return x.chunk(n_heads, dim=-1)


def split_two_heads_always(x, n_heads):
    b, t, d = x.shape
    return x.view(b, t, 2, d // 2).transpose(1, 2)


def split_in_float64(x, n_heads):
    b, t, d = x.shape
    return x.double().view(b, t, n_heads, d // n_heads).transpose(1, 2)


def split_without_return(x, n_heads):
    b, t, d = x.shape
    heads = x.view(b, t, n_heads, d // n_heads).transpose(1, 2)  # noqa: F841


def split_resized_in_place(x, n_heads):
    b, t, d = x.shape
    return x.resize_(b, t, n_heads, d // n_heads).transpose(1, 2)  # resize_ changes the caller's x


# ---- exercise 4.2


def merge_straight(x):
    b, h, t, d_k = x.shape
    return x.contiguous().view(b, t, h * d_k)


def merge_with_view(x):
    b, _, t, _ = x.shape
    return x.transpose(1, 2).view(b, t, -1)


def merge_head_axis_last(x):
    return x.movedim(1, -1).flatten(-2)


def merge_by_adding(x):
    return sum(x.unbind(dim=1))


def merge_by_averaging(x):
    return torch.stack(x.unbind(dim=1)).mean(0)


def merge_heads_after_positions(x):
    return torch.cat(x.unbind(dim=1), dim=1)  # (B, H*T, d_k): the heads one after the other in time


def merge_not_flattened(x):
    return x.transpose(1, 2)


def merge_last_two_swapped(x):
    b, h, t, d_k = x.shape
    return x.transpose(2, 3).reshape(b, t, h * d_k)


def merge_in_float64(x):
    return torch.cat(x.unbind(dim=1), dim=-1).double()


def merge_without_return(x):
    merged = torch.cat(x.unbind(dim=1), dim=-1)  # noqa: F841


def merge_first_head_only(x):
    return x[:, 0]


# ---- exercise 4.3


def _split(x, h):
    b, t, d = x.shape
    return x.view(b, t, h, d // h).transpose(1, 2)


def _merge(x):
    b, h, t, d_k = x.shape
    return x.transpose(1, 2).reshape(b, t, h * d_k)


def make_reader(merge=_merge, split=_split, use_w_o=True, scale=None, mask_rule="attend", one_head=False):
    """A reader's multi-head attention built on PyTorch's F.scaled_dot_product_attention, with one slip."""

    def reader(query, key, value, w_q, w_k, w_v, w_o, n_heads, mask=None):
        heads = 1 if one_head else n_heads
        q, k, v = split(w_q(query), heads), split(w_k(key), heads), split(w_v(value), heads)
        attn_mask = None
        if mask is not None and mask_rule == "attend":
            attn_mask = mask
        elif mask is not None and mask_rule == "hide":
            attn_mask = ~mask
        if scale == "d_model":
            scale_value = 1 / math.sqrt(query.shape[-1])
        elif scale == "none":
            scale_value = 1.0
        else:
            scale_value = None
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, scale=scale_value)
        merged = merge(out)
        return w_o(merged) if use_w_o else merged

    return reader


def make_masking_reader(hide, fill=None, zero_hidden=False, additive=False):
    """A reader who writes the scores and the softmax by hand: hide(mask) says which entries to hide, and fill what
    to put there (masked_fill), or additive=True to add fill * hide to the scores instead."""

    def reader(query, key, value, w_q, w_k, w_v, w_o, n_heads, mask=None):
        q, k, v = _split(w_q(query), n_heads), _split(w_k(key), n_heads), _split(w_v(value), n_heads)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if mask is not None:
            hidden = hide(mask)
            value_ = torch.finfo(scores.dtype).min if fill == "finfo.min" else fill
            scores = scores + hidden * value_ if additive else scores.masked_fill(hidden, value_)
        weights = torch.softmax(scores, dim=-1)
        if mask is not None and zero_hidden:
            weights = weights.masked_fill(hide(mask), 0.0)
        return w_o(_merge(weights @ v))

    return reader


def _as_given(mask):  # the package's True = may attend mask used as a "hide" mask: the inversion
    return mask


def _inverted(mask):
    return ~mask


def mha_where_minus_infinity(query, key, value, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q, k, v = _split(w_q(query), n_heads), _split(w_k(key), n_heads), _split(w_v(value), n_heads)
    scores = q @ k.mT / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = torch.where(mask, float("-inf"), scores)  # hides where the mask is True
    return w_o(_merge(torch.softmax(scores, dim=-1) @ v))


def mha_with_dropout(query, key, value, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q, k, v = _split(w_q(query), n_heads), _split(w_k(key), n_heads), _split(w_v(value), n_heads)
    return w_o(_merge(F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.1)))


def mha_w_o_before_merge(query, key, value, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q, k, v = _split(w_q(query), n_heads), _split(w_k(key), n_heads), _split(w_v(value), n_heads)
    return _merge(w_o(F.scaled_dot_product_attention(q, k, v, attn_mask=mask)))


def mha_keys_from_the_values(query, key, value, w_q, w_k, w_v, w_o, n_heads, mask=None):
    # Right wherever key is value (self-attention, the decoder's cross-attention).
    q, k, v = _split(w_q(query), n_heads), _split(w_k(value), n_heads), _split(w_v(key), n_heads)
    return w_o(_merge(F.scaled_dot_product_attention(q, k, v, attn_mask=mask)))


def mha_values_from_the_keys(query, key, value, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q, k, v = _split(w_q(query), n_heads), _split(w_k(key), n_heads), _split(w_v(key), n_heads)
    return w_o(_merge(F.scaled_dot_product_attention(q, k, v, attn_mask=mask)))


def mha_keys_from_value_too(query, key, value, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q, k, v = _split(w_q(query), n_heads), _split(w_k(value), n_heads), _split(w_v(value), n_heads)
    return w_o(_merge(F.scaled_dot_product_attention(q, k, v, attn_mask=mask)))


def mha_keys_projected_twice(query, key, value, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q, k, v = _split(w_q(query), n_heads), _split(w_k(key), n_heads), _split(w_k(value), n_heads)  # W_K for V
    return w_o(_merge(F.scaled_dot_product_attention(q, k, v, attn_mask=mask)))


def mha_queries_and_keys_swapped(query, key, value, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q, k, v = _split(w_k(query), n_heads), _split(w_q(key), n_heads), _split(w_v(value), n_heads)
    return w_o(_merge(F.scaled_dot_product_attention(q, k, v, attn_mask=mask)))


# Each exercise's wrong answers and the diagnosis each must get: (answer, mistake key or None, words of the message).
WRONG_ANSWERS = {
    "split_heads": [
        (split_straight, "no_transpose", "positions and heads are mixed up"),
        (split_without_moving_heads, "heads_axis_not_moved", "you stopped at (B, T, H, d_k)"),
        (split_dealing_features, "strided_features", "every H-th feature"),
        (split_unchanged, None, "returned shape (2, 3, 8) on x = arange(48) as (2, 3, 8) in 2 heads"),
        (split_along_positions, None, "raised RuntimeError"),
        (split_head_size_last, None, "returned shape (2, 4, 2, 3) on x = arange(48)"),
        (split_into_a_tuple, None, "returned an object of type tuple"),
        (split_two_heads_always, None, "returned shape (1, 2, 5, 6) on random x (1, 5, 12) in 3 heads"),
        (split_in_float64, "dtype", "returned dtype torch.float64"),
        (split_without_return, None, "is the `return` missing?"),
        (split_resized_in_place, "in_place", "changes its input `x` in place"),
    ],
    "merge_heads": [
        (merge_straight, "transpose_forgotten", "merged in the wrong order"),
        (merge_with_view, "view_not_contiguous", "not contiguous"),
        (merge_head_axis_last, "strided_features", "alternate between heads"),
        (merge_by_adding, "heads_summed", "added the heads"),
        (merge_by_averaging, "heads_averaged", "averaged the heads"),
        (merge_heads_after_positions, None, "returned shape (2, 6, 4) on x = arange(48) as (2, 2, 3, 4)"),
        (merge_not_flattened, None, "returned shape (2, 3, 2, 4) on x = arange(48)"),
        (merge_last_two_swapped, None, "returned the right shape but wrong values on x = arange(48)"),
        (merge_in_float64, "dtype", "returned dtype torch.float64"),
        (merge_without_return, None, "is the `return` missing?"),
        (merge_first_head_only, None, "returned shape (2, 3, 4) on x = arange(48) as (2, 2, 3, 4), expected (2, 3, 8)"),
    ],
    "multi_head_attention": [
        (make_reader(use_w_o=False), "no_w_o", "W_O is missing"),
        (make_reader(merge=merge_straight), "merge_transpose_forgotten", "merged in the wrong order"),
        (make_reader(split=split_straight), "split_no_transpose", "mixes positions"),
        (make_reader(scale="d_model"), "scale_d_model", "divided the scores by √d_model"),
        (make_reader(scale="none"), "no_scale", "without the scale"),
        (make_reader(mask_rule="ignore"), "mask_ignored", "is_causal"),
        (make_reader(one_head=True), "no_split", "one head of size d_model"),
        # The mask inverted, in every masking style: the last query of the inverted causal mask has nothing to
        # attend to, and comes out as zeros, as uniform weights or as NaN depending on the style.
        (make_reader(mask_rule="hide"), "mask_inverted", "inverted"),
        (make_masking_reader(_as_given, float("-inf")), "mask_inverted", "inverted"),
        (make_masking_reader(_as_given, -1e9), "mask_inverted", "inverted"),
        (make_masking_reader(_as_given, "finfo.min"), "mask_inverted", "inverted"),
        (make_masking_reader(_as_given, float("-inf"), zero_hidden=True), "mask_inverted", "inverted"),
        (make_masking_reader(_as_given, -1e9, additive=True), "mask_inverted", "inverted"),
        (make_masking_reader(lambda mask: mask == 1, -1e9, zero_hidden=True), "mask_inverted", "inverted"),
        (mha_where_minus_infinity, "mask_inverted", "inverted"),
        (mha_with_dropout, "nondeterministic", "dropout or random noise"),
        (mha_w_o_before_merge, None, "raised RuntimeError"),
        (mha_keys_from_the_values, "key_value_swapped", "your keys come from `value` and your values from `key`"),
        (mha_values_from_the_keys, "value_from_key", "your values are projected from `key`"),
        (mha_keys_from_value_too, "key_from_value", "your keys are projected from `value`"),
        (mha_keys_projected_twice, None, "wrong values on self-attention on x (2, 4, 8) with 2 heads"),
        (mha_queries_and_keys_swapped, None, "wrong values on self-attention on x (2, 4, 8) with 2 heads"),
    ],
}


def test_split_and_merge_accept_other_spellings():
    assert check.split_heads(lambda x, h: x.unflatten(-1, (h, -1)).transpose(1, 2)).passed
    assert check.split_heads(lambda x, h: torch.stack(x.chunk(h, dim=-1), dim=1)).passed
    assert check.merge_heads(lambda x: torch.cat(x.unbind(dim=1), dim=-1)).passed


@pytest.mark.parametrize("fill", [float("-inf"), -1e9, "finfo.min"], ids=["-inf", "-1e9", "finfo.min"])
def test_multi_head_attention_accepts_every_masking_style(fill):
    # No case has a query with nothing to attend to, so how a fully masked row comes out does not matter.
    assert check.multi_head_attention(make_masking_reader(_inverted, fill)).passed
    assert check.multi_head_attention(make_masking_reader(_inverted, fill, zero_hidden=True)).passed


def test_multi_head_attention_accepts_the_correct_reader_and_the_package():
    assert check.multi_head_attention(make_reader()).passed

    def via_package(query, key, value, w_q, w_k, w_v, w_o, n_heads, mask=None):
        mha = tc.MultiHeadAttention(query.shape[-1], n_heads)
        mha.w_q, mha.w_k, mha.w_v, mha.w_o = w_q, w_k, w_v, w_o
        return mha(query, key, value, mask)

    assert check.multi_head_attention(via_package).passed
