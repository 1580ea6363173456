"""Chapter 3 exercises: a padding mask, a causal mask, the two combined, and attention that applies a mask.

Every mask follows the package's convention, PyTorch's: a boolean tensor, True = may attend. The checkers
compare the reader's masks with `tc.padding_mask`, `tc.causal_mask` and `tc.decoder_self_mask`, and the
reader's attention with `tc.scaled_dot_product_attention`; they name the usual mistakes: the convention
inverted (post 1's "1 = hide"), the wrong shape or dtype, OR instead of AND, the mask applied after the
softmax, a fully masked row that comes out uniform or NaN.
"""

from __future__ import annotations

import math

import torch

from ...attention import attention_scale, scaled_dot_product_attention
from ...masks import causal_mask as _causal_mask
from ...masks import decoder_self_mask
from ...masks import padding_mask as _padding_mask
from ._core import Case, Mistake, Result, checker, compare, describe_difference, solution

_INVERTED = (
    "your mask is inverted: True marks what must be hidden, which is post 1's convention (1 = hide). "
    "The package's masks follow PyTorch's scaled_dot_product_attention: True = may attend."
)


def _explain_mask(got, expected, label: str) -> str:
    """Words for a mask that no known mistake explains: dtype, shape, then how many entries differ."""
    if isinstance(got, torch.Tensor) and isinstance(expected, torch.Tensor):
        if got.dtype != torch.bool:
            return f"returned dtype {got.dtype} on {label}; a mask must be torch.bool (True = may attend)"
        if got.shape == expected.shape:
            wrong = int((got != expected).sum())
            return f"your mask differs from the expected one at {wrong} of {got.numel()} entries on {label}"
    return describe_difference(got, expected, label)


# ---------------------------------------------------------------- exercise 3.1: padding_mask


@solution
def padding_mask(tokens, pad_id=0):
    """(B, 1, 1, T) bool from token ids (B, T): True at real tokens, False at padding."""
    keep = tokens != pad_id  # (B, T): the keys that may be attended to
    return keep[:, None, None, :]  # one mask for every head and every query: broadcasting does the rest


_PADDING_MISTAKES = (
    Mistake("inverted", lambda tokens, pad_id: (tokens == pad_id)[:, None, None, :], _INVERTED),
    Mistake(
        "no_broadcast_axes",
        lambda tokens, pad_id: tokens != pad_id,
        "your mask has shape (B, T); the scores have shape (B, H, T_q, T_k), and a (B, T) mask would line up "
        "B with T_q. Add the head and query axes: mask[:, None, None, :] gives (B, 1, 1, T).",
    ),
    Mistake(
        "head_axis_missing",
        lambda tokens, pad_id: (tokens != pad_id)[:, None, :],
        "your mask has shape (B, 1, T), as post 1's get_attn_pad_mask before its expand; against scores "
        "(B, H, T_q, T_k) the batch axis would meet the head axis. Use (B, 1, 1, T): mask[:, None, None, :].",
    ),
    Mistake(
        "queries_masked",
        lambda tokens, pad_id: (tokens != pad_id)[:, None, :, None],
        "your mask has shape (B, 1, T, 1): it hides the rows of padded queries, not the padded keys. A padding "
        "mask says which keys may be attended to, the last axis: mask[:, None, None, :] gives (B, 1, 1, T).",
    ),
    Mistake(
        "pad_id_ignored",
        lambda tokens, pad_id: (tokens != 0)[:, None, None, :],
        "you compared the tokens with 0, not with pad_id: the padding token is whatever pad_id says.",
    ),
    Mistake(
        "not_bool",
        lambda tokens, pad_id: (tokens != pad_id)[:, None, None, :].long(),
        "the values are right but the dtype is not: a mask must be torch.bool (True = may attend). "
        "Comparisons such as tokens != pad_id already give one; do not convert it to numbers.",
    ),
)


