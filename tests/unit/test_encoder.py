"""Chapter 9, transformer_course/encoder.py: EncoderLayer and Encoder."""

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
# Properties that must hold for every input: checked with hypothesis on random shapes, masks and tokens


ATOL = 1e-5


@given(seed=st.integers(0, 10_000), length=st.integers(2, 8), norm_first=st.booleans())
def test_encoder_without_positions_is_permutation_equivariant(seed, length, norm_first):
    torch.manual_seed(seed)
    encoder = tc.Encoder(16, 2, 32, n_layers=2, dropout=0.0, norm_first=norm_first).eval()
    x = torch.randn(2, length, 16)
    perm = torch.randperm(length)
    with torch.no_grad():
        torch.testing.assert_close(encoder(x[:, perm]), encoder(x)[:, perm], atol=ATOL, rtol=0)


# ---------------------------------------------------------------------------------------------------------
# Equal to PyTorch's reference modules, weights copied with `from_torch` (float32, atol 1e-5)


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


def test_encoder_stack_equals_torch_encoder():
    layer = _perturb(nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, batch_first=True, norm_first=True))
    m = nn.TransformerEncoder(layer, num_layers=3, norm=_perturb(nn.LayerNorm(D)), enable_nested_tensor=False)
    ours = tc.Encoder(D, H, FF, n_layers=3, dropout=0.0, norm_first=True)
    ours.layers = nn.ModuleList(tc.EncoderLayer.from_torch(layer) for layer in m.layers)
    ours.norm = tc.LayerNorm.from_torch(m.norm)
    x = torch.randn(B, T, D)
    torch.testing.assert_close(ours(x), m(x), atol=ATOL, rtol=0)


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
    # mode after a Post-LN and after a Pre-LN sublayer (the residual's dropout comes before or after the norm;
    # tests/mutants.py removes it, or moves the feed-forward's), and a bias-free layer whose dropout must be
    # copied while it does nothing in eval mode (mutants: bias kept, dropout probability not copied).
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
def test_encoder_layer(case):
    bias, norm_first, activation, eps, batch_first, (dropout, mode) = case
    m = make_layer(nn.TransformerEncoderLayer, bias, norm_first, activation, eps, batch_first, dropout, mode)
    ours = tc.EncoderLayer.from_torch(m)
    assert_carries_the_options(ours, m, bias, eps, dropout)
    batch = batch_size(dropout, mode)
    x = torch.randn(batch, T, D)
    kpm = key_padding([5, 2, 4][:batch], T)
    got, expected = run_both(
        lambda: ours(x, ~kpm[:, None, None, :]),
        lambda: m(to_torch_layout(x, batch_first), src_key_padding_mask=kpm),
    )
    # PyTorch's inference fast path may zero the padded query rows: compare the real positions.
    real = ~kpm
    torch.testing.assert_close(got[real], to_torch_layout(expected, batch_first)[real], atol=ATOL, rtol=0)


def test_a_callable_activation_is_copied_not_shared():
    m = nn.TransformerEncoderLayer(D, H, FF, activation=nn.GELU(approximate="tanh"), batch_first=True)
    ours = tc.EncoderLayer.from_torch(m)
    assert isinstance(ours.ffn.activation, nn.GELU) and ours.ffn.activation.approximate == "tanh"
    assert ours.ffn.activation is not m.activation
    # By name where PyTorch's layer was built by name: the same modules as a layer built by hand.
    assert isinstance(tc.EncoderLayer.from_torch(nn.TransformerEncoderLayer(D, H, FF)).ffn.activation, nn.ReLU)


@pytest.mark.parametrize("kind", [nn.TransformerEncoderLayer, nn.TransformerDecoderLayer])
def test_layers_follow_dtype(kind):
    m = kind(D, H, FF, batch_first=True, dtype=torch.float64)
    ours = getattr(tc, kind.__name__.replace("Transformer", "")).from_torch(m)
    assert {p.dtype for p in ours.parameters()} == {torch.float64}


