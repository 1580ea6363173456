"""Chapter 4, transformer_course/multihead.py: MultiHeadAttention, split_heads and merge_heads."""

import pytest
import torch
from half_precision import (
    HALF_B,
    HALF_D,
    HALF_H,
    HALF_S,
    HALF_T,
    assert_layer_as_accurate_as_torch,
    dtypes,
    in_float64,
    randn,
    scales,
)
from hypothesis import given
from hypothesis import strategies as st
from layer_checks import (
    ATOL,
    MODES,
    B,
    D,
    H,
    S,
    T,
    assert_same_modes,
    batch_size,
    dropouts,
    key_padding,
    run_both,
    to_torch_layout,
    torch_causal,
)
from pairwise import pairwise
from torch import nn

import transformer_course as tc

# ---------------------------------------------------------------------------------------------------------
# The module's own claims


def test_multihead_attention_drops_weights_in_training_only():
    mha = tc.MultiHeadAttention(16, 2, dropout=0.5)
    x = torch.randn(2, 6, 16)
    mha.train()(x, x, x)
    assert (mha.attn_weights == 0).float().mean() > 0.3  # dropout applied to the weights
    mha.eval()(x, x, x)
    assert (mha.attn_weights > 0).all()  # no dropout in evaluation


def test_split_then_merge_heads_is_identity_and_keeps_feature_blocks():
    x = torch.arange(2 * 3 * 8, dtype=torch.float32).view(2, 3, 8)
    heads = tc.split_heads(x, 4)
    assert heads.shape == (2, 4, 3, 2)
    torch.testing.assert_close(heads[:, 1], x[..., 2:4])
    torch.testing.assert_close(tc.merge_heads(heads), x)


# ---------------------------------------------------------------------------------------------------------
# Properties that must hold for every input: checked with hypothesis on random shapes, masks and tokens


@given(seed=st.integers(0, 10_000), length=st.integers(2, 8), fast=st.booleans())
def test_self_attention_is_permutation_equivariant(seed, length, fast):
    """Without positions, permuting the input rows permutes the output rows the same way."""
    torch.manual_seed(seed)
    mha = tc.use_fused_attention(tc.MultiHeadAttention(16, 4).eval(), fast)
    x = torch.randn(2, length, 16)
    perm = torch.randperm(length)
    with torch.no_grad():
        out = mha(x, x, x)
        out_perm = mha(x[:, perm], x[:, perm], x[:, perm])
    torch.testing.assert_close(out_perm, out[:, perm], atol=ATOL, rtol=0)


# ---------------------------------------------------------------------------------------------------------
# Equal to PyTorch's reference modules, weights copied with `from_torch` (float32, atol 1e-5)


def _run_torch_mha(m, query, key, value, attn_mask, kpm, batch_first):
    if not batch_first:
        query, key, value = (x.transpose(0, 1) for x in (query, key, value))
    out, weights = m(query, key, value, attn_mask=attn_mask, key_padding_mask=kpm, average_attn_weights=False)
    return (out if batch_first else out.transpose(0, 1)), weights


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("masking", ["none", "causal", "key_padding", "both"])
@pytest.mark.parametrize("need_weights", [True, False])
def test_multihead_equals_torch_self_attention(batch_first, masking, need_weights):
    m = nn.MultiheadAttention(D, H, batch_first=batch_first).eval()
    ours = tc.MultiHeadAttention.from_torch(m).eval()
    x = torch.randn(B, T, D)
    attn_mask = torch_causal(T) if masking in ("causal", "both") else None
    kpm = key_padding([5, 3, 4], T) if masking in ("key_padding", "both") else None
    expected, expected_weights = _run_torch_mha(m, x, x, x, attn_mask, kpm, batch_first)
    mask = tc.combine_masks(None if attn_mask is None else ~attn_mask, None if kpm is None else ~kpm[:, None, None, :])
    got = tc.use_fused_attention(ours, not need_weights)(x, x, x, mask)
    torch.testing.assert_close(got, expected, atol=ATOL, rtol=0)
    if need_weights:
        torch.testing.assert_close(ours.attn_weights, expected_weights, atol=ATOL, rtol=0)


