"""Chapter 6, transformer_course/norm.py: LayerNorm and RMSNorm."""

import pytest
import torch
import torch.nn.functional as F
from half_precision import (
    HALF_B,
    HALF_D,
    HALF_T,
    assert_as_accurate_as_torch,
    dtypes,
    in_float64,
    perturbed,
    randn,
    scales,
)
from hypothesis import given
from hypothesis import strategies as st
from layer_checks import (
    ATOL,
    B,
    D,
    T,
    assert_same_modes,
    perturb,
)
from torch import nn

import transformer_course as tc

# ---------------------------------------------------------------------------------------------------------
# The module's own claims


def test_seed_000_layernorm_differs_from_the_real_one():
    x = torch.randn(4, 16)
    seed_style = (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + 1e-6)  # unbiased, eps outside
    ours = tc.LayerNorm(16)(x)
    torch.testing.assert_close(ours, F.layer_norm(x, (16,)), atol=1e-5, rtol=0)
    assert (seed_style - ours).abs().max() > 1e-2


def test_rmsnorm_formula():
    x = torch.randn(3, 8)
    expected = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
    torch.testing.assert_close(tc.RMSNorm(8)(x), expected, atol=1e-6, rtol=0)


# ---------------------------------------------------------------------------------------------------------
# Equal to PyTorch's reference modules, weights copied with `from_torch` (float32, atol 1e-5)


@pytest.mark.parametrize("eps", [1e-5, 1e-6, 0.1])
def test_layernorm_equals_torch(eps):
    m = nn.LayerNorm(D, eps=eps)
    with torch.no_grad():
        m.weight.normal_()
        m.bias.normal_()
    ours = tc.LayerNorm.from_torch(m)
    x = torch.randn(B, T, D) * 3 + 1
    torch.testing.assert_close(ours(x), m(x), atol=ATOL, rtol=0)


# ---------------------------------------------------------------------------------------------------------
# `from_torch` for every constructor option of PyTorch's module, in train and eval mode: one equality test per
# combination. With dropout, a batch of one row draws the same random numbers as PyTorch in the same order.


@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("shape", [D, (D,), [D]], ids=["int", "tuple", "list"])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("eps", [1e-5, 1e-2])
def test_layernorm(eps, bias, shape, mode):
    m = perturb(nn.LayerNorm(shape, eps=eps, bias=bias)).train(mode == "train")
    ours = tc.LayerNorm.from_torch(m)
    assert_same_modes(ours, m)
    assert ours.eps == eps
    x = torch.randn(3, T, D) * 3 + 1
    torch.testing.assert_close(ours(x), m(x), atol=ATOL, rtol=0)
    # Without a bias PyTorch has no parameter to train; ours keeps beta at 0 and does not train it.
    assert ours.bias.requires_grad is bias
    assert tc.count_parameters(ours) == sum(p.numel() for p in m.parameters())


@pytest.mark.parametrize(
    ("m", "message"),
    [
        (nn.LayerNorm(D, elementwise_affine=False), "elementwise_affine=False"),
        (nn.LayerNorm((T, D)), r"normalises over \(5, 16\); only one dimension"),
        (nn.RMSNorm(D), "m must be a torch.nn.LayerNorm, got RMSNorm"),
    ],
    ids=["no affine", "two dimensions", "rmsnorm"],
)
def test_layernorm_refuses_what_the_course_does_not_support(m, message):
    with pytest.raises((ValueError, TypeError), match=message):
        tc.LayerNorm.from_torch(m)


# ---------------------------------------------------------------------------------------------------------
# float16 and bfloat16: at every element our error against the exact result may exceed PyTorch's own error by at
# most assert_close's default tolerance for the dtype (tests/half_precision.py says how and why).


offsets = st.sampled_from([0.0, 10.0, 1000.0])


def test_layernorm_float16_of_large_inputs_is_not_zero():
    x = randn(1, 64, dtype=torch.float16, scale=300.0)
    ours, theirs = tc.LayerNorm(64).half(), nn.LayerNorm(64).half()
    assert ours(x).abs().max() > 1.0  # the squares overflowed: every output was 0
    assert_as_accurate_as_torch(ours(x), theirs(x), in_float64(theirs)(x.double()))


