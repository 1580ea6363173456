"""`from_torch` for every constructor option of PyTorch's layers: one equality test per combination.

The grid covers nn.MultiheadAttention (bias, batch_first, dropout), nn.LayerNorm (eps, bias, the form of
normalized_shape), nn.TransformerEncoderLayer and nn.TransformerDecoderLayer (bias, norm_first, activation
as a name or a callable, layer_norm_eps, batch_first, dropout), each in train and eval mode, and the stacks
nn.TransformerEncoder / nn.TransformerDecoder with and without a final norm. What the course does not
support (kdim/vdim, add_bias_kv, add_zero_attn, elementwise_affine=False, a norm over two dimensions, a
final norm other than LayerNorm) is refused with an error that says so.

In training mode with dropout the two modules draw the same random numbers in the same order when the
batch has one row, so equal seeds give equal outputs: every dropout sits where PyTorch's does, with
PyTorch's probability. (With more rows PyTorch lays some masks out time-major, so the draws land elsewhere.)
"""

import itertools

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import transformer_course as tc

ATOL = 1e-5
D, H, FF, T, S = 16, 4, 32, 5, 7

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


def key_padding(lengths, total):
    """PyTorch's key_padding_mask (True = ignore)."""
    return torch.arange(total)[None, :] >= torch.tensor(lengths)[:, None]


def torch_causal(size):
    return torch.ones(size, size, dtype=torch.bool).triu(1)  # PyTorch's bool convention: True = may not attend


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


# ---------------------------------------------------------------------------------------------------------
# nn.MultiheadAttention


@pytest.mark.parametrize(("dropout", "mode"), MODES)
@pytest.mark.parametrize("masking", ["none", "causal", "key_padding"])
@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("bias", [True, False])
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
# nn.LayerNorm


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
# nn.TransformerEncoderLayer and nn.TransformerDecoderLayer: the whole grid of options

LAYER_GRID = list(
    itertools.product(
        [True, False],  # bias
        [False, True],  # norm_first
        list(ACTIVATIONS),  # activation
        [1e-5, 1e-3],  # layer_norm_eps
        [True, False],  # batch_first
        MODES,  # (dropout, mode)
    )
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


# ---------------------------------------------------------------------------------------------------------
# The stacks: nn.TransformerEncoder and nn.TransformerDecoder


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
