"""Checks shared by tests/unit/test_encoder.py and test_decoder.py: our layers against PyTorch's.

Both files test `from_torch` (tc.EncoderLayer / tc.DecoderLayer and their stacks) against PyTorch's
nn.TransformerEncoderLayer / nn.TransformerDecoderLayer the same way; what they share lives here, imported as
`from layer_checks import ...` (tests/ is on the path, as for `from pairwise import pairwise`):

- float32 equality, weights copied with `from_torch` (atol ATOL): the sizes B, T, S, D, H, FF, PyTorch's mask
  conventions (`key_padding`, `torch_causal`) and `perturb`, which gives the LayerNorms non-trivial gains and biases.
- Every constructor option, in train and eval mode: LAYER_GRID is a pairwise covering array (tests/pairwise.py:
  every value of every option and every pair of two options' values, 25 cases instead of the 384 of the full
  product), `layer_id` names a case, `make_layer` builds PyTorch's layer of either kind for it,
  `assert_carries_the_options` checks what `from_torch` copied and `run_both` runs the two layers under one seed.
  With dropout in training mode a batch of one row (`batch_size`) draws the same random numbers as PyTorch in the
  same order, so the outputs are equal there too.
- float16 and bfloat16: `assert_layer_as_accurate_as_torch` compares our error against the exact result (float64,
  `in_float64`) with PyTorch's own error, for inputs from `randn` and LayerNorms `perturbed` under a seed.
"""

import copy

import torch
import torch.nn.functional as F
from hypothesis import strategies as st
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
