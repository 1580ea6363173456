"""Chapter 19: today's decoder (Llama-style): rotary positions, RMSNorm, SwiGLU and grouped-query attention.

    ids (B, T) ─ embedding ─ N × [x + GQA(RMSNorm(x), RoPE); x + SwiGLU(RMSNorm(x))] ─ RMSNorm ─ head ─ (B, T, V)

Chapter 14's GPT with four pieces changed, as in Llama, Mistral and Qwen:

* **RoPE** (旋转位置编码): no position table is added to the input; each query and key is rotated by an angle
  proportional to its position, pair of features by pair, so q_m · k_n depends on the offset m - n only.
* **RMSNorm** (chapter 6's exercise) before every sub-layer and at the end: pre-norm everywhere, no biases.
* **SwiGLU** (门控前馈网络): W_down(silu(W_gate x) ⊙ W_up x), a gate on the hidden layer; its width is 2/3 of
  GPT's 4d, so its three matrices hold as many weights as GPT's two.
* **Grouped-query attention** (分组查询注意力): H query heads share H_kv key/value heads, so the KV cache holds
  H_kv heads instead of H; H_kv = 1 is multi-query attention (MQA), H_kv = H is multi-head attention (MHA).

The attention module is the only one that reads or writes the cached keys and values:
`GroupedQueryAttention.forward` takes an optional `LayerCache`, and the keys it stores there are already rotated,
each once, at its own position. The decoder reads the cache's length to choose the angles, and the block passes
the cache through.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn

from ._validate import check_bool, check_positive_int, checked
from .attention import attention_scale
from .efficient import KVCache, LayerCache
from .gpt import check_lm_inputs
from .masks import causal_mask
from .norm import RMSNorm


def swiglu_hidden_size(d_model: int, multiple_of: int = 256) -> int:
    """Llama's SwiGLU width: 2/3 of 4 · d_model, rounded down to an int, then up to a multiple of `multiple_of`.

    Three d_model × hidden matrices at hidden = 2/3 · 4d hold as many weights as GPT's two bias-free ones at 4d.
    Meta's code for Llama 1 and the smaller Llama 2 models rounds up to a multiple of 256 (d_model 4096 gives
    11008).
    """
    check_positive_int(d_model, "d_model")
    check_positive_int(multiple_of, "multiple_of")
    hidden = int(2 * 4 * d_model / 3)
    return multiple_of * math.ceil(hidden / multiple_of)


@dataclass(frozen=True)
class ModernConfig:
    """The sizes of a `ModernDecoder`, validated once when built.

    n_kv_heads: the key/value heads (None: n_heads, multi-head attention; 1: multi-query); it must divide n_heads.
    d_ff: SwiGLU's hidden width (None: `swiglu_hidden_size(d_model)`, Llama's rule).
    tie_weights: the output layer reuses the token embedding matrix (Llama 3.2's small models) or has its own.
    """

    vocab_size: int
    d_model: int = 256
    n_layers: int = 4
    n_heads: int = 4
    n_kv_heads: int | None = None
    d_ff: int | None = None
    max_len: int = 256
    rope_theta: float = 10000.0
    eps: float = 1e-6
    tie_weights: bool = False

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "n_layers", "n_heads", "max_len"):
            check_positive_int(getattr(self, name), name)
        # A frozen dataclass: the defaults that depend on other fields are filled in once, here.
        n_kv_heads = self.n_heads if self.n_kv_heads is None else self.n_kv_heads
        d_ff = swiglu_hidden_size(self.d_model) if self.d_ff is None else self.d_ff
        object.__setattr__(self, "n_kv_heads", check_positive_int(n_kv_heads, "n_kv_heads"))
        object.__setattr__(self, "d_ff", check_positive_int(d_ff, "d_ff"))
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        if (self.d_model // self.n_heads) % 2:
            raise ValueError(f"head_dim={self.d_model // self.n_heads} must be even: RoPE rotates pairs of features")
        if self.n_heads % n_kv_heads:
            raise ValueError(f"n_kv_heads={n_kv_heads} must divide n_heads={self.n_heads} (groups of equal size)")
        for name in ("rope_theta", "eps"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"{name}={value!r} must be a positive number")
        check_bool(self.tie_weights, "tie_weights")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads


# ----------------------------------------------------------------------------------------- RoPE


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(..., d) -> (..., d): the pairs (x_i, x_{i+d/2}) turned by 90°, i.e. (x1, x2) -> (-x2, x1) half by half."""
    x1, x2 = x.chunk(2, dim=-1)  # (..., d) -> 2 × (..., d/2)
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate each pair (x_i, x_{i+d/2}) of x (B, H, T, d) by the angles of its position: cos, sin (T, d)."""
    return x * cos + rotate_half(x) * sin


class RotaryEmbedding(nn.Module):
    """The cosines and sines of rotary position embeddings: forward(start, length) -> cos, sin (length, head_dim).

    Pair i (features i and i + d/2) turns by the angle m · θ^(-2i/d) at position m: fast turns for the first
    pairs, slow ones for the last. The frequencies and angles stay in float32 even when the model is cast
    (`.to(torch.bfloat16)`, `.half()`): rounded to bfloat16's 8 significant bits (7 stored), the angles of far
    positions would be off by whole radians. The attention casts cos and sin to its own dtype only after they are
    computed.
    """

    def __init__(self, head_dim: int, theta: float = 10000.0):
        super().__init__()
        self.head_dim, self.theta = check_positive_int(head_dim, "head_dim"), theta
        self.inv_freq: torch.Tensor
        self.register_buffer("inv_freq", self._frequencies(None), persistent=False)  # derived from theta

    def _frequencies(self, device: torch.device | None) -> torch.Tensor:
        exponents = torch.arange(0, self.head_dim, 2, dtype=torch.float32, device=device) / self.head_dim
        return 1.0 / (self.theta**exponents)  # (d/2,): θ^(-2i/d), in float32

    def _apply(self, fn: Callable[[torch.Tensor], torch.Tensor], recurse: bool = True) -> RotaryEmbedding:
        # Every .to(), .half(), .cuda() goes through here. A cast would round the frequencies: recompute them
        # in float32 on the new device (transformers, too, builds its inv_freq in float32).
        super()._apply(fn, recurse)
        self.inv_freq = self._frequencies(self.inv_freq.device)
        return self

    def forward(self, start: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
        positions = torch.arange(start, start + length, device=self.inv_freq.device, dtype=torch.float32)
        angles = positions[:, None] * self.inv_freq  # (T, 1) * (d/2,) -> (T, d/2)
        angles = torch.cat((angles, angles), dim=-1)  # (T, d): pair i uses feature i and i + d/2
        return angles.cos(), angles.sin()


# ----------------------------------------------------------------------------------------- SwiGLU


class SwiGLU(nn.Module):
    """The gated feed-forward network: (B, T, D) -> w_down(silu(w_gate(x)) * w_up(x)), no biases."""

    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        self.w_gate = nn.Linear(d_model, d_ff, bias=False)
        self.w_up = nn.Linear(d_model, d_ff, bias=False)
        self.w_down = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # The gate silu(x W_gate) decides, feature by feature, how much of x W_up passes.
        return self.w_down(F.silu(self.w_gate(x)) * self.w_up(x))


# ----------------------------------------------------------------------------------------- attention


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """(B, H_kv, T, d) -> (B, H_kv · n_rep, T, d): query head j reads key/value head j // n_rep."""
    if n_rep == 1:
        return x
    batch, n_kv_heads, length, head_dim = x.shape
    x = x[:, :, None].expand(batch, n_kv_heads, n_rep, length, head_dim)  # (B, H_kv, n_rep, T, d), no copy
    return x.reshape(batch, n_kv_heads * n_rep, length, head_dim)  # (B, H_kv, n_rep, T, d) -> (B, H, T, d)


class GroupedQueryAttention(nn.Module):
    """Causal self-attention with n_heads query heads sharing n_kv_heads key/value heads, and rotary positions.

    forward(x (B, T, D), rope = (cos, sin) of x's positions, cache) -> (B, T, D). With a `LayerCache`, x holds
    the positions after the cached ones; their rotated keys and their values join the cache.
    """

    def __init__(self, config: ModernConfig):
        super().__init__()
        # n_kv_heads is an int once ModernConfig.__post_init__ has filled in its default.
        self.n_heads, self.n_kv_heads, self.head_dim = config.n_heads, cast(int, config.n_kv_heads), config.head_dim
        self.scale = attention_scale(self.head_dim)  # 1/√d_k, from chapter 2's one definition
        kv_dim = self.n_kv_heads * self.head_dim
        self.w_q = nn.Linear(config.d_model, config.d_model, bias=False)
        self.w_k = nn.Linear(config.d_model, kv_dim, bias=False)  # fewer heads: a narrower matrix
        self.w_v = nn.Linear(config.d_model, kv_dim, bias=False)
        self.w_o = nn.Linear(config.d_model, config.d_model, bias=False)

    def forward(
        self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor], cache: LayerCache | None = None
    ) -> torch.Tensor:
        batch, length, d_model = x.shape
        q = self.w_q(x).view(batch, length, self.n_heads, self.head_dim).transpose(1, 2)  # -> (B, H, T, d)
        k = self.w_k(x).view(batch, length, self.n_kv_heads, self.head_dim).transpose(1, 2)  # -> (B, H_kv, T, d)
        v = self.w_v(x).view(batch, length, self.n_kv_heads, self.head_dim).transpose(1, 2)
        cos, sin = (t.to(x.dtype) for t in rope)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)  # values carry content, not position
        start = 0 if cache is None else cache.length
        if cache is not None:
            k, v = cache.append(k, v)  # keys stored rotated: each is rotated once, at its own position
        n_rep = self.n_heads // self.n_kv_heads
        k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)  # (B, H_kv, T_k, d) -> (B, H, T_k, d)
        # One new position sees every key; a full pass is causal; a chunk after a cached prefix sees rows
        # start.. of the causal mask.
        mask = None if length == 1 or start == 0 else causal_mask(start + length, x.device)[start:]
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=length > 1 and start == 0, scale=self.scale
        )  # (B, H, T, d)
        return self.w_o(out.transpose(1, 2).reshape(batch, length, d_model))  # (B, T, H, d) -> (B, T, D)


