"""Chapter 9's wrong answers (`WRONG_ANSWERS`) and the tests specific to its checker.

The wrong answers are written the way a reader might write them, independently of the checker's variants.

test_exercise_checkers.py runs every row of the table against its checker (the mistake's key and the
words of its message), with the reference solution and the checks common to every checker.
"""

import torch
import torch.nn.functional as F

import transformer_course as tc
from transformer_course.course.exercises import solutions


def test_solution_equals_the_package_layer():
    layer = tc.EncoderLayer(16, 4, 32, dropout=0.0)
    x, mask = torch.randn(2, 5, 16), tc.padding_mask(torch.tensor([[3, 1, 4, 0, 0], [1, 5, 9, 2, 6]]))
    norm1, norm2 = (sub.norm for sub in layer.sublayers)
    out = solutions.encoder_layer(x, mask, layer.self_attn, layer.ffn, norm1, norm2)
    torch.testing.assert_close(out, layer(x, mask))


def no_residual(x, mask, self_attn, ffn, norm1, norm2):
    attended = norm1(self_attn(x, x, x, mask))
    return norm2(ffn(attended))


def no_residual_around_attention(x, mask, self_attn, ffn, norm1, norm2):
    h = norm1(self_attn(x, x, x, mask))
    return norm2(ffn(h) + h)


def no_residual_around_ffn(x, mask, self_attn, ffn, norm1, norm2):
    h = norm1(self_attn(x, x, x, mask) + x)
    return norm2(ffn(h))


def pre_ln(x, mask, self_attn, ffn, norm1, norm2):
    y = norm1(x)
    x = x + self_attn(y, y, y, mask)
    return x + ffn(norm2(x))


def normalise_the_branch(x, mask, self_attn, ffn, norm1, norm2):
    x = x + norm1(self_attn(x, x, x, mask))
    return x + norm2(ffn(x))


def swapped_norms(x, mask, self_attn, ffn, norm1, norm2):
    x = norm2(x + self_attn(x, x, x, mask))
    return norm1(x + ffn(x))


def mask_forgotten(x, mask, self_attn, ffn, norm1, norm2):
    x = norm1(x + self_attn(x, x, x))
    return norm2(x + ffn(x))


def mask_flipped(x, mask, self_attn, ffn, norm1, norm2):
    x = norm1(x + self_attn(x, x, x, mask.logical_not()))
    return norm2(x + ffn(x))


def ffn_on_the_input(x, mask, self_attn, ffn, norm1, norm2):
    h = norm1(x + self_attn(x, x, x, mask))
    return norm2(h + ffn(x))


def twice_the_attention(x, mask, self_attn, ffn, norm1, norm2):
    x = norm1(x + 2 * self_attn(x, x, x, mask))
    return norm2(x + ffn(x))


def attention_called_wrongly(x, mask, self_attn, ffn, norm1, norm2):
    return self_attn(x, mask)


def stops_after_attention(x, mask, self_attn, ffn, norm1, norm2):
    return norm1(x + self_attn(x, x, x, mask))


def with_dropout(x, mask, self_attn, ffn, norm1, norm2):
    h = norm1(x + F.dropout(self_attn(x, x, x, mask), 0.1))
    return norm2(h + F.dropout(ffn(h), 0.1))


def residual_added_in_place(x, mask, self_attn, ffn, norm1, norm2):
    x += self_attn(x, x, x, mask)  # the caller's x changes
    h = norm1(x)
    return norm2(h + ffn(h))


def without_return(x, mask, self_attn, ffn, norm1, norm2):
    h = norm1(x + self_attn(x, x, x, mask))
    out = norm2(h + ffn(h))  # noqa: F841


def last_position_only(x, mask, self_attn, ffn, norm1, norm2):
    h = norm1(x + self_attn(x, x, x, mask))
    return norm2(h + ffn(h))[:, -1]


# Each exercise's wrong answers and the diagnosis each must get: (answer, mistake key or None, words of the message).
WRONG_ANSWERS = {
    "encoder_layer": [
        (no_residual, "residual_missing", "the residual connection is missing"),
        (no_residual_around_attention, "residual_missing", "residual around the self-attention is missing"),
        (no_residual_around_ffn, "residual_missing", "residual around the feed-forward network is missing"),
        (pre_ln, "norm_wrong_place", "you wrote a Pre-LN layer"),
        (normalise_the_branch, "norm_wrong_place", "before the residual is added"),
        (swapped_norms, "norms_swapped", "the two LayerNorms are swapped"),
        (mask_forgotten, "mask_not_passed", "the mask is not passed"),
        (mask_flipped, "mask_inverted", "the mask is inverted"),
        (ffn_on_the_input, "ffn_input", "applied to the layer's input x"),
        (stops_after_attention, "ffn_missing", "stops after the self-attention"),
        (twice_the_attention, None, "wrong values on 2 padded sentences (lengths 5 and 3; d_model 8; 2 heads)"),
        (attention_called_wrongly, None, "raised TypeError"),
        (with_dropout, "nondeterministic", "dropout or random noise"),
        (residual_added_in_place, "in_place", "changes its input `x` in place"),
        (without_return, None, "is the `return` missing?"),
        (last_position_only, None, "returned shape (2, 8) on 2 padded sentences"),
    ],
}
