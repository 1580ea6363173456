"""Copying weights out of PyTorch's own Transformer layers, for the `from_torch` constructors.

`EncoderLayer.from_torch` (chapter 9) and `DecoderLayer.from_torch` (chapter 10) build a layer of this
package holding exactly the numbers of a `torch.nn.TransformerEncoderLayer` / `TransformerDecoderLayer`,
and `Encoder.from_torch` / `Decoder.from_torch` a stack of them, so that the two can be compared output
for output. What they need lives here. Every constructor option of PyTorch's layers is carried over
(bias, norm_first, activation as a name or a callable, layer_norm_eps, batch_first, dropout) together
with the dtype, the device and the train/eval mode.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

import torch
import torch.nn.functional as F
from torch import nn

from .ffn import Activation
from .norm import LayerNorm
from .residual import SublayerConnection

if TYPE_CHECKING:  # the layers import this module: their names are for the type checker only
    from .decoder import Decoder, DecoderLayer
    from .encoder import Encoder, EncoderLayer

TorchLayer = nn.TransformerEncoderLayer | nn.TransformerDecoderLayer


def check_torch_module(m: object, kind: type) -> None:
    """A TypeError naming `m` unless it is a `kind`."""
    if not isinstance(m, kind):
        raise TypeError(f"m must be a torch.nn.{kind.__name__}, got {type(m).__name__}")


def torch_activation(m: TorchLayer) -> str | Activation:
    """The activation of a torch.nn.Transformer{Encoder,Decoder}Layer: "relu" or "gelu" by name, else a copy
    of the callable itself (nn.GELU(approximate="tanh"), F.silu, any function of a tensor)."""
    act = m.activation
    if act is F.relu or type(act) is nn.ReLU:
        return "relu"
    if act is F.gelu or (type(act) is nn.GELU and act.approximate == "none"):
        return "gelu"
    return copy.deepcopy(act) if isinstance(act, nn.Module) else act


def torch_sizes(m: TorchLayer) -> tuple[int, int, int]:
    """(d_model, n_heads, d_ff) of a torch transformer layer."""
    return m.self_attn.embed_dim, m.self_attn.num_heads, m.linear1.out_features


def copy_layer(
    new: EncoderLayer | DecoderLayer, m: TorchLayer, norms: tuple[nn.LayerNorm, ...], dropouts: tuple[nn.Dropout, ...]
) -> None:
    """Copy into `new` what the torch layer `m` holds besides its attentions: the feed-forward weights,
    the LayerNorms `norms` and the dropout probabilities (`dropouts` after each sub-layer); then give
    `new` the dtype, the device and the train/eval mode of `m`."""
    new.to(device=m.linear1.weight.device, dtype=m.linear1.weight.dtype)
    ffn = new.ffn
    with torch.no_grad():
        for ours, theirs in ((ffn.w_1, m.linear1), (ffn.w_2, m.linear2)):
            ours.weight.copy_(theirs.weight)
            if theirs.bias is not None:
                ours.bias.copy_(theirs.bias)
    ffn.dropout.p = m.dropout.p
    for sublayer, norm, dropout in zip(cast("list[SublayerConnection]", new.sublayers), norms, dropouts, strict=True):
        sublayer.norm = LayerNorm.from_torch(norm)
        sublayer.dropout.p = dropout.p
    new.train(m.training)


def copy_stack(
    new: Encoder | Decoder, m: nn.TransformerEncoder | nn.TransformerDecoder, layer_from_torch: Callable
) -> None:
    """Give the stack `new` the layers of `m` (each through `layer_from_torch`), its final norm (none when
    m.norm is None) and its train/eval mode."""
    new.layers = nn.ModuleList(layer_from_torch(layer) for layer in m.layers)
    new.norm = nn.Identity() if m.norm is None else LayerNorm.from_torch(cast(nn.LayerNorm, m.norm))
    new.train(m.training)


def check_torch_stack(m: nn.TransformerEncoder | nn.TransformerDecoder, kind: type) -> None:
    check_torch_module(m, kind)
    if len(m.layers) == 0:
        raise ValueError("m has no layers")
    if m.norm is not None and not isinstance(m.norm, nn.LayerNorm):
        raise ValueError(f"m.norm is a {type(m.norm).__name__}; only torch.nn.LayerNorm (or None) is supported")
