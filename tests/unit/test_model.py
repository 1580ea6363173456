"""Chapter 11, transformer_course/model.py: the whole Transformer, its parameter count and its summary."""

import copy
import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import transformer_course as tc


def build_on_meta(**kwargs):
    # The meta device allocates no memory: the 213M-parameter model is built in milliseconds.
    with torch.device("meta"):
        return tc.Transformer(37_000, 37_000, share_embeddings=True, **kwargs)


@pytest.mark.parametrize(
    ("row", "kwargs", "paper_millions"),
    [
        ("base", dict(d_model=512, n_heads=8, n_layers=6, d_ff=2048), 65),
        ("big", dict(d_model=1024, n_heads=16, n_layers=6, d_ff=4096), 213),
    ],
)
def test_table3_parameter_counts(row, kwargs, paper_millions):
    count = tc.count_parameters(build_on_meta(**kwargs))
    assert abs(count / 1e6 - paper_millions) / paper_millions < 0.07, f"{row}: {count / 1e6:.1f}M"


def test_count_by_formula_and_tying():
    """Count the base model by hand from the architecture: tying removes two vocabulary matrices."""
    d, ff, n, v = 512, 2048, 6, 37_000
    attention = 4 * (d * d + d)
    ffn = d * ff + ff + ff * d + d
    norm = 2 * d
    encoder = n * (attention + ffn + 2 * norm)
    decoder = n * (2 * attention + ffn + 3 * norm)
    assert tc.count_parameters(build_on_meta(d_model=d, n_heads=8, n_layers=n, d_ff=ff)) == v * d + encoder + decoder
    with torch.device("meta"):
        untied = tc.Transformer(v, v, share_embeddings=False)
    assert tc.count_parameters(untied) == 3 * v * d + encoder + decoder


def test_tied_weights_are_one_tensor():
    model = tc.Transformer(20, 20, d_model=8, n_heads=2, n_layers=1, d_ff=16, share_embeddings=True)
    assert model.src_embed.weight is model.tgt_embed.weight is model.lm_head.weight
    with torch.no_grad():
        model.lm_head.weight[3, 0] = 42.0
    assert model.src_embed.weight[3, 0] == 42.0


def small_model(share):
    tc.set_seed(0)
    return tc.Transformer(30, 30 if share else 20, d_model=16, n_heads=2, n_layers=2, d_ff=24, share_embeddings=share)


SRC = torch.tensor([[3, 4, 5, 0], [6, 7, 8, 9]])  # (B=2, S=4), one padded


TGT_IN = torch.tensor([[1, 5, 6, 7, 0], [1, 8, 9, 0, 0]])  # (B=2, T=5)


def test_top_level_rows_shapes_and_counts():
    model = small_model(share=False)
    result = tc.summary(model, SRC, TGT_IN, max_depth=1)
    rows = {row.name: row for row in result.rows}
    assert list(rows) == ["src_embed", "tgt_embed", "positions", "encoder", "decoder", "lm_head"]
    assert rows["src_embed"].shapes == ((2, 4, 16),)
    assert rows["positions"].shapes == ((2, 4, 16), (2, 5, 16))  # one table, applied to the source then the target
    assert rows["lm_head"].shapes == ((2, 5, 20),)
    assert rows["encoder"].params == tc.count_parameters(model.encoder)
    assert rows["src_embed"].params == 30 * 16 and rows["lm_head"].params == 20 * 16
    assert all(row.tied_to is None for row in result.rows)
    assert sum(row.params for row in result.rows) == result.total == tc.count_parameters(model)


def test_tied_weights_are_marked_and_counted_once():
    model = small_model(share=True)
    result = tc.summary(model, SRC, SRC[:, :3])
    rows = {row.name: row for row in result.rows}
    assert rows["tgt_embed"].tied_to == "src_embed" and rows["lm_head"].tied_to == "src_embed"
    assert rows["src_embed"].tied_to is None
    top = [row for row in result.rows if row.depth == 1]
    assert sum(row.params for row in top if row.tied_to is None) == result.total
    assert "tied to src_embed" in str(result)


def test_depth_two_lists_every_layer_and_skips_containers():
    model = small_model(share=False)
    result = tc.summary(model, SRC, TGT_IN, max_depth=2)
    names = [row.name for row in result.rows]
    assert "encoder.layers.0" in names and "decoder.layers.1" in names
    assert "encoder.layers" not in names  # an nn.ModuleList never runs: it is not a row and adds no depth
    layer = next(row for row in result.rows if row.name == "decoder.layers.1")
    assert layer.depth == 2 and layer.kind == "DecoderLayer" and layer.shapes == ((2, 5, 16),)
    assert layer.params == tc.count_parameters(model.decoder.layers[1])
    assert max(row.depth for row in result.rows) == 2


