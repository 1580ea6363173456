"""Chapter 1 exercises: collapse two Linear layers, an MLP's forward pass, build an MLP module.

Each exercise has a reference solution (`@solution`, shown in the book), a checker (`@checker`) that
compares the reader's function with the package (`tc.collapse_linear`, `tc.MLP`), and the known
wrong variants that the checker recognises and names.
"""

from __future__ import annotations

import itertools

import torch
from torch import nn

from ...mlp import MLP, collapse_linear
from ._core import Case, Crash, Mistake, Result, checker, compare, describe_difference, solution

# ---------------------------------------------------------------- exercise 1.1: collapse_two


@solution
def collapse_two(w1, b1, w2, b2):
    """The weight and bias of the one Linear layer equal to layer 1 followed by layer 2.

    Weights are (out_features, in_features), as in nn.Linear: y = x @ w.T + b.
    """
    # y = W2 (W1 x + b1) + b2 = (W2 W1) x + (W2 b1 + b2)
    return w2 @ w1, w2 @ b1 + b2


def _collapse_reference(w1, b1, w2, b2):
    layers = []
    for w, b in ((w1, b1), (w2, b2)):
        layer = nn.Linear(w.shape[1], w.shape[0], dtype=w.dtype)
        with torch.no_grad():
            layer.weight.copy_(w)
            layer.bias.copy_(b)
        layers.append(layer)
    merged = collapse_linear(layers)
    return merged.weight.detach(), merged.bias.detach()


_COLLAPSE_MISTAKES = (
    Mistake(
        "wrong_order",
        lambda w1, b1, w2, b2: (w1 @ w2, w2 @ b1 + b2),
        "the weight product is in the wrong order: layer 2 acts last, so it is on the left, W = W2 @ W1 "
        "(nn.Linear stores weights as (out_features, in_features)).",
    ),
    Mistake(
        "transposed",
        lambda w1, b1, w2, b2: (w1.T @ w2.T, w2 @ b1 + b2),
        "the weight is transposed: you built (W2 @ W1).T, of shape (in, out); nn.Linear wants (out_features, "
        "in_features), so W = W2 @ W1.",
    ),
    Mistake(
        "bias_not_mapped",
        lambda w1, b1, w2, b2: (w2 @ w1, b1 + b2),
        "the weight is right but b1 goes through layer 2 as well: the bias is W2 @ b1 + b2, not b1 + b2.",
    ),
    Mistake(
        "first_bias_dropped",
        lambda w1, b1, w2, b2: (w2 @ w1, b2),
        "the weight is right but b1 is missing from the bias: it is W2 @ b1 + b2.",
    ),
)


@checker
def check_collapse_two(fn) -> Result:
    """Check `fn(w1, b1, w2, b2) -> (w, b)` on random stacks of two Linear layers."""
    g = torch.Generator().manual_seed(1)

    def stack(n_in, n_hidden, n_out, zero_bias=False):
        w1, w2 = torch.randn(n_hidden, n_in, generator=g), torch.randn(n_out, n_hidden, generator=g)
        b1, b2 = torch.randn(n_hidden, generator=g), torch.randn(n_out, generator=g)
        if zero_bias:
            b1, b2 = torch.zeros_like(b1), torch.zeros_like(b2)
        return w1, b1, w2, b2

    cases = [
        Case("layers 3 -> 5 -> 2", stack(3, 5, 2)),
        Case("layers 4 -> 4 -> 4 (square weights)", stack(4, 4, 4)),
        Case("layers 6 -> 2 -> 3 (a narrow middle)", stack(6, 2, 3)),
        Case("layers 1 -> 1 -> 1", stack(1, 1, 1)),
        Case("layers 4 -> 3 -> 4 with zero biases", stack(4, 3, 4, zero_bias=True)),
    ]
    return compare("collapse_two", fn, _collapse_reference, cases, _COLLAPSE_MISTAKES)


# ---------------------------------------------------------------- exercise 1.2: mlp_forward


@solution
def mlp_forward(x, weights, biases):
    """Apply Linear layers (weights[i] is (out, in)) with a ReLU between each pair, none after the last."""
    for i, (w, b) in enumerate(zip(weights, biases)):
        x = x @ w.T + b
        if i < len(weights) - 1:  # the output layer stays linear: outputs may be negative
            x = torch.relu(x)
    return x


