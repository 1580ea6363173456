"""Chapter 6: layer normalization (层归一化).

Each position's feature vector is normalised on its own, to mean 0 and variance 1, then scaled by
a learned gain and shifted by a learned bias:

    LayerNorm(x) = (x - mean(x)) / sqrt(var(x) + eps) * gamma + beta

with the *biased* variance (divide by D, not D - 1) and eps *inside* the square root, as in
`torch.nn.LayerNorm` and the paper's code. Unlike BatchNorm nothing is averaged across the batch,
so padding and sentence length in other rows cannot change a position's output.
"""

from __future__ import annotations

import torch
from torch import nn

from ._validate import check_bool, check_positive_int, check_tensor, checked


def check_norm_sizes(norm: LayerNorm | RMSNorm | None, d_model: int, eps: float = 1e-5, bias: bool = True) -> None:
    check_positive_int(d_model, "d_model")
    check_eps(eps)
    check_bool(bias, "bias")


def _check_input(norm: LayerNorm | RMSNorm, x: torch.Tensor) -> None:
    """A floating-point tensor (..., d_model)."""
    check_tensor(x, "x", floating=True)
    if x.dim() == 0 or x.shape[-1] != norm.d_model:
        raise ValueError(f"x has {x.shape[-1] if x.dim() else 0} features, expected d_model={norm.d_model}")


class LayerNorm(nn.Module):
    """Normalise the last dimension of (..., d_model); `weight` is gamma, `bias` is beta."""

    @checked(check_norm_sizes)
    def __init__(self, d_model: int, eps: float = 1e-5, bias: bool = True):
        super().__init__()
        self.d_model, self.eps = d_model, float(eps)
        self.weight = nn.Parameter(torch.ones(d_model))
        # bias=False, as in nn.LayerNorm(bias=False): beta stays 0 and is not trained.
        self.bias = nn.Parameter(torch.zeros(d_model), requires_grad=bias)

    @checked(_check_input)
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Statistics in float32 at least, as nn.LayerNorm computes them: in float16 the squares of inputs
        # near 300 overflow, and bfloat16 rounds the mean of inputs near 1000 to a multiple of 4.
        h = x.to(torch.promote_types(x.dtype, torch.float32))
        centered = h - h.mean(dim=-1, keepdim=True)
        # The biased variance: the mean of the squared deviations, divided by D (not D - 1).
        # Written out rather than x.var(unbiased=False), which is several times slower on CPU.
        var = centered.pow(2).mean(dim=-1, keepdim=True)
        return (centered / torch.sqrt(var + self.eps) * self.weight + self.bias).to(x.dtype)

    @classmethod
    def from_torch(cls, m: nn.LayerNorm) -> LayerNorm:
        """A LayerNorm with the gain, bias (or none), eps and mode of `m`, which must normalise one dimension."""
        _check_torch_norm(m)
        new = cls(m.normalized_shape[0], eps=m.eps, bias=m.bias is not None)
        new.to(device=m.weight.device, dtype=m.weight.dtype).train(m.training)
        with torch.no_grad():
            new.weight.copy_(m.weight)
            if m.bias is not None:
                new.bias.copy_(m.bias)
        return new


class RMSNorm(nn.Module):
    """Root-mean-square normalisation (used by LLaMA and others): no mean subtraction, no bias.

    RMSNorm(x) = x / sqrt(mean(x²) + eps) * gamma
    """

    @checked(check_norm_sizes)
    def __init__(self, d_model: int, eps: float = 1e-6):
        super().__init__()
        self.d_model, self.eps = d_model, float(eps)
        self.weight = nn.Parameter(torch.ones(d_model))

    @checked(_check_input)
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.to(torch.promote_types(x.dtype, torch.float32))  # float16 squares overflow: sum them in float32
        return (h * torch.rsqrt(h.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight).to(x.dtype)


def check_eps(eps: object) -> float:
    if isinstance(eps, bool) or not isinstance(eps, (int, float)):
        raise TypeError(f"eps must be a float, got {type(eps).__name__}")
    if not eps > 0:
        raise ValueError(f"eps={eps} must be positive")
    return float(eps)


def _check_torch_norm(m: nn.LayerNorm) -> None:
    if not isinstance(m, nn.LayerNorm):
        raise TypeError(f"m must be a torch.nn.LayerNorm, got {type(m).__name__}")
    if len(m.normalized_shape) != 1:
        raise ValueError(f"m normalises over {tuple(m.normalized_shape)}; only one dimension is supported")
    if m.weight is None:
        raise ValueError("m has elementwise_affine=False; this LayerNorm always has a gain")
