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

from ._validate import check_positive_int


def _check_eps(eps) -> float:
    if isinstance(eps, bool) or not isinstance(eps, (int, float)):
        raise TypeError(f"eps must be a float, got {type(eps).__name__}")
    if eps <= 0:
        raise ValueError(f"eps={eps} must be positive")
    return float(eps)


class LayerNorm(nn.Module):
    """Normalise the last dimension of (..., d_model); `weight` is gamma, `bias` is beta."""

    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        self.d_model = check_positive_int(d_model, "d_model")
        self.eps = _check_eps(eps)
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.d_model:
            raise ValueError(f"x has {x.shape[-1]} features, expected d_model={self.d_model}")
        centered = x - x.mean(dim=-1, keepdim=True)
        # The biased variance: the mean of the squared deviations, divided by D (not D - 1).
        # Written out rather than x.var(unbiased=False), which is several times slower on CPU.
        var = centered.pow(2).mean(dim=-1, keepdim=True)
        return centered / torch.sqrt(var + self.eps) * self.weight + self.bias

    @classmethod
    def from_torch(cls, m: nn.LayerNorm) -> LayerNorm:
        """A LayerNorm with the gain, bias and eps of `m` (which must normalise one dimension)."""
        if not isinstance(m, nn.LayerNorm):
            raise TypeError(f"m must be a torch.nn.LayerNorm, got {type(m).__name__}")
        if len(m.normalized_shape) != 1:
            raise ValueError(f"m normalises over {m.normalized_shape}; only one dimension is supported")
        new = cls(m.normalized_shape[0], eps=m.eps)
        if m.weight is None:
            raise ValueError("m has elementwise_affine=False; this LayerNorm always has a gain and a bias")
        new.to(device=m.weight.device, dtype=m.weight.dtype)
        with torch.no_grad():
            new.weight.copy_(m.weight)
            if m.bias is not None:
                new.bias.copy_(m.bias)
        return new


class RMSNorm(nn.Module):
    """Root-mean-square normalisation (used by LLaMA and others): no mean subtraction, no bias.

    RMSNorm(x) = x / sqrt(mean(x²) + eps) * gamma
    """

    def __init__(self, d_model: int, eps: float = 1e-6):
        super().__init__()
        self.d_model = check_positive_int(d_model, "d_model")
        self.eps = _check_eps(eps)
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.d_model:
            raise ValueError(f"x has {x.shape[-1]} features, expected d_model={self.d_model}")
        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight
