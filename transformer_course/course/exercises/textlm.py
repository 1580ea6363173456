"""Chapter 18 exercises: the evaluation blocks of a token stream, and a text's cost in bits per byte.

The checkers run the reader's function and the package's (`textlm.heldout_blocks`, and
`textlm.bits_per_byte` given the mean of the token losses) on small streams and on texts with non-ASCII
characters. Known wrong variants are recognised and named: one block too many or too few, a token skipped
between blocks, targets not shifted or wrapped around, overlapping windows, characters or tokens counted
instead of bytes, nats or another base instead of bits, and more.
"""

from __future__ import annotations

import math

import torch

from ...textlm import bits_per_byte as package_bits_per_byte
from ...textlm import heldout_blocks as package_heldout_blocks
from ._core import Case, Mistake, Result, checker, compare, solution

# ---------------------------------------------------------------- exercise 18.1: the held-out blocks


@solution
def heldout_blocks(data, block_size):
    """The full non-overlapping blocks of the stream data (N,): inputs x (n, T), targets y (n, T), y = x shifted."""
    n = (len(data) - 1) // block_size  # block i needs data[i·T + T] as its last target
    x = data[: n * block_size].reshape(n, block_size)  # (n·T,) -> (n, T)
    y = data[1 : n * block_size + 1].reshape(n, block_size)  # (n, T): each input's next token
    return x, y


def _grid(data, block_size, n=None, stride=None, y_shift=1, x_shift=0):
    """The blocks with one thing done differently (the keyword that differs from the default says which)."""
    stride = block_size if stride is None else stride
    n = (len(data) - 1) // block_size if n is None else n
    x = torch.stack([data[i * stride + x_shift : i * stride + x_shift + block_size] for i in range(n)])
    y = torch.stack([data[i * stride + y_shift : i * stride + y_shift + block_size] for i in range(n)])
    return x, y


def _cut_then_shifted(data, block_size):
    n = len(data) // block_size
    blocks = data[: n * block_size].reshape(n, block_size)
    return blocks[:, :-1], blocks[:, 1:]  # T - 1 pairs per block: the boundary tokens are never targets


def _rolled(data, block_size):
    x, _ = heldout_blocks(data, block_size)
    return x, x.roll(-1, dims=1)


def _sliding(data, block_size):
    return data[:-1].unfold(0, block_size, 1), data[1:].unfold(0, block_size, 1)  # (N - T, T): every window


def _time_first(data, block_size):
    x, y = heldout_blocks(data, block_size)
    return x.T, y.T


