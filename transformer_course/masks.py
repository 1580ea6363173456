"""Chapter 3: masks (掩码), the boolean tables that say which key each query may attend to.

The package's convention is PyTorch's (`F.scaled_dot_product_attention`): True = may attend.
Two other conventions appear in the wild and in this course's sources:

* "1 = hide" (post 1: `masked_fill_(attn_mask, -1e9)` with 1 at padding / future positions);
* "0 = hide", i.e. 1 = keep (post 3: `masked_fill(attn_mask == 0, -1e9)`).

`from_hide_mask` and `from_keep_mask` turn either into the package's convention.
"""

from __future__ import annotations

import torch

from ._validate import check_positive_int, check_tensor, checked


def _check_bool_mask(mask: torch.Tensor, name: str = "mask") -> None:
    check_tensor(mask, name)
    if mask.dtype != torch.bool:
        raise TypeError(f"{name} must have dtype torch.bool (True = may attend), got {mask.dtype}")


def _check_masks_combine(*masks: torch.Tensor | None) -> None:
    """Boolean masks whose shapes broadcast together (named masks[i], counting the ones given)."""
    given = tuple(m for m in masks if m is not None)
    for i, m in enumerate(given):
        _check_bool_mask(m, f"masks[{i}]")
    try:
        torch.broadcast_shapes(*(m.shape for m in given))
    except RuntimeError:
        shapes = ", ".join(str(tuple(m.shape)) for m in given)
        raise ValueError(f"masks of shapes {shapes} do not broadcast together: line up their dimensions") from None


def _check_causal(size: int, device: torch.device | str | None = None) -> None:
    check_positive_int(size, "size")


def _check_padding(tokens: torch.Tensor, pad_id: int = 0) -> None:
    check_tensor(tokens, "tokens", ndim=2, floating=False)
    if isinstance(pad_id, bool) or not isinstance(pad_id, int):
        raise TypeError(f"pad_id must be an int, got {type(pad_id).__name__}")


@checked(_check_causal)
def causal_mask(size: int, device: torch.device | str | None = None) -> torch.Tensor:
    """(size, size) bool, True on and below the diagonal: position t may attend to 0..t only."""
    return torch.ones(size, size, dtype=torch.bool, device=device).tril()


@checked(_check_padding)
def padding_mask(tokens: torch.Tensor, pad_id: int = 0) -> torch.Tensor:
    """(B, 1, 1, T) bool from token ids (B, T): True at real tokens, False at padding.

    The two singleton dimensions broadcast over heads and query positions, so one mask serves
    every query of every head: a padded key is hidden from all of them.
    """
    return (tokens != pad_id)[:, None, None, :]


@checked(_check_masks_combine)
def combine_masks(*masks: torch.Tensor | None) -> torch.Tensor | None:
    """Logical AND of boolean masks, broadcast together: a key is visible only if every mask allows it.

    `None` entries (no restriction) are skipped; with no mask left the result is None.
    """
    present = [m for m in masks if m is not None]
    if not present:
        return None
    combined = present[0]
    for m in present[1:]:
        combined = combined & m
    return combined


def decoder_self_mask(tgt: torch.Tensor, pad_id: int = 0) -> torch.Tensor:
    """(B, 1, T, T) bool for the decoder's self-attention: causal AND not padding."""
    return padding_mask(tgt, pad_id) & causal_mask(tgt.shape[1], device=tgt.device)


def from_hide_mask(mask: torch.Tensor) -> torch.Tensor:
    """Convert a "1 (or True) = hide" mask, as in post 1, to the package's True = may attend."""
    check_tensor(mask, "mask")
    return mask == 0


def from_keep_mask(mask: torch.Tensor) -> torch.Tensor:
    """Convert a "0 = hide" (1 = keep) mask, as in post 3, to the package's True = may attend."""
    check_tensor(mask, "mask")
    return mask != 0


def to_hide_mask(mask: torch.Tensor) -> torch.Tensor:
    """Convert the package's True = may attend to a "True = hide" mask (what post 1's code expects)."""
    _check_bool_mask(mask)
    return ~mask


def to_additive_mask(mask: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """A float mask to add to the scores: 0 where attending is allowed, the dtype's minimum elsewhere.

    The minimum of the dtype, not -1e9: -1e9 cannot be represented in float16.
    """
    _check_bool_mask(mask)
    if not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating-point dtype, got {dtype}")
    zeros = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
    return zeros.masked_fill(~mask, torch.finfo(dtype).min)
