"""Chapter 7's checkers: the reference solutions pass, and each known mistake gets its own diagnosis.

The wrong answers below are written the way a reader might write them, independently of the
variants the checkers use to recognise the mistakes.
"""

import itertools

import pytest
import torch
from torch import nn

import transformer_course as tc
from transformer_course.exercises import check, solutions


@pytest.mark.parametrize("name", ["sublayer_connection", "linear_warmup"])
def test_reference_solution_passes(name):
    result = getattr(check, name)(getattr(solutions, name))
    assert result.passed and result.mistake is None, result
    assert repr(result).startswith(f"✅ {name}: passed all")


@pytest.mark.parametrize("norm_first", [False, True])
def test_solution_matches_torch_encoder_layer_sublayers(norm_first):
    """The solution's two orders are PyTorch's: the attention block of nn.TransformerEncoderLayer."""
    torch.manual_seed(2)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True, norm_first=norm_first).eval()
    x = torch.randn(2, 5, 8)
    ours = tc.EncoderLayer.from_torch(layer).eval()

    def attention(y):
        return ours.self_attn(y, y, y)

    def ffn(y):
        return ours.ffn(y)

    h = solutions.sublayer_connection(x, attention, ours.sublayers[0].norm, norm_first)
    out = solutions.sublayer_connection(h, ffn, ours.sublayers[1].norm, norm_first)
    assert torch.allclose(out, layer(x), atol=1e-5)


def test_linear_warmup_reaches_the_peak_and_stays():
    rates = [solutions.linear_warmup(step, 0.01, 100) for step in range(1, 301)]
    assert rates[0] == pytest.approx(1e-4) and rates[99] == pytest.approx(0.01)
    assert all(a < b for a, b in itertools.pairwise(rates[:100])) and set(rates[99:]) == {0.01}


# ---- exercise 7.1


def swapped(x, sublayer, norm, norm_first):
    if not norm_first:
        return x + sublayer(norm(x))
    return norm(x + sublayer(x))


def post_ln_only(x, sublayer, norm, norm_first):
    return norm(x + sublayer(x))


def pre_ln_only(x, sublayer, norm, norm_first):
    return x + sublayer(norm(x))


def pre_ln_adds_normalised(x, sublayer, norm, norm_first):
    if norm_first:
        x = norm(x)
        return x + sublayer(x)
    return norm(x + sublayer(x))


def post_ln_norms_the_branch(x, sublayer, norm, norm_first):
    if norm_first:
        return x + sublayer(norm(x))
    return x + norm(sublayer(x))


def forgot_the_residual(x, sublayer, norm, norm_first):
    return sublayer(norm(x)) if norm_first else norm(sublayer(x))


@pytest.mark.parametrize(
    ("reader", "mistake", "words"),
    [
        (swapped, "order_swapped", "the two orders are swapped"),
        (post_ln_only, "always_post_ln", "norm_first=True must give Pre-LN"),
        (pre_ln_only, "always_pre_ln", "norm_first=False must give Post-LN"),
        (pre_ln_adds_normalised, "residual_from_normalised", "adds the normalised input"),
        (post_ln_norms_the_branch, "norm_on_branch", "output only"),
        (forgot_the_residual, "no_residual", "x is never added back"),
    ],
)
def test_sublayer_connection_mistakes_are_named(reader, mistake, words):
    result = check.sublayer_connection(reader)
    assert not result.passed and result.mistake == mistake and words in result.message, result


def test_sublayer_connection_with_dropout_in_eval_is_accepted():
    def with_eval_dropout(x, sublayer, norm, norm_first):
        drop = nn.Dropout(0.1).eval()
        return x + drop(sublayer(norm(x))) if norm_first else norm(x + drop(sublayer(x)))

    assert check.sublayer_connection(with_eval_dropout).passed


# ---- exercise 7.2


def warmup_uncapped(step, peak_lr, warmup):
    return step * peak_lr / warmup


def warmup_from_zero(step, peak_lr, warmup):
    return min(peak_lr, peak_lr * (step - 1) / warmup)


def constant_rate(step, peak_lr, warmup):
    return peak_lr


@pytest.mark.parametrize(
    ("reader", "mistake", "words"),
    [
        (warmup_uncapped, "never_capped", "keeps growing"),
        (warmup_from_zero, "starts_at_zero", "learning rate of 0"),
        (constant_rate, "no_warmup", "without warm-up"),
    ],
)
def test_linear_warmup_mistakes_are_named(reader, mistake, words):
    result = check.linear_warmup(reader)
    assert not result.passed and result.mistake == mistake and words in result.message, result