# ----------------------------------------------------------------------------------------- the model


class ModernBlock(nn.Module):
    """x + attention(RMSNorm(x)), then x + SwiGLU(RMSNorm(x)): pre-norm, no biases. (B, T, D) -> (B, T, D)."""

    def __init__(self, config: ModernConfig):
        super().__init__()
        self.attn_norm = RMSNorm(config.d_model, config.eps)
        self.attn = GroupedQueryAttention(config)
        self.ffn_norm = RMSNorm(config.d_model, config.eps)
        self.ffn = SwiGLU(config.d_model, cast(int, config.d_ff))

    def forward(
        self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor], cache: LayerCache | None = None
    ) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x), rope, cache)
        return x + self.ffn(self.ffn_norm(x))


def _check_config(model: ModernDecoder, config: ModernConfig) -> None:
    if not isinstance(config, ModernConfig):
        raise TypeError(f"config must be a transformer_course.ModernConfig, got {type(config).__name__}")


class ModernDecoder(nn.Module):
    """A Llama-style language model. forward(ids (B, T), cache) -> logits (B, T, vocab_size).

    With a `cache` (from `new_cache()`), ids holds only the positions after the cached ones, and only their
    logits are computed. `tc.generate` samples from it as from `tc.GPT`.
    """

    @checked(_check_config)  # the config was checked when made: the modules built inside skip their checks
    def __init__(self, config: ModernConfig):
        super().__init__()
        self.config = config
        self.vocab_size, self.max_len = config.vocab_size, config.max_len
        self.token_embedding = nn.Embedding(config.vocab_size, config.d_model)  # no position table: RoPE
        self.rope = RotaryEmbedding(config.head_dim, config.rope_theta)
        self.blocks = nn.ModuleList(ModernBlock(config) for _ in range(config.n_layers))
        self.norm = RMSNorm(config.d_model, config.eps)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        for module in self.modules():  # N(0, 0.02) everywhere, as Llama's initializer_range
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)
        if config.tie_weights:
            self.lm_head.weight = self.token_embedding.weight

    @checked(check_lm_inputs)
    def forward(self, ids: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        start = 0 if cache is None else cache.length  # the position of ids' first token
        rope = self.rope(start, ids.shape[1])  # (T, head_dim) each, shared by every block
        x = self.token_embedding(ids)
        for i, block in enumerate(self.blocks):
            x = block(x, rope, None if cache is None else cache.layers[i])
        return self.lm_head(self.norm(x))

    def new_cache(self) -> KVCache:
        """An empty KV cache with one entry per block; it stores n_kv_heads heads per layer."""
        return KVCache(len(self.blocks))


def cache_bytes_per_token(cache: KVCache) -> float:
    """The bytes a KV cache holds per cached position (keys and values, every layer, the whole batch)."""
    if cache.length == 0:
        raise ValueError("cache is empty: run the model on at least one position first")
    tensors = [t for layer in cache.layers for t in (layer.keys, layer.values) if t is not None]
    total = sum(t.numel() * t.element_size() for t in tensors)
    return total / cache.length
