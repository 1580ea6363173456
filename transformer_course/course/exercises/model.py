"""Chapter 11 exercise: the parameter count of the whole Transformer, as a formula.

The reader writes `count_transformer_parameters(...)` from the architecture alone; the checker builds
`tc.Transformer` with the same sizes on PyTorch's meta device (no memory, no time) and compares with
`tc.count_parameters`, for random sizes, Post-LN and Pre-LN, tied and untied embeddings. The known wrong
formulas (biases or LayerNorms forgotten, the cross-attention missing, tying ignored, the positional
table counted, n_heads multiplied in) are recognised by name.
"""

from __future__ import annotations

import functools

import torch

from ...model import Transformer, count_parameters
from ._core import Case, Mistake, Result, checker, compare, describe_difference, solution


@solution
def count_transformer_parameters(
    src_vocab_size, tgt_vocab_size, d_model, n_heads, n_layers, d_ff, max_len, norm_first, share_embeddings
):
    """Trainable parameters of tc.Transformer(...) with these sizes, each tied tensor counted once."""
    d = d_model
    attention = 4 * (d * d + d)  # W_Q, W_K, W_V, W_O with biases; the h heads split them, n_heads adds nothing
    ffn = (d * d_ff + d_ff) + (d_ff * d + d)  # two Linear layers with biases
    norm = 2 * d  # a gain and a bias
    encoder_layer = attention + ffn + 2 * norm
    decoder_layer = 2 * attention + ffn + 3 * norm  # masked self-attention and cross-attention
    final_norms = 2 * norm if norm_first else 0  # Pre-LN stacks end with a LayerNorm (Post-LN: nn.Identity)
    # Source embedding, target embedding, output projection (no bias); one matrix when tied.
    # The sinusoidal table (max_len x d_model) is a buffer, not a parameter.
    embeddings = src_vocab_size * d if share_embeddings else (src_vocab_size + 2 * tgt_vocab_size) * d
    return embeddings + n_layers * (encoder_layer + decoder_layer) + final_norms


@functools.cache  # the cases are the same on every check: build each model once per process
def _reference(src_vocab_size, tgt_vocab_size, d_model, n_heads, n_layers, d_ff, max_len, norm_first, share):
    with torch.device("meta"):  # no memory is allocated, so large sizes cost nothing
        model = Transformer(
            src_vocab_size, tgt_vocab_size, d_model, n_heads, n_layers, d_ff,
            max_len=max_len, norm_first=norm_first, share_embeddings=share,
        )  # fmt: skip
    return count_parameters(model)


def _formula(attention_bias=True, ffn_bias=True, norms=True, final="pre_ln", cross=True, tying="right",
             positions=False, generator_bias=False, heads=False):  # fmt: skip
    """The solution's formula with one deliberate change, for the known mistakes below."""

    def count(v_src, v_tgt, d, h, n, d_ff, max_len, norm_first, share):
        attention = (h if heads else 1) * 4 * d * d + (4 * d if attention_bias else 0)
        ffn = 2 * d * d_ff + ((d_ff + d) if ffn_bias else 0)
        norm = 2 * d if norms else 0
        layers = n * (attention + ffn + 2 * norm) + n * ((2 if cross else 1) * attention + ffn + 3 * norm)
        with_final = {"pre_ln": norm_first, "never": False, "always": True}[final]
        tied = {"never": False, "always": True}.get(tying, share)
        embeddings = v_src * d if tied else (v_src + (1 if tying == "no_generator" else 2) * v_tgt) * d
        extra = (max_len * d if positions else 0) + (v_tgt if generator_bias else 0)
        return embeddings + layers + (2 * norm if with_final else 0) + extra

    return count


