"""Chapter 7 exercises: a residual connection around a sub-layer (Post-LN and Pre-LN), and a warm-up schedule.

The reference solutions (`@solution`, shown in the book) are checked against the package
(`tc.SublayerConnection` with dropout off; the ramp of `tc.noam_lr`); the checkers recognise and name
the usual mistakes, first of all the two orders swapped.
"""

from __future__ import annotations

import numbers

import torch

from ...ffn import PositionwiseFeedForward
from ...norm import LayerNorm
from ...residual import SublayerConnection
from ...training import noam_lr
from ._core import Case, Mistake, Result, checker, compare, solution

# ---------------------------------------------------------------- exercise 7.1: sublayer_connection


@solution
def sublayer_connection(x, sublayer, norm, norm_first):
    """Post-LN (norm_first=False, the paper): norm(x + sublayer(x)). Pre-LN (True): x + sublayer(norm(x))."""
    if norm_first:
        return x + sublayer(norm(x))  # the identity path from x to the output never meets a LayerNorm
    return norm(x + sublayer(x))


def _sublayer_reference(x, sublayer, norm, norm_first):
    connection = SublayerConnection(x.shape[-1], dropout=0.0, norm_first=norm_first)
    connection.norm = norm
    with torch.no_grad():
        return connection(x, sublayer)


def _post(x, sublayer, norm):
    return norm(x + sublayer(x))


def _pre(x, sublayer, norm):
    return x + sublayer(norm(x))


_SUBLAYER_MISTAKES = (
    Mistake(
        "order_swapped",
        lambda x, f, norm, norm_first: _post(x, f, norm) if norm_first else _pre(x, f, norm),
        "the two orders are swapped: norm_first=True is Pre-LN, x + sublayer(norm(x)) (post 0, GPT-2); "
        "norm_first=False is Post-LN, norm(x + sublayer(x)) (the paper, post 1).",
    ),
    Mistake(
        "always_post_ln",
        lambda x, f, norm, norm_first: _post(x, f, norm),
        "Post-LN is right, but norm_first=True must give Pre-LN: x + sublayer(norm(x)).",
    ),
    Mistake(
        "always_pre_ln",
        lambda x, f, norm, norm_first: _pre(x, f, norm),
        "Pre-LN is right, but norm_first=False must give Post-LN: norm(x + sublayer(x)).",
    ),
    Mistake(
        "residual_from_normalised",
        lambda x, f, norm, norm_first: norm(x) + f(norm(x)) if norm_first else _post(x, f, norm),
        "in Pre-LN the residual adds the normalised input, norm(x) + sublayer(norm(x)): add x itself, "
        "x + sublayer(norm(x)), so the identity path carries x through unchanged.",
    ),
    Mistake(
        "norm_on_branch",
        lambda x, f, norm, norm_first: _pre(x, f, norm) if norm_first else x + norm(f(x)),
        "in Post-LN the LayerNorm is applied to the sub-layer's output only, x + norm(sublayer(x)): it "
        "normalises the sum, norm(x + sublayer(x)).",
    ),
    Mistake(
        "no_residual",
        lambda x, f, norm, norm_first: f(norm(x)) if norm_first else norm(f(x)),
        "x is never added back: without the residual (identity) path this is a plain stack. "
        "Post-LN is norm(x + sublayer(x)), Pre-LN is x + sublayer(norm(x)).",
    ),
)


@checker
def check_sublayer_connection(fn) -> Result:
    """Check `fn(x, sublayer, norm, norm_first)` against tc.SublayerConnection in both orders."""
    g = torch.Generator().manual_seed(9)

    def parts(d_model, seed):
        torch.manual_seed(seed)
        ffn, norm = PositionwiseFeedForward(d_model, 4 * d_model), LayerNorm(d_model)
        with torch.no_grad():
            norm.weight.copy_(1 + 0.5 * torch.randn(d_model, generator=g))
            norm.bias.copy_(0.5 * torch.randn(d_model, generator=g))
        return ffn, norm

    cases = []
    for label, shape, seed in (("a (2, 3, 8) batch", (2, 3, 8), 0), ("a (1, 5, 4) sentence", (1, 5, 4), 1)):
        x = 2 * torch.randn(*shape, generator=g) + 1
        for norm_first, order in ((False, "Post-LN"), (True, "Pre-LN")):
            cases.append(Case(f"{label}, norm_first={norm_first} ({order})", (x, *parts(shape[-1], seed), norm_first)))
    return compare("sublayer_connection", fn, _sublayer_reference, cases, _SUBLAYER_MISTAKES)


