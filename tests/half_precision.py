"""float16 and bfloat16: our modules must be as accurate as PyTorch's, with PyTorch's own error as the yardstick.

Shared by tests/unit/test_attention.py, test_multihead.py, test_norm.py and, through tests/layer_checks.py,
test_encoder.py and test_decoder.py; imported as `from half_precision import ...` (tests/ is on the path, as for
`from pairwise import pairwise`).

In float16 (11 significant bits) and bfloat16 (8) no result equals the exact one, and two correct
implementations round in different places, so equality with PyTorch is the wrong test; a fixed tolerance is the
wrong test too, since the error a dtype forces grows with the inputs (a large scale, a large offset). What these
helpers check instead: both modules get the same weights and inputs rounded to the low precision; the exact
result is the same computation in float64 on those rounded values (`in_float64`, inputs `.double()`); and our
error against it may exceed PyTorch's own error by at most assert_close's default tolerance for the dtype
(TOLERANCE). PyTorch's modules are the reference that `from_torch` copies weights from and what a reader would
otherwise use, so their error is what the dtype costs in practice: where an input is hard, PyTorch errs more and
we are allowed as much; where PyTorch is accurate, we must be too. Where PyTorch overflows (inf or NaN), its error
counts as 0 (`their_error`): ours must then be within the tolerance of the exact result.

- `assert_as_accurate_as_torch` compares at every element (attention, LayerNorm, RMSNorm);
  `assert_layer_as_accurate_as_torch` compares the largest errors (multi-head attention, encoder and decoder
  layers: see its docstring for why).
- Inputs: `randn` (seeded, scaled and shifted, then rounded to the dtype), with the hypothesis strategies
  `dtypes` and `scales`, at the sizes HALF_*; `perturbed` gives the norms non-trivial gains and biases under a
  seed.
"""

import copy

import torch
from hypothesis import strategies as st
from torch import nn

DTYPES = [torch.float16, torch.bfloat16]


# torch.testing.assert_close's default (rtol, atol) for each dtype.
TOLERANCE = {torch.float16: (1e-3, 1e-5), torch.bfloat16: (1.6e-2, 1e-5)}


HALF_D, HALF_H, HALF_FF, HALF_B, HALF_T, HALF_S = 32, 4, 64, 2, 5, 6


dtypes = st.sampled_from(DTYPES)


scales = st.sampled_from([1e-2, 1.0, 10.0, 30.0, 300.0])


def assert_as_accurate_as_torch(ours: torch.Tensor, theirs: torch.Tensor, exact: torch.Tensor) -> None:
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape == exact.shape
    rtol, atol = TOLERANCE[ours.dtype]
    exact = exact.double()
    our_error = (ours.double() - exact).abs()
    allowed = their_error(theirs, exact) + atol + rtol * exact.abs()
    bad = ~(our_error <= allowed)  # NaN counts as bad
    assert not bad.any(), (
        f"{int(bad.sum())} of {bad.numel()} elements are further from the exact result than PyTorch's: "
        f"ours {ours[bad][:4].tolist()}, PyTorch {theirs[bad][:4].tolist()}, exact {exact[bad][:4].tolist()}"
    )


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
