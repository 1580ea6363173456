"""Chapter 9: the encoder (编码器), N identical layers of self-attention and a feed-forward network.

    EncoderLayer(x) = SublayerConnection(FFN)(SublayerConnection(SelfAttention)(x))

Every position attends to every non-padding position of the source; the output has the input's
shape (B, T, d_model), so layers stack.
"""

from __future__ import annotations

import torch
from torch import nn

from ._validate import check_positive_int
from .ffn import PositionwiseFeedForward
from .interop import activation_name, copy_ffn, copy_norms
from .multihead import MultiHeadAttention
from .norm import LayerNorm
from .residual import SublayerConnection


class EncoderLayer(nn.Module):
    """Self-attention then a feed-forward network, each in a residual connection.

    forward(x (B, T, D), mask broadcastable to (B, H, T, T), True = may attend) -> (B, T, D).
    norm_first=False is Post-LN (the paper); True is Pre-LN.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.1,
        norm_first: bool = False,
        activation: str = "relu",
        eps: float = 1e-5,
    ):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout=dropout, activation=activation)
        self.sublayers = nn.ModuleList(SublayerConnection(d_model, dropout, norm_first, eps) for _ in range(2))
        self.norm_first = norm_first

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        x = self.sublayers[0](x, lambda y: self.self_attn(y, y, y, mask))
        return self.sublayers[1](x, self.ffn)

    @property
    def attn_weights(self) -> torch.Tensor | None:
        """The self-attention weights (B, H, T, T) of the last forward call."""
        return self.self_attn.attn_weights

    @classmethod
    def from_torch(cls, m: nn.TransformerEncoderLayer) -> EncoderLayer:
        """An EncoderLayer with the weights of `m` (Post-LN or Pre-LN, relu or gelu)."""
        if not isinstance(m, nn.TransformerEncoderLayer):
            raise TypeError(f"m must be a torch.nn.TransformerEncoderLayer, got {type(m).__name__}")
        attn = MultiHeadAttention.from_torch(m.self_attn)
        new = cls(
            attn.d_model,
            attn.n_heads,
            m.linear1.out_features,
            dropout=m.dropout.p,
            norm_first=m.norm_first,
            activation=activation_name(m),
            eps=m.norm1.eps,
        )
        new.to(device=m.linear1.weight.device, dtype=m.linear1.weight.dtype)
        new.self_attn = attn
        copy_ffn(new.ffn, m)
        copy_norms(new.sublayers, (m.norm1, m.norm2))
        return new


class Encoder(nn.Module):
    """A stack of `n_layers` EncoderLayers; with Pre-LN a final LayerNorm normalises the output.

    forward(x (B, T, D), mask) -> (B, T, D); `.attn_weights` lists each layer's (B, H, T, T) weights.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        n_layers: int,
        dropout: float = 0.1,
        norm_first: bool = False,
        activation: str = "relu",
    ):
        super().__init__()
        check_positive_int(n_layers, "n_layers")
        self.layers = nn.ModuleList(
            EncoderLayer(d_model, n_heads, d_ff, dropout, norm_first, activation) for _ in range(n_layers)
        )
        # Pre-LN leaves the residual stream un-normalised after the last layer.
        self.norm = LayerNorm(d_model) if norm_first else nn.Identity()

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x, mask)
        return self.norm(x)

    @property
    def attn_weights(self) -> list:
        """Each layer's self-attention weights of the last forward call."""
        return [layer.attn_weights for layer in self.layers]
