"""Chapter 4: multi-head attention (多头注意力).

    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W_O,   head_i = Attention(Q W_Q^i, K W_K^i, V W_V^i)

The h projections W_Q^1..W_Q^h (each d_model × d_k) are stored side by side in one d_model × d_model
Linear: one wide matrix product computes all heads at once, then `split_heads` cuts the result into
h slices of d_k = d_model / h features. W_O mixes the concatenated heads back into d_model features.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ._validate import check_positive_int, check_probability, check_tensor
from .attention import check_mask, fused_attention, scaled_dot_product_attention


def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(B, T, D) -> (B, H, T, D / H): head i gets features i*d_k .. (i+1)*d_k - 1."""
    batch, length, d_model = x.shape
    return x.view(batch, length, n_heads, d_model // n_heads).transpose(1, 2)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(B, H, T, d_k) -> (B, T, H * d_k), the inverse of `split_heads`.

    The transpose must come before the reshape: reshaping (B, H, T, d_k) directly would
    interleave positions and heads.
    """
    batch, n_heads, length, d_k = x.shape
    return x.transpose(1, 2).reshape(batch, length, n_heads * d_k)


class MultiHeadAttention(nn.Module):
    """h attention heads in parallel on d_k = d_model / h features each, mixed by W_O.

    forward(query (B, T_q, D), key (B, T_k, D), value (B, T_k, D), mask) -> (B, T_q, D).
    mask: bool, True = may attend, broadcastable to (B, H, T_q, T_k), e.g. `padding_mask` (B, 1, 1, T_k)
    or `causal_mask` (T_q, T_k).

    With `need_weights` True (the default, for teaching) the weights (B, H, T_q, T_k) of the last call
    are kept on `.attn_weights`; with it False the fused kernel `F.scaled_dot_product_attention` runs
    instead, which is faster and never builds the T_q × T_k matrix.
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        check_positive_int(d_model, "d_model")
        check_positive_int(n_heads, "n_heads")
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.d_model, self.n_heads, self.d_k = d_model, n_heads, d_model // n_heads
        self.dropout = check_probability(dropout, "dropout")
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        self.need_weights = True
        self.attn_weights: torch.Tensor | None = None

    def project_kv(self, key: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values split into heads, (B, H, T_k, d_k) each; cached by incremental decoding."""
        self._check_input(key, "key")
        self._check_input(value, "value")
        if key.shape[:2] != value.shape[:2]:
            raise ValueError(f"key {tuple(key.shape)} and value {tuple(value.shape)} must share (B, T_k)")
        return split_heads(self.w_k(key), self.n_heads), split_heads(self.w_v(value), self.n_heads)

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        mask: torch.Tensor | None = None,
        need_weights: bool | None = None,
        kv: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """kv: keys and values already projected by `project_kv` (then key and value are ignored)."""
        self._check_input(query, "query")
        if kv is None and query is key and key is value:
            q, k, v = (split_heads(x, self.n_heads) for x in self._project_qkv(query))
        else:
            q = split_heads(self.w_q(query), self.n_heads)
            k, v = self.project_kv(key, value) if kv is None else kv
        if k.shape[0] != q.shape[0]:
            raise ValueError(f"query has batch size {q.shape[0]} but key has {k.shape[0]}")
        if mask is not None:
            self._check_mask(mask, q.shape[0], q.shape[2], k.shape[2])
        dropout_p = self.dropout if self.training else 0.0
        if self.need_weights if need_weights is None else need_weights:
            out, weights = scaled_dot_product_attention(q, k, v, mask, dropout_p)
            self.attn_weights = weights.detach()
        else:
            out = fused_attention(q, k, v, mask, dropout_p)
            self.attn_weights = None
        return self.w_o(merge_heads(out))

    def _project_qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Self-attention's Q, K and V (B, T, D) each, from one product with W_Q, W_K, W_V stacked.

        One wide matrix product instead of three narrow ones: the same numbers, less overhead
        (nn.MultiheadAttention stores the three matrices stacked for the same reason).
        """
        weight = torch.cat([self.w_q.weight, self.w_k.weight, self.w_v.weight])
        bias = None if self.w_q.bias is None else torch.cat([self.w_q.bias, self.w_k.bias, self.w_v.bias])
        return F.linear(x, weight, bias).chunk(3, dim=-1)

    def _check_input(self, x, name: str) -> None:
        check_tensor(x, name, ndim=3, floating=True)
        if x.shape[-1] != self.d_model:
            raise ValueError(f"{name} has {x.shape[-1]} features, expected d_model={self.d_model}")

    def _check_mask(self, mask, batch: int, q_len: int, k_len: int) -> None:
        check_mask(mask, "mask", q_len, k_len)
        # A 3-D (B, T_q, T_k) mask would broadcast B against the head axis: refuse it rather than guess.
        lead = tuple(mask.shape[:-2])
        if len(lead) > 2 or (len(lead) == 1 and lead[0] != 1):
            raise ValueError(
                f"mask has shape {tuple(mask.shape)}; expected (T_q, T_k) or (B or 1, H or 1, T_q, T_k): "
                "add the head axis with mask[:, None]"
            )
        if len(lead) == 2 and (lead[0] not in (1, batch) or lead[1] not in (1, self.n_heads)):
            raise ValueError(
                f"mask has shape {tuple(mask.shape)}, expected ({batch} or 1, {self.n_heads} or 1, T_q, T_k)"
            )

    @classmethod
    def from_torch(cls, m: nn.MultiheadAttention) -> MultiHeadAttention:
        """A MultiHeadAttention with the weights of `m`; batch-first inputs whatever `m.batch_first` is."""
        if not isinstance(m, nn.MultiheadAttention):
            raise TypeError(f"m must be a torch.nn.MultiheadAttention, got {type(m).__name__}")
        if not m._qkv_same_embed_dim:
            raise ValueError("m has kdim/vdim different from embed_dim, which this module does not support")
        if m.bias_k is not None or m.add_zero_attn:
            raise ValueError("m uses add_bias_kv or add_zero_attn, which this module does not support")
        bias = m.in_proj_bias is not None
        new = cls(m.embed_dim, m.num_heads, dropout=m.dropout, bias=bias)
        new.to(device=m.in_proj_weight.device, dtype=m.in_proj_weight.dtype)
        with torch.no_grad():
            # nn.MultiheadAttention packs W_Q, W_K, W_V as the three row blocks of in_proj_weight.
            for linear, w in zip((new.w_q, new.w_k, new.w_v), m.in_proj_weight.chunk(3)):
                linear.weight.copy_(w)
            if bias:
                for linear, b in zip((new.w_q, new.w_k, new.w_v), m.in_proj_bias.chunk(3)):
                    linear.bias.copy_(b)
                new.w_o.bias.copy_(m.out_proj.bias)
            new.w_o.weight.copy_(m.out_proj.weight)
        return new


def keep_attention_weights(model: nn.Module, keep: bool = True) -> nn.Module:
    """Switch every MultiHeadAttention in `model` between keeping its weights and the fused fast path."""
    for module in model.modules():
        if isinstance(module, MultiHeadAttention):
            module.need_weights = keep
    return model
