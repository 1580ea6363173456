"""Chapter 4: multi-head attention (多头注意力).

    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W_O,   head_i = Attention(Q W_Q^i, K W_K^i, V W_V^i)

The h projections W_Q^1..W_Q^h (each d_model × d_k) are stored side by side in one d_model × d_model
Linear: one wide matrix product computes all heads at once, then `split_heads` cuts the result into
h slices of d_k = d_model / h features. W_O mixes the concatenated heads back into d_model features.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from ._validate import check_bool, check_positive_int, check_probability, check_tensor, checked
from .attention import check_mask, scaled_dot_product_attention


def _check_split(x: torch.Tensor, n_heads: int) -> None:
    """x (B, T, D) with D divisible by n_heads."""
    check_tensor(x, "x", ndim=3)
    check_positive_int(n_heads, "n_heads")
    if x.shape[-1] % n_heads:
        raise ValueError(f"x has {x.shape[-1]} features, which n_heads={n_heads} does not divide")


def _check_merge(x: torch.Tensor) -> None:
    """x (B, H, T, d_k)."""
    check_tensor(x, "x", ndim=4)


@checked(_check_split)
def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(B, T, D) -> (B, H, T, D / H): head i gets features i*d_k .. (i+1)*d_k - 1."""
    batch, length, d_model = x.shape
    return x.view(batch, length, n_heads, d_model // n_heads).transpose(1, 2)  # (B, T, H, d_k) -> (B, H, T, d_k)


@checked(_check_merge)
def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(B, H, T, d_k) -> (B, T, H * d_k), the inverse of `split_heads`.

    The transpose must come before the reshape: reshaping (B, H, T, d_k) directly would
    interleave positions and heads.
    """
    batch, n_heads, length, d_k = x.shape
    return x.transpose(1, 2).reshape(batch, length, n_heads * d_k)  # (B, T, H, d_k) -> (B, T, H * d_k)


def check_head_sizes(
    attn: MultiHeadAttention | None, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True
) -> None:
    check_positive_int(d_model, "d_model")
    check_positive_int(n_heads, "n_heads")
    if d_model % n_heads:
        raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
    check_probability(dropout, "dropout")
    check_bool(bias, "bias")


def check_features(x: torch.Tensor, name: str, m: MultiHeadAttention) -> None:
    """x (B, T, d_model) of the dtype and on the device of the attention module `m`'s weights."""
    weight = m.w_q.weight
    check_tensor(x, name, ndim=3, floating=True)
    if x.shape[-1] != m.d_model:
        raise ValueError(f"{name} has {x.shape[-1]} features, expected d_model={m.d_model}")
    if x.dtype != weight.dtype:
        raise TypeError(f"{name} has dtype {x.dtype} but the weights {weight.dtype}: convert one with .to()")
    if x.device != weight.device:
        raise ValueError(f"{name} is on {x.device} but the weights on {weight.device}: move one with .to()")


def _check_inputs(
    m: MultiHeadAttention,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None = None,
) -> None:
    """Shapes (B, T, d_model) that agree, and a mask that broadcasts to (B, H, T_q, T_k)."""
    for name, x in (("query", query), ("key", key), ("value", value)):
        check_features(x, name, m)
    if key.shape[:2] != value.shape[:2]:
        raise ValueError(f"key {tuple(key.shape)} and value {tuple(value.shape)} must share (B, T_k)")
    if query.shape[0] != key.shape[0]:
        raise ValueError(f"query has batch size {query.shape[0]} but key has {key.shape[0]}")
    if mask is not None:
        check_head_mask(mask, query.shape[0], m.n_heads, query.shape[1], key.shape[1])


def check_head_mask(mask: torch.Tensor, batch: int, n_heads: int, q_len: int, k_len: int, name: str = "mask") -> None:
    """A bool mask of shape (T_q, T_k) or (B or 1, H or 1, T_q, T_k), with T_q, T_k also allowed to be 1."""
    lead = tuple(mask.shape[:-2]) if isinstance(mask, torch.Tensor) else ()
    # A 3-D (B, T_q, T_k) mask would broadcast B against the head axis: refuse it rather than guess.
    if len(lead) > 2 or (len(lead) == 1 and lead[0] != 1):
        raise ValueError(
            f"{name} has shape {tuple(mask.shape)}; expected (T_q, T_k) or (B or 1, H or 1, T_q, T_k): "
            "add the head axis with mask[:, None]"
        )
    if len(lead) == 2 and (lead[0] not in (1, batch) or lead[1] not in (1, n_heads)):
        raise ValueError(f"{name} has shape {tuple(mask.shape)}, expected ({batch} or 1, {n_heads} or 1, T_q, T_k)")
    check_mask(mask, name, (batch, n_heads, q_len, k_len))


class MultiHeadAttention(nn.Module):
    """h attention heads in parallel on d_k = d_model / h features each, mixed by W_O.

    forward(query (B, T_q, D), key (B, T_k, D), value (B, T_k, D), mask) -> (B, T_q, D).
    mask: bool, True = may attend, broadcastable to (B, H, T_q, T_k), e.g. `padding_mask` (B, 1, 1, T_k)
    or `causal_mask` (T_q, T_k). The weights (B, H, T_q, T_k) of the last call are kept on `.attn_weights`.
    """

    @checked(check_head_sizes)
    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        self.d_model, self.n_heads, self.d_k = d_model, n_heads, d_model // n_heads
        self.dropout = float(dropout)
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        # Chapter 2's attention, applied to every head at once: (q, k, v, mask, dropout_p) -> (output, weights).
        self.attention: Callable[..., tuple[torch.Tensor, torch.Tensor | None]] = scaled_dot_product_attention
        self.attn_weights: torch.Tensor | None = None

    @checked(_check_inputs)
    def forward(
        self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        q, k, v = self.project(query, key, value)  # (B, H, T, d_k) each
        return self.attend(q, k, v, mask)

    def project(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Q, K and V cut into heads: query (B, T_q, D), key and value (B, T_k, D) -> (B, H, T, d_k) each."""
        if query is key and key is value:  # self-attention: Q, K and V from one stacked product (section 4.4)
            q, k, v = self.project_qkv(query)
        else:
            q, k, v = self.w_q(query), self.w_k(key), self.w_v(value)
        return tuple(split_heads(t, self.n_heads) for t in (q, k, v))  # (B, T, D) -> (B, H, T, d_k)

    def attend(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Attention on every head at once, then W_O: q (B, H, T_q, d_k), k and v (B, H, T_k, d_k) -> (B, T_q, D)."""
        out, weights = self.attention(q, k, v, mask, self.dropout if self.training else 0.0)
        self.attn_weights = None if weights is None else weights.detach()
        return self.w_o(merge_heads(out))  # (B, H, T_q, d_k) -> (B, T_q, D)

    def project_qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Self-attention's Q, K and V (B, T, D) each, from one product with W_Q, W_K, W_V stacked.

        One wide matrix product instead of three narrow ones: the same numbers. nn.MultiheadAttention stores the
        three matrices stacked once; here they are stacked with torch.cat at every call, a copy that can cost
        more than it saves on short inputs (chapter 13 measures it).
        """
        weight = torch.cat([self.w_q.weight, self.w_k.weight, self.w_v.weight])  # (3D, D)
        bias = None if self.w_q.bias is None else torch.cat([self.w_q.bias, self.w_k.bias, self.w_v.bias])
        return F.linear(x, weight, bias).chunk(3, dim=-1)  # (B, T, 3D) -> 3 × (B, T, D)

    @classmethod
    def from_torch(cls, m: nn.MultiheadAttention) -> MultiHeadAttention:
        """A MultiHeadAttention with the weights and mode of `m`; batch-first inputs whatever `m.batch_first` is."""
        if not isinstance(m, nn.MultiheadAttention):
            raise TypeError(f"m must be a torch.nn.MultiheadAttention, got {type(m).__name__}")
        if not m._qkv_same_embed_dim:
            raise ValueError("m has kdim/vdim different from embed_dim, which this module does not support")
        if m.bias_k is not None or m.add_zero_attn:
            raise ValueError("m uses add_bias_kv or add_zero_attn, which this module does not support")
        bias = m.in_proj_bias is not None
        new = cls(m.embed_dim, m.num_heads, dropout=m.dropout, bias=bias)
        new.to(device=m.in_proj_weight.device, dtype=m.in_proj_weight.dtype).train(m.training)
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
