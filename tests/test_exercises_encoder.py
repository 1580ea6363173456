"""Chapter 9's checker: the reference encoder layer passes, and each known assembly mistake gets its diagnosis.

The wrong answers are written the way a reader might write them, independently of the checker's variants.
"""

import pytest
import torch

import transformer_course as tc
from transformer_course.exercises import check, solutions


def test_reference_solution_passes():
    result = check.encoder_layer(solutions.encoder_layer)
    assert result.passed and result.mistake is None, result
    assert repr(result).startswith("✅ encoder_layer: passed all 4 cases")


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


@pytest.mark.parametrize(
    ("reader", "mistake", "words"),
    [
        (no_residual, "residual_missing", "the residual connection is missing"),
        (no_residual_around_attention, "residual_missing", "residual around the self-attention is missing"),
        (no_residual_around_ffn, "residual_missing", "residual around the feed-forward network is missing"),
        (pre_ln, "norm_wrong_place", "you wrote a Pre-LN layer"),
        (normalise_the_branch, "norm_wrong_place", "before the residual is added"),
        (swapped_norms, "norms_swapped", "the two LayerNorms are swapped"),
        (mask_forgotten, "mask_not_passed", "the mask is not passed"),
        (mask_flipped, "mask_inverted", "the mask is inverted"),
        (ffn_on_the_input, "ffn_input", "applied to the layer's input x"),
    ],
)
def test_encoder_layer_mistakes_are_named(reader, mistake, words):
    result = check.encoder_layer(reader)
    assert not result.passed and result.mistake == mistake and words in result.message, result


def test_other_wrong_answers_get_the_failing_case():
    def twice_the_attention(x, mask, self_attn, ffn, norm1, norm2):
        x = norm1(x + 2 * self_attn(x, x, x, mask))
        return norm2(x + ffn(x))

    result = check.encoder_layer(twice_the_attention)
    assert not result.passed and result.mistake is None
    assert "wrong values on 2 padded sentences (lengths 5 and 3; d_model 8; 2 heads)" in result.message

    crash = check.encoder_layer(lambda x, mask, self_attn, ffn, norm1, norm2: self_attn(x, mask))
    assert not crash.passed and crash.message.startswith("raised TypeError")


def test_the_checker_leaves_the_global_random_state_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    check.encoder_layer(solutions.encoder_layer)
    assert torch.equal(torch.rand(3), expected)
