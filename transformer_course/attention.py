"""Chapter 2: scaled dot-product attention (缩放点积注意力).

    Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V

A query is compared with every key by a dot product; the softmax turns the scores into weights
that sum to 1; the output is the weighted average of the values. Dividing by √d_k keeps the scores'
spread independent of d_k, so the softmax does not saturate when the vectors get long.

Masks are boolean with True = "may attend" (the convention of
`torch.nn.functional.scaled_dot_product_attention`), broadcastable to (..., T_q, T_k).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ._validate import check_probability, check_tensor


def check_mask(mask, name: str, q_len: int, k_len: int) -> torch.Tensor:
    """Return `mask` if it is a boolean tensor broadcastable to (..., q_len, k_len), else raise.

    Masks of other dtypes are refused rather than guessed: 0/1 masks mean "hide" in some code
    (post 1) and "keep" in other code (post 3). `transformer_course.masks` has converters.
    """
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of dtype torch.bool, got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise TypeError(
            f"{name} must have dtype torch.bool (True = may attend), got {mask.dtype}; "
            "convert 0/1 masks with tc.masks.from_hide_mask or tc.masks.from_keep_mask"
        )
    if mask.dim() < 2 or mask.shape[-2] not in (1, q_len) or mask.shape[-1] not in (1, k_len):
        raise ValueError(
            f"{name} has shape {tuple(mask.shape)}, expected a shape broadcastable to (..., {q_len}, {k_len})"
        )
    return mask


def check_qkv(q, k, v) -> None:
    for name, x in (("q", q), ("k", k), ("v", v)):
        check_tensor(x, name, floating=True)
        if x.dim() < 2:
            raise ValueError(f"{name} must have shape (..., T, d), got {tuple(x.shape)}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must share their last dimension d_k, got {q.shape[-1]} and {k.shape[-1]}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k and v must have the same length T_k, got {k.shape[-2]} and {v.shape[-2]}")


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(q kᵀ / √d_k) v, written out step by step: the teaching path.

    q (..., T_q, d_k), k (..., T_k, d_k), v (..., T_k, d_v), mask broadcastable to (..., T_q, T_k)
    with True = may attend. Returns (output (..., T_q, d_v), weights (..., T_q, T_k)).
    A query row that may attend to nothing gets all-zero weights and a zero output, never NaN.
    """
    check_qkv(q, k, v)
    dropout_p = check_probability(dropout_p, "dropout_p")
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (.., T_q, d_k) @ (.., d_k, T_k) -> (.., T_q, T_k)
    if mask is not None:
        check_mask(mask, "mask", q.shape[-2], k.shape[-2])
        # The dtype's own minimum, not -1e9: -1e9 overflows float16 (its range ends at 65504).
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        # A fully masked row came out of the softmax uniform; zeroing the masked entries makes it 0.
        weights = weights.masked_fill(~mask, 0.0)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    return weights @ v, weights
