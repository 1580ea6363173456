"""Chapter 6's wrong answers (`WRONG_ANSWERS`) and the tests specific to its checkers.

The wrong answers below are written the way a reader might write them, independently of the
variants the checkers use to recognise the mistakes.

test_exercise_checkers.py runs every row of the table against its checker (the mistake's key and the
words of its message), with the reference solution and the checks common to every checker.
"""

import torch
import torch.nn.functional as F
from torch import nn

import transformer_course as tc
from transformer_course.course.exercises import check, solutions


def test_solutions_agree_with_torch():
    torch.manual_seed(1)
    norm = nn.LayerNorm(8)
    nn.init.normal_(norm.weight)
    nn.init.normal_(norm.bias)
    x = 3 * torch.randn(2, 5, 8) + 2
    assert torch.allclose(solutions.layer_norm(x, norm.weight, norm.bias), norm(x), atol=1e-5)
    rms = nn.RMSNorm(8, eps=1e-6)
    nn.init.normal_(rms.weight)
    assert torch.allclose(solutions.rms_norm(x, rms.weight), rms(x), atol=1e-5)
    assert torch.allclose(solutions.rms_norm(x, rms.weight), tc.RMSNorm.forward(_rms_with(rms.weight), x), atol=1e-6)


def _rms_with(weight):
    module = tc.RMSNorm(weight.shape[0])
    with torch.no_grad():
        module.weight.copy_(weight)
    return module


# ---- exercise 6.1: each wrong LayerNorm a reader might write


def ln_post_0(x, gamma, beta, eps=1e-5):
    return gamma * (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + eps) + beta


def ln_post_0_as_printed(x, gamma, beta, eps=1e-6):
    return gamma * (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + eps) + beta


def ln_unbiased(x, gamma, beta, eps=1e-5):
    mu = x.mean(dim=-1, keepdim=True)
    return (x - mu) / (x.var(dim=-1, keepdim=True) + eps).sqrt() * gamma + beta