@pytest.mark.parametrize("batch_first", [True, False])
def test_multihead_equals_torch_cross_attention(batch_first):
    m = nn.MultiheadAttention(D, H, batch_first=batch_first).eval()
    ours = tc.MultiHeadAttention.from_torch(m).eval()
    query, memory = torch.randn(B, T, D), torch.randn(B, S, D)
    kpm = key_padding([7, 2, 5], S)
    expected, _ = _run_torch_mha(m, query, memory, memory, None, kpm, batch_first)
    got = ours(query, memory, memory, tc.combine_masks(~kpm[:, None, None, :]))
    torch.testing.assert_close(got, expected, atol=ATOL, rtol=0)


def test_multihead_without_bias_equals_torch():
    m = nn.MultiheadAttention(D, H, bias=False, batch_first=True).eval()
    ours = tc.MultiHeadAttention.from_torch(m)
    x = torch.randn(B, T, D)
    torch.testing.assert_close(ours(x, x, x), m(x, x, x)[0], atol=ATOL, rtol=0)


def test_multihead_gradients_match_torch():
    m = nn.MultiheadAttention(D, H, batch_first=True)
    ours = tc.use_fused_attention(tc.MultiHeadAttention.from_torch(m))
    x = torch.randn(B, T, D)
    m(x, x, x, need_weights=False)[0].square().sum().backward()
    ours(x, x, x).square().sum().backward()
    torch.testing.assert_close(ours.w_q.weight.grad, m.in_proj_weight.grad[:D], atol=1e-4, rtol=0)
    torch.testing.assert_close(ours.w_o.weight.grad, m.out_proj.weight.grad, atol=1e-4, rtol=0)


# ---------------------------------------------------------------------------------------------------------
# `from_torch` for every constructor option of PyTorch's module, in train and eval mode: one equality test per
# case of a pairwise covering array (tests/pairwise.py: every value of every option and every pair of two options'
# values; here every masking with every (dropout, mode), 12 cases instead of the 48 of the full product). With
# dropout, a batch of one row draws the same random numbers as PyTorch in the same order.


# (dropout, mode): eval with and without dropout (dropout must then do nothing), training without dropout,
# and training with dropout under one seed (one batch row, see the module docstring).


MHA_GRID = [
    (bias, batch_first, masking, *dropout_mode)
    for bias, batch_first, masking, dropout_mode in pairwise(
        [True, False],  # bias
        [True, False],  # batch_first
        ["none", "causal", "key_padding"],  # masking
        MODES,  # (dropout, mode)
    )
]


@pytest.mark.parametrize(("bias", "batch_first", "masking", "dropout", "mode"), MHA_GRID)
def test_multihead_attention(bias, batch_first, masking, dropout, mode):
    m = nn.MultiheadAttention(D, H, dropout=dropout, bias=bias, batch_first=batch_first).train(mode == "train")
    ours = tc.MultiHeadAttention.from_torch(m)
    assert_same_modes(ours, m)
    assert dropouts(ours) == {dropout}
    batch = batch_size(dropout, mode)
    x, memory = torch.randn(batch, T, D), torch.randn(batch, S, D)
    attn_mask = torch_causal(T) if masking == "causal" else None
    kpm = key_padding([5, 3, 4][:batch], T) if masking == "key_padding" else None
    mask = None if attn_mask is None else ~attn_mask
    if kpm is not None:
        mask = ~kpm[:, None, None, :]
    for query, key in ((x, x), (x, memory)):
        if key is memory and masking != "none":
            continue
        args = [to_torch_layout(t, batch_first) for t in (query, key, key)]
        got, expected = run_both(
            lambda q=query, k=key: ours(q, k, k, mask),
            lambda args=args: m(*args, attn_mask=attn_mask, key_padding_mask=kpm, need_weights=False)[0],
        )
        torch.testing.assert_close(got, to_torch_layout(expected, batch_first), atol=ATOL, rtol=0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(kdim=8), "kdim/vdim"),
        (dict(vdim=8), "kdim/vdim"),
        (dict(add_bias_kv=True), "add_bias_kv or add_zero_attn"),
        (dict(add_zero_attn=True), "add_bias_kv or add_zero_attn"),
    ],
)
def test_multihead_attention_refuses_what_the_course_does_not_support(kwargs, message):
    with pytest.raises(ValueError, match=message):
        tc.MultiHeadAttention.from_torch(nn.MultiheadAttention(D, H, **kwargs))