# ---------------------------------------------------------------- exercise 7.2: linear_warmup


@solution
def linear_warmup(step, peak_lr, warmup):
    """The learning rate at optimizer step `step` (1, 2, ...): a linear ramp to `peak_lr` over `warmup` steps."""
    return peak_lr * min(1.0, step / warmup)


def _warmup_reference(step, peak_lr, warmup):
    # The schedule the chapter trains with, written with the package's noam_lr as a cross-check of its ramp:
    # during warm-up noam_lr grows linearly, noam_lr(step) / noam_lr(warmup) = step / warmup.
    ramp = noam_lr(min(step, warmup), 1, warmup) / noam_lr(warmup, 1, warmup)
    return peak_lr * ramp


def _observe_rate(fn, case: Case):
    """The rate as a float: a number, or a one-element tensor of float32 or float64, is as good as a float.

    Anything else is kept as it is, for the diagnosis: None, a half-precision tensor (a dtype problem), a list.
    """
    rate = fn(*case.args)
    if isinstance(rate, torch.Tensor) and (rate.numel() != 1 or rate.dtype in (torch.float16, torch.bfloat16)):
        return rate
    return float(rate) if isinstance(rate, (numbers.Real, torch.Tensor)) else rate


_WARMUP_MISTAKES = (
    Mistake(
        "never_capped",
        lambda step, peak_lr, warmup: peak_lr * step / warmup,
        "the rate keeps growing after the warm-up: cap it at peak_lr, peak_lr * min(1, step / warmup).",
    ),
    Mistake(
        "starts_at_zero",
        lambda step, peak_lr, warmup: peak_lr * min(1.0, (step - 1) / warmup),
        "the first step (step=1) gets a learning rate of 0, a wasted step: use step / warmup, which is "
        "1 / warmup at step 1 and 1 at step = warmup.",
    ),
    Mistake(
        "integer_division",
        lambda step, peak_lr, warmup: peak_lr * min(1, step // warmup),
        "the rate is 0 for every step of the warm-up and jumps to peak_lr at its end: step // warmup rounds "
        "down to 0. Use true division, step / warmup.",
    ),
    Mistake(
        "decays_after_warmup",
        lambda step, peak_lr, warmup: peak_lr * min(step / warmup, (warmup / step) ** 0.5),
        "right during the warm-up, but then the rate decays as 1/√step, as the paper's schedule (tc.noam_lr) "
        "does; this exercise holds it at peak_lr after the warm-up: peak_lr * min(1, step / warmup).",
    ),
    Mistake(
        "no_warmup",
        lambda step, peak_lr, warmup: peak_lr,
        "the rate is peak_lr from the first step: that is training without warm-up. Ramp it up linearly, "
        "peak_lr * min(1, step / warmup).",
    ),
)


@checker
def check_linear_warmup(fn) -> Result:
    """Check `fn(step, peak_lr, warmup)` on steps before, at and after the end of the warm-up."""
    cases = [
        Case("step 1 of a 100-step warm-up", (1, 0.01, 100)),
        Case("step 40 of a 100-step warm-up", (40, 0.01, 100)),
        Case("step 100, the last warm-up step", (100, 0.01, 100)),
        Case("step 250, after the warm-up", (250, 0.01, 100)),
        Case("step 3 with warmup=1", (3, 0.5, 1)),
    ]
    return compare(
        "linear_warmup", fn, _warmup_reference, cases, _WARMUP_MISTAKES, observe=_observe_rate, atol=1e-9, rtol=1e-6
    )