def test_the_model_is_left_as_it_was():
    model = small_model(share=False)
    model.train()
    hooks_before = sum(len(m._forward_hooks) for m in model.modules())
    text = str(tc.summary(model, SRC, TGT_IN))
    assert model.training
    assert sum(len(m._forward_hooks) for m in model.modules()) == hooks_before
    assert text.splitlines()[0].split() == ["module", "type", "output", "shape", "params"]
    assert (
        text.splitlines()[-1]
        == f"total: {tc.count_parameters(model):,} trainable parameters (tied tensors counted once)"
    )


def test_bad_depth_is_rejected():
    with pytest.raises(ValueError, match="max_depth=0 must be a positive integer"):
        tc.summary(small_model(share=False), SRC, TGT_IN, max_depth=0)


# ---------------------------------------------------------------------------------------------------------
# Properties that must hold for every input: checked with hypothesis on random shapes, masks and tokens


ATOL = 1e-5


VOCAB = 13


def untrained_model(seed, norm_first=False, d_model=16, n_heads=2):
    torch.manual_seed(seed)
    return tc.Transformer(VOCAB, VOCAB + 2, d_model=d_model, n_heads=n_heads, n_layers=2, d_ff=32,
                          dropout=0.0, norm_first=norm_first).eval()  # fmt: skip


def tokens(seed, batch, length, low=1):
    """Random non-padding token ids (pad is 0)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(low, VOCAB, (batch, length), generator=g)


@given(
    seed=st.integers(0, 10_000),
    length=st.integers(2, 9),
    t=st.integers(0, 8),
    norm_first=st.booleans(),
)
def test_decoder_is_causal(seed, length, t, norm_first):
    """Changing target tokens after position t leaves the logits at positions 0..t unchanged."""
    t = min(t, length - 2)
    model = untrained_model(seed, norm_first)
    src = tokens(seed, 2, 6)
    tgt = tokens(seed + 1, 2, length)
    changed = tgt.clone()
    changed[:, t + 1 :] = tokens(seed + 2, 2, length - t - 1)
    with torch.no_grad():
        before, after = model(src, tgt), model(src, changed)
    torch.testing.assert_close(before[:, : t + 1], after[:, : t + 1], atol=ATOL, rtol=0)


@given(seed=st.integers(0, 10_000), length=st.integers(1, 8), extra=st.integers(1, 5))
def test_source_padding_does_not_change_the_output(seed, length, extra):
    """Appending <pad> tokens to the source changes nothing: padded keys are masked out everywhere."""
    model = untrained_model(seed)
    src = tokens(seed, 2, length)
    padded = torch.cat([src, torch.zeros(2, extra, dtype=torch.long)], dim=1)
    tgt = tokens(seed + 1, 2, 4)
    with torch.no_grad():
        torch.testing.assert_close(model(src, tgt), model(padded, tgt), atol=ATOL, rtol=0)


@given(seed=st.integers(0, 10_000), batch=st.integers(2, 4))
def test_batch_rows_are_independent(seed, batch):
    """Each row of a padded batch gets the logits it would get alone."""
    model = untrained_model(seed)
    g = torch.Generator().manual_seed(seed)
    src_lengths = torch.randint(1, 7, (batch,), generator=g).tolist()
    src = torch.zeros(batch, max(src_lengths), dtype=torch.long)
    for i, n in enumerate(src_lengths):
        src[i, :n] = tokens(seed + i, 1, n)[0]
    tgt = tokens(seed + 99, batch, 5)
    with torch.no_grad():
        together = model(src, tgt)
        for i, n in enumerate(src_lengths):
            alone = model(src[i : i + 1, :n], tgt[i : i + 1])
            torch.testing.assert_close(together[i : i + 1], alone, atol=ATOL, rtol=0)


# ---------------------------------------------------------------------------------------------------------
# float16 and bfloat16: at every element our error against the exact result (float64, weights and inputs
# rounded to the low precision first) may exceed PyTorch's own error by at most assert_close's default
# tolerance for the dtype; where PyTorch overflows, ours must be within that tolerance of the exact result.


DTYPES = [torch.float16, torch.bfloat16]


HALF_D, HALF_H, HALF_FF, HALF_B, HALF_T, HALF_S = 32, 4, 64, 2, 5, 6


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_transformer_in_half_precision_decodes_what_it_decodes_in_float32(dtype):
    """A whole model in low precision: finite logits, close to float32's, and the same greedy tokens."""
    torch.manual_seed(0)
    model = tc.Transformer(
        20, 20, d_model=HALF_D, n_heads=HALF_H, n_layers=2, d_ff=HALF_FF, dropout=0.0, norm_first=True
    ).eval()
    src = torch.randint(3, 20, (2, 7))
    tgt = torch.randint(3, 20, (2, 5))
    with torch.no_grad():
        expected = model(src, tgt)
        low = copy.deepcopy(model).to(dtype)
        logits = low(src, tgt)
    assert logits.dtype == dtype and torch.isfinite(logits).all()
    scale = expected.abs().max()
    assert (logits.float() - expected).abs().max() < 0.05 * scale
    assert math.isfinite(float(tc.sequence_log_prob(low, src, tgt)[0]))