@checker
def check_padding_mask(fn) -> Result:
    """Check `fn(tokens, pad_id) -> (B, 1, 1, T)` bool against tc.padding_mask."""
    cases = [
        Case(
            "post 1's example [1, 2, 3, 0, 0] and [4, 5, 0, 0, 0]",
            (torch.tensor([[1, 2, 3, 0, 0], [4, 5, 0, 0, 0]]), 0),
        ),
        Case("a batch without padding", (torch.tensor([[5, 6, 7], [8, 9, 4]]), 0)),
        Case("pad_id 1 (0 is a real token)", (torch.tensor([[0, 3, 1, 1], [2, 0, 4, 1]]), 1)),
    ]
    return compare("padding_mask", fn, _padding_mask, cases, _PADDING_MISTAKES, explain=_explain_mask)


# ---------------------------------------------------------------- exercise 3.2: causal_mask


@solution
def causal_mask(size):
    """(size, size) bool, True on and below the diagonal: query t may attend to keys 0..t."""
    return torch.ones(size, size, dtype=torch.bool).tril()


_CAUSAL_MISTAKES = (
    Mistake(
        "inverted",
        lambda size: torch.ones(size, size, dtype=torch.bool).triu(1),
        "True above the diagonal marks the future to hide: that is post 1's convention (1 = hide). "
        "The package's masks say True = may attend: keep the diagonal and below, .tril().",
    ),
    Mistake(
        "future_visible",
        lambda size: torch.ones(size, size, dtype=torch.bool).triu(),
        "with triu, position t sees itself and every later position and none before it: the mask lets the "
        "future in. Use tril: on and below the diagonal.",
    ),
    Mistake(
        "diagonal_hidden",
        lambda size: torch.ones(size, size, dtype=torch.bool).tril(-1),
        "the diagonal is hidden: a position may attend to itself (tril(), not tril(-1)). Without it the "
        "first position attends to nothing at all.",
    ),
    Mistake(
        "not_bool",
        lambda size: torch.ones(size, size).tril(),
        "the values are right but the dtype is not: build a torch.bool mask (dtype=torch.bool), True = may "
        "attend. masked_fill refuses float and uint8 masks.",
    ),
    Mistake(
        "additive_mask",
        lambda size: torch.full((size, size), float("-inf")).triu(1),
        "this is an additive float mask, 0 where a position may attend and -inf above the diagonal (what "
        "nn.Transformer.generate_square_subsequent_mask returns). The package's masks are bool, True = may attend: "
        "torch.ones(size, size, dtype=torch.bool).tril().",
    ),
    Mistake(
        "post_1_uint8",
        lambda size: torch.ones(size, size).triu(1).byte(),
        "this is post 1's get_attn_subsequent_mask: a uint8 mask with 1 = hide. Current PyTorch refuses "
        "uint8 masks, and the package's convention is the opposite: a bool mask, True on and below the diagonal.",
    ),
)


@checker
def check_causal_mask(fn) -> Result:
    """Check `fn(size) -> (size, size)` bool against tc.causal_mask."""
    cases = [Case("size 4", (4,)), Case("size 1", (1,)), Case("size 6", (6,))]
    return compare("causal_mask", fn, _causal_mask, cases, _CAUSAL_MISTAKES, explain=_explain_mask)


# ---------------------------------------------------------------- exercise 3.3: decoder_mask


@solution
def decoder_mask(tokens, pad_id=0):
    """(B, 1, T, T) bool for a decoder's self-attention: a key is visible if it is not padding AND not future."""
    length = tokens.shape[1]
    not_padding = (tokens != pad_id)[:, None, None, :]  # (B, 1, 1, T): hides padded keys
    not_future = torch.ones(length, length, dtype=torch.bool).tril()  # (T, T): hides later keys
    return not_padding & not_future  # broadcast to (B, 1, T, T)


def _keys(tokens, pad_id):
    return (tokens != pad_id)[:, None, None, :]


def _lower(tokens):
    return torch.ones(tokens.shape[1], tokens.shape[1], dtype=torch.bool).tril()


