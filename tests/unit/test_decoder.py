"""Chapter 10, transformer_course/decoder.py: DecoderLayer and Decoder."""

import copy

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st
from pairwise import pairwise
from torch import nn

import transformer_course as tc

# ---------------------------------------------------------------------------------------------------------
# Equal to PyTorch's reference modules, weights copied with `from_torch` (float32, atol 1e-5)


ATOL = 1e-5


B, T, S, D, H, FF = 3, 5, 7, 16, 4, 32


def key_padding(lengths, total):
    """PyTorch's key_padding_mask (True = ignore) for rows of the given lengths."""
    return torch.arange(total)[None, :] >= torch.tensor(lengths)[:, None]


def torch_causal(size):
    """PyTorch's bool attn_mask convention: True = NOT allowed to attend."""
    return torch.ones(size, size, dtype=torch.bool).triu(1)


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


# ---------------------------------------------------------------------------------------------------------
# `from_torch` for every constructor option of PyTorch's module, in train and eval mode: one equality test per
# case of a pairwise covering array (tests/pairwise.py: every value of every option and every pair of two options'
# values, 25 cases instead of the 384 of the full product). With dropout, a batch of one row draws the same random
# numbers as PyTorch in the same order.


ACTIVATIONS = {
    "relu": "relu",
    "gelu": "gelu",
    "F.relu": F.relu,
    "F.gelu": F.gelu,
    "GELU(tanh)": nn.GELU(approximate="tanh"),
    "F.silu": F.silu,
}


# (dropout, mode): eval with and without dropout (dropout must then do nothing), training without dropout,
# and training with dropout under one seed (one batch row, see the module docstring).
MODES = [(0.0, "eval"), (0.3, "eval"), (0.0, "train"), (0.3, "train")]


def perturb(module: nn.Module) -> nn.Module:
    """Non-trivial LayerNorm gains and biases, so that a norm swapped or left out cannot go unnoticed."""
    with torch.no_grad():
        for sub in module.modules():
            if isinstance(sub, nn.LayerNorm) and sub.weight is not None:
                sub.weight.uniform_(0.5, 1.5)
                if sub.bias is not None:
                    sub.bias.normal_(0, 0.1)
    return module


def batch_size(dropout, mode):
    return 1 if dropout > 0 and mode == "train" else 3


def assert_same_modes(ours: nn.Module, theirs: nn.Module) -> None:
    assert ours.training == theirs.training
    assert all(m.training == theirs.training for m in ours.modules())


def dropouts(module: nn.Module) -> set[float]:
    """Every dropout probability in `module`: nn.Dropout layers and the attention weights' dropout."""
    attention = (tc.MultiHeadAttention, nn.MultiheadAttention)
    found = {m.p for m in module.modules() if isinstance(m, nn.Dropout)}
    return found | {m.dropout for m in module.modules() if isinstance(m, attention)}


def run_both(ours_call, theirs_call):
    """Run both calls under the same seed (dropout in training mode then draws the same numbers)."""
    torch.manual_seed(1234)
    expected = theirs_call()
    torch.manual_seed(1234)
    return ours_call(), expected


def to_torch_layout(x, batch_first):
    return x if batch_first else x.transpose(0, 1)


LAYER_GRID = pairwise(
    [True, False],  # bias
    [False, True],  # norm_first
    list(ACTIVATIONS),  # activation
    [1e-5, 1e-3],  # layer_norm_eps
    [True, False],  # batch_first
    MODES,  # (dropout, mode)
    # The combinations the code branches on, named rather than left to the greedy choice: dropout in training
    # mode after a Post-LN and after a Pre-LN sublayer (the residual's dropout comes before or after the norm),
    # and a bias-free layer whose dropout must be copied while it does nothing in eval mode: the same cases as
    # test_encoder.py's grid, where tests/mutants.py needs them.
    required=[
        (True, False, "relu", 1e-5, True, (0.3, "train")),
        (False, True, "gelu", 1e-3, False, (0.3, "train")),
        (False, False, "relu", 1e-5, True, (0.3, "eval")),
    ],
)


