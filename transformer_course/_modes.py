"""Evaluation mode for a while, then back: every submodule gets its own train/eval flag back."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import nn


@contextlib.contextmanager
def evaluating(model: nn.Module) -> Iterator[nn.Module]:
    """`model.eval()` and no gradients inside the block; afterwards each submodule's own flag is restored.

    `model.train(was_training)` would give every submodule the top module's flag, switching dropout back
    on in a submodule that was deliberately in eval mode (a frozen encoder, say).
    """
    modes = [(module, module.training) for module in model.modules()]
    model.eval()
    try:
        with torch.no_grad():
            yield model
    finally:
        for module, training in modes:  # parents before children: each child's own flag wins
            module.train(training)
