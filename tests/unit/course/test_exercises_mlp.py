"""Chapter 1's wrong answers (`WRONG_ANSWERS`) and the tests specific to its checkers.

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


def merge_weight_only(w1, b1, w2, b2):
    return w2 @ w1


def merge_bias_first(w1, b1, w2, b2):
    return w2 @ b1 + b2, w2 @ w1


def merge_elementwise(w1, b1, w2, b2):
    return w2 * w1.T, w2 @ b1 + b2  # * is elementwise: shapes (2, 5) and (3, 5) do not even match


def merge_into_b2(w1, b1, w2, b2):
    b2 += w2 @ b1  # the caller's b2 changes
    return w2 @ w1, b2


def merge_in_float64(w1, b1, w2, b2):
    return w2.double() @ w1.double(), w2.double() @ b1.double() + b2.double()


def merge_without_return(w1, b1, w2, b2):
    w, b = w2 @ w1, w2 @ b1 + b2  # noqa: F841


def merge_with_numpy(w1, b1, w2, b2):
    return w2.numpy() @ w1.numpy(), w2.numpy() @ b1.numpy() + b2.numpy()


def merge_transposed_without_b1(w1, b1, w2, b2):
    return w1.T @ w2.T, b2


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


def forward_leaky(x, weights, biases):  # LeakyReLU instead of ReLU: close, but not the exercise
    for i, (w, b) in enumerate(zip(weights, biases)):
        x = x @ w.T + b
        if i < len(weights) - 1:
            x = F.leaky_relu(x, 0.5)
    return x


def forward_first_layer_only(x, weights, biases):
    return torch.relu(x @ weights[0].T + biases[0])


def forward_transposing_in_place(x, weights, biases):
    for i, (w, b) in enumerate(zip(weights, biases)):
        x = x @ w.t_() + b  # t_() transposes the caller's weight itself
        if i < len(weights) - 1:
            x = torch.relu(x)
    return x


def forward_relu_on_inputs(x, weights, biases):
    for w, b in zip(weights, biases):
        x = torch.relu(x) @ w.T + b  # the ReLU lands before each layer, the input included
    return x


def forward_with_dropout(x, weights, biases):
    for i, (w, b) in enumerate(zip(weights, biases)):
        x = x @ w.T + b
        if i < len(weights) - 1:
            x = F.dropout(torch.relu(x), 0.1)  # F.dropout is on unless training=False
    return x


def forward_returns_every_layer(x, weights, biases):
    outputs = []
    for i, (w, b) in enumerate(zip(weights, biases)):
        x = x @ w.T + b
        if i < len(weights) - 1:
            x = torch.relu(x)
        outputs.append(x)
    return outputs


def forward_layers_reversed(x, weights, biases):
    for w, b in zip(reversed(weights), reversed(biases)):
        x = torch.relu(x @ w.T + b)
    return x


# ---- exercise 1.3


def build_without_activation(n_in, n_hidden, n_out):
    return nn.Sequential(nn.Linear(n_in, n_hidden), nn.Linear(n_hidden, n_out))


def build_without_bias(n_in, n_hidden, n_out):
    return nn.Sequential(nn.Linear(n_in, n_hidden, bias=False), nn.ReLU(), nn.Linear(n_hidden, n_out, bias=False))


def build_back_to_input_width(n_in, n_hidden, n_out):
    return nn.Sequential(nn.Linear(n_in, n_hidden), nn.ReLU(), nn.Linear(n_hidden, n_in))


def build_hidden_width_output(n_in, n_hidden, n_out):
    return nn.Sequential(nn.Linear(n_in, n_hidden), nn.ReLU(), nn.Linear(n_hidden, n_hidden))


def build_one_layer(n_in, n_hidden, n_out):
    return nn.Linear(n_in, n_out)


def build_relu_at_the_end(n_in, n_hidden, n_out):
    return nn.Sequential(nn.Linear(n_in, n_hidden), nn.ReLU(), nn.Linear(n_hidden, n_out), nn.ReLU())


def build_layer_list(n_in, n_hidden, n_out):
    return [nn.Linear(n_in, n_hidden), nn.ReLU(), nn.Linear(n_hidden, n_out)]


def build_without_return(n_in, n_hidden, n_out):
    model = nn.Sequential(nn.Linear(n_in, n_hidden), nn.ReLU(), nn.Linear(n_hidden, n_out))  # noqa: F841


def build_swapped_sizes(n_in, n_hidden, n_out):
    return nn.Sequential(nn.Linear(n_hidden, n_in), nn.ReLU(), nn.Linear(n_out, n_hidden))


def build_fixed_width(n_in, n_hidden, n_out):
    return nn.Sequential(nn.Linear(n_in, 16), nn.ReLU(), nn.Linear(16, n_out))


def build_two_hidden_layers(n_in, n_hidden, n_out):
    return nn.Sequential(
        nn.Linear(n_in, n_hidden), nn.ReLU(), nn.Linear(n_hidden, n_hidden), nn.ReLU(), nn.Linear(n_hidden, n_out)
    )


def build_plus_one(n_in, n_hidden, n_out):
    return nn.Sequential(nn.Linear(n_in, n_hidden), nn.ReLU(), nn.Linear(n_hidden, n_out + 1))


def build_in_float64(n_in, n_hidden, n_out):
    return nn.Sequential(nn.Linear(n_in, n_hidden), nn.ReLU(), nn.Linear(n_hidden, n_out)).double()


# Each exercise's wrong answers and the diagnosis each must get: (answer, mistake key or None, words of the message).
WRONG_ANSWERS = {
    "collapse_two": [
        (merge_wrong_order, "wrong_order", "wrong order"),
        (merge_transposed, "transposed", "transposed"),
        (merge_biases_added, "bias_not_mapped", "W2 @ b1 + b2, not b1 + b2"),
        (merge_first_bias_forgotten, "first_bias_dropped", "b1 is missing"),
        (merge_weight_only, None, "returned a tensor of shape (2, 3) on layers 3 -> 5 -> 2, expected 2 values"),
        (merge_bias_first, None, "value 0: returned shape (2,) on layers 3 -> 5 -> 2, expected (2, 3)"),
        (merge_elementwise, None, "raised RuntimeError"),
        (merge_into_b2, "in_place", "changes its input `b2` in place"),
        (merge_in_float64, "dtype", "value 0: returned dtype torch.float64 on layers 3 -> 5 -> 2"),
        (merge_without_return, None, "returned None on layers 3 -> 5 -> 2: is the `return` missing?"),
        (merge_with_numpy, None, "value 0: returned an object of type ndarray"),
        (merge_transposed_without_b1, None, "value 0: returned shape (3, 2)"),
    ],
    "mlp_forward": [
        (forward_no_activation, "no_activation", "ReLU between the layers is missing"),
        (forward_no_bias, "bias_dropped", "biases are never added"),
        (forward_relu_everywhere, "activation_after_last", "never be negative"),
        (forward_untransposed, "weights_not_transposed", "multiply by W.T"),
        (forward_leaky, None, "wrong values on a batch of 5 rows through layers 3 -> 8 -> 2"),
        (forward_first_layer_only, None, "returned shape (5, 8) on a batch of 5 rows"),
        (forward_transposing_in_place, "in_place", "changes its input `weights[0]` in place"),
        (forward_relu_on_inputs, None, "wrong values on a batch of 5 rows"),
        (forward_with_dropout, "nondeterministic", "dropout or random noise"),
        (forward_returns_every_layer, None, "returned an object of type list"),
        (forward_layers_reversed, None, "raised RuntimeError"),
    ],
    "make_mlp": [
        (build_without_activation, "no_activation", "the module is affine"),
        (build_without_bias, "bias_dropped", "no bias"),
        (build_back_to_input_width, "wrong_output_width", "n_in features, not n_out"),
        (build_hidden_width_output, "wrong_output_width", "n_hidden features, not n_out"),
        (build_one_layer, "single_layer", "one Linear layer"),
        (build_relu_at_the_end, "activation_after_last", "never negative"),
        (build_layer_list, None, "returned an object of type list, expected an nn.Module"),
        (build_without_return, None, "make_mlp(2, 8, 1) returned None: is the `return` missing?"),
        (build_swapped_sizes, None, "could not use on make_mlp(2, 8, 1) (RuntimeError: mat1 and mat2 shapes"),
        (build_fixed_width, None, "on make_mlp(2, 8, 1) the module has 65 parameters, expected 33"),
        (build_two_hidden_layers, None, "the module has 105 parameters, expected 33"),
        (build_plus_one, None, "on make_mlp(2, 8, 1) the output has shape (64, 2), expected (64, 1)"),
        (build_in_float64, "dtype", "returned dtype torch.float64 on make_mlp(2, 8, 1), expected torch.float32"),
    ],
}


def test_make_mlp_accepts_the_package_and_other_activations():
    assert check.make_mlp(lambda n_in, n_hidden, n_out: tc.MLP([n_in, n_hidden, n_out])).passed
    assert check.make_mlp(lambda a, h, b: nn.Sequential(nn.Linear(a, h), nn.Tanh(), nn.Linear(h, b))).passed
