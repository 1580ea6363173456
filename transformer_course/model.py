"""Chapter 11: the full Transformer (Vaswani et al., 2017): embeddings, encoder, decoder, projection.

    src (B, S) ─ embed·√d + PE ─ Encoder ─────────────── memory (B, S, D)
                                                              │
    tgt_in (B, T) ─ embed·√d + PE ─ Decoder(·, memory) ─ Linear ─ logits (B, T, V_tgt)

`tgt_in` is the target shifted right (`<sos> y_1 .. y_{n-1}`); the logits at position t predict
y_t. With `share_embeddings=True` the source embedding, the target embedding and the output
projection are one matrix (paper §3.4), which needs one vocabulary for both languages.
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import asdict, dataclass
from typing import Any, cast

import torch
from torch import nn

from ._modes import evaluating
from ._validate import (
    at_the_door,
    check_bool,
    check_device,
    check_positive_int,
    check_tensor,
    check_token_ids,
    checked,
)
from .decoder import Decoder, DecoderLayer
from .embedding import LearnedPositionalEncoding, PositionalEncoding, TokenEmbedding
from .encoder import BlockConfig, Encoder
from .masks import causal_mask, combine_masks, padding_mask
from .multihead import check_features

POSITIONAL = {"sinusoidal": PositionalEncoding, "learned": LearnedPositionalEncoding}


@dataclass(frozen=True)
class TransformerConfig:
    """Everything that builds a `Transformer`: `Transformer.from_config(config)` rebuilds it, and a checkpoint
    stores `dataclasses.asdict(config)`. Every field is checked once, when the config is made; the layers'
    sizes and options are its `block`, which the encoder and the decoder are built from."""

    src_vocab_size: int
    tgt_vocab_size: int
    d_model: int = 512
    n_heads: int = 8
    n_layers: int = 6
    d_ff: int = 2048
    dropout: float = 0.1
    max_len: int = 5000
    norm_first: bool = False
    share_embeddings: bool = False
    pad_id: int = 0
    activation: str = "relu"
    positional: str = "sinusoidal"

    def __post_init__(self) -> None:
        if not at_the_door():  # inside a checked call (the Transformer's constructor), checked at its door
            return
        self.block  # noqa: B018 -- building the BlockConfig checks the layers' fields
        for name in ("src_vocab_size", "tgt_vocab_size", "n_layers", "max_len"):
            check_positive_int(getattr(self, name), name)
        check_bool(self.share_embeddings, "share_embeddings")
        if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError(
                f"share_embeddings=True needs one vocabulary, got src_vocab_size={self.src_vocab_size} "
                f"and tgt_vocab_size={self.tgt_vocab_size}"
            )
        smallest_vocab = min(self.src_vocab_size, self.tgt_vocab_size)
        if isinstance(self.pad_id, bool) or not isinstance(self.pad_id, int) or not 0 <= self.pad_id < smallest_vocab:
            raise ValueError(f"pad_id={self.pad_id!r} must be an int id inside both vocabularies")
        if self.positional not in POSITIONAL:
            raise ValueError(f"positional={self.positional!r} is not one of {sorted(POSITIONAL)}")

    @functools.cached_property
    def block(self) -> BlockConfig:
        """The sizes and options of every encoder and decoder layer."""
        return BlockConfig(self.d_model, self.n_heads, self.d_ff, self.dropout, self.norm_first, self.activation)


def _check_encode(model: Transformer, src: torch.Tensor) -> None:
    check_tokens(src, "src", model.config.src_vocab_size, model)


def _check_decode(model: Transformer, tgt_in: torch.Tensor, memory: torch.Tensor, src: torch.Tensor) -> None:
    check_decode_inputs(model, tgt_in, memory, src)


def _check_forward(model: Transformer, src: torch.Tensor, tgt_in: torch.Tensor) -> None:
    check_tokens(src, "src", model.config.src_vocab_size, model)
    check_tokens(tgt_in, "tgt_in", model.config.tgt_vocab_size, model)
    if src.shape[0] != tgt_in.shape[0]:
        raise ValueError(f"src and tgt_in must share the batch size, got {src.shape[0]} and {tgt_in.shape[0]}")


def _check_config(model: Transformer, *args: Any, **kwargs: Any) -> None:
    TransformerConfig(*args, **kwargs)


class Transformer(nn.Module):
    """The encoder-decoder Transformer. forward(src (B, S), tgt_in (B, T)) -> logits (B, T, tgt_vocab_size)."""

    @checked(_check_config)  # every argument checked once, here; the modules built inside skip their checks
    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        d_model: int = 512,
        n_heads: int = 8,
        n_layers: int = 6,
        d_ff: int = 2048,
        dropout: float = 0.1,
        max_len: int = 5000,
        norm_first: bool = False,
        share_embeddings: bool = False,
        pad_id: int = 0,
        activation: str = "relu",
        positional: str = "sinusoidal",
    ):
        super().__init__()
        self.config = config = TransformerConfig(
            src_vocab_size, tgt_vocab_size, d_model, n_heads, n_layers, d_ff, dropout, max_len,
            norm_first, share_embeddings, pad_id, activation, positional,
        )  # fmt: skip
        self.pad_id = pad_id
        self.src_embed = TokenEmbedding(src_vocab_size, d_model)
        self.tgt_embed = TokenEmbedding(tgt_vocab_size, d_model)
        self.positions = POSITIONAL[positional](d_model, max_len, dropout)
        self.encoder = Encoder.from_config(config.block, n_layers)
        self.decoder = Decoder.from_config(config.block, n_layers)
        self.lm_head = nn.Linear(d_model, tgt_vocab_size, bias=False)  # the output layer: D -> target vocabulary
        self._init_weights()
        if share_embeddings:
            self.tgt_embed.embedding.weight = self.src_embed.weight
            self.lm_head.weight = self.src_embed.weight
        self._register_load_state_dict_pre_hook(_rename_generator)

    @classmethod
    def from_config(cls, config: TransformerConfig) -> Transformer:
        if not isinstance(config, TransformerConfig):
            raise TypeError(f"config must be a TransformerConfig, got {type(config).__name__}")
        return cls(**asdict(config))

    def _init_weights(self) -> None:
        # Xavier-uniform on every matrix, as in the reference implementations; biases stay as built.
        for name, p in self.named_parameters():
            if p.dim() > 1 and not name.startswith("positions"):
                nn.init.xavier_uniform_(p)

    @property
    def generator(self) -> nn.Linear:
        """Deprecated name of `lm_head` (the output layer; "generator" also names torch.Generator arguments)."""
        warnings.warn("Transformer.generator is deprecated: use Transformer.lm_head", DeprecationWarning, stacklevel=2)
        return self.lm_head

    def __setattr__(self, name: str, value: Any) -> None:
        # `model.generator = nn.Linear(...)` in old code would register a second, unused output layer.
        if name == "generator":
            warnings.warn(
                "Transformer.generator is deprecated: use Transformer.lm_head", DeprecationWarning, stacklevel=2
            )
            name = "lm_head"
        super().__setattr__(name, value)

    @checked(_check_encode)
    def encode(self, src: torch.Tensor) -> torch.Tensor:
        """src (B, S) token ids -> memory (B, S, d_model)."""
        x = self.positions(self.src_embed(src))
        return self.encoder(x, padding_mask(src, self.pad_id))

    @checked(_check_decode)
    def decode(self, tgt_in: torch.Tensor, memory: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
        """Logits (B, T, V) for the decoder input tgt_in (B, T), given the encoder's memory (B, S, D) of src (B, S)."""
        x = self.positions(self.tgt_embed(tgt_in))
        # Position t may see the target positions 0..t that are not padding.
        tgt_mask = combine_masks(padding_mask(tgt_in, self.pad_id), causal_mask(tgt_in.shape[1], tgt_in.device))
        h = self.decoder(x, memory, tgt_mask, padding_mask(src, self.pad_id))
        return self.lm_head(h)

    @checked(_check_forward)
    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        return self.decode(tgt_in, self.encode(src), src)


