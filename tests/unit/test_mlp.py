"""Chapter 1, transformer_course/mlp.py: the MLP, collapse_linear, full-batch training, hinge fits and toy data."""

import itertools

import pytest
import torch
from torch import nn

import transformer_course as tc
from transformer_course.mlp import accuracy, hinge_fit, train_full_batch, two_moons, xor_data


def test_train_full_batch_lowers_the_loss_and_an_mlp_solves_xor():
    x, y = xor_data(n_per_corner=20, noise=0.1)
    model = tc.MLP([2, 16, 2])
    losses = train_full_batch(model, x, y, steps=300, lr=0.03)
    assert len(losses) == 300 and losses[-1] < 0.1 * losses[0]
    assert accuracy(model, x, y) == 1.0


def test_a_linear_classifier_cannot_solve_xor():
    x, y = xor_data(n_per_corner=20, noise=0.1)
    model = tc.MLP([2, 2])
    train_full_batch(model, x, y, steps=300, lr=0.03)
    assert accuracy(model, x, y) <= 0.75


def test_train_full_batch_regression_and_bad_arguments():
    x = torch.linspace(-1, 1, 50).unsqueeze(1)
    model = tc.MLP([1, 16, 1])
    losses = train_full_batch(model, x, 3 * x, loss="mse", steps=200, lr=0.02)
    assert losses[-1] < 0.01
    with pytest.raises(ValueError, match="loss='hinge' is not one of"):
        train_full_batch(model, x, x, loss="hinge")
    with pytest.raises(ValueError, match="x has 50 rows but y has 10"):
        train_full_batch(model, x, x[:10], loss="mse")
    with pytest.raises(ValueError, match="steps=0"):
        train_full_batch(model, x, x, loss="mse", steps=0)


def test_accuracy_counts_rows_whose_largest_logit_is_the_label():
    model = nn.Identity()
    logits = torch.tensor([[2.0, 1.0], [0.0, 3.0], [5.0, -1.0], [0.0, 1.0]])
    assert accuracy(model, logits, torch.tensor([0, 1, 1, 1])) == 0.75


def test_hinge_fit_is_an_mlp_with_kinks_where_asked_and_exact_on_piecewise_linear_targets():
    x = torch.linspace(-2, 2, 101, dtype=torch.float64).unsqueeze(1)
    kinks = torch.linspace(-2, 2, 5, dtype=torch.float64)[:-1]
    target = 1.5 + 2 * torch.relu(x - kinks[1]) - 3 * torch.relu(x - kinks[3]) + 0.5 * (x + 2)
    model = hinge_fit(x, target, width=4, low=-2.0, high=2.0)
    assert isinstance(model, tc.MLP) and model.sizes == [1, 4, 1]
    assert torch.allclose(-model.layers[0].bias, kinks) and torch.all(model.layers[0].weight == 1)
    with torch.no_grad():
        assert torch.allclose(model(x), target, atol=1e-9)


def test_hinge_fit_error_falls_as_the_width_doubles():
    x = torch.linspace(-2, 2, 200, dtype=torch.float64).unsqueeze(1)
    y = torch.sin(3 * x)
    errors = []
    for width in [2, 4, 8, 16, 32]:
        with torch.no_grad():
            errors.append(nn.functional.mse_loss(hinge_fit(x, y, width, -2.0, 2.0)(x), y).item())
    assert all(a > b for a, b in itertools.pairwise(errors))


def test_hinge_fit_rejects_bad_input():
    x = torch.linspace(0, 1, 10).unsqueeze(1)
    with pytest.raises(ValueError, match=r"shape \(N, 1\)"):
        hinge_fit(x.squeeze(1), x.squeeze(1), 4, 0.0, 1.0)
    with pytest.raises(ValueError, match=r"low=1\.0 must be smaller than high=0\.0"):
        hinge_fit(x, x, 4, 1.0, 0.0)
    with pytest.raises(ValueError, match="width=0"):
        hinge_fit(x, x, 0, 0.0, 1.0)


def test_two_moons_and_xor_shapes():
    x, y = two_moons(n_samples=11)
    assert x.shape == (11, 2) and y.tolist() == [0] * 5 + [1] * 6
    x, y = xor_data(n_per_corner=3)
    assert x.shape == (12, 2) and y.tolist() == [0] * 3 + [1] * 6 + [0] * 3


# ---------------------------------------------------------------------------------------------------------
# The module's own claims


def test_stacked_linear_layers_collapse_to_one():
    layers = [nn.Linear(3, 5), nn.Linear(5, 4), nn.Linear(4, 2, bias=False)]
    x = torch.randn(7, 3)
    torch.testing.assert_close(tc.collapse_linear(layers)(x), nn.Sequential(*layers)(x), atol=1e-5, rtol=0)


def test_mlp_shapes_and_activation_placement():
    mlp = tc.MLP([2, 8, 8, 3])
    assert [type(m).__name__ for m in mlp.layers] == ["Linear", "ReLU", "Linear", "ReLU", "Linear"]
    assert mlp(torch.randn(5, 2)).shape == (5, 3)


# ---------------------------------------------------------------------------------------------------------
# Bad input gets a ValueError or TypeError whose message names the argument and what was expected


BAD_INPUT = [
    # (id, callable, exception, pattern the message must contain)
    ("MLP on integer inputs", lambda: tc.MLP([3, 4, 2])(torch.zeros(2, 3, dtype=torch.long)), TypeError,
     r"x must be a floating-point tensor, got dtype torch.int64"),
    ("MLP on a scalar", lambda: tc.MLP([3, 4, 2])(torch.tensor(1.0)), ValueError, r"x has 0 features"),
    ("collapse of a non-Linear", lambda: tc.collapse_linear([nn.Linear(2, 3), nn.ReLU()]), TypeError,
     r"layers\[1\] must be an nn.Linear, got ReLU"),
    ("collapse of mismatched widths", lambda: tc.collapse_linear([nn.Linear(2, 3), nn.Linear(4, 1)]), ValueError,
     r"layers\[0\] gives 3 features but layers\[1\] expects 4"),
]  # fmt: skip


@pytest.mark.parametrize(("call", "exc", "pattern"), [c[1:] for c in BAD_INPUT], ids=[c[0] for c in BAD_INPUT])
def test_bad_input_raises_a_clear_error(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()
