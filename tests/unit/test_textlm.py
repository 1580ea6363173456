"""Chapter 18's helpers: contiguous-block batches, the held-out loss, bits per byte, and the compressors."""

import bz2
import gzip
import lzma
import math

import pytest
import torch
import torch.nn.functional as F

import transformer_course as tc
from transformer_course.textlm import (
    bits_per_byte,
    compressed_bits_per_byte,
    get_batch,
    heldout_blocks,
    heldout_loss,
)

# ---------------------------------------------------------------------------------------------- get_batch


def test_get_batch_returns_contiguous_blocks_shifted_by_one():
    data = torch.arange(100, 150)  # the value of a token tells its position: data[i] = 100 + i
    x, y = get_batch(data, 8, 32, torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (32, 8) and x.dtype == y.dtype == torch.long
    assert torch.equal(x[:, 1:] - x[:, :-1], torch.ones(32, 7, dtype=torch.long))  # contiguous, no padding
    assert torch.equal(y, x + 1)  # every target is the token right after its input


def test_get_batch_reaches_the_last_token_and_never_runs_past_it():
    data = torch.arange(12)
    x, y = get_batch(data, 4, 2000, torch.Generator().manual_seed(1))
    starts = set(x[:, 0].tolist())
    assert starts == set(range(12 - 4))  # every legal start 0..N-T-1 is drawn, none beyond
    assert int(y.max()) == 11  # the last token is a target of the last block


def test_get_batch_is_reproducible_with_a_generator_and_leaves_the_global_state_alone():
    data = torch.arange(1000)
    torch.manual_seed(5)
    state = torch.get_rng_state()
    a = get_batch(data, 16, 4, torch.Generator().manual_seed(7))
    b = get_batch(data, 16, 4, torch.Generator().manual_seed(7))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert torch.equal(torch.get_rng_state(), state)


def test_get_batch_on_a_stream_just_long_enough_has_one_block():
    x, y = get_batch(torch.arange(5), 4, 3, torch.Generator().manual_seed(0))
    assert torch.equal(x, torch.arange(4).expand(3, 4)) and torch.equal(y, torch.arange(1, 5).expand(3, 4))


@pytest.mark.parametrize(
    "args, error, words",
    [
        ((torch.arange(4), 4, 2), ValueError, "data has 4 tokens: a block needs"),
        ((torch.arange(10).float(), 4, 2), TypeError, "data must be an integer tensor"),
        ((torch.arange(10).view(2, 5), 2, 2), ValueError, "data must have 1 dimensions"),
        ((torch.arange(10), 0, 2), ValueError, "block_size=0"),
        ((torch.arange(10), 2, 1.5), TypeError, "batch_size must be an int"),
    ],
)
def test_get_batch_rejects_bad_arguments(args, error, words):
    with pytest.raises(error, match=words):
        get_batch(*args)


# ---------------------------------------------------------------------------------------------- heldout_loss


@pytest.mark.parametrize("length, n_blocks", [(9, 2), (10, 2), (12, 2), (13, 3), (4, 0)])
def test_heldout_blocks_tile_the_stream_and_share_one_token(length, n_blocks):
    data = torch.arange(length)
    x, y = heldout_blocks(data, 4)
    assert x.shape == y.shape == (n_blocks, 4)
    assert torch.equal(x.flatten(), torch.arange(4 * n_blocks)) and torch.equal(y, x + 1)


def tiny_model(vocab=11, max_len=8):
    torch.manual_seed(0)
    return tc.GPT(vocab, d_model=16, n_heads=2, n_layers=1, d_ff=32, max_len=max_len, dropout=0.0)


def brute_force_loss(model, data, block_size):
    """Token by token: the context of token i + 1 is its own block's tokens up to i."""
    losses = []
    for i in range(len(data) - 1):
        start = i - i % block_size
        logits = model(data[None, start : i + 1])[0, -1]
        losses.append(F.cross_entropy(logits[None], data[i + 1 : i + 2]))
    return torch.stack(losses).mean().item()


@pytest.mark.parametrize("length", [2, 9, 17, 30])  # one prediction, one full block, full blocks and a tail
def test_heldout_loss_predicts_every_token_but_the_first_once(length):
    model = tiny_model()
    data = torch.randint(11, (length,), generator=torch.Generator().manual_seed(length))
    loss, count = heldout_loss(model, data, 8, batch_size=2)
    assert count == length - 1
    assert math.isclose(loss, brute_force_loss(model.eval(), data, 8), rel_tol=1e-5)


def test_heldout_loss_restores_training_mode_and_rejects_a_single_token():
    model = tiny_model().train()
    heldout_loss(model, torch.arange(10) % 11, 8)
    assert model.training
    with pytest.raises(ValueError, match="at least 2"):
        heldout_loss(model, torch.tensor([3]), 8)


# ---------------------------------------------------------------------------------------------- bits per byte


def test_bits_per_byte_converts_nats_per_token_to_bits_per_byte():
    # A uniform guess among 256 byte values, one token per byte: 8 bits per byte.
    assert math.isclose(bits_per_byte(math.log(256), 1000, 1000), 8.0)
    # Four bytes per token at log 2 nats each: a quarter of a bit per byte.
    assert math.isclose(bits_per_byte(math.log(2), 250, 1000), 0.25)


@pytest.mark.parametrize(
    "args, error, words",
    [
        ((float("nan"), 10, 10), ValueError, "loss must be a finite"),
        ((-1.0, 10, 10), ValueError, "loss must be a finite"),
        ((torch.tensor(1.0), 10, 10), ValueError, "loss must be a finite"),
        ((1.0, 0, 10), ValueError, "n_tokens=0"),
        ((1.0, 10, 2.5), TypeError, "n_bytes must be an int"),
    ],
)
def test_bits_per_byte_rejects_bad_arguments(args, error, words):
    with pytest.raises(error, match=words):
        bits_per_byte(*args)


# ---------------------------------------------------------------------------------------------- compressors

TRAIN = (
    "the quick brown fox jumps over the lazy dog. " * 40 + "pack my box with five dozen liquor jugs. " * 40
).encode()
HELDOUT = b"the lazy dog jumps over the quick brown fox. pack my box with five dozen jugs."


@pytest.mark.parametrize("method, module", [("gzip", gzip), ("bz2", bz2), ("lzma", lzma)])
def test_compressed_bits_per_byte_alone_and_with_the_training_text_as_prior(method, module):
    alone = compressed_bits_per_byte(TRAIN, HELDOUT, method, prior=False)
    with_prior = compressed_bits_per_byte(TRAIN, HELDOUT, method, prior=True)
    compress = {"gzip": lambda d: gzip.compress(d, 9, mtime=0), "bz2": bz2.compress, "lzma": None}[method]
    if compress is not None:  # lzma's preset differs from its default; its size is checked by decompression below
        assert alone == 8 * len(compress(HELDOUT)) / len(HELDOUT)
    assert with_prior < alone  # the held-out words were all seen in the training text
    assert module.decompress(tc.textlm.COMPRESSORS[method](HELDOUT)) == HELDOUT


def test_the_prior_cost_is_the_difference_of_two_compressed_sizes():
    both = len(lzma.compress(TRAIN + HELDOUT, preset=9 | lzma.PRESET_EXTREME))
    train = len(lzma.compress(TRAIN, preset=9 | lzma.PRESET_EXTREME))
    assert compressed_bits_per_byte(TRAIN, HELDOUT, "lzma") == 8 * (both - train) / len(HELDOUT)


@pytest.mark.parametrize(
    "args, error, words",
    [
        ((TRAIN, HELDOUT, "zip"), ValueError, "method must be one of"),
        (("text", HELDOUT, "gzip"), TypeError, "train must be bytes"),
        ((TRAIN, b"", "bz2"), ValueError, "heldout is empty"),
    ],
)
def test_compressed_bits_per_byte_rejects_bad_arguments(args, error, words):
    with pytest.raises(error, match=words):
        compressed_bits_per_byte(*args)


# ---------------------------------------------------------------------------------------------- benchmark


def test_the_benchmark_section_trains_and_compares_with_every_compressor():
    from transformer_course.course.benchmark import FUNCTIONS, OPTIONAL_SECTIONS

    assert "text_lm" in OPTIONAL_SECTIONS
    table = FUNCTIONS["text_lm"](minutes=(0.003,), vocab_size=270, train_chars=20_000)
    assert [row["method"] for row in table.rows] == ["GPT, 0.003 min"] + [m for m in ("gzip", "bz2", "lzma")
                                                                          for _ in range(2)]  # fmt: skip
    assert [row["train_text_as_prior"] for row in table.rows[1:]] == [False, True] * 3
    model = table.rows[0]
    assert model["steps"] >= 1 and 0 < model["bits_per_byte"] < 20 and model["cpu_min"] > 0
    assert all(0 < row["bits_per_byte"] < 8 for row in table.rows[1:])
    assert "beats the best of each compressor" in table.format()


def test_heldout_loss_gives_every_submodule_its_own_mode_back():
    # model.train(was_training) would switch a frozen (eval-mode) block back to training: `evaluating` does not.
    torch.manual_seed(0)
    model = tc.GPT(20, d_model=16, n_heads=2, n_layers=2, d_ff=32, max_len=16).train()
    model.layers[0].eval()  # a frozen block
    tc.heldout_loss(model, torch.randint(0, 20, (40,)), block_size=8)
    assert model.training and not model.layers[0].training and model.layers[1].training


def test_heldout_loss_runs_with_dropout_off():
    """A model with dropout, left in training mode: the held-out loss is the eval-mode loss, token by token."""
    torch.manual_seed(0)
    model = tc.GPT(11, d_model=16, n_heads=2, n_layers=1, d_ff=32, max_len=8, dropout=0.5).train()
    data = torch.randint(11, (30,), generator=torch.Generator().manual_seed(3))
    loss, count = heldout_loss(model, data, 8, batch_size=2)
    model.eval()
    with torch.no_grad():
        losses = []
        for i in range(len(data) - 1):  # token i + 1 is predicted from its own block's tokens up to i
            start = i - i % 8
            logits = model(data[None, start : i + 1])[0, -1]
            losses.append(F.cross_entropy(logits[None], data[i + 1 : i + 2]))
    assert count == len(data) - 1
    assert math.isclose(loss, torch.stack(losses).mean().item(), rel_tol=1e-5)
