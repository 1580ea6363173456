"""Checks shared by the layer tests (tests/unit/test_encoder.py, test_decoder.py, test_multihead.py, test_norm.py):
our layers against PyTorch's.

Those files test `from_torch` (tc.EncoderLayer / tc.DecoderLayer and their stacks, tc.MultiHeadAttention,
tc.LayerNorm) against PyTorch's modules the same way; what they share lives here, imported as
`from layer_checks import ...` (tests/ is on the path, as for `from pairwise import pairwise`):

- float32 equality, weights copied with `from_torch` (atol ATOL): the sizes B, T, S, D, H, FF, PyTorch's mask
  conventions (`key_padding`, `torch_causal`) and `perturb`, which gives the LayerNorms non-trivial gains and biases.
- Every constructor option, in train and eval mode: LAYER_GRID is a pairwise covering array (tests/pairwise.py:
  every value of every option and every pair of two options' values, 25 cases instead of the 384 of the full
  product), `layer_id` names a case, `make_layer` builds PyTorch's layer of either kind for it,
  `assert_carries_the_options` checks what `from_torch` copied and `run_both` runs the two layers under one seed.
  With dropout in training mode a batch of one row (`batch_size`) draws the same random numbers as PyTorch in the
  same order, so the outputs are equal there too.
- float16 and bfloat16: both files take their helpers from tests/half_precision.py
  (`assert_layer_as_accurate_as_torch` compares our largest error against the exact result, float64 by
  `in_float64`, with PyTorch's own, for inputs from `randn` and LayerNorms `perturbed`).
"""

import torch
import torch.nn.functional as F
from pairwise import pairwise
from torch import nn

import transformer_course as tc

# ---------------------------------------------------------------------------------------------------------
# float32 equality with PyTorch's modules


ATOL = 1e-5


B, T, S, D, H, FF = 3, 5, 7, 16, 4, 32


def key_padding(lengths, total):
    """PyTorch's key_padding_mask (True = ignore) for rows of the given lengths."""
    return torch.arange(total)[None, :] >= torch.tensor(lengths)[:, None]


def torch_causal(size):
    """PyTorch's bool attn_mask convention: True = NOT allowed to attend."""
    return torch.ones(size, size, dtype=torch.bool).triu(1)


def perturb(module: nn.Module) -> nn.Module:
    """Non-trivial LayerNorm gains and biases, so that a norm swapped or left out cannot go unnoticed."""
    with torch.no_grad():
        for sub in module.modules():
            if isinstance(sub, nn.LayerNorm) and sub.weight is not None:
                sub.weight.uniform_(0.5, 1.5)
                if sub.bias is not None:
                    sub.bias.normal_(0, 0.1)
    return module


def assert_same_modes(ours: nn.Module, theirs: nn.Module) -> None:
    assert ours.training == theirs.training
    assert all(m.training == theirs.training for m in ours.modules())


# ---------------------------------------------------------------------------------------------------------
# Every constructor option of PyTorch's layer: one case of LAYER_GRID per test


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


def batch_size(dropout, mode):
    return 1 if dropout > 0 and mode == "train" else 3


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
    # copied while it does nothing in eval mode (mutants: bias kept, dropout probability not copied). The
    # encoder's and the decoder's tests share the grid, so both meet these cases.
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
    """PyTorch's layer of `kind` (nn.TransformerEncoderLayer or nn.TransformerDecoderLayer) for one grid case."""
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
