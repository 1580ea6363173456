"""Chapter 6 exercises: LayerNorm and RMSNorm from raw tensor operations.

Each exercise has a reference solution (`@solution`, shown in the book), a checker (`@checker`) that
compares the reader's function with the package (`tc.LayerNorm`, `tc.RMSNorm`), and the known wrong
variants that the checker recognises and names: among them post 0's LayerNorm (unbiased standard
deviation, eps outside the square root).
"""

from __future__ import annotations

import torch

from ...norm import LayerNorm, RMSNorm
from ._core import Case, Mistake, Result, checker, compare, solution

# ---------------------------------------------------------------- exercise 6.1: layer_norm


@solution
def layer_norm(x, gamma, beta, eps=1e-5):
    """Normalise each position's features (the last axis) to mean 0 and variance 1, then scale and shift."""
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # biased: divide by D, as torch.nn.LayerNorm does
    return (x - mean) / torch.sqrt(var + eps) * gamma + beta  # eps inside the square root


def _layer_norm_reference(x, gamma, beta, eps=1e-5):
    norm = LayerNorm(x.shape[-1], eps=eps).to(x.dtype)
    with torch.no_grad():
        norm.weight.copy_(gamma)
        norm.bias.copy_(beta)
        return norm(x)


def _normalise(x, dims, unbiased=False, eps=1e-5, eps_inside=True, center=True):
    mean = x.mean(dim=dims, keepdim=True) if center else torch.zeros_like(x)
    var = x.var(dim=dims, keepdim=True, unbiased=unbiased) if center else x.pow(2).mean(dim=dims, keepdim=True)
    if eps_inside:
        return (x - mean) / torch.sqrt(var + eps)
    return (x - mean) / (torch.sqrt(var) + eps)


def _all_dims(x):
    return tuple(range(x.dim()))


_LAYER_NORM_MISTAKES = (
    Mistake(
        "post_0",
        lambda x, g, b, eps=1e-5: _normalise(x, -1, unbiased=True, eps=eps, eps_inside=False) * g + b,
        "this is post 0's LayerNorm: the unbiased standard deviation (x.std() divides by D - 1) and eps "
        "added outside the square root. torch.nn.LayerNorm divides by D and adds eps inside: "
        "(x - mean) / sqrt(var + eps) with var = ((x - mean) ** 2).mean(-1).",
    ),
    Mistake(  # post 0 as printed, its default eps=1e-6 included
        "post_0",
        lambda x, g, b, eps=1e-6: _normalise(x, -1, unbiased=True, eps=eps, eps_inside=False) * g + b,
        "this is post 0's LayerNorm: the unbiased standard deviation (x.std() divides by D - 1) and eps "
        "added outside the square root. torch.nn.LayerNorm divides by D and adds eps inside: "
        "(x - mean) / sqrt(var + eps) with var = ((x - mean) ** 2).mean(-1).",
    ),
    Mistake(
        "unbiased_variance",
        lambda x, g, b, eps=1e-5: _normalise(x, -1, unbiased=True, eps=eps) * g + b,
        "the variance is the unbiased one (divided by D - 1, the default of x.var() and x.std()): "
        "LayerNorm divides by D. Use x.var(-1, unbiased=False, keepdim=True) or the mean of the squared "
        "deviations.",
    ),
    Mistake(
        "eps_outside_root",
        lambda x, g, b, eps=1e-5: _normalise(x, -1, eps=eps, eps_inside=False) * g + b,
        "eps is added outside the square root, (x - mean) / (sqrt(var) + eps): it belongs inside, "
        "(x - mean) / sqrt(var + eps). The two differ when the variance is small.",
    ),
    Mistake(
        "no_eps",
        lambda x, g, b, eps=1e-5: (
            (x - x.mean(-1, keepdim=True)) / x.var(-1, unbiased=False, keepdim=True).sqrt() * g + b
        ),
        "eps is missing: sqrt(var + eps) keeps the division finite and stable when a vector is nearly constant.",
    ),
    Mistake(
        "default_eps",
        lambda x, g, b, eps=1e-6: _normalise(x, -1, eps=eps) * g + b,
        "right, except the default eps: torch.nn.LayerNorm and tc.LayerNorm use eps=1e-5 (post 0 uses 1e-6).",
    ),
    Mistake(
        "batch_axis",
        lambda x, g, b, eps=1e-5: _normalise(x, 0, eps=eps) * g + b,
        "you normalise over the first axis (across the batch, as BatchNorm does): LayerNorm normalises each "
        "position's feature vector, the last axis (dim=-1).",
    ),
    Mistake(
        "position_axis",
        lambda x, g, b, eps=1e-5: _normalise(x, -2, eps=eps) * g + b,
        "you normalise over the positions (dim=-2), mixing the tokens of a sentence: LayerNorm normalises "
        "each position's feature vector, the last axis (dim=-1).",
    ),
    Mistake(
        "all_axes",
        lambda x, g, b, eps=1e-5: _normalise(x, _all_dims(x), eps=eps) * g + b,
        "you normalise with one mean and one variance for the whole tensor: LayerNorm computes them for each "
        "position separately, over the last axis (dim=-1, keepdim=True).",
    ),
    Mistake(
        "affine_dropped",
        lambda x, g, b, eps=1e-5: _normalise(x, -1, eps=eps),
        "the normalisation is right but gamma and beta are never applied: finish with * gamma + beta.",
    ),
    Mistake(
        "beta_dropped",
        lambda x, g, b, eps=1e-5: _normalise(x, -1, eps=eps) * g,
        "the normalisation and gamma are right but beta is never added: finish with * gamma + beta.",
    ),
    Mistake(
        "gamma_dropped",
        lambda x, g, b, eps=1e-5: _normalise(x, -1, eps=eps) + b,
        "the normalisation and beta are right but gamma never multiplies: finish with * gamma + beta.",
    ),
    Mistake(
        "mean_not_subtracted",
        lambda x, g, b, eps=1e-5: x / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + eps) * g + b,
        "the mean is never subtracted: divide x - mean, not x, by the standard deviation.",
    ),
    Mistake(
        "gamma_beta_swapped",
        lambda x, g, b, eps=1e-5: _normalise(x, -1, eps=eps) * b + g,
        "gamma and beta are swapped: gamma (the gain) multiplies the normalised vector and beta (the bias) "
        "is added: * gamma + beta.",
    ),
)


