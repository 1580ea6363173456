"""Chapter 10: the decoder (解码器): masked self-attention, cross-attention to the encoder, feed-forward.

The self-attention is causal: position t may look at target positions 0..t only, so training on a
whole shifted target at once (teacher forcing) cannot leak the answer. The cross-attention takes its
queries from the decoder and its keys and values from the encoder's output (`memory`).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import cast

import torch
from torch import nn

from ._validate import check_positive_int, checked, inside_the_door
from .encoder import BlockConfig, check_block_config, check_layer_args, check_stack_args
from .ffn import Activation, PositionwiseFeedForward
from .interop import check_torch_module, check_torch_stack, copy_layer, copy_stack, torch_activation, torch_sizes
from .multihead import MultiHeadAttention, check_features, check_head_mask
from .norm import LayerNorm
from .residual import SublayerConnection


def check_stream(
    module: DecoderLayer | Decoder,
    x: torch.Tensor,
    memory: torch.Tensor,
    tgt_mask: torch.Tensor | None = None,
    memory_mask: torch.Tensor | None = None,
) -> None:
    """A decoder layer's or stack's input: x (B, T, d_model), memory (B, S, d_model), tgt_mask broadcastable to
    (B, H, T, T) and memory_mask to (B, H, T, S)."""
    layer = module if isinstance(module, DecoderLayer) else cast(DecoderLayer, module.layers[0])
    attn = layer.self_attn
    check_features(x, "x", attn)
    check_features(memory, "memory", attn)
    if memory.shape[0] != x.shape[0]:
        raise ValueError(f"x has batch size {x.shape[0]} but memory has {memory.shape[0]}")
    for name, mask, k_len in (("tgt_mask", tgt_mask, x.shape[1]), ("memory_mask", memory_mask, memory.shape[1])):
        if mask is not None:
            check_head_mask(mask, x.shape[0], attn.n_heads, x.shape[1], k_len, name)


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over `memory`, feed-forward; each in a residual connection.

    forward(x (B, T, D), memory (B, S, D), tgt_mask (.., T, T), memory_mask (.., T, S)) -> (B, T, D);
    masks are bool, True = may attend.
    """

    @checked(check_layer_args)
    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.1,
        norm_first: bool = False,
        activation: str | Activation = "relu",
        eps: float = 1e-5,
        bias: bool = True,
    ):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout, bias=bias)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout, bias=bias)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout=dropout, activation=activation, bias=bias)
        self.sublayers = nn.ModuleList(SublayerConnection(d_model, dropout, norm_first, eps, bias) for _ in range(3))
        self.norm_first = norm_first

    @checked(check_stream)
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

    @classmethod
    def from_config(cls, config: BlockConfig) -> DecoderLayer:
        """A DecoderLayer built from one BlockConfig, as nanoGPT's Block(config); the config was checked when made."""
        check_block_config(config)
        with inside_the_door("build"):
            return cls(**asdict(config))

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
        """A DecoderLayer with the weights, options and mode of `m`; batch-first whatever `m.batch_first` is."""
        check_torch_module(m, nn.TransformerDecoderLayer)
        bias = m.linear1.bias is not None
        new = cls(*torch_sizes(m), norm_first=m.norm_first, activation=torch_activation(m), bias=bias)
        new.self_attn = MultiHeadAttention.from_torch(m.self_attn)
        new.cross_attn = MultiHeadAttention.from_torch(m.multihead_attn)
        copy_layer(new, m, norms=(m.norm1, m.norm2, m.norm3), dropouts=(m.dropout1, m.dropout2, m.dropout3))
        return new


class Decoder(nn.Module):
    """A stack of `n_layers` DecoderLayers; with Pre-LN a final LayerNorm normalises the output."""

    @checked(check_stack_args)
    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        n_layers: int,
        dropout: float = 0.1,
        norm_first: bool = False,
        activation: str | Activation = "relu",
        eps: float = 1e-5,
        bias: bool = True,
    ):
        super().__init__()
        self.layers = nn.ModuleList(
            DecoderLayer(d_model, n_heads, d_ff, dropout, norm_first, activation, eps, bias) for _ in range(n_layers)
        )
        # Pre-LN leaves the residual stream un-normalised after the last layer.
        self.norm = LayerNorm(d_model, eps, bias) if norm_first else nn.Identity()

    @checked(check_stream)
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

    @classmethod
    def from_config(cls, config: BlockConfig, n_layers: int) -> Decoder:
        """`n_layers` DecoderLayers built from one BlockConfig (checked when made; n_layers is checked here)."""
        check_block_config(config)
        check_positive_int(n_layers, "n_layers")
        block = asdict(config)
        with inside_the_door("build"):
            return cls(block.pop("d_model"), block.pop("n_heads"), block.pop("d_ff"), n_layers, **block)

    @property
    def attn_weights(self) -> list:
        """Each layer's self-attention weights of the last forward call."""
        return [layer.attn_weights for layer in self.layers]

    @property
    def cross_attn_weights(self) -> list:
        """Each layer's cross-attention weights of the last forward call."""
        return [layer.cross_attn_weights for layer in self.layers]

    @classmethod
    def from_torch(cls, m: nn.TransformerDecoder) -> Decoder:
        """A Decoder with the layers of `m` and its final LayerNorm (none if `m.norm` is None)."""
        check_torch_stack(m, nn.TransformerDecoder)
        new = cls(*torch_sizes(m.layers[0]), n_layers=len(m.layers))
        copy_stack(new, m, DecoderLayer.from_torch)
        return new