def layer_id(case):
    bias, norm_first, activation, eps, batch_first, (dropout, mode) = case
    return (
        f"{'bias' if bias else 'nobias'}-{'preln' if norm_first else 'postln'}-{activation}-eps{eps:g}-"
        f"{'bf' if batch_first else 'tf'}-p{dropout:g}-{mode}"
    )


def make_layer(kind, bias, norm_first, activation, eps, batch_first, dropout, mode):
    m = kind(D, H, FF, dropout=dropout, activation=ACTIVATIONS[activation], layer_norm_eps=eps,
             batch_first=batch_first, norm_first=norm_first, bias=bias)  # fmt: skip
    return perturb(m).train(mode == "train")


def assert_carries_the_options(ours, m, bias, eps, dropout):
    assert_same_modes(ours, m)
    assert dropouts(ours) == {dropout}
    assert all(layer.eps == eps for layer in ours.modules() if isinstance(layer, tc.LayerNorm))
    # bias=False: no Linear has a bias and no LayerNorm trains one, exactly as in PyTorch.
    assert all((linear.bias is not None) is bias for linear in ours.modules() if isinstance(linear, nn.Linear))
    assert tc.count_parameters(ours) == sum(p.numel() for p in m.parameters())


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
# float16 and bfloat16: at every element our error against the exact result (float64, weights and inputs
# rounded to the low precision first) may exceed PyTorch's own error by at most assert_close's default
# tolerance for the dtype; where PyTorch overflows, ours must be within that tolerance of the exact result.


DTYPES = [torch.float16, torch.bfloat16]


# torch.testing.assert_close's default (rtol, atol) for each dtype.
TOLERANCE = {torch.float16: (1e-3, 1e-5), torch.bfloat16: (1.6e-2, 1e-5)}


HALF_D, HALF_H, HALF_FF, HALF_B, HALF_T, HALF_S = 32, 4, 64, 2, 5, 6


dtypes = st.sampled_from(DTYPES)


def assert_layer_as_accurate_as_torch(ours: torch.Tensor, theirs: torch.Tensor, exact: torch.Tensor) -> None:
    """For a module of several rounded steps, error is measured on the largest element: rounding a sum of
    terms much larger than the result to the dtype costs every element an error of the terms' size."""
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape == exact.shape
    rtol, atol = TOLERANCE[ours.dtype]
    exact = exact.double()
    our_error, theirs_largest = (ours.double() - exact).abs().max(), their_error(theirs, exact).max()
    allowed = theirs_largest + atol + rtol * exact.abs().max()
    assert our_error <= allowed, f"largest error {float(our_error):.3g}, PyTorch's {float(theirs_largest):.3g}"


def their_error(theirs: torch.Tensor, exact: torch.Tensor) -> torch.Tensor:
    """PyTorch's error at each element; 0 where PyTorch overflows (there ours must match the exact result)."""
    error = (theirs.double() - exact).abs()
    return error.masked_fill(~torch.isfinite(error), 0.0)


def randn(*shape, dtype, scale=1.0, offset=0.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g) * scale + offset).to(dtype)


def perturbed(module: nn.Module, seed: int) -> nn.Module:
    """Non-trivial LayerNorm gains and biases (PyTorch initialises them to 1 and 0)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for sub in module.modules():
            if isinstance(sub, (nn.LayerNorm, nn.RMSNorm)):
                sub.weight.copy_(torch.rand(sub.weight.shape, generator=g) + 0.5)
                if getattr(sub, "bias", None) is not None:
                    sub.bias.copy_(torch.randn(sub.bias.shape, generator=g) * 0.1)
    return module


def in_float64(module: nn.Module) -> nn.Module:
    return copy.deepcopy(module).double()


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
    causal = torch.ones(HALF_T, HALF_T, dtype=torch.bool).triu(1)  # PyTorch's convention: True = may not attend
    with torch.no_grad():
        exact = in_float64(theirs)(x.double(), memory.double(), tgt_mask=causal)
        assert_layer_as_accurate_as_torch(
            ours(x, memory, tc.causal_mask(HALF_T)), theirs(x, memory, tgt_mask=causal), exact
        )