def _rename_generator(state_dict: dict[str, torch.Tensor], prefix: str, *args: object) -> None:
    """Load a state_dict saved before the output layer was renamed: `generator.weight` is `lm_head.weight`."""
    old, new = prefix + "generator.weight", prefix + "lm_head.weight"
    if old in state_dict and new in state_dict:
        raise ValueError(f"state_dict holds both {old} and {new}: keep one (generator is the old name of lm_head)")
    if old in state_dict:
        state_dict[new] = state_dict.pop(old)


def check_tokens(
    tokens: torch.Tensor, name: str, vocab_size: int | None = None, model: nn.Module | None = None
) -> None:
    """Token ids (B, T) with T >= 1, each in [0, vocab_size) when vocab_size is given, on `model`'s device when
    a model is given."""
    check_tensor(tokens, name, ndim=2, floating=False)
    if tokens.shape[1] == 0:
        raise ValueError(f"{name} is empty: expected shape (B, T) with T >= 1")
    if model is not None:
        check_device(tokens, name, model)
    if vocab_size is not None:
        check_token_ids(tokens, name, vocab_size)


def check_decode_inputs(model: Transformer, tgt_in: torch.Tensor, memory: torch.Tensor, src: torch.Tensor) -> None:
    """What `model` decodes from (`decode`, and chapter 13's `decode_cached`): token ids tgt_in (B, T) and src (B, S)
    in its vocabularies and on its device, and memory (B, S, d_model) that its cross-attention can read."""
    config = model.config
    check_tokens(tgt_in, "tgt_in", config.tgt_vocab_size, model)
    check_tokens(src, "src", config.src_vocab_size, model)
    check_tensor(memory, "memory", ndim=3, floating=True)
    if not (tgt_in.shape[0] == memory.shape[0] == src.shape[0]):
        raise ValueError(
            f"tgt_in, memory and src must share the batch size, got "
            f"{tgt_in.shape[0]}, {memory.shape[0]} and {src.shape[0]}"
        )
    if memory.shape[1] != src.shape[1]:
        raise ValueError(f"memory has {memory.shape[1]} positions but src has {src.shape[1]}")
    # memory's width, dtype and device, against the cross-attention that reads it
    check_features(memory, "memory", cast(DecoderLayer, model.decoder.layers[0]).cross_attn)