def _mlp_reference(x, weights, biases):
    model = MLP([weights[0].shape[1]] + [w.shape[0] for w in weights])
    linears = [m for m in model.layers if isinstance(m, nn.Linear)]
    with torch.no_grad():
        for layer, w, b in zip(linears, weights, biases):
            layer.weight.copy_(w)
            layer.bias.copy_(b)
        return model(x)


def _forward_without_activation(x, weights, biases):
    for w, b in zip(weights, biases):
        x = x @ w.T + b
    return x


def _forward_without_bias(x, weights, biases):
    for i, w in enumerate(weights):
        x = x @ w.T
        if i < len(weights) - 1:
            x = torch.relu(x)
    return x


def _forward_relu_after_last(x, weights, biases):
    for w, b in zip(weights, biases):
        x = torch.relu(x @ w.T + b)
    return x


def _forward_untransposed(x, weights, biases):
    for i, (w, b) in enumerate(zip(weights, biases)):
        x = x @ w + b
        if i < len(weights) - 1:
            x = torch.relu(x)
    return x


_FORWARD_MISTAKES = (
    Mistake(
        "no_activation",
        _forward_without_activation,
        "your output is an affine function of x: the ReLU between the layers is missing, and without it the "
        "whole stack collapses into one Linear layer (chapter 1, section 1.2).",
    ),
    Mistake(
        "bias_dropped",
        _forward_without_bias,
        "the biases are never added: every layer computes x @ W.T + b.",
    ),
    Mistake(
        "activation_after_last",
        _forward_relu_after_last,
        "a ReLU is applied after the last layer too, so the output can never be negative: apply it between "
        "layers only and leave the output layer linear.",
    ),
    Mistake(
        "weights_not_transposed",
        _forward_untransposed,
        "multiply by W.T, not W: nn.Linear stores each weight as (out_features, in_features), so a layer is "
        "x @ W.T + b.",
    ),
)


@checker
def check_mlp_forward(fn) -> Result:
    """Check `fn(x, weights, biases)` against tc.MLP with the same weights."""
    g = torch.Generator().manual_seed(2)

    def layers(*sizes):
        weights = [torch.randn(n_out, n_in, generator=g) / n_in**0.5 for n_in, n_out in itertools.pairwise(sizes)]
        biases = [torch.randn(n_out, generator=g) for n_out in sizes[1:]]
        return weights, biases

    cases = [
        Case("a batch of 5 rows through layers 3 -> 8 -> 2", (torch.randn(5, 3, generator=g), *layers(3, 8, 2))),
        Case("three layers 4 -> 6 -> 5 -> 3", (torch.randn(7, 4, generator=g), *layers(4, 6, 5, 3))),
        Case("one row of large negative inputs", (-10 * torch.rand(1, 3, generator=g), *layers(3, 4, 2))),
        Case("a (2, 3, 4) batch of sequences", (torch.randn(2, 3, 4, generator=g), *layers(4, 5, 2))),
        Case("a single layer 4 -> 4 (nothing to activate)", (torch.randn(3, 4, generator=g), *layers(4, 4))),
    ]
    return compare("mlp_forward", fn, _mlp_reference, cases, _FORWARD_MISTAKES)


# ---------------------------------------------------------------- exercise 1.3: make_mlp


@solution
def make_mlp(n_in, n_hidden, n_out):
    """A one-hidden-layer MLP: n_in -> n_hidden -> ReLU -> n_out."""
    return nn.Sequential(nn.Linear(n_in, n_hidden), nn.ReLU(), nn.Linear(n_hidden, n_out))


def _summarise_module(build, case: Case):
    """What a built module does, independent of its random weights: dtype, output shape, size, linearity."""
    n_in = case.args[0]
    with torch.random.fork_rng(devices=[]):  # the same initial weights on both runs; dropout still random
        torch.manual_seed(0)
        model = build(*case.args)
    if not isinstance(model, nn.Module):
        return ("not a module", type(model).__name__)
    dtype = next((p.dtype for p in model.parameters()), torch.float32)
    g = torch.Generator().manual_seed(3)
    a, b = (3 * torch.randn(64, n_in, generator=g).to(dtype) for _ in range(2))
    with torch.no_grad():
        y_a, y_b, y_mid = model(a), model(b), model((a + b) / 2)
    # An affine map sends the midpoint of a and b to the midpoint of f(a) and f(b); a ReLU network does not.
    affine = bool(torch.allclose(y_mid, (y_a + y_b) / 2, atol=1e-5))
    # A linear output layer gives negative outputs for some of 64 random inputs; a ReLU after it never does.
    negative = bool((y_a < 0).any())
    n_params = sum(p.numel() for p in model.parameters())
    return dtype, tuple(y_a.shape), n_params, affine, negative


