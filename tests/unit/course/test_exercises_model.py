"""Chapter 11's wrong answers (`WRONG_ANSWERS`) and the tests specific to its checker.

test_exercise_checkers.py runs every row of the table against its checker (the mistake's key and the
words of its message), with the reference solution and the checks common to every checker.
"""

import pytest
import torch

import transformer_course as tc
from transformer_course.course.exercises import solutions


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("share", [False, True])
def test_solution_equals_a_real_model(norm_first, share):
    model = tc.Transformer(23, 23 if share else 17, d_model=12, n_heads=3, n_layers=2, d_ff=20,
                           norm_first=norm_first, share_embeddings=share)  # fmt: skip
    expected = sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
    assert solutions.count_transformer_parameters(23, 23 if share else 17, 12, 3, 2, 20, 5000, norm_first, share) == (
        expected
    )


def base(v_src, v_tgt, d, h, n, d_ff, max_len, norm_first, share, **change):
    """A reader's formula, written out; `change` switches one part to a common wrong version."""
    attention = 4 * d * d * (h if change.get("per_head") else 1) + (0 if change.get("no_attn_bias") else 4 * d)
    ffn = d * d_ff + d_ff * d + (0 if change.get("no_ffn_bias") else d_ff + d)
    ln = 0 if change.get("no_norms") else 2 * d
    enc = attention + ffn + 2 * ln
    dec = (attention if change.get("no_cross") else 2 * attention) + ffn + 3 * ln
    if change.get("final_norms") == "never":
        final = 0
    elif change.get("final_norms") == "always":
        final = 2 * ln
    else:
        final = 2 * ln if norm_first else 0
    if change.get("tie") == "never":
        emb = (v_src + 2 * v_tgt) * d
    elif change.get("tie") == "always":
        emb = v_src * d
    elif change.get("tie") == "two_tables":
        emb = (v_src + v_tgt) * d if not share else v_src * d
    else:
        emb = v_src * d if share else (v_src + 2 * v_tgt) * d
    extra = (max_len * d if change.get("pe") else 0) + (v_tgt if change.get("out_bias") else 0)
    return emb + n * (enc + dec) + final + extra


def reader(**change):
    return lambda *sizes: base(*sizes, **change)


def count_with_true_division(*sizes):
    return solutions.count_transformer_parameters(*sizes) / 1  # a float, even when it is a whole number


def count_as_a_tensor(*sizes):
    return torch.tensor(solutions.count_transformer_parameters(*sizes))


def count_off_by_one(*sizes):
    return solutions.count_transformer_parameters(*sizes) + 1


def count_without_return(*sizes):
    n = solutions.count_transformer_parameters(*sizes)  # noqa: F841


def count_in_millions(*sizes):
    return round(solutions.count_transformer_parameters(*sizes) / 1e6, 1)


# Each exercise's wrong answers and the diagnosis each must get: (answer, mistake key or None, words of the message).
WRONG_ANSWERS = {
    "count_transformer_parameters": [
        (reader(no_attn_bias=True, no_ffn_bias=True), "biases_missing", "the biases are missing"),
        (reader(no_attn_bias=True), "biases_missing", "attention biases are missing"),
        (reader(no_ffn_bias=True), "biases_missing", "feed-forward biases are missing"),
        (reader(no_norms=True), "norms_missing", "the LayerNorms are missing"),
        (reader(final_norms="never"), "final_norm", "end with one more LayerNorm"),
        (reader(final_norms="always"), "final_norm", "only with norm_first=True"),
        (reader(no_cross=True), "cross_attention_missing", "two attention blocks"),
        (reader(tie="never"), "tying_ignored", "count vocab_size * d_model once"),
        (reader(tie="always"), "tying_ignored", "three matrices"),
        (reader(tie="two_tables"), "generator_missing", "output projection"),
        (reader(pe=True), "positions_counted", "is a buffer"),
        (reader(out_bias=True), "generator_bias", "has no bias"),
        (reader(per_head=True), "heads_multiplied", "n_heads does not change the count"),
        (count_off_by_one, None, "(off by +1)"),
        (count_with_true_division, "dtype", "expected a Python int (use // rather than /"),
        (count_as_a_tensor, "dtype", "returned a torch.int64 tensor on vocab"),
        (count_without_return, None, "is the `return` missing?"),
        (
            count_in_millions,
            None,
            "returned 0.1 on vocab 243/131; d_model 22; 2 heads; 6 layers; d_ff 29; Post-LN; untied, expected 64786",
        ),
    ],
}