# ---------------------------------------------------------------------------------------------------------
# float16 and bfloat16: our largest error against the exact result may exceed PyTorch's own largest error by at
# most assert_close's default tolerance for the dtype (tests/half_precision.py says how and why).


@given(dtype=dtypes, scale=scales, seed=st.integers(0, 1000))
def test_multihead_attention_equals_torch_in_half_precision(dtype, scale, seed):
    torch.manual_seed(seed)
    theirs = nn.MultiheadAttention(HALF_D, HALF_H, batch_first=True).to(dtype).train()  # dropout 0: the standard path
    ours = tc.MultiHeadAttention.from_torch(theirs)
    x, memory = (
        randn(HALF_B, HALF_T, HALF_D, dtype=dtype, scale=scale, seed=seed),
        randn(HALF_B, HALF_S, HALF_D, dtype=dtype, seed=seed + 1),
    )
    with torch.no_grad():
        for query, key in ((x, x), (x, memory)):
            exact = in_float64(theirs)(query.double(), key.double(), key.double(), need_weights=False)[0]
            expected = theirs(query, key, key, need_weights=False)[0]
            assert_layer_as_accurate_as_torch(ours(query, key, key), expected, exact)


# ---------------------------------------------------------------------------------------------------------
# Bad input gets a ValueError or TypeError whose message names the argument and what was expected


x3 = torch.randn(2, 4, 16)


BAD_INPUT = [
    # (id, callable, exception, pattern the message must contain)
    ("d_model not divisible", lambda: tc.MultiHeadAttention(30, 8), ValueError,
     r"d_model=30 is not divisible by n_heads=8"),
    ("n_heads zero", lambda: tc.MultiHeadAttention(16, 0), ValueError, r"n_heads=0 must be a positive integer"),
    ("d_model float", lambda: tc.MultiHeadAttention(16.0, 2), TypeError, r"d_model must be an int"),
    ("negative dropout", lambda: tc.MultiHeadAttention(16, 2, dropout=-0.1), ValueError,
     r"dropout=-0.1 must be in \[0, 1\)"),
    ("mask uint8 like post 1", lambda: tc.MultiHeadAttention(16, 2)(x3, x3, x3, torch.ones(4, 4).byte()),
     TypeError, r"mask must have dtype torch.bool.*torch.uint8"),
    ("ambiguous 3-D mask", lambda: tc.MultiHeadAttention(16, 2)(x3, x3, x3, torch.ones(2, 4, 4, dtype=torch.bool)),
     ValueError, r"mask has shape \(2, 4, 4\); expected \(T_q, T_k\) or"),
    ("mask batch mismatch", lambda: tc.MultiHeadAttention(16, 2)(x3, x3, x3, torch.ones(5, 1, 4, 4, dtype=torch.bool)),
     ValueError, r"mask has shape \(5, 1, 4, 4\), expected \(2 or 1, 2 or 1, T_q, T_k\)"),
    ("query width", lambda: tc.MultiHeadAttention(16, 2)(torch.randn(2, 4, 8), x3, x3), ValueError,
     r"query has 8 features, expected d_model=16"),
    ("from_torch of the wrong module", lambda: tc.MultiHeadAttention.from_torch(nn.Linear(4, 4)), TypeError,
     r"m must be a torch.nn.MultiheadAttention, got Linear"),
    ("split_heads that does not divide", lambda: tc.split_heads(torch.randn(2, 3, 10), 3), ValueError,
     r"x has 10 features, which n_heads=3 does not divide"),
    ("split_heads of a 2-D tensor", lambda: tc.split_heads(torch.randn(3, 16), 2), ValueError,
     r"x must have 3 dimensions, got shape \(3, 16\)"),
    ("split_heads of zero heads", lambda: tc.split_heads(x3, 0), ValueError, r"n_heads=0 must be a positive integer"),
    ("attention input of another dtype", lambda: tc.MultiHeadAttention(16, 2)(x3.double(), x3.double(), x3.double()),
     TypeError, r"query has dtype torch.float64 but the weights torch.float32"),
]  # fmt: skip


@pytest.mark.parametrize(("call", "exc", "pattern"), [c[1:] for c in BAD_INPUT], ids=[c[0] for c in BAD_INPUT])
def test_bad_input_raises_a_clear_error(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()
