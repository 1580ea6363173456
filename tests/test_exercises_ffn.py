"""Chapter 5's checkers: the reference solutions pass, and each known mistake gets its own diagnosis.

The wrong answers below are written the way a reader might write them, independently of the
variants the checkers use to recognise the mistakes.
"""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import transformer_course as tc
from transformer_course.exercises import check, solutions


@pytest.mark.parametrize("name", ["ffn_forward", "linear_from_conv1d"])
def test_reference_solution_passes(name):
    result = getattr(check, name)(getattr(solutions, name))
    assert result.passed and result.mistake is None, result
    assert repr(result).startswith(f"✅ {name}: passed all")


def test_solutions_agree_with_the_package_and_with_conv1d():
    ffn = tc.PositionwiseFeedForward(6, 24)
    x = torch.randn(2, 5, 6)
    out = solutions.ffn_forward(x, ffn.w_1.weight, ffn.w_1.bias, ffn.w_2.weight, ffn.w_2.bias)
    assert torch.allclose(out, ffn(x), atol=1e-6)
    conv = nn.Conv1d(6, 24, kernel_size=1)
    linear = solutions.linear_from_conv1d(conv)
    assert isinstance(linear, nn.Linear)
    assert torch.allclose(linear(x), conv(x.transpose(1, 2)).transpose(1, 2), atol=1e-6)
    assert tc.count_parameters(linear) == tc.count_parameters(conv)


# ---- exercise 5.1


def ffn_linear_only(x, w1, b1, w2, b2):
    return F.linear(F.linear(x, w1, b1), w2, b2)


def ffn_relu_on_output(x, w1, b1, w2, b2):
    return F.relu(F.linear(F.relu(F.linear(x, w1, b1)), w2, b2))


def ffn_bias_outside(x, w1, b1, w2, b2):
    h = (x @ w1.T).clamp(min=0) + b1
    return h @ w2.T + b2


def ffn_seed_000_style(x, w1, b1, w2, b2):
    return F.linear(F.relu(F.linear(x, w1)), w2)


def ffn_untransposed(x, w1, b1, w2, b2):
    return torch.matmul(torch.relu(torch.matmul(x, w1) + b1), w2) + b2


@pytest.mark.parametrize(
    ("reader", "mistake", "words"),
    [
        (ffn_linear_only, "no_activation", "ReLU between the two layers is missing"),
        (ffn_relu_on_output, "relu_after_output", "never negative"),
        (ffn_bias_outside, "bias_after_relu", "b1 is added after the ReLU"),
        (ffn_seed_000_style, "biases_dropped", "never added"),
        (ffn_untransposed, "weights_not_transposed", "multiply by W.T"),
    ],
)
def test_ffn_forward_mistakes_are_named(reader, mistake, words):
    result = check.ffn_forward(reader)
    assert not result.passed and result.mistake == mistake and words in result.message, result


def test_ffn_forward_unrecognised_mistake_names_the_case():
    def gelu_ffn(x, w1, b1, w2, b2):  # GELU is a fine activation, but not the exercise's
        return F.gelu(x @ w1.T + b1) @ w2.T + b2

    result = check.ffn_forward(gelu_ffn)
    assert not result.passed and result.mistake is None
    assert "wrong values on a (2, 3, 4) batch, d_ff = 8" in result.message


# ---- exercise 5.2


def conv_to_linear_transposed(conv):
    linear = nn.Linear(conv.in_channels, conv.out_channels)
    linear.weight.data = conv.weight.data[:, :, 0].t().clone()
    linear.bias.data = conv.bias.data.clone()
    return linear


def conv_to_linear_no_bias(conv):
    linear = nn.Linear(conv.in_channels, conv.out_channels, bias=False)
    linear.weight.data = conv.weight.data.view(conv.out_channels, conv.in_channels).clone()
    return linear


@pytest.mark.parametrize(
    ("reader", "mistake", "words"),
    [
        (conv_to_linear_transposed, "weight_transposed", "do not transpose"),
        (conv_to_linear_no_bias, "bias_dropped", "copy conv.bias too"),
    ],
)
def test_linear_from_conv1d_mistakes_are_named(reader, mistake, words):
    result = check.linear_from_conv1d(reader)
    assert not result.passed and result.mistake == mistake and words in result.message, result


def test_linear_from_conv1d_explains_uncopied_weights_and_non_modules():
    fresh = check.linear_from_conv1d(lambda conv: nn.Linear(conv.in_channels, conv.out_channels))
    assert not fresh.passed and fresh.mistake is None and "were conv.weight and conv.bias copied" in fresh.message
    weights = check.linear_from_conv1d(lambda conv: conv.weight.squeeze(-1))
    assert not weights.passed and "object of type Tensor, expected an nn.Linear" in weights.message
    sequential = check.linear_from_conv1d(lambda conv: nn.Sequential(solutions.linear_from_conv1d(conv)))
    assert not sequential.passed and "not an nn.Linear" in sequential.message