@checker
def check_layer_norm(fn) -> Result:
    """Check `fn(x, gamma, beta, eps=1e-5)` against tc.LayerNorm (equal to torch.nn.LayerNorm)."""
    g = torch.Generator().manual_seed(7)

    def affine(d):
        return 1 + 0.5 * torch.randn(d, generator=g), 0.5 * torch.randn(d, generator=g)

    cases = [
        Case("a (2, 3, 8) batch", (3 * torch.randn(2, 3, 8, generator=g) + 1, *affine(8))),
        Case(
            "nearly constant rows (4, 6) (variance 1e-6)",
            (1 + 1e-3 * torch.randn(4, 6, generator=g, dtype=torch.float64), *(p.double() for p in affine(6))),
        ),
        Case("a (3, 5) input with eps=0.1", (torch.randn(3, 5, generator=g), *affine(5)), {"eps": 0.1}),
        Case("a (2, 4, 2) batch with d_model = 2", (torch.randn(2, 4, 2, generator=g), *affine(2))),
    ]
    return compare("layer_norm", fn, _layer_norm_reference, cases, _LAYER_NORM_MISTAKES)


# ---------------------------------------------------------------- exercise 6.2: rms_norm


@solution
def rms_norm(x, gamma, eps=1e-6):
    """Divide each position's features by their root mean square, then scale: no mean, no beta."""
    rms = torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)
    return x / rms * gamma


def _rms_norm_reference(x, gamma, eps=1e-6):
    norm = RMSNorm(x.shape[-1], eps=eps).to(x.dtype)
    with torch.no_grad():
        norm.weight.copy_(gamma)
        return norm(x)


_RMS_NORM_MISTAKES = (
    Mistake(
        "mean_subtracted",
        lambda x, g, eps=1e-6: _normalise(x, -1, eps=eps) * g,
        "you subtract the mean first: that is LayerNorm (without beta). RMSNorm divides x itself by "
        "sqrt(mean(x ** 2) + eps).",
    ),
    Mistake(
        "no_square_root",
        lambda x, g, eps=1e-6: x / (x.pow(2).mean(-1, keepdim=True) + eps) * g,
        "you divide by the mean square: take its square root, sqrt(mean(x ** 2) + eps).",
    ),
    Mistake(
        "eps_outside_root",
        lambda x, g, eps=1e-6: _normalise(x, -1, eps=eps, eps_inside=False, center=False) * g,
        "eps is added outside the square root: it belongs inside, sqrt(mean(x ** 2) + eps).",
    ),
    Mistake(
        "gamma_dropped",
        lambda x, g, eps=1e-6: _normalise(x, -1, eps=eps, center=False),
        "the normalisation is right but gamma never multiplies: finish with * gamma.",
    ),
    Mistake(
        "no_eps",
        lambda x, g, eps=1e-6: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True)) * g,
        "eps is missing: sqrt(mean(x ** 2) + eps) keeps the division finite when the features are all near 0.",
    ),
    Mistake(
        "default_eps",
        lambda x, g, eps=1e-5: _normalise(x, -1, eps=eps, center=False) * g,
        "right, except the default eps: tc.RMSNorm uses eps=1e-6 (1e-5 is LayerNorm's default).",
    ),
    Mistake(
        "wrong_axis",
        lambda x, g, eps=1e-6: _normalise(x, 0, eps=eps, center=False) * g,
        "you average over the first axis: RMSNorm averages each position's features, the last axis (dim=-1).",
    ),
)


@checker
def check_rms_norm(fn) -> Result:
    """Check `fn(x, gamma, eps=1e-6)` against tc.RMSNorm."""
    g = torch.Generator().manual_seed(8)
    cases = [
        Case("a (2, 3, 8) batch", (2 * torch.randn(2, 3, 8, generator=g) + 1, 1 + torch.randn(8, generator=g))),
        Case(
            "small inputs (4, 6) (mean square 1e-6)",
            (
                1e-3 * torch.randn(4, 6, generator=g, dtype=torch.float64),
                torch.rand(6, generator=g, dtype=torch.float64),
            ),
        ),
        Case(
            "a (3, 5) input with eps=0.1", (torch.randn(3, 5, generator=g), torch.randn(5, generator=g)), {"eps": 0.1}
        ),
    ]
    return compare("rms_norm", fn, _rms_norm_reference, cases, _RMS_NORM_MISTAKES)
