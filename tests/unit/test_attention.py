"""Chapter 2, transformer_course/attention.py: scaled dot-product attention."""

import math

import pytest
import torch
import torch.nn.functional as F
from half_precision import HALF_B, HALF_H, HALF_T, assert_as_accurate_as_torch, dtypes, randn, scales
from hypothesis import given
from hypothesis import strategies as st

import transformer_course as tc

# ---------------------------------------------------------------------------------------------------------
# The module's own claims


def test_seed_002_worked_example():
    """Post 2's X, W^Q, W^K, W^V: Q, K, V and the scaled scores it prints (its QKᵀ product is right)."""
    x = torch.tensor([[1.0, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]])
    w_q = torch.tensor([[1.0, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 1]])
    w_k = torch.tensor([[0.0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 0]])
    w_v = torch.tensor([[0.0, 2, 0], [0, 3, 0], [1, 0, 3], [1, 1, 0]])
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    assert q.tolist() == [[1, 0, 2], [2, 2, 2], [2, 1, 3]]
    assert k.tolist() == [[0, 1, 1], [4, 4, 0], [2, 3, 1]]
    assert v.tolist() == [[1, 2, 3], [2, 8, 0], [2, 6, 3]]
    out, weights = tc.scaled_dot_product_attention(q, k, v)
    scores = q @ k.T / math.sqrt(3)
    torch.testing.assert_close(weights, torch.softmax(scores, -1))
    torch.testing.assert_close(out, torch.softmax(scores, -1) @ v)


def test_apple_banana_chair_lookup():
    """Post 0's soft dictionary: weights 0.6, 0.4, 0 over values 10, 5, 2 give 8."""
    values = torch.tensor([[10.0], [5.0], [2.0]])
    weights = torch.tensor([[0.6, 0.4, 0.0]])
    assert (weights @ values).item() == pytest.approx(8.0)


def test_fully_masked_row_gives_zeros_and_finite_gradients():
    q = torch.randn(1, 3, 4, requires_grad=True)
    mask = torch.tensor([[True, True, False], [False, False, False], [True, False, False]])
    out, weights = tc.scaled_dot_product_attention(q, q, q, mask)
    assert torch.all(out[0, 1] == 0) and torch.all(weights[0, 1] == 0)
    out.sum().backward()
    assert torch.isfinite(q.grad).all()
    assert torch.all(tc.fused_attention(q, q, q, mask)[0, 1] == 0)


def test_attention_dropout_zeroes_weights_and_rescales_the_rest():
    """dropout_p zeroes a share of the weights and scales the others by 1 / (1 - p), as nn.Dropout does."""
    q, k, v = (torch.randn(2, 4, 16, 8) for _ in range(3))
    _, clean = tc.scaled_dot_product_attention(q, k, v)
    out, dropped = tc.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    kept = dropped != 0
    assert 0.3 < kept.float().mean() < 0.7
    torch.testing.assert_close(dropped[kept], clean[kept] * 2)
    torch.testing.assert_close(out, dropped @ v)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_masking_is_safe_in_half_precision(dtype):
    """`masked_fill(mask, -1e9)` overflows float16; the package uses the dtype's own minimum."""
    q = torch.randn(2, 5, 8).to(dtype)
    with pytest.raises(RuntimeError, match="overflow"):
        q.masked_fill(torch.ones_like(q, dtype=torch.bool), -1e9) if dtype == torch.float16 else q.half().masked_fill(
            torch.ones_like(q, dtype=torch.bool), -1e9
        )
    out, weights = tc.scaled_dot_product_attention(q, q, q, tc.causal_mask(5))
    assert out.dtype == dtype and torch.isfinite(out).all()
    torch.testing.assert_close(weights.float().sum(-1), torch.ones(2, 5), atol=1e-2, rtol=0)


# ---------------------------------------------------------------------------------------------------------
# Properties that must hold for every input: checked with hypothesis on random shapes, masks and tokens


ATOL = 1e-5


@given(
    seed=st.integers(0, 10_000),
    t_q=st.integers(1, 7),
    t_k=st.integers(1, 7),
    p_visible=st.floats(0.0, 1.0),
)
def test_attention_rows_sum_to_one_over_visible_keys(seed, t_q, t_k, p_visible):
    """Each query's weights sum to 1 over the keys it may see, are 0 on hidden keys; a fully hidden row is all 0."""
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(2, 3, n, 8, generator=g) for n in (t_q, t_k, t_k))
    mask = torch.rand(2, 1, t_q, t_k, generator=g) < p_visible
    out, weights = tc.scaled_dot_product_attention(q, k, v, mask)
    visible_rows = mask.expand_as(weights).any(-1)
    torch.testing.assert_close(weights.sum(-1), visible_rows.float(), atol=ATOL, rtol=0)
    assert torch.all(weights[~mask.expand_as(weights)] == 0)
    assert torch.isfinite(out).all()
    assert torch.all(out[~visible_rows] == 0)


# ---------------------------------------------------------------------------------------------------------
# Equal to PyTorch's reference modules, weights copied with `from_torch` (float32, atol 1e-5)


B, T, S, D, H, FF = 3, 5, 7, 16, 4, 32


