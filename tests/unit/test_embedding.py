"""Chapter 8, transformer_course/embedding.py: token embeddings and positional encodings."""

import math

import pytest
import torch

import transformer_course as tc

# ---------------------------------------------------------------------------------------------------------
# The module's own claims


def seed_001_loop_table(n_position, d):
    """Post 1's get_sin_enc_table, written as its double loop (in float64)."""
    table = torch.zeros(n_position, d, dtype=torch.float64)
    for pos in range(n_position):
        for j in range(d):
            table[pos, j] = pos / 10000 ** (2 * (j // 2) / d)
    table[:, 0::2] = torch.sin(table[:, 0::2])
    table[:, 1::2] = torch.cos(table[:, 1::2])
    return table.float()


@pytest.mark.parametrize("d_model", [4, 16, 7])
def test_sinusoidal_table_equals_the_double_loop(d_model):
    torch.testing.assert_close(tc.sinusoidal_positional_encoding(50, d_model), seed_001_loop_table(50, d_model))


def test_relative_positions_are_a_fixed_linear_map():
    """PE(pos + k) = M_k PE(pos) for one block-diagonal rotation M_k, whatever pos is."""
    d, k = 16, 3
    pe = tc.sinusoidal_positional_encoding(40, d).double()
    inv_freq = 10000 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    m = torch.zeros(d, d, dtype=torch.float64)
    for i, w in enumerate(inv_freq):
        c, s = math.cos(k * w), math.sin(k * w)
        m[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = torch.tensor([[c, s], [-s, c]])
    torch.testing.assert_close(pe[k:], pe[:-k] @ m.T, atol=1e-5, rtol=0)


def test_token_embedding_is_scaled_by_sqrt_d_model():
    emb = tc.TokenEmbedding(10, 16)
    tokens = torch.tensor([[1, 2, 3]])
    torch.testing.assert_close(emb(tokens), emb.embedding(tokens) * 4.0)


def test_learned_positions_are_parameters_and_sinusoidal_are_not():
    assert [n for n, _ in tc.LearnedPositionalEncoding(8, 20).named_parameters()] == ["pe"]
    assert list(tc.PositionalEncoding(8, 20).parameters()) == []


@pytest.mark.parametrize("kind", [tc.PositionalEncoding, tc.LearnedPositionalEncoding])
def test_positional_dropout_in_training_only(kind):
    """The sum of embeddings and positions goes through dropout (paper §5.4), in training mode only."""
    pe = kind(8, 20, dropout=0.5)
    x = torch.randn(2, 10, 8)
    clean = x + pe.pe[:10].detach()
    out = pe.train()(x)
    kept = out != 0
    assert 0.3 < kept.float().mean() < 0.7
    torch.testing.assert_close(out[kept], clean[kept] * 2)
    torch.testing.assert_close(pe.eval()(x), clean)


def test_positional_offset_matches_the_full_table():
    pe = tc.PositionalEncoding(8, 20)
    x = torch.zeros(1, 3, 8)
    torch.testing.assert_close(pe(x, offset=5)[0], tc.sinusoidal_positional_encoding(20, 8)[5:8])


# ---------------------------------------------------------------------------------------------------------
# Bad input gets a ValueError or TypeError whose message names the argument and what was expected


BAD_INPUT = [
    # (id, callable, exception, pattern the message must contain)
    ("positional table too long", lambda: tc.PositionalEncoding(8, max_len=4)(torch.randn(1, 5, 8)), ValueError,
     r"sequence length 5 exceeds max_len=4"),
    ("bool token ids", lambda: tc.TokenEmbedding(10, 8)(torch.ones(1, 2, dtype=torch.bool)), TypeError,
     r"tokens must be an integer tensor of token ids \(torch.long or torch.int\), got dtype torch.bool"),
    ("TokenEmbedding pad_id outside the vocabulary", lambda: tc.TokenEmbedding(10, 8, pad_id=10), ValueError,
     r"pad_id=10 must be a token id in \[0, 9\] \(vocabulary of 10\)"),
    ("TokenEmbedding negative pad_id", lambda: tc.TokenEmbedding(10, 8, pad_id=-1), ValueError,
     r"pad_id=-1 must be a token id in \[0, 9\]"),
    ("TokenEmbedding pad_id a float", lambda: tc.TokenEmbedding(10, 8, pad_id=0.0), TypeError,
     r"pad_id must be an int token id, got float"),
    ("negative positional offset", lambda: tc.PositionalEncoding(8, max_len=10)(torch.randn(1, 3, 8), offset=-2),
     ValueError, r"offset=-2 must be >= 0"),
]  # fmt: skip


@pytest.mark.parametrize(("call", "exc", "pattern"), [c[1:] for c in BAD_INPUT], ids=[c[0] for c in BAD_INPUT])
def test_bad_input_raises_a_clear_error(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()
