"""Chapter 5: the position-wise feed-forward network (逐位置前馈网络).

    FFN(x) = max(0, x W_1 + b_1) W_2 + b_2

The same two-layer MLP is applied to every position on its own: a Linear on (B, T, D) already
shares its weights across the T positions, so a Conv1d with kernel_size=1 computes exactly the
same thing with exactly the same number of parameters.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from ._validate import check_bool, check_positive_int, check_probability, check_tensor, checked
from .mlp import ACTIVATIONS, make_activation

Activation = Callable[[torch.Tensor], torch.Tensor]


def _check_sizes(
    ffn: PositionwiseFeedForward,
    d_model: int,
    d_ff: int,
    dropout: float = 0.0,
    activation: str | Activation = "relu",
    bias: bool = True,
) -> None:
    check_positive_int(d_model, "d_model")
    check_positive_int(d_ff, "d_ff")
    check_probability(dropout, "dropout")
    check_activation(activation)
    check_bool(bias, "bias")


def check_activation(activation: str | Activation) -> None:
    """A name among the activations `mlp` knows, or any function of a tensor."""
    if not callable(activation) and activation not in ACTIVATIONS:
        raise ValueError(f"activation={activation!r} is not one of {sorted(ACTIVATIONS)} nor a function")


def _check_input(ffn: PositionwiseFeedForward, x: torch.Tensor) -> None:
    d_model = ffn.w_1.in_features
    check_tensor(x, "x", floating=True)
    if x.dim() == 0 or x.shape[-1] != d_model:
        raise ValueError(f"x has {x.shape[-1] if x.dim() else 0} features, expected d_model={d_model}")


class PositionwiseFeedForward(nn.Module):
    """(B, T, d_model) -> (B, T, d_model) through a hidden layer of d_ff features.

    Layout and dropout placement follow `torch.nn.TransformerEncoderLayer`:
    w_2(dropout(activation(w_1(x)))).
    """

    @checked(_check_sizes)
    def __init__(
        self, d_model: int, d_ff: int, dropout: float = 0.0, activation: str | Activation = "relu", bias: bool = True
    ):
        super().__init__()
        self.w_1 = nn.Linear(d_model, d_ff, bias=bias)
        self.w_2 = nn.Linear(d_ff, d_model, bias=bias)
        # A name ("relu", "gelu", ...) or, as nn.TransformerEncoderLayer allows, any function of a tensor.
        self.activation = activation if callable(activation) else make_activation(activation)
        self.dropout = nn.Dropout(dropout)

    @checked(_check_input)
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w_2(self.dropout(self.activation(self.w_1(x))))
