"""Chapter 9 exercise: assemble one Post-LN encoder layer from its parts.

The reader gets the sub-modules of a `tc.EncoderLayer` (its multi-head self-attention, its feed-forward
network and its two LayerNorms) and writes the forward pass that wires them together. The checker
compares the result with the package's `EncoderLayer` holding the very same modules, and names the
usual assembly mistakes: a missing residual, a LayerNorm in the wrong place, the mask not passed.
"""

from __future__ import annotations

import torch

from ...encoder import EncoderLayer
from ...ffn import PositionwiseFeedForward
from ...masks import causal_mask, padding_mask
from ...multihead import MultiHeadAttention
from ...norm import LayerNorm
from ._core import Case, Mistake, Result, checker, compare, solution


@solution
def encoder_layer(x, mask, self_attn, ffn, norm1, norm2):
    """One Post-LN encoder layer (the paper's): x (B, T, D), mask True = may attend -> (B, T, D)."""
    # Sub-layer 1: every position attends to every visible position; add the input, then normalise.
    h = norm1(x + self_attn(x, x, x, mask))
    # Sub-layer 2: the same feed-forward network at every position; add, then normalise.
    return norm2(h + ffn(h))


def _reference(x, mask, self_attn, ffn, norm1, norm2):
    """The package's EncoderLayer, holding the reader's modules (dropout 0, Post-LN)."""
    with torch.random.fork_rng(devices=[]):  # its own weights are replaced: draw nothing from the reader's RNG
        layer = EncoderLayer(self_attn.d_model, self_attn.n_heads, ffn.w_1.out_features, dropout=0.0)
    layer.self_attn, layer.ffn = self_attn, ffn
    layer.sublayers[0].norm, layer.sublayers[1].norm = norm1, norm2
    return layer(x, mask)


_RESIDUAL = (
    "the residual connection is missing: each sub-layer adds its input back before normalising, "
    "h = norm1(x + self_attn(x, x, x, mask)) and then norm2(h + ffn(h))."
)
_MISTAKES = (
    Mistake("residual_missing", lambda x, m, a, f, n1, n2: n2(f(n1(a(x, x, x, m)))), _RESIDUAL),
    Mistake(
        "residual_missing",
        lambda x, m, a, f, n1, n2: n2(f(h := n1(a(x, x, x, m))) + h),
        "the residual around the self-attention is missing: h = norm1(x + self_attn(x, x, x, mask)).",
    ),
    Mistake(
        "residual_missing",
        lambda x, m, a, f, n1, n2: n2(f(n1(x + a(x, x, x, m)))),
        "the residual around the feed-forward network is missing: the output is norm2(h + ffn(h)).",
    ),
    Mistake(
        "norm_wrong_place",
        lambda x, m, a, f, n1, n2: (h := x + a(n1(x), n1(x), n1(x), m)) + f(n2(h)),
        "you wrote a Pre-LN layer, x + sublayer(norm(x)) (post 0's layout); this exercise asks for the "
        "paper's Post-LN, norm(x + sublayer(x)): add first, then normalise.",
    ),
    Mistake(
        "norm_wrong_place",
        lambda x, m, a, f, n1, n2: (h := x + n1(a(x, x, x, m))) + n2(f(h)),
        "the LayerNorm is applied to the sub-layer's output before the residual is added; normalise the sum: "
        "norm1(x + self_attn(...)), then norm2(h + ffn(h)).",
    ),
    Mistake(
        "norms_swapped",
        lambda x, m, a, f, n1, n2: n1((h := n2(x + a(x, x, x, m))) + f(h)),
        "the two LayerNorms are swapped: norm1 belongs to the self-attention sub-layer, norm2 to the "
        "feed-forward one (each has its own gain and bias).",
    ),
    Mistake(
        "mask_not_passed",
        lambda x, m, a, f, n1, n2: n2((h := n1(x + a(x, x, x))) + f(h)),
        "the mask is not passed to the self-attention, so every position also attends to the padding: "
        "call self_attn(x, x, x, mask).",
    ),
    Mistake(
        "mask_inverted",
        lambda x, m, a, f, n1, n2: n2((h := n1(x + a(x, x, x, ~m))) + f(h)),
        "the mask is inverted: in this package True means 'may attend' (PyTorch's SDPA convention), so pass "
        "the mask as it is, not ~mask.",
    ),
    Mistake(
        "ffn_missing",
        lambda x, m, a, f, n1, n2: n1(x + a(x, x, x, m)),
        "your layer stops after the self-attention: the second sub-layer, the feed-forward network with its "
        "residual and norm2, is missing: return norm2(h + ffn(h)).",
    ),
    Mistake(
        "ffn_input",
        lambda x, m, a, f, n1, n2: n2(n1(x + a(x, x, x, m)) + f(x)),
        "the feed-forward network is applied to the layer's input x; it must process the output h of the "
        "first sub-layer: norm2(h + ffn(h)).",
    ),
)


def seeded_sublayers(seed: int, d_model: int, n_heads: int, d_ff: int, n_attn: int = 1, n_norms: int = 2):
    """Fresh sub-modules with seeded weights: (attentions..., ffn, norms...).

    LayerNorm gains and biases are made non-trivial so that a norm used in the wrong place shows.
    """
    with torch.random.fork_rng(devices=[]):  # leave the reader's random state untouched
        torch.manual_seed(seed)
        attns = [MultiHeadAttention(d_model, n_heads) for _ in range(n_attn)]
        ffn = PositionwiseFeedForward(d_model, d_ff)
        norms = [LayerNorm(d_model) for _ in range(n_norms)]
        with torch.no_grad():
            for norm in norms:
                norm.weight.uniform_(0.5, 1.5)
                norm.bias.normal_(0.0, 0.2)
    return (*attns, ffn, *norms)


def _tokens(g: torch.Generator, lengths: list[int]) -> torch.Tensor:
    """(B, max(lengths)) token ids 1..9, right-padded with 0."""
    tokens = torch.randint(1, 10, (len(lengths), max(lengths)), generator=g)
    return tokens * (torch.arange(max(lengths)) < torch.tensor(lengths)[:, None])


@checker
def check_encoder_layer(fn) -> Result:
    """Check `fn(x, mask, self_attn, ffn, norm1, norm2)` against tc.EncoderLayer with the same modules."""
    g = torch.Generator().manual_seed(9)
    cases = [
        Case(
            "2 padded sentences (lengths 5 and 3; d_model 8; 2 heads)",
            (torch.randn(2, 5, 8, generator=g), padding_mask(_tokens(g, [5, 3])), *seeded_sublayers(1, 8, 2, 16)),
        ),
        Case(
            "3 padded sentences (lengths 6/2/4; d_model 12; 3 heads)",
            (torch.randn(3, 6, 12, generator=g), padding_mask(_tokens(g, [6, 2, 4])), *seeded_sublayers(2, 12, 3, 24)),
        ),
        Case(
            "one sentence with a causal 4 x 4 mask",
            (torch.randn(1, 4, 8, generator=g), causal_mask(4), *seeded_sublayers(3, 8, 4, 8)),
        ),
        Case(
            "unnormalised inputs (scale 10; shift 3)",
            (
                10 * torch.randn(2, 3, 8, generator=g) + 3,
                padding_mask(_tokens(g, [3, 2])),
                *seeded_sublayers(4, 8, 2, 32),
            ),
        ),
    ]
    passed = (
        f"passed all {len(cases)} cases: equal to tc.EncoderLayer holding the same modules, with padding masks, "
        "a causal mask and unnormalised inputs"
    )
    return compare("encoder_layer", fn, _reference, cases, _MISTAKES, passed=passed)
