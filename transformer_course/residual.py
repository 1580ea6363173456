"""Chapter 7: residual connections (残差连接) around each sub-layer, in Post-LN or Pre-LN order.

    Post-LN (the paper, post 1):  x = LayerNorm(x + Dropout(sublayer(x)))
    Pre-LN  (post 0, GPT-2 on):   x = x + Dropout(sublayer(LayerNorm(x)))

The identity path lets the gradient reach early layers unchanged; Pre-LN keeps that path free of
normalisation, which is why it trains without a learning-rate warm-up where Post-LN often cannot.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from ._validate import check_probability
from .norm import LayerNorm


class SublayerConnection(nn.Module):
    """A residual connection with dropout and a LayerNorm, wrapped around any sub-layer (B, T, D) -> (B, T, D)."""

    def __init__(self, d_model: int, dropout: float = 0.1, norm_first: bool = False, eps: float = 1e-5):
        super().__init__()
        if not isinstance(norm_first, bool):
            raise TypeError(f"norm_first must be a bool, got {type(norm_first).__name__}")
        self.norm = LayerNorm(d_model, eps=eps)
        self.dropout = nn.Dropout(check_probability(dropout, "dropout"))
        self.norm_first = norm_first

    def forward(self, x: torch.Tensor, sublayer: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        if self.norm_first:
            return x + self.dropout(sublayer(self.norm(x)))
        return self.norm(x + self.dropout(sublayer(x)))
