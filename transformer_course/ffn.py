"""Chapter 5: the position-wise feed-forward network (逐位置前馈网络).

    FFN(x) = max(0, x W_1 + b_1) W_2 + b_2

The same two-layer MLP is applied to every position on its own: a Linear on (B, T, D) already
shares its weights across the T positions, so a Conv1d with kernel_size=1 computes exactly the
same thing with exactly the same number of parameters.
"""

from __future__ import annotations

import torch
from torch import nn

from ._validate import check_positive_int, check_probability
from .mlp import make_activation


class PositionwiseFeedForward(nn.Module):
    """(B, T, d_model) -> (B, T, d_model) through a hidden layer of d_ff features.

    Layout and dropout placement follow `torch.nn.TransformerEncoderLayer`:
    w_2(dropout(activation(w_1(x)))).
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, activation: str = "relu", bias: bool = True):
        super().__init__()
        check_positive_int(d_model, "d_model")
        check_positive_int(d_ff, "d_ff")
        self.w_1 = nn.Linear(d_model, d_ff, bias=bias)
        self.w_2 = nn.Linear(d_ff, d_model, bias=bias)
        self.activation = make_activation(activation)
        self.dropout = nn.Dropout(check_probability(dropout, "dropout"))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.w_1.in_features:
            raise ValueError(f"x has {x.shape[-1]} features, expected d_model={self.w_1.in_features}")
        return self.w_2(self.dropout(self.activation(self.w_1(x))))
