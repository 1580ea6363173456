"""Chapter 5 exercises: the position-wise feed-forward network's forward pass, and a Conv1d turned into a Linear.

Each exercise has a reference solution (`@solution`, shown in the book), a checker (`@checker`) that
compares the reader's function with the package (`tc.PositionwiseFeedForward`, `torch.nn.Conv1d`), and
the known wrong variants that the checker recognises and names.
"""

from __future__ import annotations

import torch
from torch import nn

from ...ffn import PositionwiseFeedForward
from ._core import Case, Crash, Mistake, Result, checker, compare, describe_difference, solution

# ---------------------------------------------------------------- exercise 5.1: ffn_forward


@solution
def ffn_forward(x, w1, b1, w2, b2):
    """FFN(x) = max(0, x W1ᵀ + b1) W2ᵀ + b2 on (..., d_model); weights in nn.Linear's (out, in) layout."""
    hidden = torch.relu(x @ w1.T + b1)  # (..., d_ff): the same two layers at every position
    return hidden @ w2.T + b2


def _ffn_reference(x, w1, b1, w2, b2):
    ffn = PositionwiseFeedForward(w1.shape[1], w1.shape[0]).to(x.dtype)
    with torch.no_grad():
        for layer, w, b in ((ffn.w_1, w1, b1), (ffn.w_2, w2, b2)):
            layer.weight.copy_(w)
            layer.bias.copy_(b)
        return ffn(x)


_FFN_MISTAKES = (
    Mistake(
        "no_activation",
        lambda x, w1, b1, w2, b2: (x @ w1.T + b1) @ w2.T + b2,
        "your output is an affine function of x: the ReLU between the two layers is missing, so the FFN "
        "collapses into one Linear layer (chapter 1, section 1.2). Apply torch.relu to the hidden layer.",
    ),
    Mistake(
        "relu_after_output",
        lambda x, w1, b1, w2, b2: torch.relu(torch.relu(x @ w1.T + b1) @ w2.T + b2),
        "the output is never negative: a ReLU is applied after the second layer too. "
        "FFN(x) = max(0, x W1 + b1) W2 + b2 has one ReLU, on the hidden layer only.",
    ),
    Mistake(
        "bias_after_relu",
        lambda x, w1, b1, w2, b2: (torch.relu(x @ w1.T) + b1) @ w2.T + b2,
        "b1 is added after the ReLU: it belongs inside, max(0, x W1 + b1).",
    ),
    Mistake(
        "biases_dropped",
        lambda x, w1, b1, w2, b2: torch.relu(x @ w1.T) @ w2.T,
        "the biases b1 and b2 are never added (post 0's FFN has none, the paper's has both).",
    ),
    Mistake(
        "weights_not_transposed",
        lambda x, w1, b1, w2, b2: torch.relu(x @ w1 + b1) @ w2 + b2,
        "multiply by W.T, not W: the weights are stored as nn.Linear stores them, (out_features, in_features), "
        "so a layer is x @ W.T + b.",
    ),
)


@checker
def check_ffn_forward(fn) -> Result:
    """Check `fn(x, w1, b1, w2, b2)` against tc.PositionwiseFeedForward with the same weights."""
    g = torch.Generator().manual_seed(5)

    def weights(d_model, d_ff):
        return (
            torch.randn(d_ff, d_model, generator=g) / d_model**0.5,
            torch.randn(d_ff, generator=g),
            torch.randn(d_model, d_ff, generator=g) / d_ff**0.5,
            torch.randn(d_model, generator=g),
        )

    cases = [
        Case("a (2, 3, 4) batch, d_ff = 8", (torch.randn(2, 3, 4, generator=g), *weights(4, 8))),
        Case("a (1, 5, 6) sentence, d_ff = 6 (square weights)", (torch.randn(1, 5, 6, generator=g), *weights(6, 6))),
        Case("one position (3, 4), d_ff = 16", (torch.randn(3, 4, generator=g), *weights(4, 16))),
        Case("large inputs (2, 4, 8), d_ff = 32", (5 * torch.randn(2, 4, 8, generator=g), *weights(8, 32))),
    ]
    return compare("ffn_forward", fn, _ffn_reference, cases, _FFN_MISTAKES)


# ---------------------------------------------------------------- exercise 5.2: linear_from_conv1d


@solution
def linear_from_conv1d(conv):
    """An nn.Linear that computes on (B, T, C_in) what `conv` (kernel_size=1) computes on (B, C_in, T)."""
    linear = nn.Linear(conv.in_channels, conv.out_channels, bias=conv.bias is not None)
    with torch.no_grad():
        linear.weight.copy_(conv.weight.squeeze(-1))  # (out, in, 1) -> (out, in): the same numbers
        if conv.bias is not None:
            linear.bias.copy_(conv.bias)
    return linear