_BLOCK_MISTAKES = (
    Mistake(
        "runs_past_the_end",
        lambda data, t: _grid(data, t, n=len(data) // t),
        "one block too many when T divides N: with n = N // T, the last block's targets would need token n·T, one "
        "past the end. The last target must exist: n = (N - 1) // T.",
    ),
    Mistake(
        "drops_the_last_block",
        lambda data, t: _grid(data, t, n=(len(data) - 1) // t - 1),
        "the last full block is missing: n = (N - 1) // T blocks fit, since block i reads tokens i·T .. i·T + T.",
    ),
    Mistake(
        "skips_a_token",
        lambda data, t: _grid(data, t, n=len(data) // (t + 1), stride=t + 1),
        "the blocks are T + 1 apart, so one token between two blocks is never a target (nor an input): the next "
        "block starts at the last target of the previous one, a stride of T.",
    ),
    Mistake(
        "block_one_short",
        _cut_then_shifted,
        "each block gives T - 1 predictions: cutting the stream into blocks of T and shifting inside each block "
        "loses the pair that crosses the boundary. Take y from the stream, data[1 : n·T + 1], not from x.",
    ),
    Mistake(
        "not_shifted",
        lambda data, t: _grid(data, t, y_shift=0),
        "the targets are the inputs themselves: y is the stream shifted by one, data[1 : n·T + 1].",
    ),
    Mistake(
        "shifted_by_two",
        lambda data, t: _grid(data, t, n=(len(data) - 2) // t, y_shift=2),
        "the targets are two tokens ahead: y[i, t] must be the token right after x[i, t], data[1 : n·T + 1].",
    ),
    Mistake(
        "wrapped_targets",
        _rolled,
        "y is x rolled by one, so each block's last target wraps to its own first token: take y from the "
        "stream, where the token after a block is the next block's first input.",
    ),
    Mistake(
        "starts_at_one",
        lambda data, t: _grid(data, t, n=(len(data) - 2) // t, x_shift=1, y_shift=2),
        "the first block starts at token 1: token 0 is the first input, and every token after it a target.",
    ),
    Mistake(
        "sliding_windows",
        _sliding,
        "these are all N - T overlapping windows: every token is then predicted up to T times. Evaluation "
        "blocks do not overlap: block i starts at i·T.",
    ),
    Mistake(
        "swapped", lambda data, t: heldout_blocks(data, t)[::-1], "x and y are swapped: inputs first, then targets."
    ),
    Mistake("time_first", _time_first, "the result is (T, n), time first: one row per block, (n, T)."),
)


@checker
def check_heldout_blocks(fn) -> Result:
    """Check `fn(data, block_size)` against textlm.heldout_blocks on streams with and without a leftover rest."""
    g = torch.Generator().manual_seed(18)
    cases = [
        Case("12 tokens, blocks of 4 (T divides N)", (torch.arange(100, 112), 4)),
        Case("13 tokens, blocks of 4 (N - 1 divisible)", (torch.arange(13) * 3 % 11, 4)),
        Case("50 random tokens, blocks of 8", (torch.randint(1000, (50,), generator=g), 8)),
        Case("1000 tokens, blocks of 64", (torch.randint(1000, (1000,), generator=g), 64)),
        Case("7 tokens, blocks of 3", (torch.arange(7), 3)),
    ]
    return compare(
        "heldout_blocks",
        fn,
        package_heldout_blocks,
        cases,
        _BLOCK_MISTAKES,
        atol=0,
        rtol=0,
        passed=f"passed all {len(cases)} cases (streams of 7 to 1000 tokens, with and without a leftover rest): "
        "the same blocks as textlm.heldout_blocks",
    )


# ---------------------------------------------------------------- exercise 18.2: bits per byte


@solution
def bits_per_byte(token_losses, text):
    """The cost of `text` in bits per UTF-8 byte, from the loss in nats of each of its tokens (N,)."""
    total_bits = token_losses.sum().item() / math.log(2)  # nats -> bits: log2(x) = ln(x) / ln 2
    return total_bits / len(text.encode("utf-8"))  # per byte of the text, not per token or per character


def _reference_bits_per_byte(token_losses, text):
    """The package's bits_per_byte, which takes the mean loss per token and the two counts."""
    return package_bits_per_byte(token_losses.mean().item(), len(token_losses), len(text.encode("utf-8")))


def _variant(token_losses, text, reduce="sum", base=2.0, unit="bytes"):
    nats = token_losses.sum().item() if reduce == "sum" else token_losses.mean().item()
    counts = {"bytes": len(text.encode("utf-8")), "chars": len(text), "tokens": len(token_losses), "one": 1,
              "words": len(text.split())}  # fmt: skip
    return nats / math.log(base) / counts[unit]


_BPB_MISTAKES = (
    Mistake(
        "characters",
        lambda losses, text: _variant(losses, text, unit="chars"),
        "divided by the number of characters, len(text): a Chinese character is 3 bytes of UTF-8, an emoji 4. "
        "Bits per byte divides by len(text.encode('utf-8')).",
    ),
    Mistake(
        "bits_per_token",
        lambda losses, text: _variant(losses, text, reduce="mean", unit="one"),
        "this is bits per token, the mean loss in bits: it depends on how many bytes a token holds, so it cannot "
        "compare tokenizers. Sum the losses (the whole text's cost) and divide by its bytes.",
    ),
    Mistake(
        "nats_per_token",
        lambda losses, text: _variant(losses, text, reduce="mean", base=math.e, unit="one"),
        "this is the mean loss in nats per token, the training loss itself: convert to bits (divide by ln 2) and "
        "spread the total over the text's bytes instead of its tokens.",
    ),
    Mistake(
        "nats",
        lambda losses, text: _variant(losses, text, base=math.e),
        "the result is in nats per byte: F.cross_entropy uses the natural logarithm, so divide by ln 2 to get bits.",
    ),
    Mistake(
        "log10",
        lambda losses, text: _variant(losses, text, base=10.0),
        "divided by ln 10: the losses are in nats (base e); bits need base 2, so divide by ln 2 = math.log(2).",
    ),
    Mistake(
        "times_ln2",
        lambda losses, text: losses.sum().item() * math.log(2) / len(text.encode("utf-8")),
        "multiplied by ln 2 instead of dividing: one nat is 1 / ln 2 ≈ 1.44 bits, so bits = nats / ln 2.",
    ),
    Mistake(
        "mean_over_bytes",
        lambda losses, text: _variant(losses, text, reduce="mean", unit="bytes"),
        "the mean loss per token was divided by the bytes: that counts the cost of one token, not of the text. "
        "Use the sum of the losses (or the mean times the number of tokens).",
    ),
    Mistake(
        "total_bits",
        lambda losses, text: _variant(losses, text, unit="one"),
        "this is the total number of bits of the text: divide it by the text's number of UTF-8 bytes.",
    ),
    Mistake(
        "times_eight",
        lambda losses, text: 8 * _variant(losses, text),
        "multiplied by 8: the losses already measure bits once divided by ln 2; 8 bits per byte is what an "
        "uncompressed text costs, not a factor to apply.",
    ),
    Mistake(
        "words",
        lambda losses, text: _variant(losses, text, unit="words"),
        "divided by the number of words, text.split(): a text's cost is measured per UTF-8 byte.",
    ),
    Mistake(
        "bytes_per_bit",
        lambda losses, text: 1 / _variant(losses, text),
        "the fraction is upside down: bits per byte is the text's bits divided by its bytes.",
    ),
    Mistake(
        "log2_of_losses",
        lambda losses, text: losses.log2().sum().item() / len(text.encode("utf-8")),
        "the logarithm was taken of the losses themselves: they are already -ln p. To change the base, divide "
        "them by ln 2, do not take their log2.",
    ),
)


@checker
def check_bits_per_byte(fn) -> Result:
    """Check `fn(token_losses, text)` against textlm.bits_per_byte on texts in English, Chinese, French and emoji."""
    g = torch.Generator().manual_seed(18)

    def losses(n):
        return 0.5 + 4 * torch.rand(n, generator=g)  # (N,) nats per token, as a trained model gives

    cases = [
        Case("an English sentence of 6 tokens", (losses(6), "The cat sat on the mat.")),
        Case("a Chinese line of 9 tokens", (losses(9), "注意力就是你所需要的。")),
        Case("English, accents and an emoji in 12 tokens", (losses(12), "Café au lait, s'il vous plaît! 🙂")),
        Case("one token for a whole word", (losses(1), "transformer")),
    ]
    return compare(
        "bits_per_byte",
        fn,
        _reference_bits_per_byte,
        cases,
        _BPB_MISTAKES,
        passed=f"passed all {len(cases)} cases (English, Chinese, accents and emoji): the same bits per byte as "
        "textlm.bits_per_byte",
    )
