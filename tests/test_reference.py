"""The package equals PyTorch's reference modules, weights copied with `from_torch` (float32, atol 1e-5)."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import transformer_course as tc

ATOL = 1e-5
B, T, S, D, H, FF = 3, 5, 7, 16, 4, 32


def key_padding(lengths, total):
    """PyTorch's key_padding_mask (True = ignore) for rows of the given lengths."""
    return torch.arange(total)[None, :] >= torch.tensor(lengths)[:, None]


def torch_causal(size):
    """PyTorch's bool attn_mask convention: True = NOT allowed to attend."""
    return torch.ones(size, size, dtype=torch.bool).triu(1)


# ---------------------------------------------------------------------------------------------------------
# Scaled dot-product attention vs F.scaled_dot_product_attention


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


def test_fused_attention_equals_teaching_path():
    q, k, v = (torch.randn(B, H, T, 8) for _ in range(3))
    mask = tc.padding_mask(torch.tensor([[1, 2, 3, 0, 0], [4, 5, 6, 7, 8], [9, 0, 0, 0, 0]]))
    torch.testing.assert_close(
        tc.fused_attention(q, k, v, mask), tc.scaled_dot_product_attention(q, k, v, mask)[0], atol=ATOL, rtol=0
    )


# ---------------------------------------------------------------------------------------------------------
# MultiHeadAttention vs nn.MultiheadAttention


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
# LayerNorm vs nn.LayerNorm


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
# Encoder and decoder layers vs nn.TransformerEncoderLayer / nn.TransformerDecoderLayer


def _perturb(module):
    """Non-trivial LayerNorm gains and biases, so a swapped norm cannot go unnoticed."""
    with torch.no_grad():
        for sub in module.modules():
            if isinstance(sub, nn.LayerNorm):
                sub.weight.uniform_(0.5, 1.5)
                sub.bias.normal_(0, 0.1)
    return module


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("training", [False, True])
def test_encoder_layer_equals_torch(norm_first, activation, training):
    m = _perturb(nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, activation=activation,
                                            batch_first=True, norm_first=norm_first))  # fmt: skip
    ours = tc.EncoderLayer.from_torch(m)
    m.train(training)
    ours.train(training)
    x = torch.randn(B, T, D)
    kpm = key_padding([5, 2, 4], T)
    expected = m(x, src_key_padding_mask=kpm)
    got = ours(x, tc.combine_masks(~kpm[:, None, None, :]))
    # torch's inference fast path may zero padded query rows: compare the real positions.
    real = ~kpm
    torch.testing.assert_close(got[real], expected[real], atol=ATOL, rtol=0)


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_with_attn_mask_equals_torch(norm_first):
    m = _perturb(nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, batch_first=True, norm_first=norm_first))
    ours = tc.EncoderLayer.from_torch(m)
    x = torch.randn(B, T, D)
    torch.testing.assert_close(ours(x, tc.causal_mask(T)), m(x, src_mask=torch_causal(T)), atol=ATOL, rtol=0)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_decoder_layer_equals_torch(norm_first, activation):
    m = _perturb(nn.TransformerDecoderLayer(D, H, FF, dropout=0.0, activation=activation,
                                            batch_first=True, norm_first=norm_first))  # fmt: skip
    ours = tc.DecoderLayer.from_torch(m)
    x, memory = torch.randn(B, T, D), torch.randn(B, S, D)
    tgt_kpm, mem_kpm = key_padding([5, 3, 4], T), key_padding([7, 4, 6], S)
    expected = m(x, memory, tgt_mask=torch_causal(T), tgt_key_padding_mask=tgt_kpm, memory_key_padding_mask=mem_kpm)
    tgt_mask = tc.combine_masks(tc.causal_mask(T), ~tgt_kpm[:, None, None, :])
    got = ours(x, memory, tgt_mask, ~mem_kpm[:, None, None, :])
    torch.testing.assert_close(got, expected, atol=ATOL, rtol=0)


def test_decoder_layer_memory_mask_equals_torch():
    m = _perturb(nn.TransformerDecoderLayer(D, H, FF, dropout=0.0, batch_first=True))
    ours = tc.DecoderLayer.from_torch(m)
    x, memory = torch.randn(B, T, D), torch.randn(B, S, D)
    memory_hide = torch.rand(T, S) > 0.5
    memory_hide[:, 0] = False
    expected = m(x, memory, tgt_mask=torch_causal(T), memory_mask=memory_hide)
    torch.testing.assert_close(ours(x, memory, tc.causal_mask(T), ~memory_hide), expected, atol=ATOL, rtol=0)


def test_encoder_stack_equals_torch_encoder():
    layer = _perturb(nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, batch_first=True, norm_first=True))
    m = nn.TransformerEncoder(layer, num_layers=3, norm=_perturb(nn.LayerNorm(D)), enable_nested_tensor=False)
    ours = tc.Encoder(D, H, FF, n_layers=3, dropout=0.0, norm_first=True)
    ours.layers = nn.ModuleList(tc.EncoderLayer.from_torch(layer) for layer in m.layers)
    ours.norm = tc.LayerNorm.from_torch(m.norm)
    x = torch.randn(B, T, D)
    torch.testing.assert_close(ours(x), m(x), atol=ATOL, rtol=0)
