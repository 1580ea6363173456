"""Chapter 9, transformer_course/encoder.py: EncoderLayer and Encoder."""

import pytest
import torch
from half_precision import (
    HALF_B,
    HALF_D,
    HALF_FF,
    HALF_H,
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
# Properties that must hold for every input: checked with hypothesis on random shapes, masks and tokens


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


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("training", [False, True])
def test_encoder_layer_equals_torch(norm_first, activation, training):
    m = perturb(nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, activation=activation,
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
    m = perturb(nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, batch_first=True, norm_first=norm_first))
    ours = tc.EncoderLayer.from_torch(m)
    x = torch.randn(B, T, D)
    torch.testing.assert_close(ours(x, tc.causal_mask(T)), m(x, src_mask=torch_causal(T)), atol=ATOL, rtol=0)


def test_encoder_stack_equals_torch_encoder():
    layer = perturb(nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, batch_first=True, norm_first=True))
    m = nn.TransformerEncoder(layer, num_layers=3, norm=perturb(nn.LayerNorm(D)), enable_nested_tensor=False)
    ours = tc.Encoder(D, H, FF, n_layers=3, dropout=0.0, norm_first=True)
    ours.layers = nn.ModuleList(tc.EncoderLayer.from_torch(layer) for layer in m.layers)
    ours.norm = tc.LayerNorm.from_torch(m.norm)
    x = torch.randn(B, T, D)
    torch.testing.assert_close(ours(x), m(x), atol=ATOL, rtol=0)


# ---------------------------------------------------------------------------------------------------------
# `from_torch` for every constructor option of PyTorch's module, in train and eval mode: one equality test per
# case of layer_checks.LAYER_GRID (a pairwise covering array: 25 cases instead of the 384 of the full product).


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
# float16 and bfloat16: our error against the exact float64 result may exceed PyTorch's own by at most the
# dtype's tolerance (layer_checks.assert_layer_as_accurate_as_torch)


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