@pytest.mark.parametrize("mode", ["eval", "train"])
@pytest.mark.parametrize("final_norm", [True, False])
@pytest.mark.parametrize("norm_first", [False, True], ids=["post-ln", "pre-ln"])
def test_encoder_stack(norm_first, final_norm, mode):
    layer = nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, batch_first=True, norm_first=norm_first)
    norm = nn.LayerNorm(D) if final_norm else None
    m = perturb(nn.TransformerEncoder(layer, num_layers=3, norm=norm, enable_nested_tensor=False))
    m.train(mode == "train")
    ours = tc.Encoder.from_torch(m)
    assert_same_modes(ours, m)
    assert len(ours.layers) == 3 and isinstance(ours.norm, tc.LayerNorm if final_norm else nn.Identity)
    x = torch.randn(3, T, D)
    kpm = key_padding([5, 2, 4], T)
    real = ~kpm
    got, expected = ours(x, ~kpm[:, None, None, :]), m(x, src_key_padding_mask=kpm)
    torch.testing.assert_close(got[real], expected[real], atol=ATOL, rtol=0)


@pytest.mark.parametrize(
    ("make", "exc", "message"),
    [
        (lambda: tc.Encoder.from_torch(nn.TransformerEncoderLayer(D, H, FF)), TypeError,
         "m must be a torch.nn.TransformerEncoder, got TransformerEncoderLayer"),
        (lambda: tc.Decoder.from_torch(nn.TransformerDecoder(nn.TransformerDecoderLayer(D, H, FF), 2,
                                                             norm=nn.RMSNorm(D))),
         ValueError, "m.norm is a RMSNorm; only torch.nn.LayerNorm"),
        (lambda: tc.Encoder.from_torch(nn.TransformerEncoder(nn.TransformerEncoderLayer(D, H, FF), 0,
                                                             enable_nested_tensor=False)),
         ValueError, "m has no layers"),
        (lambda: tc.DecoderLayer.from_torch(nn.TransformerEncoderLayer(D, H, FF)), TypeError,
         "m must be a torch.nn.TransformerDecoderLayer, got TransformerEncoderLayer"),
    ],
    ids=["layer for a stack", "rmsnorm final norm", "no layers", "encoder layer for a decoder layer"],
)  # fmt: skip
def test_stacks_refuse_what_the_course_does_not_support(make, exc, message):
    with pytest.raises(exc, match=message):
        make()


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
       norm_first=st.booleans(), activation=st.sampled_from(["relu", "gelu"]))  # fmt: skip
def test_encoder_layer_equals_torch_in_half_precision(dtype, scale, seed, norm_first, activation):
    torch.manual_seed(seed)
    theirs = nn.TransformerEncoderLayer(HALF_D, HALF_H, HALF_FF, dropout=0.0, activation=activation, batch_first=True,
                                        norm_first=norm_first)  # fmt: skip
    theirs = perturbed(theirs, seed).to(dtype).train()  # dropout 0: the standard path
    ours = tc.EncoderLayer.from_torch(theirs)
    x = randn(HALF_B, HALF_T, HALF_D, dtype=dtype, scale=scale, seed=seed)
    with torch.no_grad():
        assert_layer_as_accurate_as_torch(ours(x), theirs(x), in_float64(theirs)(x.double()))


# ---------------------------------------------------------------------------------------------------------
# Bad input gets a ValueError or TypeError whose message names the argument and what was expected


BAD_INPUT = [
    # (id, callable, exception, pattern the message must contain)
    ("dropout of one", lambda: tc.EncoderLayer(16, 2, 32, dropout=1.0), ValueError, r"dropout=1.0 must be in \[0, 1\)"),
    ("norm_first not a bool", lambda: tc.EncoderLayer(16, 2, 32, norm_first=1), TypeError,
     r"norm_first must be a bool, got int"),
]  # fmt: skip


@pytest.mark.parametrize(("call", "exc", "pattern"), [c[1:] for c in BAD_INPUT], ids=[c[0] for c in BAD_INPUT])
def test_bad_input_raises_a_clear_error(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()
