"""Chapter 10 exercise: assemble one Post-LN decoder layer from its parts.

The reader gets the sub-modules of a `tc.DecoderLayer` (masked self-attention, cross-attention, feed-forward
network, three LayerNorms) and writes the forward pass, building the causal mask themselves. The checker
compares the output with the package's `DecoderLayer` holding the same modules, and also runs the leakage
test of chapter 10 (change the last target position: no earlier output may move), so a layer that sees the
future is called out even when its mistake is not one of the known ones.
"""

from __future__ import annotations

import torch

from ...decoder import DecoderLayer
from ...masks import causal_mask, padding_mask
from ._core import Case, Crash, Mistake, Result, checker, compare, describe_difference, solution
from .encoder import seeded_sublayers


@solution
def decoder_layer(x, memory, memory_mask, self_attn, cross_attn, ffn, norm1, norm2, norm3):
    """One Post-LN decoder layer: x (B, T, D) the target so far, memory (B, S, D) the encoder's output."""
    # Masked self-attention: position t may look at target positions 0..t only (True = may attend).
    length = x.shape[1]
    may_attend = torch.ones(length, length, dtype=torch.bool, device=x.device).tril()
    h = norm1(x + self_attn(x, x, x, may_attend))
    # Cross-attention: queries from the decoder, keys and values from the encoder's output.
    h = norm2(h + cross_attn(h, memory, memory, memory_mask))
    return norm3(h + ffn(h))


def _reference(x, memory, memory_mask, self_attn, cross_attn, ffn, norm1, norm2, norm3):
    """The package's DecoderLayer, holding the reader's modules (dropout 0, Post-LN)."""
    with torch.random.fork_rng(devices=[]):  # its own weights are replaced: draw nothing from the reader's RNG
        layer = DecoderLayer(self_attn.d_model, self_attn.n_heads, ffn.w_1.out_features, dropout=0.0)
    layer.self_attn, layer.cross_attn, layer.ffn = self_attn, cross_attn, ffn
    for sub, norm in zip(layer.sublayers, (norm1, norm2, norm3)):
        sub.norm = norm
    return layer(x, memory, causal_mask(x.shape[1]), memory_mask)


def _layer(self_mask, cross, order=("self", "cross", "ffn"), norm_of=None, pre_ln=False):
    """A decoder layer written with one deliberate change, for the known mistakes below.

    self_mask(T) gives the self-attention's mask; cross(attn, h, memory, mask) runs the cross-attention;
    `order` lists the sub-layers; norm_of maps a sub-layer to the index of its LayerNorm (default: by name).
    """
    norm_of = norm_of or {"self": 0, "cross": 1, "ffn": 2}

    def forward(x, memory, memory_mask, self_attn, cross_attn, ffn, *norms):
        runs = {
            "self": lambda y: self_attn(y, y, y, self_mask(y.shape[1])),
            "cross": lambda y: cross(cross_attn, y, memory, memory_mask),
            "ffn": ffn,
        }
        h = x
        for name in order:
            norm = norms[norm_of[name]]
            h = h + runs[name](norm(h)) if pre_ln else norm(h + runs[name](h))
        return h

    return forward


def _right_cross(attn, h, memory, mask):
    return attn(h, memory, memory, mask)


_MISTAKES = (
    Mistake(
        "no_causal_mask",
        _layer(lambda t: None, _right_cross),
        "the self-attention has no causal mask, so each position sees the target tokens after it (the leak of "
        "post 0's decoder): pass causal_mask(T) to self_attn.",
    ),
    Mistake(
        "causal_mask_inverted",
        _layer(lambda t: ~causal_mask(t), _right_cross),
        "the causal mask is inverted: tc.causal_mask(T) is True on and below the diagonal and True means 'may "
        "attend'; ~causal_mask(T) lets each position see only the future.",
    ),
    Mistake(
        "causal_mask_diagonal",
        _layer(lambda t: causal_mask(t).tril(-1), _right_cross),
        "the causal mask hides the diagonal: position t may attend to itself, so keep tc.causal_mask(T) as it "
        "is (True on and below the diagonal).",
    ),
    Mistake(
        "cross_from_decoder",
        _layer(causal_mask, lambda attn, h, memory, mask: attn(h, h, h, mask)),
        "the cross-attention takes its keys and values from the decoder; they must come from the encoder: "
        "cross_attn(h, memory, memory, memory_mask).",
    ),
    Mistake(
        "cross_from_decoder",
        _layer(causal_mask, lambda attn, h, memory, mask: attn(h, h, h)),
        "the cross-attention takes its keys and values from the decoder; they must come from the encoder: "
        "cross_attn(h, memory, memory, memory_mask).",
    ),
    Mistake(
        "memory_mask_missing",
        _layer(causal_mask, lambda attn, h, memory, mask: attn(h, memory, memory)),
        "memory_mask is not passed to the cross-attention, so the decoder attends to the source's padding: "
        "cross_attn(h, memory, memory, memory_mask).",
    ),
    *(
        Mistake(
            "sublayer_order",
            _layer(causal_mask, _right_cross, order, norm_of),
            "the sub-layers are in the wrong order: masked self-attention first, then cross-attention to the "
            "encoder, then the feed-forward network (norm1, norm2, norm3 in that order).",
        )
        for order in (("cross", "self", "ffn"), ("self", "ffn", "cross"))
        for norm_of in (None, {name: i for i, name in enumerate(order)})
    ),
    Mistake(
        "attentions_swapped",
        lambda x, memory, memory_mask, self_attn, cross_attn, *rest: _layer(causal_mask, _right_cross)(
            x, memory, memory_mask, cross_attn, self_attn, *rest
        ),
        "self_attn and cross_attn are swapped: the masked self-attention over the target is self_attn, the "
        "attention to the encoder's output is cross_attn; each has its own weights.",
    ),
    Mistake(
        "norm_wrong_place",
        _layer(causal_mask, _right_cross, pre_ln=True),
        "you wrote a Pre-LN layer, x + sublayer(norm(x)) (post 0's layout); this exercise asks for the "
        "paper's Post-LN, norm(x + sublayer(x)): add first, then normalise.",
    ),
)


