"""Chapter 1's checkers: the reference solutions pass, and each known mistake gets its own diagnosis.

The wrong answers below are written the way a reader might write them, independently of the
variants the checkers use to recognise the mistakes.
"""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import transformer_course as tc
from transformer_course.exercises import check, solutions


@pytest.mark.parametrize("name", ["collapse_two", "mlp_forward", "make_mlp"])
def test_reference_solution_passes(name):
    result = getattr(check, name)(getattr(solutions, name))
    assert result.passed and result.mistake is None, result
    assert repr(result).startswith(f"✅ {name}: passed all")


def test_solutions_agree_with_the_package():
    torch.manual_seed(0)
    layers = [nn.Linear(3, 5), nn.Linear(5, 2)]
    w, b = solutions.collapse_two(layers[0].weight, layers[0].bias, layers[1].weight, layers[1].bias)
    merged = tc.collapse_linear(layers)
    assert torch.allclose(w, merged.weight) and torch.allclose(b, merged.bias)
    model = tc.MLP([3, 5, 2])
    linears = [m for m in model.layers if isinstance(m, nn.Linear)]
    x = torch.randn(4, 3)
    out = solutions.mlp_forward(x, [m.weight for m in linears], [m.bias for m in linears])
    assert torch.allclose(out, model(x))


# ---- exercise 1.1


def merge_wrong_order(w1, b1, w2, b2):
    return torch.matmul(w1, w2), torch.matmul(w2, b1) + b2


def merge_transposed(w1, b1, w2, b2):
    return (w2 @ w1).T, w2 @ b1 + b2


def merge_biases_added(w1, b1, w2, b2):
    return w2 @ w1, b1 + b2


def merge_first_bias_forgotten(w1, b1, w2, b2):
    return w2 @ w1, b2.clone()


@pytest.mark.parametrize(
    ("reader", "mistake", "words"),
    [
        (merge_wrong_order, "wrong_order", "wrong order"),
        (merge_transposed, "transposed", "transposed"),
        (merge_biases_added, "bias_not_mapped", "W2 @ b1 + b2, not b1 + b2"),
        (merge_first_bias_forgotten, "first_bias_dropped", "b1 is missing"),
    ],
)
def test_collapse_two_mistakes_are_named(reader, mistake, words):
    result = check.collapse_two(reader)
    assert not result.passed and result.mistake == mistake and words in result.message, result


# ---- exercise 1.2


def forward_no_activation(x, weights, biases):
    for w, b in zip(weights, biases):
        x = F.linear(x, w, b)
    return x


def forward_no_bias(x, weights, biases):
    for i, w in enumerate(weights):
        x = F.linear(x, w)
        if i + 1 < len(weights):
            x = F.relu(x)
    return x


def forward_relu_everywhere(x, weights, biases):
    for w, b in zip(weights, biases):
        x = (x @ w.T + b).clamp(min=0)
    return x


def forward_untransposed(x, weights, biases):
    h = x
    for i, (w, b) in enumerate(zip(weights, biases)):
        h = torch.matmul(h, w) + b
        if i < len(weights) - 1:
            h = h.relu()
    return h


@pytest.mark.parametrize(
    ("reader", "mistake", "words"),
    [
        (forward_no_activation, "no_activation", "ReLU between the layers is missing"),
        (forward_no_bias, "bias_dropped", "biases are never added"),
        (forward_relu_everywhere, "activation_after_last", "never be negative"),
        (forward_untransposed, "weights_not_transposed", "multiply by W.T"),
    ],
)
def test_mlp_forward_mistakes_are_named(reader, mistake, words):
    result = check.mlp_forward(reader)
    assert not result.passed and result.mistake == mistake and words in result.message, result


def test_mlp_forward_unrecognised_mistake_gets_the_case_that_fails():
    def half_relu(x, weights, biases):  # LeakyReLU instead of ReLU: close, but not the exercise
        for i, (w, b) in enumerate(zip(weights, biases)):
            x = x @ w.T + b
            if i < len(weights) - 1:
                x = F.leaky_relu(x, 0.5)
        return x

    result = check.mlp_forward(half_relu)
    assert not result.passed and result.mistake is None
    assert "wrong values on a batch of 5 rows through layers 3 -> 8 -> 2" in result.message


# ---- exercise 1.3


def build_without_activation(n_in, n_hidden, n_out):
    return nn.Sequential(nn.Linear(n_in, n_hidden), nn.Linear(n_hidden, n_out))


def build_without_bias(n_in, n_hidden, n_out):
    return nn.Sequential(nn.Linear(n_in, n_hidden, bias=False), nn.ReLU(), nn.Linear(n_hidden, n_out, bias=False))


def build_back_to_input_width(n_in, n_hidden, n_out):
    return nn.Sequential(nn.Linear(n_in, n_hidden), nn.ReLU(), nn.Linear(n_hidden, n_in))


def build_hidden_width_output(n_in, n_hidden, n_out):
    return nn.Sequential(nn.Linear(n_in, n_hidden), nn.ReLU(), nn.Linear(n_hidden, n_hidden))


@pytest.mark.parametrize(
    ("reader", "mistake", "words"),
    [
        (build_without_activation, "no_activation", "the module is affine"),
        (build_without_bias, "bias_dropped", "no bias"),
        (build_back_to_input_width, "wrong_output_width", "n_in features, not n_out"),
        (build_hidden_width_output, "wrong_output_width", "n_hidden features, not n_out"),
    ],
)
def test_make_mlp_mistakes_are_named(reader, mistake, words):
    result = check.make_mlp(reader)
    assert not result.passed and result.mistake == mistake and words in result.message, result


def test_make_mlp_accepts_the_package_and_other_activations():
    assert check.make_mlp(lambda n_in, n_hidden, n_out: tc.MLP([n_in, n_hidden, n_out])).passed
    assert check.make_mlp(lambda a, h, b: nn.Sequential(nn.Linear(a, h), nn.Tanh(), nn.Linear(h, b))).passed


def test_make_mlp_explains_non_modules_and_other_widths():
    not_module = check.make_mlp(lambda n_in, n_hidden, n_out: [n_in, n_hidden, n_out])
    assert not not_module.passed and "returned an object of type list, expected an nn.Module" in not_module.message
    plus_one = check.make_mlp(lambda a, h, b: nn.Sequential(nn.Linear(a, h), nn.ReLU(), nn.Linear(h, b + 1)))
    assert not plus_one.passed and plus_one.mistake is None
    assert plus_one.message == "on make_mlp(2, 8, 1) the output has shape (64, 2), expected (64, 1)"