# ---------------------------------------------------------------------------------------------------------
# Bad input gets a ValueError or TypeError whose message names the argument and what was expected


def tiny(**kwargs):
    defaults = dict(d_model=8, n_heads=2, n_layers=1, d_ff=16, dropout=0.0, max_len=10)
    return tc.Transformer(10, 10, **{**defaults, **kwargs})


BAD_INPUT = [
    # (id, callable, exception, pattern the message must contain)
    ("token id too large", lambda: tiny()(torch.tensor([[1, 2, 10]]), torch.tensor([[1, 2]])), ValueError,
     r"src: ids in \[1, 10\], expected ids in \[0, 9\] \(vocab_size=10\)"),
    ("negative token id", lambda: tiny()(torch.tensor([[1, -1]]), torch.tensor([[1]])), ValueError,
     r"expected ids in \[0, 9\]"),
    ("float token ids", lambda: tiny()(torch.tensor([[1.0, 2.0]]), torch.tensor([[1]])), TypeError,
     r"src must be an integer tensor of token ids"),
    ("sequence longer than max_len", lambda: tiny()(torch.ones(1, 11, dtype=torch.long), torch.tensor([[1]])),
     ValueError, r"sequence length 11 exceeds max_len=10"),
    ("share_embeddings with unequal vocabularies", lambda: tc.Transformer(10, 12, share_embeddings=True), ValueError,
     r"share_embeddings=True needs one vocabulary, got src_vocab_size=10 and tgt_vocab_size=12"),
    ("pad_id outside the vocabulary", lambda: tc.Transformer(10, 10, pad_id=10), ValueError,
     r"pad_id=10 must be an int id inside both vocabularies"),
    ("batch sizes differ", lambda: tiny()(torch.ones(2, 3, dtype=torch.long), torch.ones(3, 2, dtype=torch.long)),
     ValueError, r"src and tgt_in must share the batch size, got 2 and 3"),
    ("empty source", lambda: tiny().encode(torch.ones(1, 0, dtype=torch.long)), ValueError,
     r"src is empty: expected shape \(B, T\) with T >= 1"),
    ("uint8 token ids", lambda: tiny()(torch.tensor([[1, 2]], dtype=torch.uint8), torch.tensor([[1]])), TypeError,
     r"src must be an integer tensor of token ids \(torch.long or torch.int\), got dtype torch.uint8"),
    ("uint8 target ids", lambda: tiny()(torch.tensor([[1, 2]]), torch.tensor([[1]], dtype=torch.uint8)), TypeError,
     r"tgt_in must be an integer tensor of token ids"),
    # ids on another device than the weights: the meta device stands in for a GPU on any machine
    ("source on another device", lambda: tiny()(torch.tensor([[1, 2]], device="meta"), torch.tensor([[1]])),
     ValueError, r"src is on meta but the model is on cpu: move one with .to\(\)"),
    ("target on another device", lambda: tiny()(torch.tensor([[1, 2]]), torch.tensor([[1]], device="meta")),
     ValueError, r"tgt_in is on meta but the model is on cpu"),
    ("encode on another device", lambda: tiny().encode(torch.tensor([[1, 2]], device="meta")), ValueError,
     r"src is on meta but the model is on cpu"),
    ("decode's memory of another width", lambda: tiny().decode(torch.tensor([[1]]), torch.randn(1, 2, 6),
     torch.tensor([[3, 4]])), ValueError, r"memory has 6 features, expected d_model=8"),
    ("decode's memory in another dtype", lambda: tiny().decode(torch.tensor([[1]]), torch.randn(1, 2, 8).double(),
     torch.tensor([[3, 4]])), TypeError, r"memory has dtype torch.float64 but the weights torch.float32"),
]  # fmt: skip


@pytest.mark.parametrize(("call", "exc", "pattern"), [c[1:] for c in BAD_INPUT], ids=[c[0] for c in BAD_INPUT])
def test_bad_input_raises_a_clear_error(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()