def _observe(fn, case: Case):
    """The output, and whether changing the last target position moves any earlier output (a leak).

    The leak is only looked for in an output of the right shape, (B, T, D) like x.
    """
    x, *rest = case.args  # fresh copies from compare, which then looks for changes fn made to them
    x_moved = x.clone()
    x_moved[:, -1] = -x_moved[:, -1] + 1.0
    out = fn(x, *rest)
    if not (isinstance(out, torch.Tensor) and out.shape == x.shape):
        return out, None
    moved = fn(x_moved, *rest)
    if not (isinstance(moved, torch.Tensor) and moved.shape == out.shape):
        return out, None
    return out, not torch.allclose(out[:, :-1], moved[:, :-1], atol=1e-6)


def _explain(got, expected, label: str) -> str:
    if isinstance(got, Crash):
        return f"raised {got} on {label}"
    if got[1]:  # None when the output has the wrong shape: that is described as a shape problem below
        return (
            f"on {label} the outputs at earlier positions change when the last target position changes: the "
            "layer sees the future. The self-attention needs causal_mask(T) (True on and below the diagonal)."
        )
    return describe_difference(got[0], expected[0], label)


def _modules(seed: int, d_model: int, n_heads: int, d_ff: int):
    return seeded_sublayers(seed, d_model, n_heads, d_ff, n_attn=2, n_norms=3)


def _source_mask(g: torch.Generator, lengths: list[int]) -> torch.Tensor:
    tokens = torch.randint(1, 10, (len(lengths), max(lengths)), generator=g)
    return padding_mask(tokens * (torch.arange(max(lengths)) < torch.tensor(lengths)[:, None]))


@checker
def check_decoder_layer(fn) -> Result:
    """Check `fn(x, memory, memory_mask, self_attn, cross_attn, ffn, norm1, norm2, norm3)` against tc.DecoderLayer."""
    g = torch.Generator().manual_seed(10)

    def case(label, seed, batch, tgt_len, src_lengths, d_model, n_heads, d_ff):
        x = torch.randn(batch, tgt_len, d_model, generator=g)
        memory = torch.randn(batch, max(src_lengths), d_model, generator=g)
        return Case(label, (x, memory, _source_mask(g, src_lengths), *_modules(seed, d_model, n_heads, d_ff)))

    cases = [
        case("targets of 4 tokens; padded sources of 6 and 3", 1, 2, 4, [6, 3], 8, 2, 16),
        case("targets and sources of 5 tokens; source lengths 5/2/4", 2, 3, 5, [5, 2, 4], 8, 4, 32),
        case("a target of 6 tokens; a source of 2 (d_model 12; 3 heads)", 3, 1, 6, [2], 12, 3, 24),
    ]
    x, memory = torch.randn(2, 3, 8, generator=g), torch.randn(2, 7, 8, generator=g)
    label = "a target of 3 tokens; an unpadded source of 7 (memory_mask None)"
    cases.append(Case(label, (x, memory, None, *_modules(4, 8, 2, 8))))
    passed = (
        f"passed all {len(cases)} cases: equal to tc.DecoderLayer holding the same modules, source lengths "
        "different from and equal to the target's, and no position sees the future"
    )
    return compare("decoder_layer", fn, _reference, cases, _MISTAKES, _observe, _explain, passed=passed)
