"""Chapter 5's wrong answers (`WRONG_ANSWERS`) and the tests specific to its checkers.

The wrong answers below are written the way a reader might write them, independently of the
variants the checkers use to recognise the mistakes.

test_exercise_checkers.py runs every row of the table against its checker (the mistake's key and the
words of its message), with the reference solution and the checks common to every checker.
"""

import torch
import torch.nn.functional as F
from torch import nn

import transformer_course as tc
from transformer_course.course.exercises import solutions


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


def ffn_post_0_style(x, w1, b1, w2, b2):
    return F.linear(F.relu(F.linear(x, w1)), w2)


def ffn_untransposed(x, w1, b1, w2, b2):
    return torch.matmul(torch.relu(torch.matmul(x, w1) + b1), w2) + b2


def ffn_gelu(x, w1, b1, w2, b2):  # GELU is a fine activation, but not the exercise's
    return F.gelu(x @ w1.T + b1) @ w2.T + b2


def ffn_with_dropout(x, w1, b1, w2, b2):
    return F.dropout(torch.relu(x @ w1.T + b1), p=0.1) @ w2.T + b2


def ffn_layers_swapped(x, w1, b1, w2, b2):
    return torch.relu(x @ w2.T + b2) @ w1.T + b1


def ffn_second_bias_forgotten(x, w1, b1, w2, b2):
    return torch.relu(x @ w1.T + b1) @ w2.T


def ffn_in_float64(x, w1, b1, w2, b2):
    return (torch.relu(x @ w1.T + b1) @ w2.T + b2).double()


def ffn_without_return(x, w1, b1, w2, b2):
    out = torch.relu(x @ w1.T + b1) @ w2.T + b2  # noqa: F841


def ffn_hidden_layer_only(x, w1, b1, w2, b2):
    return torch.relu(x @ w1.T + b1)


def ffn_sigmoid(x, w1, b1, w2, b2):
    return torch.sigmoid(x @ w1.T + b1) @ w2.T + b2


def ffn_relu_in_place_on_bias(x, w1, b1, w2, b2):
    return (x @ w1.T).add_(b1).relu_() @ w2.T + b2.relu_()  # relu_ on b2 clips the caller's bias


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


def conv_to_fresh_linear(conv):
    return nn.Linear(conv.in_channels, conv.out_channels)  # the weights never copied


def conv_weight_itself(conv):
    return conv.weight.squeeze(-1)


def conv_wrapped_in_sequential(conv):
    return nn.Sequential(solutions.linear_from_conv1d(conv))


def conv_returned_as_is(conv):
    return conv


def conv_weight_not_squeezed(conv):
    linear = nn.Linear(conv.in_channels, conv.out_channels)
    linear.weight = nn.Parameter(conv.weight.detach().clone())  # still (out, in, 1)
    linear.bias = nn.Parameter(conv.bias.detach().clone())
    return linear


def conv_copied_with_grad_on(conv):
    linear = nn.Linear(conv.in_channels, conv.out_channels)
    linear.weight.copy_(conv.weight.squeeze(-1))  # outside torch.no_grad()
    linear.bias.copy_(conv.bias)
    return linear


def conv_squeezed_in_place(conv):
    linear = nn.Linear(conv.in_channels, conv.out_channels)
    with torch.no_grad():
        linear.weight.copy_(conv.weight.squeeze_(-1))  # squeeze_ reshapes the convolution's own weight
        linear.bias.copy_(conv.bias)
    return linear


def conv_sizes_swapped(conv):
    linear = nn.Linear(conv.out_channels, conv.in_channels)
    with torch.no_grad():
        linear.weight.copy_(conv.weight.squeeze(-1))
        linear.bias.copy_(conv.bias)
    return linear


def conv_to_float64_linear(conv):
    return solutions.linear_from_conv1d(conv).double()


def conv_without_return(conv):
    linear = solutions.linear_from_conv1d(conv)  # noqa: F841


# Each exercise's wrong answers and the diagnosis each must get: (answer, mistake key or None, words of the message).
WRONG_ANSWERS = {
    "ffn_forward": [
        (ffn_linear_only, "no_activation", "ReLU between the two layers is missing"),
        (ffn_relu_on_output, "relu_after_output", "never negative"),
        (ffn_bias_outside, "bias_after_relu", "b1 is added after the ReLU"),
        (ffn_post_0_style, "biases_dropped", "never added"),
        (ffn_untransposed, "weights_not_transposed", "multiply by W.T"),
        (ffn_gelu, None, "wrong values on a (2, 3, 4) batch, d_ff = 8"),
        (ffn_with_dropout, "nondeterministic", "dropout or random noise"),
        (ffn_layers_swapped, None, "raised RuntimeError"),
        (ffn_second_bias_forgotten, None, "wrong values on a (2, 3, 4) batch, d_ff = 8"),
        (ffn_in_float64, "dtype", "returned dtype torch.float64"),
        (ffn_without_return, None, "is the `return` missing?"),
        (ffn_hidden_layer_only, None, "returned shape (2, 3, 8) on a (2, 3, 4) batch, d_ff = 8, expected (2, 3, 4)"),
        (ffn_sigmoid, None, "wrong values on a (2, 3, 4) batch, d_ff = 8"),
        (ffn_relu_in_place_on_bias, "in_place", "changes its input `b2` in place"),
    ],
    "linear_from_conv1d": [
        (conv_to_linear_transposed, "weight_transposed", "do not transpose"),
        (conv_to_linear_no_bias, "bias_dropped", "copy conv.bias too"),
        (conv_to_fresh_linear, None, "were conv.weight and conv.bias copied"),
        (conv_weight_itself, None, "object of type Tensor, expected an nn.Linear"),
        (conv_wrapped_in_sequential, None, "a module of type Sequential, expected an nn.Linear"),
        (conv_returned_as_is, None, "a module of type Conv1d, expected an nn.Linear"),
        (conv_weight_not_squeezed, None, "could not use on Conv1d(4, 8, 1) on a (2, 5, 4) batch (RuntimeError"),
        (conv_copied_with_grad_on, None, "raised RuntimeError: a leaf Variable that requires grad"),
        (conv_squeezed_in_place, "in_place", "changes its input `conv.weight` in place"),
        (conv_sizes_swapped, None, "raised RuntimeError"),
        (conv_to_float64_linear, "dtype", "returned dtype torch.float64 on Conv1d(4, 8, 1)"),
        (conv_without_return, None, "it returned None: is the `return` missing?"),
    ],
}