_DECODER_MISTAKES = (
    Mistake(
        "or_instead_of_and",
        lambda tokens, pad_id: _keys(tokens, pad_id) | _lower(tokens),
        "you combined the masks with OR: a key is then visible if either mask allows it, so the future or "
        "the padding leaks through. A key must pass both: padding & causal.",
    ),
    Mistake("inverted", lambda tokens, pad_id: ~(_keys(tokens, pad_id) & _lower(tokens)), _INVERTED),
    Mistake(
        "sum_not_bool",
        lambda tokens, pad_id: _keys(tokens, pad_id).long() + _lower(tokens).long(),
        "you added the masks: the sum counts 0, 1 or 2 and is not a mask. Post 1 adds its hide masks and "
        "then takes torch.gt(sum, 0); with True = may attend, combine with logical AND, padding & causal.",
    ),
    Mistake(
        "causal_only",
        lambda tokens, pad_id: _lower(tokens).expand(tokens.shape[0], 1, -1, -1),
        "the padding is not hidden: your mask is the causal mask alone. AND it with the padding mask.",
    ),
    Mistake(
        "causal_only",
        lambda tokens, pad_id: _lower(tokens),
        "the padding is not hidden: your mask is the causal mask alone. AND it with the padding mask.",
    ),
    Mistake(
        "padding_only",
        lambda tokens, pad_id: _keys(tokens, pad_id).expand(-1, -1, tokens.shape[1], -1),
        "the future is not hidden: your mask is the padding mask alone. AND it with the causal mask.",
    ),
    Mistake(
        "padding_only",
        lambda tokens, pad_id: _keys(tokens, pad_id),
        "the future is not hidden: your mask is the padding mask alone. AND it with the causal mask.",
    ),
    Mistake(
        "queries_masked",
        lambda tokens, pad_id: _keys(tokens, pad_id) & _lower(tokens) & (tokens != pad_id)[:, None, :, None],
        "you also hid the rows of padded queries. Only keys are masked: what a padded position computes is "
        "ignored by the loss, and a query row with nothing to attend to becomes a fully masked row.",
    ),
    Mistake(
        "head_axis_missing",
        lambda tokens, pad_id: (_keys(tokens, pad_id) & _lower(tokens))[:, 0],
        "your mask has shape (B, T, T); against scores (B, H, T, T) the batch axis would meet the head axis. "
        "Keep the head axis: (B, 1, T, T).",
    ),
)


@checker
def check_decoder_mask(fn) -> Result:
    """Check `fn(tokens, pad_id) -> (B, 1, T, T)` bool against tc.decoder_self_mask."""
    cases = [
        Case("target inputs [[1, 5, 6, 7, 0], [1, 8, 0, 0, 0]]", (torch.tensor([[1, 5, 6, 7, 0], [1, 8, 0, 0, 0]]), 0)),
        Case("a batch without padding", (torch.tensor([[1, 4, 5], [1, 6, 7]]), 0)),
        Case("one sequence with pad_id 2", (torch.tensor([[1, 0, 4, 2, 2, 2]]), 2)),
    ]
    return compare("decoder_mask", fn, decoder_self_mask, cases, _DECODER_MISTAKES, explain=_explain_mask)


# ---------------------------------------------------------------- exercise 3.4: masked_attention


@solution
def masked_attention(q, k, v, mask):
    """softmax(q kᵀ / √d_k) v with a bool mask (True = may attend) -> (output, weights)."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    # Hidden scores get the smallest number of the dtype, before the softmax: they end up with weight 0.
    scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1)
    # A row that may attend to nothing came out uniform; zeroing the hidden entries makes it all 0.
    weights = weights.masked_fill(~mask, 0.0)
    return weights @ v, weights


def _masked_variant(fill, zero_hidden=True, invert=False, after_softmax=False, scale=True):
    """A wrong (or partly wrong) masked attention, for recognising the reader's mistake."""

    def variant(q, k, v, mask):
        hide = mask if invert else ~mask
        scores = q @ k.transpose(-2, -1)
        if scale:
            scores = scores * attention_scale(q.shape[-1])  # the package's scale: only the mistake differs
        if after_softmax:
            weights = torch.softmax(scores, dim=-1).masked_fill(hide, 0.0)
        else:
            weights = torch.softmax(scores.masked_fill(hide, fill), dim=-1)
            if zero_hidden:
                weights = weights.masked_fill(hide, 0.0)
        return weights @ v, weights

    return variant