_MISTAKES = (
    Mistake(
        "biases_missing",
        _formula(attention_bias=False, ffn_bias=False),
        "the biases are missing: W_Q, W_K, W_V, W_O each have d_model biases, and the feed-forward network's "
        "Linear layers d_ff and d_model.",
    ),
    Mistake(
        "biases_missing",
        _formula(attention_bias=False),
        "the attention biases are missing: W_Q, W_K, W_V and W_O each have d_model biases, 4 * (d*d + d) in all.",
    ),
    Mistake(
        "biases_missing",
        _formula(ffn_bias=False),
        "the feed-forward biases are missing: its two Linear layers have d_ff and d_model biases.",
    ),
    Mistake(
        "norms_missing",
        _formula(norms=False),
        "the LayerNorms are missing: each has a gain and a bias (2 * d_model); an encoder layer has 2, a decoder "
        "layer 3.",
    ),
    Mistake(
        "final_norm",
        _formula(final="never"),
        "with norm_first=True (Pre-LN) the encoder and the decoder each end with one more LayerNorm: add "
        "2 * 2 * d_model.",
    ),
    Mistake(
        "final_norm",
        _formula(final="always"),
        "the final LayerNorms exist only with norm_first=True (Pre-LN); a Post-LN stack ends with nn.Identity.",
    ),
    Mistake(
        "cross_attention_missing",
        _formula(cross=False),
        "a decoder layer has two attention blocks, masked self-attention and cross-attention to the encoder "
        "(and three LayerNorms).",
    ),
    Mistake(
        "tying_ignored",
        _formula(tying="never"),
        "with share_embeddings=True the source embedding, the target embedding and the output projection are "
        "one matrix: count vocab_size * d_model once.",
    ),
    Mistake(
        "tying_ignored",
        _formula(tying="always"),
        "without share_embeddings the source embedding, the target embedding and the output projection are "
        "three matrices: (src_vocab_size + 2 * tgt_vocab_size) * d_model.",
    ),
    Mistake(
        "generator_missing",
        _formula(tying="no_generator"),
        "the output projection (d_model -> tgt_vocab_size, no bias) is missing: untied, it is a third "
        "vocabulary matrix.",
    ),
    Mistake(
        "positions_counted",
        _formula(positions=True),
        "the sinusoidal positional table (max_len * d_model) is a buffer computed by a formula, not a trained "
        "parameter: leave it out.",
    ),
    Mistake(
        "generator_bias",
        _formula(generator_bias=True),
        "the output projection has no bias in tc.Transformer (bias=False, as in post 1's "
        "`projection`): leave out tgt_vocab_size.",
    ),
    Mistake(
        "heads_multiplied",
        _formula(heads=True),
        "n_heads does not change the count: the heads split each d_model x d_model projection into slices of "
        "d_k = d_model / n_heads columns, they do not each get a full matrix.",
    ),
)


def _explain(got, expected, label: str) -> str:
    if isinstance(got, int) and not isinstance(got, bool):
        return f"returned {got:,} on {label}, expected {expected:,} (off by {got - expected:+,})"
    return describe_difference(got, expected, label)


@checker
def check_count_transformer_parameters(fn) -> Result:
    """Check the formula against tc.count_parameters(tc.Transformer(...)) for random sizes."""
    g = torch.Generator().manual_seed(11)

    def randint(low, high):
        return int(torch.randint(low, high + 1, (1,), generator=g))

    cases = []
    for norm_first, share in ((False, False), (True, False), (False, True), (True, True), (True, False)):
        n_heads = randint(1, 8)
        d_model = n_heads * randint(2, 16)
        src = randint(10, 500)
        tgt = src if share else randint(10, 500)
        sizes = (src, tgt, d_model, n_heads, randint(1, 6), randint(8, 256), randint(16, 512), norm_first, share)
        label = (
            f"vocab {src}/{tgt}; d_model {d_model}; {n_heads} heads; {sizes[4]} layers; d_ff {sizes[5]}; "
            f"{'Pre-LN' if norm_first else 'Post-LN'}; {'tied' if share else 'untied'}"
        )
        cases.append(Case(label, sizes))
    cases.append(Case("the paper's base model (vocab 37000; tied)", (37000, 37000, 512, 8, 6, 2048, 5000, False, True)))
    return compare(
        "count_transformer_parameters",
        fn,
        _reference,
        cases,
        _MISTAKES,
        explain=_explain,
        passed=f"passed all {len(cases)} cases: your formula equals tc.count_parameters for random sizes, "
        "Post-LN and Pre-LN, tied and untied, and for the paper's base model",
    )