class _ConvOnSequences(nn.Module):
    """The convolution applied the way post 1 applies it: (B, T, C_in) -> transpose -> Conv1d -> transpose."""

    def __init__(self, conv: nn.Conv1d):
        super().__init__()
        self.conv = conv

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x.transpose(1, 2)).transpose(1, 2)


def _observe_linear(build, case: Case):
    """The built module's dtype, its kind, its parameter count, and (an nn.Linear's) output on (B, T, C_in)."""
    conv, x = case.args
    with torch.random.fork_rng(devices=[]):  # a Linear left with its initial weights: the same on both runs
        torch.manual_seed(100)  # not a seed the cases' convolutions use: their weights would come out equal
        module = build(conv)
    if not isinstance(module, nn.Module):
        return ("not a module", type(module).__name__)
    dtype = next((p.dtype for p in module.parameters()), torch.float32)
    n_params = sum(p.numel() for p in module.parameters())
    if not isinstance(module, (nn.Linear, _ConvOnSequences)):
        return dtype, type(module).__name__, n_params, None  # not run: a Conv1d would fail on (B, T, C_in)
    with torch.no_grad():
        out = module(x.to(dtype))
    return dtype, "Linear", n_params, out


def _explain_linear(got, expected, label: str) -> str:
    if isinstance(got, Crash):
        return f"raised {got} on {label}"
    if got[0] == "not a module":
        if got[1] == "NoneType":
            return f"on {label} it returned None: is the `return` missing?"
        return f"on {label} it returned an object of type {got[1]}, expected an nn.Linear"
    _, kind, n_params, out = got
    if kind != "Linear":
        return f"on {label} it returned a module of type {kind}, expected an nn.Linear"
    if n_params != expected[2]:
        return f"on {label} the Linear has {n_params} parameters, the convolution has {expected[2]}"
    # Right type and size, wrong numbers: most often the Linear kept its own random initial weights.
    return describe_difference(out, expected[3], label) + ": were conv.weight and conv.bias copied into the Linear?"


def _linear_with_transposed_weight(conv):
    linear = nn.Linear(conv.in_channels, conv.out_channels)
    with torch.no_grad():
        # A square layer accepts the transposed weight silently; a rectangular one raises.
        linear.weight.copy_(conv.weight.squeeze(-1).T)
        linear.bias.copy_(conv.bias)
    return linear


def _linear_without_bias(conv):
    linear = nn.Linear(conv.in_channels, conv.out_channels, bias=False)
    with torch.no_grad():
        linear.weight.copy_(conv.weight.squeeze(-1))
    return linear


_CONV_MISTAKES = (
    Mistake(
        "weight_transposed",
        _linear_with_transposed_weight,
        "the weight is transposed: Conv1d's weight is (out_channels, in_channels, 1) and nn.Linear's is "
        "(out_features, in_features), the same order, so squeeze the last axis and do not transpose.",
    ),
    Mistake(
        "bias_dropped",
        _linear_without_bias,
        "the Linear has no bias, so it is short of the convolution's out_channels bias parameters: "
        "copy conv.bias too (both layers have one).",
    ),
)


@checker
def check_linear_from_conv1d(fn) -> Result:
    """Check that `fn(conv)` returns an nn.Linear equal to `conv` (kernel_size=1) at every position."""
    g = torch.Generator().manual_seed(6)

    def conv(c_in, c_out, seed):
        torch.manual_seed(seed)
        return nn.Conv1d(c_in, c_out, kernel_size=1)

    cases = [
        Case("Conv1d(4, 8, 1) on a (2, 5, 4) batch", (conv(4, 8, 0), torch.randn(2, 5, 4, generator=g))),
        Case("Conv1d(3, 3, 1) on a (1, 7, 3) sentence (square)", (conv(3, 3, 1), torch.randn(1, 7, 3, generator=g))),
        Case("Conv1d(6, 6, 1) on a (3, 2, 6) batch (square)", (conv(6, 6, 2), torch.randn(3, 2, 6, generator=g))),
        Case("Conv1d(8, 2, 1) on a (1, 4, 8) sentence", (conv(8, 2, 3), torch.randn(1, 4, 8, generator=g))),
    ]
    return compare(
        "linear_from_conv1d",
        fn,
        _ConvOnSequences,
        cases,
        _CONV_MISTAKES,
        observe=_observe_linear,
        explain=_explain_linear,
    )
