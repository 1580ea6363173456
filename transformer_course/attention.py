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

from ._validate import check_positive_int, check_probability, check_tensor, checked


def _check_d_k(d_k: int) -> None:
    check_positive_int(d_k, "d_k")


@checked(_check_d_k)
def attention_scale(d_k: int) -> float:
    """1/√d_k, the factor on every attention score: the one place the course writes it."""
    return 1.0 / math.sqrt(d_k)


def check_attention_inputs(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None, dropout_p: float = 0.0
) -> None:
    """q (..., T_q, d_k), k (..., T_k, d_k) and v (..., T_k, d_v) of one float dtype, whose leading dimensions
    broadcast together; a bool mask that broadcasts to the scores (..., T_q, T_k) without enlarging them."""
    for name, x in (("q", q), ("k", k), ("v", v)):
        check_tensor(x, name, floating=True)
        if x.dim() < 2:
            raise ValueError(f"{name} must have shape (..., T, d), got {tuple(x.shape)}")
    if not q.dtype == k.dtype == v.dtype:
        raise TypeError(f"q, k and v must share one dtype, got {q.dtype}, {k.dtype} and {v.dtype}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must share their last dimension d_k, got {q.shape[-1]} and {k.shape[-1]}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k and v must have the same length T_k, got {k.shape[-2]} and {v.shape[-2]}")
    lead = broadcast_or_none(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    if lead is None:
        raise ValueError(
            f"the leading dimensions of q {tuple(q.shape)}, k {tuple(k.shape)} and v {tuple(v.shape)} do not broadcast"
        )
    check_probability(dropout_p, "dropout_p")
    if mask is not None:
        check_mask(mask, "mask", (*lead, q.shape[-2], k.shape[-2]))
    devices = {x.device for x in (q, k, v, mask) if x is not None}
    if len(devices) > 1:
        raise ValueError(f"q, k, v and mask must be on one device, got {sorted(map(str, devices))}")


def check_mask(mask: object, name: str, shape: tuple[int, ...]) -> torch.Tensor:
    """Return `mask` if it is a boolean tensor that broadcasts to `shape` (..., T_q, T_k), else raise.

    Masks of other dtypes are refused rather than guessed: 0/1 masks mean "hide" in some code
    (post 1) and "keep" in other code (post 3). `transformer_course.masks` has converters. A mask with
    more dimensions than `shape`, or larger ones, is refused too: it would silently enlarge the output.
    """
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of dtype torch.bool, got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise TypeError(
            f"{name} must have dtype torch.bool (True = may attend), got {mask.dtype}; "
            "convert 0/1 masks with tc.masks.from_hide_mask or tc.masks.from_keep_mask"
        )
    shape = tuple(shape)
    if mask.dim() < 2 or broadcast_or_none(mask.shape, shape) != shape:
        raise ValueError(
            f"{name} has shape {tuple(mask.shape)}, expected a shape broadcastable to (..., {shape[-2]}, {shape[-1]}) "
            f"that does not enlarge the scores {shape}"
        )
    return mask


def broadcast_or_none(*shapes: tuple[int, ...]) -> tuple[int, ...] | None:
    """The shape `shapes` broadcast to, or None if they do not broadcast."""
    try:
        return tuple(torch.broadcast_shapes(*shapes))
    except RuntimeError:
        return None


@checked(check_attention_inputs)
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
    # In float32 at least, as PyTorch's kernels compute it: float16 scores of long vectors overflow (its
    # range ends at 65504), and rounded to float16's 11 bits they would shift the softmax.
    dtype = q.dtype
    q, k, v = (x.to(torch.promote_types(dtype, torch.float32)) for x in (q, k, v))
    # 1/√d_k scales q before the product, so the scores never hold the larger unscaled sums.
    scores = (q * attention_scale(q.shape[-1])) @ k.transpose(-2, -1)  # -> (.., T_q, T_k)
    if mask is not None:
        # The dtype's own minimum, not -1e9: -1e9 overflows float16 (its range ends at 65504).
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        # A fully masked row came out of the softmax uniform; zeroing the masked entries makes it 0.
        weights = weights.masked_fill(~mask, 0.0)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    return (weights @ v).to(dtype), weights.to(dtype)
