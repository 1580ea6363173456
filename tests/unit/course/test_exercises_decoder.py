"""Chapter 10's wrong answers (`WRONG_ANSWERS`) and the tests specific to its checker.

Besides the known mistakes, the checker runs chapter 10's leakage test: a layer that sees the future is called out
even when its mistake is not a known one.

test_exercise_checkers.py runs every row of the table against its checker (the mistake's key and the
words of its message), with the reference solution and the checks common to every checker.
"""

import torch
import torch.nn.functional as F

import transformer_course as tc
from transformer_course.course.exercises import solutions


def test_solution_equals_the_package_layer():
    layer = tc.DecoderLayer(16, 4, 32, dropout=0.0)
    x, memory = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
    memory_mask = tc.padding_mask(torch.tensor([[1, 2, 3, 4, 5, 6, 7], [1, 2, 3, 0, 0, 0, 0]]))
    norms = [sub.norm for sub in layer.sublayers]
    out = solutions.decoder_layer(x, memory, memory_mask, layer.self_attn, layer.cross_attn, layer.ffn, *norms)
    torch.testing.assert_close(out, layer(x, memory, tc.causal_mask(5), memory_mask))


def sees_everything(x, memory, memory_mask, self_attn, cross_attn, ffn, norm1, norm2, norm3):
    x = norm1(x + self_attn(x, x, x))
    x = norm2(x + cross_attn(x, memory, memory, memory_mask))
    return norm3(x + ffn(x))


def upper_triangle(x, memory, memory_mask, self_attn, cross_attn, ffn, norm1, norm2, norm3):
    size = x.size(1)
    mask = torch.triu(torch.ones(size, size), diagonal=1).bool()  # post 1's "1 = hide" mask, used as "keep"
    x = norm1(x + self_attn(x, x, x, mask))
    x = norm2(x + cross_attn(x, memory, memory, memory_mask))
    return norm3(x + ffn(x))


def strictly_earlier(x, memory, memory_mask, self_attn, cross_attn, ffn, norm1, norm2, norm3):
    size = x.size(1)
    mask = torch.ones(size, size, dtype=torch.bool).tril(diagonal=-1)
    x = norm1(x + self_attn(x, x, x, mask))
    x = norm2(x + cross_attn(x, memory, memory, memory_mask))
    return norm3(x + ffn(x))


def cross_attends_to_itself(x, memory, memory_mask, self_attn, cross_attn, ffn, norm1, norm2, norm3):
    x = norm1(x + self_attn(x, x, x, tc.causal_mask(x.shape[1])))
    x = norm2(x + cross_attn(x, x, x, memory_mask))
    return norm3(x + ffn(x))


def cross_attends_to_itself_unmasked(x, memory, memory_mask, self_attn, cross_attn, ffn, norm1, norm2, norm3):
    x = norm1(x + self_attn(x, x, x, tc.causal_mask(x.shape[1])))
    x = norm2(x + cross_attn(x, x, x))
    return norm3(x + ffn(x))


def memory_mask_forgotten(x, memory, memory_mask, self_attn, cross_attn, ffn, norm1, norm2, norm3):
    x = norm1(x + self_attn(x, x, x, tc.causal_mask(x.shape[1])))
    x = norm2(x + cross_attn(x, memory, memory))
    return norm3(x + ffn(x))


def attentions_swapped(x, memory, memory_mask, self_attn, cross_attn, ffn, norm1, norm2, norm3):
    x = norm1(x + cross_attn(x, x, x, tc.causal_mask(x.shape[1])))  # the other module's weights
    x = norm2(x + self_attn(x, memory, memory, memory_mask))
    return norm3(x + ffn(x))


def self_attention_used_twice(x, memory, memory_mask, self_attn, cross_attn, ffn, norm1, norm2, norm3):
    x = norm1(x + self_attn(x, x, x, tc.causal_mask(x.shape[1])))
    x = norm2(x + self_attn(x, memory, memory, memory_mask))  # cross_attn never used
    return norm3(x + ffn(x))


def cross_first(x, memory, memory_mask, self_attn, cross_attn, ffn, norm1, norm2, norm3):
    x = norm1(x + cross_attn(x, memory, memory, memory_mask))
    x = norm2(x + self_attn(x, x, x, tc.causal_mask(x.shape[1])))
    return norm3(x + ffn(x))


def ffn_before_cross(x, memory, memory_mask, self_attn, cross_attn, ffn, norm1, norm2, norm3):
    x = norm1(x + self_attn(x, x, x, tc.causal_mask(x.shape[1])))
    x = norm3(x + ffn(x))
    return norm2(x + cross_attn(x, memory, memory, memory_mask))


def pre_ln(x, memory, memory_mask, self_attn, cross_attn, ffn, norm1, norm2, norm3):
    y = norm1(x)
    x = x + self_attn(y, y, y, tc.causal_mask(x.shape[1]))
    x = x + cross_attn(norm2(x), memory, memory, memory_mask)
    return x + ffn(norm3(x))


