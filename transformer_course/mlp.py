"""Chapter 1: the multilayer perceptron (多层感知机), the building block under every later chapter.

An MLP is a stack of fully connected (Linear) layers with a non-linear activation between them.
Without the activation the stack collapses into one Linear map (`collapse_linear`), which is why
the activation is the part that lets depth buy expressive power.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence

import torch
from torch import nn

from ._validate import check_positive_int, check_tensor

ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid, "identity": nn.Identity}


def make_activation(activation: str) -> nn.Module:
    """The activation module named `activation` (relu, gelu, tanh, sigmoid or identity)."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation={activation!r} is not one of {sorted(ACTIVATIONS)}")
    return ACTIVATIONS[activation]()


class MLP(nn.Module):
    """Fully connected layers with an activation between each pair: sizes[0] -> ... -> sizes[-1].

    Input (..., sizes[0]) -> output (..., sizes[-1]); no activation after the last layer,
    so the output can be any real number (logits, a regression target).
    """

    def __init__(self, sizes: Sequence[int], activation: str = "relu", bias: bool = True):
        super().__init__()
        if len(sizes) < 2:
            raise ValueError(f"sizes={list(sizes)} needs at least an input and an output size")
        for i, size in enumerate(sizes):
            check_positive_int(size, f"sizes[{i}]")
        self.sizes = list(sizes)
        layers: list[nn.Module] = []
        for i, (n_in, n_out) in enumerate(itertools.pairwise(sizes)):
            layers.append(nn.Linear(n_in, n_out, bias=bias))
            if i < len(sizes) - 2:
                layers.append(make_activation(activation))
        self.layers = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_input(x, self.sizes[0])
        return self.layers(x)

    @property
    def linears(self) -> list[nn.Linear]:
        """The Linear layers, first to last (the activations between them left out)."""
        return [layer for layer in self.layers if isinstance(layer, nn.Linear)]


def _check_input(x: torch.Tensor, n_in: int) -> None:
    """A floating-point tensor (..., n_in): integer inputs would fail inside nn.Linear with a dtype error."""
    check_tensor(x, "x", floating=True)
    if x.dim() == 0 or x.shape[-1] != n_in:
        raise ValueError(f"x has {x.shape[-1] if x.dim() else 0} features in its last dimension, expected {n_in}")


def collapse_linear(layers: Sequence[nn.Linear]) -> nn.Linear:
    """The single Linear layer equal to applying `layers` one after another.

    y = W2 (W1 x + b1) + b2 = (W2 W1) x + (W2 b1 + b2): composing affine maps gives an affine map,
    so a stack without activations is no more expressive than one layer.
    """
    if not layers:
        raise ValueError("layers must contain at least one nn.Linear")
    for i, layer in enumerate(layers):
        if not isinstance(layer, nn.Linear):
            raise TypeError(f"layers[{i}] must be an nn.Linear, got {type(layer).__name__}")
    for i, (a, b) in enumerate(itertools.pairwise(layers)):
        if a.out_features != b.in_features:
            raise ValueError(f"layers[{i}] gives {a.out_features} features but layers[{i + 1}] expects {b.in_features}")
    weight = layers[0].weight.detach().clone()
    bias = _bias_of(layers[0])
    for layer in layers[1:]:
        bias = layer.weight.detach() @ bias + _bias_of(layer)
        weight = layer.weight.detach() @ weight
    merged = nn.Linear(weight.shape[1], weight.shape[0], dtype=weight.dtype, device=weight.device)
    with torch.no_grad():
        merged.weight.copy_(weight)
        merged.bias.copy_(bias)
    return merged


def _bias_of(layer: nn.Linear) -> torch.Tensor:
    if layer.bias is None:
        return torch.zeros(layer.out_features, dtype=layer.weight.dtype, device=layer.weight.device)
    return layer.bias.detach()


