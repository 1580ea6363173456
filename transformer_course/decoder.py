"""Chapter 10: the decoder (解码器): masked self-attention, cross-attention to the encoder, feed-forward.

The self-attention is causal: position t may look at target positions 0..t only, so training on a
whole shifted target at once (teacher forcing) cannot leak the answer. The cross-attention takes its
queries from the decoder and its keys and values from the encoder's output (`memory`).
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


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over `memory`, feed-forward; each in a residual connection.

    forward(x (B, T, D), memory (B, S, D), tgt_mask (.., T, T), memory_mask (.., T, S)) -> (B, T, D);
    masks are bool, True = may attend.
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
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout=dropout, activation=activation)
        self.sublayers = nn.ModuleList(SublayerConnection(d_model, dropout, norm_first, eps) for _ in range(3))
        self.norm_first = norm_first

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        tgt_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        x = self.sublayers[0](x, lambda y: self.self_attn(y, y, y, tgt_mask))
        x = self.sublayers[1](x, lambda y: self.cross_attn(y, memory, memory, memory_mask))
        return self.sublayers[2](x, self.ffn)

    @property
    def attn_weights(self) -> torch.Tensor | None:
        """The masked self-attention weights (B, H, T, T) of the last forward call."""
        return self.self_attn.attn_weights

    @property
    def cross_attn_weights(self) -> torch.Tensor | None:
        """The cross-attention weights (B, H, T, S) of the last forward call: target × source alignment."""
        return self.cross_attn.attn_weights

    @classmethod
    def from_torch(cls, m: nn.TransformerDecoderLayer) -> DecoderLayer:
        """A DecoderLayer with the weights of `m` (Post-LN or Pre-LN, relu or gelu)."""
        if not isinstance(m, nn.TransformerDecoderLayer):
            raise TypeError(f"m must be a torch.nn.TransformerDecoderLayer, got {type(m).__name__}")
        self_attn = MultiHeadAttention.from_torch(m.self_attn)
        new = cls(
            self_attn.d_model,
            self_attn.n_heads,
            m.linear1.out_features,
            dropout=m.dropout.p,
            norm_first=m.norm_first,
            activation=activation_name(m),
            eps=m.norm1.eps,
        )
        new.to(device=m.linear1.weight.device, dtype=m.linear1.weight.dtype)
        new.self_attn = self_attn
        new.cross_attn = MultiHeadAttention.from_torch(m.multihead_attn)
        copy_ffn(new.ffn, m)
        copy_norms(new.sublayers, (m.norm1, m.norm2, m.norm3))
        return new


class Decoder(nn.Module):
    """A stack of `n_layers` DecoderLayers; with Pre-LN a final LayerNorm normalises the output."""

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
            DecoderLayer(d_model, n_heads, d_ff, dropout, norm_first, activation) for _ in range(n_layers)
        )
        # Pre-LN leaves the residual stream un-normalised after the last layer.
        self.norm = LayerNorm(d_model) if norm_first else nn.Identity()

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        tgt_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x, memory, tgt_mask, memory_mask)
        return self.norm(x)

    @property
    def attn_weights(self) -> list:
        """Each layer's self-attention weights of the last forward call."""
        return [layer.attn_weights for layer in self.layers]

    @property
    def cross_attn_weights(self) -> list:
        """Each layer's cross-attention weights of the last forward call."""
        return [layer.cross_attn_weights for layer in self.layers]