def ln_eps_outside(x, gamma, beta, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    sigma = ((x - mu) ** 2).mean(-1, keepdim=True).sqrt()
    return (x - mu) / (sigma + eps) * gamma + beta


def ln_without_eps(x, gamma, beta, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    return (x - mu) / x.var(-1, unbiased=False, keepdim=True).sqrt() * gamma + beta


def ln_seed_eps(x, gamma, beta, eps=1e-6):
    return F.layer_norm(x, x.shape[-1:], gamma, beta, eps)


def ln_over_batch(x, gamma, beta, eps=1e-5):
    mu = x.mean(0, keepdim=True)
    var = x.var(0, unbiased=False, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * gamma + beta


def ln_over_positions(x, gamma, beta, eps=1e-5):
    mu = x.mean(-2, keepdim=True)
    var = ((x - mu) ** 2).mean(-2, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * gamma + beta


def ln_whole_tensor(x, gamma, beta, eps=1e-5):
    return (x - x.mean()) / torch.sqrt(x.var(unbiased=False) + eps) * gamma + beta


def ln_no_affine(x, gamma, beta, eps=1e-5):
    return F.layer_norm(x, x.shape[-1:], eps=eps)


def ln_no_beta(x, gamma, beta, eps=1e-5):
    return F.layer_norm(x, x.shape[-1:], eps=eps) * gamma


def ln_no_gamma(x, gamma, beta, eps=1e-5):
    return F.layer_norm(x, x.shape[-1:], eps=eps) + beta


def ln_not_centred(x, gamma, beta, eps=1e-5):
    return gamma * x / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + eps) + beta


def ln_gain_and_bias_swapped(x, gamma, beta, eps=1e-5):
    centred = x - x.mean(-1, keepdim=True)
    return beta * centred / torch.sqrt(centred.pow(2).mean(-1, keepdim=True) + eps) + gamma


def ln_centred_in_place(x, gamma, beta, eps=1e-5):
    x -= x.mean(-1, keepdim=True)  # the caller's x is centred too
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * gamma + beta


# ---- exercise 6.2


def rms_centred(x, gamma, eps=1e-6):
    return F.layer_norm(x, x.shape[-1:], eps=eps) * gamma


def rms_no_sqrt(x, gamma, eps=1e-6):
    return gamma * x / (x.square().mean(-1, keepdim=True) + eps)


def rms_eps_outside(x, gamma, eps=1e-6):
    return gamma * x / (x.square().mean(-1, keepdim=True).sqrt() + eps)


def rms_no_gamma(x, gamma, eps=1e-6):
    return x * torch.rsqrt(x.square().mean(-1, keepdim=True) + eps)


def rms_first_axis(x, gamma, eps=1e-6):
    return gamma * x * torch.rsqrt(x.square().mean(0, keepdim=True) + eps)


def rms_without_eps(x, gamma, eps=1e-6):
    return gamma * x / x.pow(2).mean(-1, keepdim=True).sqrt()


def rms_layer_norm_eps(x, gamma, eps=1e-5):
    return gamma * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def rms_mean_absolute(x, gamma, eps=1e-6):
    return gamma * x / (x.abs().mean(-1, keepdim=True) + eps)


def rms_by_standard_deviation(x, gamma, eps=1e-6):
    return gamma * x / (x.std(-1, keepdim=True) + eps)


def rms_divided_in_place(x, gamma, eps=1e-6):
    return x.div_(torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)) * gamma


def rms_in_float64(x, gamma, eps=1e-6):
    x = x.double()
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * gamma.double()


def rms_without_return(x, gamma, eps=1e-6):
    out = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * gamma  # noqa: F841


def rms_sum_of_squares(x, gamma, eps=1e-6):
    return gamma * x * torch.rsqrt(x.pow(2).sum(-1, keepdim=True) + eps)


# Each exercise's wrong answers and the diagnosis each must get: (answer, mistake key or None, words of the message).
WRONG_ANSWERS = {
    "layer_norm": [
        (ln_post_0, "post_0", "post 0's LayerNorm"),
        (ln_post_0_as_printed, "post_0", "post 0's LayerNorm"),
        (ln_unbiased, "unbiased_variance", "divided by D - 1"),
        (ln_eps_outside, "eps_outside_root", "outside the square root"),
        (ln_without_eps, "no_eps", "eps is missing"),
        (ln_seed_eps, "default_eps", "eps=1e-5"),
        (ln_over_batch, "batch_axis", "across the batch"),
        (ln_over_positions, "position_axis", "over the positions"),
        (ln_whole_tensor, "all_axes", "whole tensor"),
        (ln_no_affine, "affine_dropped", "gamma and beta are never applied"),
        (ln_no_beta, "beta_dropped", "beta is never added"),
        (ln_no_gamma, "gamma_dropped", "gamma never multiplies"),
        (ln_not_centred, "mean_not_subtracted", "mean is never subtracted"),
        (ln_gain_and_bias_swapped, "gamma_beta_swapped", "gamma and beta are swapped"),
        (lambda x, g, b: F.layer_norm(x, x.shape[-1:], g, b), None, "raised TypeError"),
        (ln_centred_in_place, "in_place", "changes its input `x` in place"),
    ],
    "rms_norm": [
        (rms_centred, "mean_subtracted", "that is LayerNorm"),
        (rms_no_sqrt, "no_square_root", "take its square root"),
        (rms_eps_outside, "eps_outside_root", "outside the square root"),
        (rms_no_gamma, "gamma_dropped", "gamma never multiplies"),
        (rms_first_axis, "wrong_axis", "first axis"),
        (rms_without_eps, "no_eps", "eps is missing"),
        (rms_layer_norm_eps, "default_eps", "eps=1e-6"),
        (rms_mean_absolute, None, "wrong values on a (2, 3, 8) batch"),
        (rms_by_standard_deviation, None, "wrong values on a (2, 3, 8) batch"),
        (rms_divided_in_place, "in_place", "changes its input `x` in place"),
        (rms_in_float64, "dtype", "returned dtype torch.float64 on a (2, 3, 8) batch, expected torch.float32"),
        (rms_without_return, None, "is the `return` missing?"),
        (rms_sum_of_squares, None, "wrong values on a (2, 3, 8) batch"),
    ],
}


def test_layer_norm_accepts_torch_and_names_the_failing_case_of_a_crash():
    assert check.layer_norm(lambda x, g, b, eps=1e-5: F.layer_norm(x, x.shape[-1:], g, b, eps)).passed
    no_eps_argument = check.layer_norm(lambda x, g, b: F.layer_norm(x, x.shape[-1:], g, b))
    assert "a (3, 5) input with eps=0.1" in no_eps_argument.message
    assert check.rms_norm(lambda x, g, eps=1e-6: F.rms_norm(x, x.shape[-1:], g, eps)).passed