def xor_data(n_per_corner: int = 50, noise: float = 0.1, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Points around the four corners of the unit square, labelled by XOR of their coordinates.

    Returns x (4 * n_per_corner, 2) float32 and y (4 * n_per_corner,) long. No straight line separates
    the two classes, which is the classic proof that a single Linear layer is not enough.
    """
    check_positive_int(n_per_corner, "n_per_corner")
    g = torch.Generator().manual_seed(seed)
    corners = torch.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    labels = torch.tensor([0, 1, 1, 0])
    x = corners.repeat_interleave(n_per_corner, 0) + noise * torch.randn(4 * n_per_corner, 2, generator=g)
    return x, labels.repeat_interleave(n_per_corner)


def two_moons(n_samples: int = 200, noise: float = 0.1, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Two interleaving half circles (the 'two moons' data set), made with torch only.

    Returns x (n_samples, 2) float32 and y (n_samples,) long; the first half is class 0.
    """
    check_positive_int(n_samples, "n_samples")
    g = torch.Generator().manual_seed(seed)
    n_top = n_samples // 2
    n_bottom = n_samples - n_top
    t_top = torch.linspace(0, math.pi, n_top)
    t_bottom = torch.linspace(0, math.pi, n_bottom)
    top = torch.stack([torch.cos(t_top), torch.sin(t_top)], 1)
    bottom = torch.stack([1 - torch.cos(t_bottom), 0.5 - torch.sin(t_bottom)], 1)
    x = torch.cat([top, bottom]) + noise * torch.randn(n_samples, 2, generator=g)
    y = torch.cat([torch.zeros(n_top, dtype=torch.long), torch.ones(n_bottom, dtype=torch.long)])
    return x, y


def train_full_batch(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, loss: str = "cross_entropy", steps: int = 500, lr: float = 0.03
) -> list[float]:
    """Train `model` with Adam on the whole data set at every step; returns the loss of each step.

    loss="cross_entropy" for classification (y holds class ids), "mse" for regression (y like model(x)).
    Small 2-D problems need no mini-batches: full-batch steps are fast and reproducible.
    """
    losses: dict[str, Callable[..., torch.Tensor]] = {
        "cross_entropy": nn.functional.cross_entropy,
        "mse": nn.functional.mse_loss,
    }
    if loss not in losses:
        raise ValueError(f"loss={loss!r} is not one of {sorted(losses)}")
    check_positive_int(steps, "steps")
    if len(x) != len(y):
        raise ValueError(f"x has {len(x)} rows but y has {len(y)}")
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    history = []
    model.train()
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=True)
        value = losses[loss](model(x), y)
        value.backward()
        optimizer.step()
        history.append(value.item())
    model.eval()
    return history


@torch.no_grad()
def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    """The fraction of rows of x whose largest logit is at the class in y."""
    return (model(x).argmax(-1) == y).float().mean().item()


@torch.no_grad()
def hinge_fit(x: torch.Tensor, y: torch.Tensor, width: int, low: float, high: float) -> MLP:
    """A one-hidden-layer ReLU MLP (1 -> width -> 1) fitted to the curve y(x) without gradient descent.

    Hidden unit i is relu(x - k_i): a hinge at k_i, with the `width` hinges evenly spaced on [low, high).
    The output layer, a weighted sum of the hinges plus a constant, is solved by least squares.
    This is the constructive idea behind universal approximation in one dimension: a ReLU network
    of width n is a piecewise-linear function with n kinks, and more kinks follow the curve closer.
    x and y are (N, 1); the returned MLP has x's dtype.
    """
    check_positive_int(width, "width")
    if x.dim() != 2 or x.shape[1] != 1 or y.shape != x.shape:
        raise ValueError(f"x and y must both have shape (N, 1), got {tuple(x.shape)} and {tuple(y.shape)}")
    if not low < high:
        raise ValueError(f"low={low} must be smaller than high={high}")
    knots = torch.linspace(low, high, width + 1, dtype=x.dtype)[:-1]
    model = MLP([1, width, 1]).to(x.dtype)
    hidden, output = model.linears
    hidden.weight.fill_(1.0)
    hidden.bias.copy_(-knots)
    features = torch.cat([torch.relu(x - knots), torch.ones_like(x)], dim=1)
    solution = torch.linalg.lstsq(features, y).solution  # (width + 1, 1): hinge weights, then the constant
    output.weight.copy_(solution[:-1].T)
    output.bias.copy_(solution[-1])
    return model
