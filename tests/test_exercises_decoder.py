"""Chapter 10's checker: the reference decoder layer passes, each known mistake is named, and any layer that
sees the future fails the leakage test even when its mistake is not a known one.
"""

import pytest
import torch

import transformer_course as tc
from transformer_course.exercises import check, solutions


def test_reference_solution_passes():
    result = check.decoder_layer(solutions.decoder_layer)
    assert result.passed and result.mistake is None, result
    assert repr(result).startswith("✅ decoder_layer: passed all 4 cases")


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
    mask = torch.triu(torch.ones(size, size), diagonal=1).bool()  # seed 001's "1 = hide" mask, used as "keep"
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


@pytest.mark.parametrize(
    ("reader", "mistake", "words"),
    [
        (sees_everything, "no_causal_mask", "has no causal mask"),
        (upper_triangle, "causal_mask_inverted", "the causal mask is inverted"),
        (strictly_earlier, "causal_mask_diagonal", "hides the diagonal"),
        (cross_attends_to_itself, "cross_from_decoder", "keys and values from the decoder"),
        (cross_attends_to_itself_unmasked, "cross_from_decoder", "keys and values from the decoder"),
        (memory_mask_forgotten, "memory_mask_missing", "memory_mask is not passed"),
        (cross_first, "sublayer_order", "wrong order"),
        (ffn_before_cross, "sublayer_order", "wrong order"),
        (pre_ln, "norm_wrong_place", "you wrote a Pre-LN layer"),
    ],
)
def test_decoder_layer_mistakes_are_named(reader, mistake, words):
    result = check.decoder_layer(reader)
    assert not result.passed and result.mistake == mistake and words in result.message, result


def test_an_unknown_leak_is_caught_by_the_leakage_test():
    def sees_one_step_ahead(x, memory, memory_mask, self_attn, cross_attn, ffn, norm1, norm2, norm3):
        size = x.shape[1]
        mask = torch.ones(size, size, dtype=torch.bool).tril(diagonal=1)  # t may look at t + 1
        x = norm1(x + self_attn(x, x, x, mask))
        x = norm2(x + cross_attn(x, memory, memory, memory_mask))
        return norm3(x + ffn(x))

    result = check.decoder_layer(sees_one_step_ahead)
    assert not result.passed and result.mistake is None
    assert "the layer sees the future" in result.message


def test_a_leak_free_wrong_answer_gets_the_failing_case():
    def no_residual_in_ffn(x, memory, memory_mask, self_attn, cross_attn, ffn, norm1, norm2, norm3):
        x = norm1(x + self_attn(x, x, x, tc.causal_mask(x.shape[1])))
        x = norm2(x + cross_attn(x, memory, memory, memory_mask))
        return norm3(ffn(x))

    result = check.decoder_layer(no_residual_in_ffn)
    assert not result.passed and result.mistake is None
    assert "wrong values on targets of 4 tokens; padded sources of 6 and 3" in result.message
    assert "sees the future" not in result.message


def test_the_checker_leaves_the_global_random_state_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    check.decoder_layer(solutions.decoder_layer)
    assert torch.equal(torch.rand(3), expected)
