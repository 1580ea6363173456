"""Chapter 9: the encoder (编码器), N identical layers of self-attention and a feed-forward network.

    EncoderLayer(x) = SublayerConnection(FFN)(SublayerConnection(SelfAttention)(x))

Every position attends to every non-padding position of the source; the output has the input's
shape (B, T, d_model), so layers stack.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, cast

import torch
from torch import nn

from ._validate import at_the_door, check_bool, check_positive_int, checked, inside_the_door
from .ffn import Activation, PositionwiseFeedForward, check_activation
from .interop import check_torch_module, check_torch_stack, copy_layer, copy_stack, torch_activation, torch_sizes
from .multihead import MultiHeadAttention, check_features, check_head_mask, check_head_sizes
from .norm import LayerNorm, check_eps
from .residual import SublayerConnection

if TYPE_CHECKING:  # the decoder imports this module: its names are for the type checker only
    from .decoder import Decoder, DecoderLayer


@dataclass(frozen=True)
class BlockConfig:
    """One encoder or decoder layer's sizes and options, shared by the configs of every model built of them
    (`TransformerConfig.block`, `GPTConfig.block`, `BERTConfig.block`). Checked once, when it is made."""

    d_model: int = 512
    n_heads: int = 8
    d_ff: int = 2048
    dropout: float = 0.1
    norm_first: bool = False
    activation: str | Activation = "relu"
    eps: float = 1e-5
    bias: bool = True

    def __post_init__(self) -> None:
        if at_the_door():  # inside a checked call (a model's constructor), the fields were checked at its door
            check_head_sizes(None, self.d_model, self.n_heads, self.dropout, self.bias)
            check_positive_int(self.d_ff, "d_ff")
            check_bool(self.norm_first, "norm_first")
            check_activation(self.activation)
            check_eps(self.eps)


def check_block_config(config: object) -> None:
    if not isinstance(config, BlockConfig):
        raise TypeError(f"config must be a BlockConfig (a model's config.block), got {type(config).__name__}")


def check_layer_args(layer: EncoderLayer | DecoderLayer, *args: Any, **kwargs: Any) -> None:
    BlockConfig(*args, **kwargs)


def check_stack_args(
    stack: Encoder | Decoder, d_model: int, n_heads: int, d_ff: int, n_layers: int, *args: Any, **kwargs: Any
) -> None:
    BlockConfig(d_model, n_heads, d_ff, *args, **kwargs)
    check_positive_int(n_layers, "n_layers")


def check_stream(module: EncoderLayer | Encoder, x: torch.Tensor, mask: torch.Tensor | None = None) -> None:
    """The input of an encoder layer or stack: x (B, T, d_model) and a mask that broadcasts to (B, H, T, T)."""
    layer = module if isinstance(module, EncoderLayer) else cast(EncoderLayer, module.layers[0])
    attn = layer.self_attn
    check_features(x, "x", attn)
    if mask is not None:
        check_head_mask(mask, x.shape[0], attn.n_heads, x.shape[1], x.shape[1])


class EncoderLayer(nn.Module):
    """Self-attention then a feed-forward network, each in a residual connection.

    forward(x (B, T, D), mask broadcastable to (B, H, T, T), True = may attend) -> (B, T, D).
    norm_first=False is Post-LN (the paper); True is Pre-LN.
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
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout=dropout, activation=activation, bias=bias)
        self.sublayers = nn.ModuleList(SublayerConnection(d_model, dropout, norm_first, eps, bias) for _ in range(2))
        self.norm_first = norm_first

    @checked(check_stream)
    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        x = self.sublayers[0](x, lambda y: self.self_attn(y, y, y, mask))
        return self.sublayers[1](x, self.ffn)

    @classmethod
    def from_config(cls, config: BlockConfig) -> EncoderLayer:
        """An EncoderLayer built from one BlockConfig, as nanoGPT's Block(config); the config was checked when made."""
        check_block_config(config)
        with inside_the_door("build"):
            return cls(**asdict(config))

    @property
    def attn_weights(self) -> torch.Tensor | None:
        """The self-attention weights (B, H, T, T) of the last forward call."""
        return self.self_attn.attn_weights

    @classmethod
    def from_torch(cls, m: nn.TransformerEncoderLayer) -> EncoderLayer:
        """An EncoderLayer with the weights, options and mode of `m`; batch-first whatever `m.batch_first` is."""
        check_torch_module(m, nn.TransformerEncoderLayer)
        bias = m.linear1.bias is not None
        new = cls(*torch_sizes(m), norm_first=m.norm_first, activation=torch_activation(m), bias=bias)
        new.self_attn = MultiHeadAttention.from_torch(m.self_attn)
        copy_layer(new, m, norms=(m.norm1, m.norm2), dropouts=(m.dropout1, m.dropout2))
        return new


class Encoder(nn.Module):
    """A stack of `n_layers` EncoderLayers; with Pre-LN a final LayerNorm normalises the output.

    forward(x (B, T, D), mask) -> (B, T, D); `.attn_weights` lists each layer's (B, H, T, T) weights.
    """

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
            EncoderLayer(d_model, n_heads, d_ff, dropout, norm_first, activation, eps, bias) for _ in range(n_layers)
        )
        # Pre-LN leaves the residual stream un-normalised after the last layer.
        self.norm = LayerNorm(d_model, eps, bias) if norm_first else nn.Identity()

    @checked(check_stream)
    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x, mask)
        return self.norm(x)

    @classmethod
    def from_config(cls, config: BlockConfig, n_layers: int) -> Encoder:
        """`n_layers` EncoderLayers built from one BlockConfig (checked when made; n_layers is checked here)."""
        check_block_config(config)
        check_positive_int(n_layers, "n_layers")
        block = asdict(config)
        with inside_the_door("build"):
            return cls(block.pop("d_model"), block.pop("n_heads"), block.pop("d_ff"), n_layers, **block)

    @property
    def attn_weights(self) -> list:
        """Each layer's self-attention weights of the last forward call."""
        return [layer.attn_weights for layer in self.layers]

    @classmethod
    def from_torch(cls, m: nn.TransformerEncoder) -> Encoder:
        """An Encoder with the layers of `m` and its final LayerNorm (none if `m.norm` is None)."""
        check_torch_stack(m, nn.TransformerEncoder)
        new = cls(*torch_sizes(m.layers[0]), n_layers=len(m.layers))
        copy_stack(new, m, EncoderLayer.from_torch)
        return new
