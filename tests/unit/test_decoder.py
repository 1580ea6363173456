"""Chapter 10, transformer_course/decoder.py: DecoderLayer and Decoder."""

import pytest
import torch
from half_precision import (
    HALF_B,
    HALF_D,
    HALF_FF,
    HALF_H,
    HALF_S,
    HALF_T,
    assert_layer_as_accurate_as_torch,
    dtypes,
    in_float64,
    perturbed,
    randn,
)
from hypothesis import given
from hypothesis import strategies as st
from layer_checks import (
    ATOL,
    FF,
    LAYER_GRID,
    B,
    D,
    H,
    S,
    T,
    assert_carries_the_options,
    assert_same_modes,
    batch_size,
    key_padding,
    layer_id,
    make_layer,
    perturb,
    run_both,
    to_torch_layout,
    torch_causal,
)
from torch import nn

import transformer_course as tc

# ---------------------------------------------------------------------------------------------------------
# Equal to PyTorch's reference modules, weights copied with `from_torch` (float32, atol 1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_decoder_layer_equals_torch(norm_first, activation):
    m = perturb(nn.TransformerDecoderLayer(D, H, FF, dropout=0.0, activation=activation,
                                           batch_first=True, norm_first=norm_first))  # fmt: skip
    ours = tc.DecoderLayer.from_torch(m)
    x, memory = torch.randn(B, T, D), torch.randn(B, S, D)
    tgt_kpm, mem_kpm = key_padding([5, 3, 4], T), key_padding([7, 4, 6], S)
    expected = m(x, memory, tgt_mask=torch_causal(T), tgt_key_padding_mask=tgt_kpm, memory_key_padding_mask=mem_kpm)
    tgt_mask = tc.combine_masks(tc.causal_mask(T), ~tgt_kpm[:, None, None, :])
    got = ours(x, memory, tgt_mask, ~mem_kpm[:, None, None, :])
    torch.testing.assert_close(got, expected, atol=ATOL, rtol=0)


def test_decoder_layer_memory_mask_equals_torch():
    m = perturb(nn.TransformerDecoderLayer(D, H, FF, dropout=0.0, batch_first=True))
    ours = tc.DecoderLayer.from_torch(m)
    x, memory = torch.randn(B, T, D), torch.randn(B, S, D)
    memory_hide = torch.rand(T, S) > 0.5
    memory_hide[:, 0] = False
    expected = m(x, memory, tgt_mask=torch_causal(T), memory_mask=memory_hide)
    torch.testing.assert_close(ours(x, memory, tc.causal_mask(T), ~memory_hide), expected, atol=ATOL, rtol=0)


# ---------------------------------------------------------------------------------------------------------
# `from_torch` for every constructor option of PyTorch's module, in train and eval mode: one equality test per
# case of layer_checks.LAYER_GRID (a pairwise covering array: 25 cases instead of the 384 of the full product).


@pytest.mark.parametrize("case", LAYER_GRID, ids=layer_id)
def test_decoder_layer(case):
    bias, norm_first, activation, eps, batch_first, (dropout, mode) = case
    m = make_layer(nn.TransformerDecoderLayer, bias, norm_first, activation, eps, batch_first, dropout, mode)
    ours = tc.DecoderLayer.from_torch(m)
    assert_carries_the_options(ours, m, bias, eps, dropout)
    batch = batch_size(dropout, mode)
    x, memory = torch.randn(batch, T, D), torch.randn(batch, S, D)
    mem_kpm = key_padding([7, 4, 6][:batch], S)
    tgt, mem = (to_torch_layout(t, batch_first) for t in (x, memory))
    got, expected = run_both(
        lambda: ours(x, memory, tc.causal_mask(T), ~mem_kpm[:, None, None, :]),
        lambda: m(tgt, mem, tgt_mask=torch_causal(T), memory_key_padding_mask=mem_kpm),
    )
    torch.testing.assert_close(got, to_torch_layout(expected, batch_first), atol=ATOL, rtol=0)


@pytest.mark.parametrize("mode", ["eval", "train"])
@pytest.mark.parametrize("final_norm", [True, False])
@pytest.mark.parametrize("norm_first", [False, True], ids=["post-ln", "pre-ln"])
def test_decoder_stack(norm_first, final_norm, mode):
    """The Decoder stack against nn.TransformerDecoder: Post-LN (norm=None, as in the paper) and Pre-LN (with a
    final LayerNorm), and the other two combinations, which nn.Transformer's own stacks use."""
    layer = nn.TransformerDecoderLayer(D, H, FF, dropout=0.0, batch_first=True, norm_first=norm_first)
    m = perturb(nn.TransformerDecoder(layer, num_layers=3, norm=nn.LayerNorm(D) if final_norm else None))
    m.train(mode == "train")
    ours = tc.Decoder.from_torch(m)
    assert_same_modes(ours, m)
    x, memory = torch.randn(3, T, D), torch.randn(3, S, D)
    tgt_kpm, mem_kpm = key_padding([5, 3, 4], T), key_padding([7, 4, 6], S)
    expected = m(x, memory, tgt_mask=torch_causal(T), tgt_key_padding_mask=tgt_kpm, memory_key_padding_mask=mem_kpm)
    got = ours(x, memory, tc.combine_masks(tc.causal_mask(T), ~tgt_kpm[:, None, None, :]), ~mem_kpm[:, None, None, :])
    torch.testing.assert_close(got, expected, atol=ATOL, rtol=0)


def test_decoder_stack_of_a_torch_transformer():
    """nn.Transformer's decoder: Post-LN layers followed by a final LayerNorm."""
    m = perturb(nn.Transformer(D, H, 2, 2, FF, dropout=0.0, batch_first=True)).eval()
    ours = tc.Decoder.from_torch(m.decoder)
    x, memory = torch.randn(2, T, D), torch.randn(2, S, D)
    expected = m.decoder(x, memory, tgt_mask=torch_causal(T))
    torch.testing.assert_close(ours(x, memory, tc.causal_mask(T)), expected, atol=ATOL, rtol=0)


# ---------------------------------------------------------------------------------------------------------
# float16 and bfloat16: our error against the exact float64 result may exceed PyTorch's own by at most the
# dtype's tolerance (layer_checks.assert_layer_as_accurate_as_torch)


@given(dtype=dtypes, scale=st.sampled_from([1e-2, 1.0, 10.0, 30.0]), seed=st.integers(0, 1000),
       norm_first=st.booleans())  # fmt: skip
def test_decoder_layer_equals_torch_in_half_precision(dtype, scale, seed, norm_first):
    torch.manual_seed(seed)
    theirs = nn.TransformerDecoderLayer(HALF_D, HALF_H, HALF_FF, dropout=0.0, batch_first=True, norm_first=norm_first)
    theirs = perturbed(theirs, seed).to(dtype).train()  # dropout 0: the standard path
    ours = tc.DecoderLayer.from_torch(theirs)
    x, memory = (
        randn(HALF_B, HALF_T, HALF_D, dtype=dtype, scale=scale, seed=seed),
        randn(HALF_B, HALF_S, HALF_D, dtype=dtype, seed=seed + 1),
    )
    causal = torch_causal(HALF_T)
    with torch.no_grad():
        exact = in_float64(theirs)(x.double(), memory.double(), tgt_mask=causal)
        assert_layer_as_accurate_as_torch(
            ours(x, memory, tc.causal_mask(HALF_T)), theirs(x, memory, tgt_mask=causal), exact
        )