def _explain_module(got, expected, label: str) -> str:
    if isinstance(got, Crash):
        return f"raised {got} on {label}"
    if got[0] == "not a module":
        if got[1] == "NoneType":
            return f"{label} returned None: is the `return` missing?"
        return f"{label} returned an object of type {got[1]}, expected an nn.Module (e.g. an nn.Sequential)"
    (_, shape, n_params, affine, negative), (_, want_shape, want_params, _, _) = got, expected
    if shape != want_shape:
        return f"on {label} the output has shape {shape}, expected {want_shape}"
    if n_params != want_params:
        return f"on {label} the module has {n_params} parameters, expected {want_params}"
    if affine:
        return f"on {label} the module is affine (no non-linearity between the layers)"
    if not negative:
        return f"on {label} the output is never negative: is there an activation after the last layer?"
    return describe_difference(got, expected, label)


_BUILD_MISTAKES = (
    Mistake(
        "single_layer",
        lambda n_in, n_hidden, n_out: nn.Linear(n_in, n_out),
        "your module is one Linear layer, n_in -> n_out: it is affine and has no hidden layer. Build "
        "Linear(n_in, n_hidden), ReLU, Linear(n_hidden, n_out).",
    ),
    Mistake(
        "activation_after_last",
        lambda n_in, n_hidden, n_out: nn.Sequential(
            nn.Linear(n_in, n_hidden), nn.ReLU(), nn.Linear(n_hidden, n_out), nn.ReLU()
        ),
        "a ReLU follows the last layer too, so the output is never negative: leave the output layer linear, "
        "Linear(n_in, n_hidden), ReLU, Linear(n_hidden, n_out).",
    ),
    Mistake(
        "no_activation",
        lambda n_in, n_hidden, n_out: nn.Sequential(nn.Linear(n_in, n_hidden), nn.Linear(n_hidden, n_out)),
        "the module is affine (the midpoint of two inputs maps to the midpoint of their outputs): there is no "
        "activation between the two Linear layers, so they act as one. Put nn.ReLU() between them.",
    ),
    Mistake(
        "bias_dropped",
        lambda n_in, n_hidden, n_out: nn.Sequential(
            nn.Linear(n_in, n_hidden, bias=False), nn.ReLU(), nn.Linear(n_hidden, n_out, bias=False)
        ),
        "the parameter count is short by n_hidden + n_out: the Linear layers have no bias. Keep bias=True "
        "(the default).",
    ),
    Mistake(
        "wrong_output_width",
        lambda n_in, n_hidden, n_out: nn.Sequential(nn.Linear(n_in, n_hidden), nn.ReLU(), nn.Linear(n_hidden, n_in)),
        "the output has n_in features, not n_out: the last layer must be nn.Linear(n_hidden, n_out).",
    ),
    Mistake(
        "wrong_output_width",
        lambda n_in, n_hidden, n_out: nn.Sequential(
            nn.Linear(n_in, n_hidden), nn.ReLU(), nn.Linear(n_hidden, n_hidden)
        ),
        "the output has n_hidden features, not n_out: the last layer must be nn.Linear(n_hidden, n_out).",
    ),
)


@checker
def check_make_mlp(fn) -> Result:
    """Check that `fn(n_in, n_hidden, n_out)` builds a module shaped and sized like tc.MLP, and not affine."""
    cases = [
        Case("make_mlp(2, 8, 1)", (2, 8, 1)),
        Case("make_mlp(3, 16, 2)", (3, 16, 2)),
        Case("make_mlp(5, 4, 5)", (5, 4, 5)),
    ]
    return compare(
        "make_mlp",
        fn,
        lambda n_in, n_hidden, n_out: MLP([n_in, n_hidden, n_out]),
        cases,
        _BUILD_MISTAKES,
        observe=_summarise_module,
        explain=_explain_module,
        passed=f"passed all {len(cases)} cases: output shapes, parameter counts, non-linearity and the sign of "
        "the outputs match tc.MLP",
    )
