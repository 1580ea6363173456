"""Chapter 7's wrong answers (`WRONG_ANSWERS`) and the tests specific to its checkers.

The wrong answers below are written the way a reader might write them, independently of the
variants the checkers use to recognise the mistakes.

test_exercise_checkers.py runs every row of the table against its checker (the mistake's key and the
words of its message), with the reference solution and the checks common to every checker.
"""

import itertools

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import transformer_course as tc
from transformer_course.course.exercises import check, solutions


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


def with_training_dropout(x, sublayer, norm, norm_first):
    if norm_first:
        return x + F.dropout(sublayer(norm(x)), 0.1)
    return norm(x + F.dropout(sublayer(x), 0.1))


def added_in_place(x, sublayer, norm, norm_first):
    if norm_first:
        x += sublayer(norm(x))  # += writes into the caller's x
        return x
    return norm(x + sublayer(x))


def sandwich(x, sublayer, norm, norm_first):
    return norm(x + sublayer(norm(x)))  # a LayerNorm on both sides, in both orders


def no_norm_at_all(x, sublayer, norm, norm_first):
    return x + sublayer(x)


def without_return(x, sublayer, norm, norm_first):
    out = x + sublayer(norm(x)) if norm_first else norm(x + sublayer(x))  # noqa: F841


def in_float64(x, sublayer, norm, norm_first):
    out = x + sublayer(norm(x)) if norm_first else norm(x + sublayer(x))
    return out.double()


def norm_and_branch_added(x, sublayer, norm, norm_first):
    return x + sublayer(norm(x)) if norm_first else norm(x) + sublayer(x)


# ---- exercise 7.2


def warmup_uncapped(step, peak_lr, warmup):
    return step * peak_lr / warmup


def warmup_from_zero(step, peak_lr, warmup):
    return min(peak_lr, peak_lr * (step - 1) / warmup)


def constant_rate(step, peak_lr, warmup):
    return peak_lr


def warmup_integer_division(step, peak_lr, warmup):
    return peak_lr * min(1, step // warmup)


def noam_schedule(step, peak_lr, warmup):  # the paper's schedule, not this exercise's
    return peak_lr * warmup**0.5 * min(step**-0.5, step * warmup**-1.5)


def warmup_one_step_late(step, peak_lr, warmup):
    return peak_lr * min(1.0, step / (warmup + 1))


def warmup_max_instead_of_min(step, peak_lr, warmup):
    return peak_lr * max(1.0, step / warmup)


def warmup_then_decay(step, peak_lr, warmup):
    return peak_lr * min(step / warmup, warmup / step)


def warmup_in_half_precision(step, peak_lr, warmup):
    return torch.tensor(peak_lr * min(1.0, step / warmup), dtype=torch.float16)


def warmup_without_return(step, peak_lr, warmup):
    lr = peak_lr * min(1.0, step / warmup)  # noqa: F841


def warmup_in_percent(step, peak_lr, warmup):
    return peak_lr * min(100, 100 * step / warmup)


# Each exercise's wrong answers and the diagnosis each must get: (answer, mistake key or None, words of the message).
WRONG_ANSWERS = {
    "sublayer_connection": [
        (swapped, "order_swapped", "the two orders are swapped"),
        (post_ln_only, "always_post_ln", "norm_first=True must give Pre-LN"),
        (pre_ln_only, "always_pre_ln", "norm_first=False must give Post-LN"),
        (pre_ln_adds_normalised, "residual_from_normalised", "adds the normalised input"),
        (post_ln_norms_the_branch, "norm_on_branch", "output only"),
        (forgot_the_residual, "no_residual", "x is never added back"),
        (with_training_dropout, "nondeterministic", "dropout or random noise"),
        (added_in_place, "in_place", "changes its input `x` in place (on a (2, 3, 8) batch, norm_first=True"),
        (sandwich, None, "wrong values on a (2, 3, 8) batch, norm_first=False (Post-LN)"),
        (no_norm_at_all, None, "wrong values on a (2, 3, 8) batch, norm_first=False (Post-LN)"),
        (without_return, None, "is the `return` missing?"),
        (in_float64, "dtype", "returned dtype torch.float64"),
        (norm_and_branch_added, None, "wrong values on a (2, 3, 8) batch, norm_first=False (Post-LN)"),
    ],
    "linear_warmup": [
        (warmup_uncapped, "never_capped", "keeps growing"),
        (warmup_from_zero, "starts_at_zero", "learning rate of 0"),
        (constant_rate, "no_warmup", "without warm-up"),
        (warmup_integer_division, "integer_division", "step // warmup rounds down to 0"),
        (noam_schedule, "decays_after_warmup", "decays as 1/√step"),
        (warmup_one_step_late, None, "on step 1 of a 100-step warm-up, expected 0.0001"),
        (warmup_max_instead_of_min, None, "returned 0.01 on step 1 of a 100-step warm-up, expected 0.0001"),
        (warmup_then_decay, None, "returned 0.004 on step 250, after the warm-up, expected 0.01"),
        (warmup_in_half_precision, "dtype", "returned a torch.float16 tensor on step 1 of a 100-step warm-up"),
        (warmup_without_return, None, "returned None on step 1 of a 100-step warm-up: is the `return` missing?"),
        (warmup_in_percent, None, "returned 0.01 on step 1 of a 100-step warm-up, expected 0.0001"),
    ],
}


def test_sublayer_connection_with_dropout_in_eval_is_accepted():
    def with_eval_dropout(x, sublayer, norm, norm_first):
        drop = nn.Dropout(0.1).eval()
        return x + drop(sublayer(norm(x))) if norm_first else norm(x + drop(sublayer(x)))

    assert check.sublayer_connection(with_eval_dropout).passed
