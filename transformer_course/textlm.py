"""Chapter 18: a GPT on real text. Random contiguous blocks, the held-out loss, bits per byte, and compressors.

    token ids (N,) ─ get_batch ─ x, y (B, T): y is x shifted left by one ─ GPT ─ loss in nats per token
    nats per token × tokens / bytes / ln 2 ─ bits per byte, comparable with gzip, bz2, lzma

A text is one long stream of token ids, not a batch of separate sentences to pad: training reads random
windows of it, as nanoGPT's `get_batch` does. A loss per token depends on the tokenizer (a larger vocabulary
makes fewer, harder tokens), so models with different tokenizers, and compressors, are compared in bits per
byte of the original UTF-8 text.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import math

import torch
import torch.nn.functional as F

from ._modes import evaluating
from ._validate import check_positive_int, check_tensor
from .gpt import GPT

COMPRESSORS = {
    "gzip": lambda data: gzip.compress(data, compresslevel=9, mtime=0),  # mtime=0: the same bytes on every run
    "bz2": lambda data: bz2.compress(data, compresslevel=9),
    "lzma": lambda data: lzma.compress(data, preset=9 | lzma.PRESET_EXTREME),
}


def get_batch(
    data: torch.Tensor, block_size: int, batch_size: int, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """`batch_size` random contiguous blocks of the token stream data (N,): inputs x and targets y, both (B, T).

    y[b, t] = x[b, t + 1] for t < T - 1 and the token after the block for t = T - 1: each block reads
    T + 1 consecutive tokens, so a start s can be at most N - T - 1 (randint's bound, N - T, is exclusive).
    """
    check_tensor(data, "data", ndim=1, floating=False)
    check_positive_int(block_size, "block_size")
    check_positive_int(batch_size, "batch_size")
    if len(data) < block_size + 1:
        raise ValueError(f"data has {len(data)} tokens: a block needs block_size + 1 = {block_size + 1}")
    starts = torch.randint(len(data) - block_size, (batch_size,), generator=generator)  # (B,)
    x = torch.stack([data[s : s + block_size] for s in starts.tolist()])  # (B, T)
    y = torch.stack([data[s + 1 : s + 1 + block_size] for s in starts.tolist()])  # (B, T): shifted by one
    return x, y


def heldout_blocks(data: torch.Tensor, block_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The full non-overlapping blocks of the stream data (N,), in order: inputs x and targets y, both (n, T).

    Block i reads data[i·T : i·T + T + 1]: x = its first T tokens, y = its last T. Neighbouring blocks share
    one token (the last target of one is the first input of the next), so tokens 1 .. n·T are each a
    target exactly once; n = (N - 1) // T, and the N - 1 - n·T tokens after them are left to the caller.
    """
    check_tensor(data, "data", ndim=1, floating=False)
    check_positive_int(block_size, "block_size")
    n = (len(data) - 1) // block_size  # the last block needs a target after its last input
    x = data[: n * block_size].view(n, block_size)  # (n·T,) -> (n, T)
    y = data[1 : n * block_size + 1].view(n, block_size)  # (n, T): the same blocks shifted by one
    return x, y


@torch.no_grad()
def heldout_loss(model: GPT, data: torch.Tensor, block_size: int, batch_size: int = 64) -> tuple[float, int]:
    """The mean loss in nats per token over the whole token stream data (N,), and the number of tokens predicted.

    Non-overlapping blocks (`heldout_blocks`, then the shorter rest): every token but the first is predicted
    exactly once, with the context of its own block only. A token early in a block sees fewer tokens than it
    would with sliding windows, so this slightly overestimates the loss, at 1/T of the cost. Runs in eval mode.
    """
    check_tensor(data, "data", ndim=1, floating=False)
    check_positive_int(batch_size, "batch_size")
    if len(data) < 2:
        raise ValueError(f"data has {len(data)} tokens: at least 2 are needed to predict one")
    x, y = heldout_blocks(data, block_size)  # (n, T) each
    total = 0.0
    with evaluating(model):  # each submodule gets its own mode back afterwards, a frozen one included
        for xs, ys in zip(x.split(batch_size), y.split(batch_size)):
            total += float(F.cross_entropy(model(xs).flatten(0, 1), ys.flatten(), reduction="sum"))  # (B·T, V)
        rest = data[x.numel() :]  # the last, shorter block: len(rest) - 1 predictions
        if len(rest) > 1:
            logits = model(rest[None, :-1])[0]  # (t, V)
            total += float(F.cross_entropy(logits, rest[1:], reduction="sum"))
    return total / (len(data) - 1), len(data) - 1


def bits_per_byte(loss: float, n_tokens: int, n_bytes: int) -> float:
    """Bits per byte of a text of n_bytes UTF-8 bytes, from the mean loss in nats per token over its n_tokens.

    The text's total code length is loss · n_tokens nats, i.e. loss · n_tokens / ln 2 bits; spread over bytes.
    """
    if isinstance(loss, bool) or not isinstance(loss, (int, float)) or not 0 <= loss < math.inf:
        raise ValueError(f"loss must be a finite number of nats per token >= 0, got {loss!r}")
    check_positive_int(n_tokens, "n_tokens")
    check_positive_int(n_bytes, "n_bytes")
    return loss * n_tokens / (math.log(2) * n_bytes)


def compressed_bits_per_byte(train: bytes, heldout: bytes, method: str, prior: bool = True) -> float:
    """Bits per held-out byte that a standard-library compressor (gzip, bz2 or lzma) spends on `heldout`.

    With prior=True the compressor has read the training text first: the cost is
    |compress(train + heldout)| - |compress(train)|, the extra bits that the held-out bytes add, as a model
    trained on `train` pays only for the held-out text. With prior=False it is |compress(heldout)| alone.
    """
    if method not in COMPRESSORS:
        raise ValueError(f"method must be one of {sorted(COMPRESSORS)}, got {method!r}")
    for name, value in (("train", train), ("heldout", heldout)):
        if not isinstance(value, bytes):
            raise TypeError(f"{name} must be bytes (text.encode('utf-8')), got {type(value).__name__}")
    if not heldout:
        raise ValueError("heldout is empty: there is nothing to compress")
    compress = COMPRESSORS[method]
    if not prior:
        return 8 * len(compress(heldout)) / len(heldout)
    return 8 * (len(compress(train + heldout)) - len(compress(train))) / len(heldout)
