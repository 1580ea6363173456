"""Chapter 10: the decoder (解码器): masked self-attention, cross-attention to the encoder, feed-forward.

The self-attention is causal: position t may look at target positions 0..t only, so training on a
whole shifted target at once (teacher forcing) cannot leak the answer. The cross-attention takes its
queries from the decoder and its keys and values from the encoder's output (`memory`).

For generation, `KVCache` keeps each layer's keys and values of the positions already decoded, so
each new token costs one position's work instead of the whole prefix's.
"""

from __future__ import annotations

import torch
from torch import nn

from ._validate import check_positive_int
from .encoder import copy_torch_ffn, torch_activation_name
from .ffn import PositionwiseFeedForward
from .multihead import MultiHeadAttention
from .norm import LayerNorm
from .residual import SublayerConnection


class KVCache:
    """Keys and values of the already decoded positions, one dict per decoder layer.

    layer["self"] holds the masked self-attention's keys and values (B, H, length, d_k) so far,
    layer["memory"] the cross-attention's projection of the encoder output (computed once).
    `length` is the number of cached positions. `reorder(index)` follows the batch rows that beam
    search keeps (index: LongTensor of batch rows). Meant for inference, under torch.no_grad().
    """

    def __init__(self, n_layers: int):
        self.layers: list[dict] = [{} for _ in range(check_positive_int(n_layers, "n_layers"))]
        self.length = 0

    @staticmethod
    def append(layer: dict, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Add new positions' keys and values (B, H, t, d_k) to one layer's dict; returns all of them so far.

        They are written into buffers with spare room along the time axis, doubled when full:
        torch.cat would copy the whole prefix at every step, work that grows with the square of
        the generated length.
        """
        start = layer["self"][0].shape[2] if "self" in layer else 0
        end = start + k.shape[2]
        buffers = layer.get("buffers")
        if buffers is None or end > buffers[0].shape[2]:
            grown = tuple(x.new_empty(x.shape[0], x.shape[1], max(2 * end, 16), x.shape[3]) for x in (k, v))
            for new, old in zip(grown, layer.get("self", ())):
                new[:, :, :start] = old
            buffers = layer["buffers"] = grown
        buffers[0][:, :, start:end] = k
        buffers[1][:, :, start:end] = v
        layer["self"] = (buffers[0][:, :, :end], buffers[1][:, :, :end])
        return layer["self"]

    def reorder(self, index: torch.Tensor) -> None:
        for layer in self.layers:
            for name, (k, v) in layer.items():
                if name != "self":  # "self" is a view of "buffers", rebuilt below
                    layer[name] = (k.index_select(0, index), v.index_select(0, index))
            if "self" in layer:
                length = layer["self"][0].shape[2]
                layer["self"] = tuple(b[:, :, :length] for b in layer["buffers"])


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over `memory`, feed-forward; each in a residual connection.

    forward(x (B, T, D), memory (B, S, D), tgt_mask (.., T, T), memory_mask (.., T, S)) -> (B, T, D);
    masks are bool, True = may attend. With `cache` (one layer's dict of a KVCache), x holds only the
    new positions and tgt_mask covers (new positions) × (cached + new positions).
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
        cache: dict | None = None,
    ) -> torch.Tensor:
        x = self.sublayers[0](x, lambda y: self._self_attention(y, tgt_mask, cache))
        if cache is None:
            memory_kv = None
        elif "memory" in cache:
            memory_kv = cache["memory"]
        else:  # the encoder output does not change while decoding: project it once
            memory_kv = cache["memory"] = self.cross_attn.project_kv(memory, memory)
        x = self.sublayers[1](x, lambda y: self.cross_attn(y, memory, memory, memory_mask, kv=memory_kv))
        return self.sublayers[2](x, self.ffn)

    def _self_attention(self, y: torch.Tensor, mask: torch.Tensor | None, cache: dict | None) -> torch.Tensor:
        if cache is None:
            return self.self_attn(y, y, y, mask)
        k, v = KVCache.append(cache, *self.self_attn.project_kv(y, y))
        return self.self_attn(y, y, y, mask, kv=(k, v))

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
            activation=torch_activation_name(m),
            eps=m.norm1.eps,
        )
        new.to(device=m.linear1.weight.device, dtype=m.linear1.weight.dtype)
        new.self_attn = self_attn
        new.cross_attn = MultiHeadAttention.from_torch(m.multihead_attn)
        copy_torch_ffn(new.ffn, m)
        for sub, norm in zip(new.sublayers, (m.norm1, m.norm2, m.norm3)):
            sub.norm = LayerNorm.from_torch(norm)
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
        self.norm = LayerNorm(d_model) if norm_first else nn.Identity()

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        tgt_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
        cache: KVCache | None = None,
    ) -> torch.Tensor:
        if cache is not None and len(cache.layers) != len(self.layers):
            raise ValueError(f"cache has {len(cache.layers)} layers, the decoder has {len(self.layers)}")
        for i, layer in enumerate(self.layers):
            x = layer(x, memory, tgt_mask, memory_mask, None if cache is None else cache.layers[i])
        if cache is not None:
            cache.length += x.shape[1]
        return self.norm(x)

    @property
    def attn_weights(self) -> list[torch.Tensor | None]:
        return [layer.attn_weights for layer in self.layers]

    @property
    def cross_attn_weights(self) -> list[torch.Tensor | None]:
        return [layer.cross_attn_weights for layer in self.layers]