def test_rmsnorm_float16_of_large_inputs():
    x = randn(1, 64, dtype=torch.float16, scale=300.0)
    ours, theirs = tc.RMSNorm(64).half(), nn.RMSNorm(64, eps=1e-6).half()
    assert_as_accurate_as_torch(ours(x), theirs(x), in_float64(theirs)(x.double()))


def test_layernorm_bfloat16_with_a_large_offset():
    x = randn(4, 64, dtype=torch.bfloat16, offset=1000.0)
    ours, theirs = tc.LayerNorm(64).bfloat16(), nn.LayerNorm(64).bfloat16()
    assert_as_accurate_as_torch(ours(x), theirs(x), in_float64(theirs)(x.double()))


@given(dtype=dtypes, scale=scales, offset=offsets, seed=st.integers(0, 1000), bias=st.booleans())
def test_layernorm_equals_torch_in_half_precision(dtype, scale, offset, seed, bias):
    theirs = perturbed(nn.LayerNorm(HALF_D, bias=bias), seed).to(dtype)
    ours = tc.LayerNorm.from_torch(theirs)
    x = randn(HALF_B, HALF_T, HALF_D, dtype=dtype, scale=scale, offset=offset, seed=seed)
    out = ours(x)
    assert out.dtype == dtype
    assert_as_accurate_as_torch(out, theirs(x), in_float64(theirs)(x.double()))


@given(dtype=dtypes, scale=scales, offset=offsets, seed=st.integers(0, 1000))
def test_rmsnorm_equals_torch_in_half_precision(dtype, scale, offset, seed):
    theirs = perturbed(nn.RMSNorm(HALF_D, eps=1e-6), seed).to(dtype)
    ours = tc.RMSNorm(HALF_D).to(dtype)
    with torch.no_grad():
        ours.weight.copy_(theirs.weight)
    x = randn(HALF_B, HALF_T, HALF_D, dtype=dtype, scale=scale, offset=offset, seed=seed)
    assert_as_accurate_as_torch(ours(x), theirs(x), in_float64(theirs)(x.double()))


# ---------------------------------------------------------------------------------------------------------
# Bad input gets a ValueError or TypeError whose message names the argument and what was expected


BAD_INPUT = [
    # (id, callable, exception, pattern the message must contain)
    ("LayerNorm eps", lambda: tc.LayerNorm(8, eps=-1e-5), ValueError, r"eps=-1e-05 must be positive"),
    ("LayerNorm width", lambda: tc.LayerNorm(8)(torch.randn(2, 4)), ValueError,
     r"x has 4 features, expected d_model=8"),
    ("LayerNorm of integers", lambda: tc.LayerNorm(4)(torch.ones(2, 4, dtype=torch.long)), TypeError,
     r"x must be a floating-point tensor, got dtype torch.int64"),
    ("RMSNorm of integers", lambda: tc.RMSNorm(4)(torch.ones(2, 4, dtype=torch.int32)), TypeError,
     r"x must be a floating-point tensor, got dtype torch.int32"),
    ("RMSNorm width", lambda: tc.RMSNorm(8)(torch.randn(2, 4)), ValueError, r"x has 4 features, expected d_model=8"),
    ("LayerNorm of a scalar", lambda: tc.LayerNorm(8)(torch.tensor(1.0)), ValueError,
     r"x has 0 features, expected d_model=8"),
    ("LayerNorm eps NaN", lambda: tc.LayerNorm(8, eps=float("nan")), ValueError, r"eps=nan must be positive"),
    ("LayerNorm bias not a bool", lambda: tc.LayerNorm(8, bias="no"), TypeError, r"bias must be a bool, got str"),
]  # fmt: skip


@pytest.mark.parametrize(("call", "exc", "pattern"), [c[1:] for c in BAD_INPUT], ids=[c[0] for c in BAD_INPUT])
def test_bad_input_raises_a_clear_error(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()
