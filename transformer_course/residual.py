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

from ._validate import check_bool, check_probability, checked
from .norm import LayerNorm, check_norm_sizes


def _check_options(
    connection: SublayerConnection,
    d_model: int,
    dropout: float = 0.1,
    norm_first: bool = False,
    eps: float = 1e-5,
    bias: bool = True,
) -> None:
    check_norm_sizes(None, d_model, eps, bias)
    check_probability(dropout, "dropout")
    check_bool(norm_first, "norm_first")


class SublayerConnection(nn.Module):
    """A residual connection with dropout and a LayerNorm, wrapped around any sub-layer (B, T, D) -> (B, T, D)."""

    @checked(_check_options)
    def __init__(
        self, d_model: int, dropout: float = 0.1, norm_first: bool = False, eps: float = 1e-5, bias: bool = True
    ):
        super().__init__()
        self.norm = LayerNorm(d_model, eps=eps, bias=bias)
        self.dropout = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x: torch.Tensor, sublayer: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        if self.norm_first:
            return x + self.dropout(sublayer(self.norm(x)))
        return self.norm(x + self.dropout(sublayer(x)))
