"""Chapter 8: token embeddings (词嵌入) and positional encodings (位置编码).

Attention treats its input as a set: permuting the tokens permutes the outputs the same way, so
"我 喜欢 你" and "你 喜欢 我" would look alike. Adding a position-dependent vector to each token's
embedding breaks that symmetry. The paper's sinusoidal table is

    PE(pos, 2i) = sin(pos / 10000^(2i / d_model)),   PE(pos, 2i + 1) = cos(pos / 10000^(2i / d_model))

Each (sin, cos) pair rotates at its own frequency, so PE(pos + k) is a fixed linear map of PE(pos).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ._validate import check_positive_int, check_probability, check_tensor, check_token_id, check_token_ids, checked


def _check_sizes(max_len: int, d_model: int) -> None:
    check_positive_int(max_len, "max_len")
    check_positive_int(d_model, "d_model")


@checked(_check_sizes)
def sinusoidal_positional_encoding(max_len: int, d_model: int) -> torch.Tensor:
    """The (max_len, d_model) sinusoidal table; even columns are sines, odd columns cosines."""
    position = torch.arange(max_len, dtype=torch.float64)[:, None]
    # 10000^(-2i/d) for i = 0 .. ceil(d/2) - 1, computed in float64 so long tables stay accurate.
    inv_freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model))
    angle = position * inv_freq
    table = torch.zeros(max_len, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return table.float()


def _check_tokens(embedding: TokenEmbedding, tokens: torch.Tensor) -> None:
    check_tensor(tokens, "tokens", ndim=2, floating=False)
    check_token_ids(tokens, "tokens", embedding.vocab_size)


def _check_features(encoding: PositionalEncoding, x: torch.Tensor, offset: int = 0) -> None:
    check_tensor(x, "x", ndim=3, floating=True)
    if x.shape[-1] != encoding.d_model:
        raise ValueError(f"x has {x.shape[-1]} features, expected d_model={encoding.d_model}")


def _check_vocab(embedding: TokenEmbedding, vocab_size: int, d_model: int, pad_id: int | None = None) -> None:
    check_positive_int(vocab_size, "vocab_size")
    check_positive_int(d_model, "d_model")
    _check_pad_id(pad_id, vocab_size)


def _check_table(encoding: PositionalEncoding, d_model: int, max_len: int = 5000, dropout: float = 0.0) -> None:
    check_positive_int(d_model, "d_model")
    check_positive_int(max_len, "max_len")
    check_probability(dropout, "dropout")


class TokenEmbedding(nn.Module):
    """Token ids (B, T) -> vectors (B, T, d_model), multiplied by √d_model as in the paper §3.4.

    The paper gives neither a reason for the factor nor an initialisation. A TokenEmbedding alone keeps
    nn.Embedding's N(0, 1); with tc.Transformer's Xavier initialisation (of a matrix that may be tied), the factor
    brings the token vectors to the order of size of the positional encodings only while the vocabulary is close
    to d_model (chapters 8 and 11 measure it).
    """

    @checked(_check_vocab)
    def __init__(self, vocab_size: int, d_model: int, pad_id: int | None = None):
        super().__init__()
        self.vocab_size, self.d_model = vocab_size, d_model
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        self.scale = math.sqrt(d_model)

    @property
    def weight(self) -> torch.Tensor:
        return self.embedding.weight

    @checked(_check_tokens)
    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.embedding(tokens) * self.scale


class PositionalEncoding(nn.Module):
    """Adds the sinusoidal table to (B, T, d_model), then dropout; T may not exceed max_len."""

    pe: torch.Tensor  # (max_len, d_model)

    @checked(_check_table)
    def __init__(self, d_model: int, max_len: int = 5000, dropout: float = 0.0):
        super().__init__()
        self.d_model, self.max_len = d_model, max_len
        self.dropout = nn.Dropout(dropout)
        # A buffer, not a parameter: it moves with .to(device) and is never trained; persistent=False keeps
        # it out of the state_dict, since the formula rebuilds it.
        self.register_buffer("pe", sinusoidal_positional_encoding(max_len, d_model), persistent=False)

    def table(self, length: int, offset: int = 0) -> torch.Tensor:
        """Rows offset .. offset + length - 1 of the table, (length, d_model)."""
        _check_offset(offset)
        if offset + length > self.max_len:
            raise ValueError(
                f"sequence length {offset + length} exceeds max_len={self.max_len}; "
                "build the model with a larger max_len"
            )
        return self.pe[offset : offset + length]

    @checked(_check_features)
    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """x (B, T, d_model); `offset` is the position of x's first row (0: x starts the sequence)."""
        return self.dropout(x + self.table(x.shape[1], offset).to(x.dtype))


class LearnedPositionalEncoding(PositionalEncoding):
    """Positions as a trained (max_len, d_model) table instead of the fixed sinusoids (BERT, GPT-2).

    It cannot extrapolate: a position never seen in training has an untrained vector.
    """

    def __init__(self, d_model: int, max_len: int = 512, dropout: float = 0.0):
        super().__init__(d_model, max_len, dropout)
        del self.pe
        self.pe = nn.Parameter(torch.randn(max_len, d_model) * 0.02)


def _check_pad_id(pad_id: object, vocab_size: int) -> int | None:
    """None, or a token id in [0, vocab_size)."""
    return None if pad_id is None else check_token_id(pad_id, "pad_id", vocab_size)


def _check_offset(offset: object) -> None:
    if isinstance(offset, bool) or not isinstance(offset, int):
        raise TypeError(f"offset must be an int, got {type(offset).__name__}")
    if offset < 0:
        raise ValueError(f"offset={offset} must be >= 0 (the position of the first row)")
