"""Copying weights out of PyTorch's own Transformer layers, for the `from_torch` constructors.

`EncoderLayer.from_torch` (chapter 9) and `DecoderLayer.from_torch` (chapter 10) build a layer of this
package holding exactly the numbers of a `torch.nn.TransformerEncoderLayer` / `TransformerDecoderLayer`,
so that the two can be compared output for output. What both need lives here.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .ffn import PositionwiseFeedForward
from .norm import LayerNorm

TorchLayer = nn.TransformerEncoderLayer | nn.TransformerDecoderLayer


def activation_name(m: TorchLayer) -> str:
    """'relu' or 'gelu' for a torch.nn.Transformer{Encoder,Decoder}Layer, else a ValueError."""
    act = m.activation
    if act is F.relu or isinstance(act, nn.ReLU):
        return "relu"
    if act is F.gelu or (isinstance(act, nn.GELU) and act.approximate == "none"):
        return "gelu"
    raise ValueError(f"{type(m).__name__} uses activation {act!r}; only relu and gelu are supported")


def copy_ffn(ffn: PositionwiseFeedForward, m: TorchLayer) -> None:
    """Copy linear1/linear2 of a torch transformer layer into `ffn`."""
    with torch.no_grad():
        for ours, theirs in ((ffn.w_1, m.linear1), (ffn.w_2, m.linear2)):
            ours.weight.copy_(theirs.weight)
            if theirs.bias is not None:
                ours.bias.copy_(theirs.bias)


def copy_norms(sublayers: nn.ModuleList, norms: tuple[nn.LayerNorm, ...]) -> None:
    """Give each residual connection of `sublayers` the LayerNorm of the torch layer at the same place."""
    for sublayer, norm in zip(sublayers, norms):
        sublayer.norm = LayerNorm.from_torch(norm)