def count_parameters(model: nn.Module) -> int:
    """Trainable parameters, each shared (tied) tensor counted once."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


@dataclass(frozen=True)
class SummaryRow:
    """One module of a `summary`: its name, depth, class, output shape(s) and parameter count."""

    name: str
    depth: int
    kind: str
    shapes: tuple[tuple[int, ...], ...]  # one per call: `positions` runs on the source and on the target
    params: int  # every parameter under the module, each tensor once
    tied_to: str | None = None  # an earlier module that holds the same parameters (weight tying)


@dataclass(frozen=True)
class Summary:
    """What `summary` returns; str() is the table, `.rows` the data, `.total` the parameters counted once."""

    rows: tuple[SummaryRow, ...]
    total: int

    def __str__(self) -> str:
        table = [("module", "type", "output shape", "params", "")]
        for row in self.rows:
            shapes = " ".join(str(s).replace(" ", "") for s in dict.fromkeys(row.shapes))
            tied = f"tied to {row.tied_to}" if row.tied_to else ""
            table.append(("  " * (row.depth - 1) + row.name, row.kind, shapes, f"{row.params:,}", tied))
        widths = [max(len(cells[i]) for cells in table) for i in range(4)]
        lines = [
            f"{name:<{widths[0]}}  {kind:<{widths[1]}}  {shapes:<{widths[2]}}  {params:>{widths[3]}}  {tied}".rstrip()
            for name, kind, shapes, params, tied in table
        ]
        lines.append(f"total: {self.total:,} trainable parameters (tied tensors counted once)")
        return "\n".join(lines)

    __repr__ = __str__


@torch.no_grad()
def summary(model: Transformer, src: torch.Tensor, tgt_in: torch.Tensor, max_depth: int = 2) -> Summary:
    """Layer-by-layer table of `model(src, tgt_in)`: every module that runs, with its output shape and size.

    Depth counts the modules that run (containers such as nn.ModuleList are skipped), so depth 1 is
    embeddings / encoder / decoder / lm_head and depth 2 adds each layer. Runs one forward pass in eval mode.
    """
    check_positive_int(max_depth, "max_depth")
    shapes: dict[str, list[tuple[int, ...]]] = {}
    handles = []
    for name, module in model.named_modules():
        if name:

            def record(_module: nn.Module, _args: tuple[object, ...], output: object, name: str = name) -> None:
                outputs = output if isinstance(output, (tuple, list)) else (output,)
                shapes.setdefault(name, []).extend(tuple(o.shape) for o in outputs if isinstance(o, torch.Tensor))

            handles.append(module.register_forward_hook(record))
    try:
        with evaluating(model):
            model(src, tgt_in)
    finally:
        for handle in handles:
            handle.remove()
    rows: list[SummaryRow] = []
    owner: dict[int, str] = {}  # parameter id -> the first row that holds it
    for name, module in model.named_modules():
        parts = name.split(".")
        depth = sum(".".join(parts[: i + 1]) in shapes for i in range(len(parts)))
        if name not in shapes or depth > max_depth:
            continue
        params = {id(p): p for p in module.parameters()}
        earlier = {owner[i] for i in params if i in owner and not name.startswith(owner[i] + ".")}
        tied = earlier.pop() if len(earlier) == 1 else None
        for i in params:
            owner.setdefault(i, name)
        n = sum(p.numel() for p in params.values() if p.requires_grad)
        rows.append(SummaryRow(name, depth, type(module).__name__, tuple(shapes[name]), n, tied))
    return Summary(tuple(rows), count_parameters(model))