_FULLY_MASKED_NAN = (
    "a query that may attend to nothing (a fully masked row) gives NaN: the softmax of a row of -inf is 0/0. "
    "Fill hidden scores with torch.finfo(scores.dtype).min instead of -inf, and set the weights of hidden "
    "entries to 0 after the softmax, so such a row gives zeros."
)
_MASKED_MISTAKES = (
    Mistake(
        "fully_masked_uniform",
        _masked_variant(-1e9, zero_hidden=False),
        "right wherever a query may attend to something; but a query that may attend to nothing (a fully "
        "masked row) gets uniform weights over the hidden keys: the softmax of a row of equal -1e9 is 1/T_k "
        "each. Set the weights of hidden entries to 0 after the softmax, weights.masked_fill(~mask, 0).",
    ),
    Mistake("fully_masked_nan", _masked_variant(float("-inf"), zero_hidden=False), _FULLY_MASKED_NAN),
    Mistake("inverted_mask", _masked_variant(-1e9, zero_hidden=False, invert=True), _INVERTED),
    Mistake("inverted_mask", _masked_variant(-1e9, zero_hidden=True, invert=True), _INVERTED),
    Mistake("inverted_mask", _masked_variant(float("-inf"), zero_hidden=False, invert=True), _INVERTED),
    Mistake(
        "mask_after_softmax",
        _masked_variant(None, after_softmax=True),
        "you applied the mask after the softmax: the hidden weights are 0 but the rows no longer sum to 1. "
        "Mask the scores before the softmax (masked_fill(~mask, ...)), so the visible keys share the whole weight.",
    ),
    Mistake(
        "zero_fill",
        _masked_variant(0.0, zero_hidden=False),
        "the hidden scores are set to 0, which the softmax turns into weight exp(0) = 1 like any other score: "
        "hidden keys still get attention. Fill them with a very negative number, torch.finfo(scores.dtype).min, "
        "so that their weight is 0.",
    ),
    Mistake(
        "mask_ignored",
        lambda q, k, v, mask: scaled_dot_product_attention(q, k, v),
        "the mask changes nothing in your output: apply it to the scores, scores.masked_fill(~mask, ...), "
        "before the softmax.",
    ),
    Mistake(
        "no_scale",
        _masked_variant(torch.finfo(torch.float32).min, scale=False),
        "your output matches masked attention without the scale: divide the scores by √d_k.",
    ),
)


@checker
def check_masked_attention(fn) -> Result:
    """Check `fn(q, k, v, mask) -> (output, weights)` against tc.scaled_dot_product_attention."""
    g = torch.Generator().manual_seed(30)

    def qkv(b, h, t_q, t_k, d):
        shapes = ((b, h, t_q, d), (b, h, t_k, d), (b, h, t_k, d))
        return tuple(torch.randn(*s, generator=g) for s in shapes)

    padded = torch.tensor([[1, 2, 3, 0, 0], [4, 5, 6, 7, 8]])
    left_padded = torch.tensor([[0, 0, 3, 4], [5, 6, 7, 8]])
    cases = [
        Case("a padding mask (2, 1, 1, 5) on (2, 2, 5, 4) heads", (*qkv(2, 2, 5, 5, 4), _padding_mask(padded))),
        Case("a causal mask (4, 4) on (1, 2, 4, 8) heads", (*qkv(1, 2, 4, 4, 8), _causal_mask(4))),
        Case(
            "left padding with a causal mask (two fully masked rows)",
            (*qkv(2, 1, 4, 4, 4), _padding_mask(left_padded) & _causal_mask(4)),
        ),
        Case("a mask that hides nothing", (*qkv(1, 1, 3, 3, 4), torch.ones(3, 3, dtype=torch.bool))),
    ]
    return compare("masked_attention", fn, scaled_dot_product_attention, cases, _MASKED_MISTAKES)
