"""Chapter 4's checkers: the reference solutions pass, and each known mistake gets its own diagnosis.

The wrong answers below are written the way a reader might write them, independently of the
variants the checkers use to recognise the mistakes.
"""

import math

import pytest
import torch
import torch.nn.functional as F

import transformer_course as tc
from transformer_course.exercises import check, solutions


@pytest.mark.parametrize("name", ["split_heads", "merge_heads", "multi_head_attention"])
def test_reference_solution_passes(name):
    result = getattr(check, name)(getattr(solutions, name))
    assert result.passed and result.mistake is None, result
    assert repr(result).startswith(f"✅ {name}: passed all")


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


# ---- exercise 4.1


def split_straight(x, n_heads):
    b, t, d = x.shape
    return x.view(b, n_heads, t, d // n_heads)


def split_without_moving_heads(x, n_heads):
    return x.unflatten(-1, (n_heads, -1))


def split_dealing_features(x, n_heads):
    b, t, _ = x.shape
    return x.view(b, t, -1, n_heads).permute(0, 3, 1, 2)


@pytest.mark.parametrize(
    ("reader", "mistake", "words"),
    [
        (split_straight, "no_transpose", "positions and heads are mixed up"),
        (split_without_moving_heads, "heads_axis_not_moved", "you stopped at (B, T, H, d_k)"),
        (split_dealing_features, "strided_features", "every H-th feature"),
    ],
)
def test_split_heads_mistakes_are_named(reader, mistake, words):
    result = check.split_heads(reader)
    assert not result.passed and result.mistake == mistake and words in result.message, result


def test_split_heads_accepts_other_spellings():
    assert check.split_heads(lambda x, h: x.unflatten(-1, (h, -1)).transpose(1, 2)).passed
    assert check.split_heads(lambda x, h: torch.stack(x.chunk(h, dim=-1), dim=1)).passed


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


@pytest.mark.parametrize(
    ("reader", "mistake", "words"),
    [
        (merge_straight, "transpose_forgotten", "merged in the wrong order"),
        (merge_with_view, "view_not_contiguous", "not contiguous"),
        (merge_head_axis_last, "strided_features", "alternate between heads"),
        (merge_by_adding, "heads_summed", "added the heads"),
        (merge_by_averaging, "heads_averaged", "averaged the heads"),
    ],
)
def test_merge_heads_mistakes_are_named(reader, mistake, words):
    result = check.merge_heads(reader)
    assert not result.passed and result.mistake == mistake and words in result.message, result


def test_merge_heads_accepts_cat_of_the_heads():
    assert check.merge_heads(lambda x: torch.cat(x.unbind(dim=1), dim=-1)).passed


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


@pytest.mark.parametrize(
    ("reader", "mistake", "words"),
    [
        (make_reader(use_w_o=False), "no_w_o", "W_O is missing"),
        (make_reader(merge=merge_straight), "merge_transpose_forgotten", "merged in the wrong order"),
        (make_reader(split=split_straight), "split_no_transpose", "mixes positions"),
        (make_reader(scale="d_model"), "scale_d_model", "divided the scores by √d_model"),
        (make_reader(scale="none"), "no_scale", "without the scale"),
        (make_reader(mask_rule="ignore"), "mask_ignored", "is_causal"),
        (make_reader(mask_rule="hide"), "mask_inverted", "inverted"),
        (make_reader(one_head=True), "no_split", "one head of size d_model"),
    ],
)
def test_multi_head_attention_mistakes_are_named(reader, mistake, words):
    result = check.multi_head_attention(reader)
    assert not result.passed and result.mistake == mistake and words in result.message, result


def test_multi_head_attention_accepts_the_correct_reader_and_the_package():
    assert check.multi_head_attention(make_reader()).passed

    def via_package(query, key, value, w_q, w_k, w_v, w_o, n_heads, mask=None):
        mha = tc.MultiHeadAttention(query.shape[-1], n_heads)
        mha.w_q, mha.w_k, mha.w_v, mha.w_o = w_q, w_k, w_v, w_o
        return mha(query, key, value, mask)

    assert check.multi_head_attention(via_package).passed