@pytest.mark.parametrize("shape", [(T, 8), (B, T, 8), (B, H, T, 8)])
def test_sdpa_no_mask(shape):
    q, k, v = (torch.randn(shape) for _ in range(3))
    out, weights = tc.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), atol=ATOL, rtol=0)
    torch.testing.assert_close(weights.sum(-1), torch.ones(shape[:-1]), atol=ATOL, rtol=0)


def test_sdpa_bool_mask_and_cross_lengths():
    q, k, v = torch.randn(B, H, T, 8), torch.randn(B, H, S, 8), torch.randn(B, H, S, 6)
    mask = torch.rand(B, 1, T, S) > 0.3
    mask[..., 0] = True  # keep one visible key per row: torch's own kernels differ on empty rows across versions
    out, _ = tc.scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), atol=ATOL, rtol=0)


def test_sdpa_causal_equals_is_causal():
    q, k, v = (torch.randn(B, H, T, 8) for _ in range(3))
    out, weights = tc.scaled_dot_product_attention(q, k, v, tc.causal_mask(T))
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True), atol=ATOL, rtol=0)
    assert torch.all(weights.triu(1) == 0)


# ---------------------------------------------------------------------------------------------------------
# float16 and bfloat16: at every element our error against the exact result may exceed PyTorch's own error by at
# most assert_close's default tolerance for the dtype (tests/half_precision.py says how and why).


def test_attention_float16_stays_finite_where_pytorch_does():
    q, k, v = (randn(1, 2, 8, 64, dtype=torch.float16, scale=100.0, seed=i) for i in range(3))
    out, weights = tc.scaled_dot_product_attention(q, k, v)
    assert torch.isfinite(out).all() and torch.isfinite(weights).all()
    assert out.dtype == weights.dtype == torch.float16
    exact = F.scaled_dot_product_attention(q.double(), k.double(), v.double())
    assert_as_accurate_as_torch(out, F.scaled_dot_product_attention(q, k, v), exact)


@given(dtype=dtypes, scale=scales, seed=st.integers(0, 1000), masked=st.booleans())
def test_attention_equals_torch_in_half_precision(dtype, scale, seed, masked):
    q, k, v = (randn(HALF_B, HALF_H, HALF_T, 16, dtype=dtype, scale=scale, seed=seed + i) for i in range(3))
    g = torch.Generator().manual_seed(seed)
    mask = (
        (torch.rand(HALF_B, 1, HALF_T, HALF_T, generator=g) > 0.3) | torch.eye(HALF_T, dtype=torch.bool)
        if masked
        else None
    )
    exact = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=mask)
    out, _ = tc.scaled_dot_product_attention(q, k, v, mask)
    assert_as_accurate_as_torch(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), exact)


# ---------------------------------------------------------------------------------------------------------
# Bad input gets a ValueError or TypeError whose message names the argument and what was expected


q4 = torch.randn(2, 2, 4, 8)


BAD_INPUT = [
    # (id, callable, exception, pattern the message must contain)
    ("mask wrong shape", lambda: tc.scaled_dot_product_attention(q4, q4, q4, torch.ones(3, 4, dtype=torch.bool)),
     ValueError, r"mask has shape \(3, 4\), expected a shape broadcastable to \(\.\.\., 4, 4\)"),
    ("mask float dtype", lambda: tc.scaled_dot_product_attention(q4, q4, q4, torch.ones(4, 4)), TypeError,
     r"mask must have dtype torch.bool \(True = may attend\), got torch.float32"),
    ("q and k widths", lambda: tc.scaled_dot_product_attention(q4, torch.randn(2, 2, 4, 6), q4), ValueError,
     r"q and k must share their last dimension d_k, got 8 and 6"),
    ("integer queries", lambda: tc.scaled_dot_product_attention(q4.long(), q4, q4), TypeError,
     r"q must be a floating-point tensor"),
    ("mask that does not broadcast", lambda: tc.scaled_dot_product_attention(q4, q4, q4, torch.ones(5, 4, 4).bool()),
     ValueError, r"mask has shape \(5, 4, 4\), expected a shape broadcastable to \(\.\.\., 4, 4\) that does not "
     r"enlarge the scores \(2, 2, 4, 4\)"),
    ("mask that would enlarge the output",
     lambda: tc.scaled_dot_product_attention(q4[0, 0], q4[0, 0], q4[0, 0], torch.ones(2, 1, 4, 4).bool()),
     ValueError, r"mask has shape \(2, 1, 4, 4\).*does not enlarge the scores \(4, 4\)"),
    ("q and k batches that do not broadcast",
     lambda: tc.scaled_dot_product_attention(q4, torch.randn(3, 2, 4, 8), torch.randn(3, 2, 4, 8)), ValueError,
     r"the leading dimensions of q \(2, 2, 4, 8\), k \(3, 2, 4, 8\) and v \(3, 2, 4, 8\) do not broadcast"),
    ("q, k and v of different dtypes", lambda: tc.scaled_dot_product_attention(q4, q4.double(), q4), TypeError,
     r"q, k and v must share one dtype, got torch.float32, torch.float64 and torch.float32"),
    ("attention dropout of one", lambda: tc.scaled_dot_product_attention(q4, q4, q4, dropout_p=1.0), ValueError,
     r"dropout_p=1.0 must be in \[0, 1\)"),
]  # fmt: skip


@pytest.mark.parametrize(("call", "exc", "pattern"), [c[1:] for c in BAD_INPUT], ids=[c[0] for c in BAD_INPUT])
def test_bad_input_raises_a_clear_error(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()