def sees_one_step_ahead(x, memory, memory_mask, self_attn, cross_attn, ffn, norm1, norm2, norm3):
    size = x.shape[1]
    mask = torch.ones(size, size, dtype=torch.bool).tril(diagonal=1)  # t may look at t + 1: no known mistake
    x = norm1(x + self_attn(x, x, x, mask))
    x = norm2(x + cross_attn(x, memory, memory, memory_mask))
    return norm3(x + ffn(x))


def no_residual_in_ffn(x, memory, memory_mask, self_attn, cross_attn, ffn, norm1, norm2, norm3):
    x = norm1(x + self_attn(x, x, x, tc.causal_mask(x.shape[1])))
    x = norm2(x + cross_attn(x, memory, memory, memory_mask))
    return norm3(ffn(x))


# Wrong shapes are shape problems: before the fix the checker called these "the layer sees the future".
def drops_the_last_position(x, memory, memory_mask, self_attn, cross_attn, ffn, norm1, norm2, norm3):
    return solutions.decoder_layer(x, memory, memory_mask, self_attn, cross_attn, ffn, norm1, norm2, norm3)[:, :-1]


def features_first(x, memory, memory_mask, self_attn, cross_attn, ffn, norm1, norm2, norm3):
    out = solutions.decoder_layer(x, memory, memory_mask, self_attn, cross_attn, ffn, norm1, norm2, norm3)
    return out.transpose(1, 2)  # (B, D, T)


def last_position_only(x, memory, memory_mask, self_attn, cross_attn, ffn, norm1, norm2, norm3):
    return solutions.decoder_layer(x, memory, memory_mask, self_attn, cross_attn, ffn, norm1, norm2, norm3)[:, -1]


# Dropout and noise are named as such: before the fix, "the layer sees the future".
def with_dropout(x, memory, memory_mask, self_attn, cross_attn, ffn, norm1, norm2, norm3):
    h = norm1(x + F.dropout(self_attn(x, x, x, tc.causal_mask(x.shape[1])), 0.1))
    h = norm2(h + F.dropout(cross_attn(h, memory, memory, memory_mask), 0.1))
    return norm3(h + F.dropout(ffn(h), 0.1))


def with_noise(x, memory, memory_mask, self_attn, cross_attn, ffn, norm1, norm2, norm3):
    x = x + 1e-3 * torch.randn_like(x)  # "a little noise helps"
    return solutions.decoder_layer(x, memory, memory_mask, self_attn, cross_attn, ffn, norm1, norm2, norm3)


def residual_added_in_place(x, memory, memory_mask, self_attn, cross_attn, ffn, norm1, norm2, norm3):
    x += self_attn(x, x, x, tc.causal_mask(x.shape[1]))  # the caller's x changes
    h = norm1(x)
    h = norm2(h + cross_attn(h, memory, memory, memory_mask))
    return norm3(h + ffn(h))


def without_return(x, memory, memory_mask, self_attn, cross_attn, ffn, norm1, norm2, norm3):
    out = solutions.decoder_layer(x, memory, memory_mask, self_attn, cross_attn, ffn, norm1, norm2, norm3)  # noqa: F841


def queries_from_the_encoder(x, memory, memory_mask, self_attn, cross_attn, ffn, norm1, norm2, norm3):
    h = norm1(x + self_attn(x, x, x, tc.causal_mask(x.shape[1])))
    h = norm2(h + cross_attn(memory, h, h))  # the encoder asks, the decoder answers: the wrong way round
    return norm3(h + ffn(h))


# Each exercise's wrong answers and the diagnosis each must get: (answer, mistake key or None, words of the message).
WRONG_ANSWERS = {
    "decoder_layer": [
        (sees_everything, "no_causal_mask", "has no causal mask"),
        (upper_triangle, "causal_mask_inverted", "the causal mask is inverted"),
        (strictly_earlier, "causal_mask_diagonal", "hides the diagonal"),
        (cross_attends_to_itself, "cross_from_decoder", "keys and values from the decoder"),
        (cross_attends_to_itself_unmasked, "cross_from_decoder", "keys and values from the decoder"),
        (memory_mask_forgotten, "memory_mask_missing", "memory_mask is not passed"),
        (attentions_swapped, "attentions_swapped", "self_attn and cross_attn are swapped"),
        (self_attention_used_twice, None, "wrong values on targets of 4 tokens; padded sources of 6 and 3"),
        (cross_first, "sublayer_order", "wrong order"),
        (ffn_before_cross, "sublayer_order", "wrong order"),
        (pre_ln, "norm_wrong_place", "you wrote a Pre-LN layer"),
        (sees_one_step_ahead, None, "the layer sees the future"),
        (no_residual_in_ffn, None, "wrong values on targets of 4 tokens; padded sources of 6 and 3"),
        (drops_the_last_position, None, "returned shape (2, 3, 8) on targets of 4 tokens; padded sources of 6 and 3"),
        (features_first, None, "returned shape (2, 8, 4) on targets of 4 tokens"),
        (last_position_only, None, "returned shape (2, 8) on targets of 4 tokens"),
        (with_dropout, "nondeterministic", "dropout or random noise"),
        (with_noise, "nondeterministic", "dropout or random noise"),
        (residual_added_in_place, "in_place", "changes its input `x` in place"),
        (without_return, None, "is the `return` missing?"),
        (queries_from_the_encoder, None, "raised RuntimeError"),
    ],
}
