"""Bad input gets a ValueError or TypeError whose message names the argument and what was expected."""

import pytest
import torch
from torch import nn

import transformer_course as tc


def tiny(**kwargs):
    defaults = dict(d_model=8, n_heads=2, n_layers=1, d_ff=16, dropout=0.0, max_len=10)
    return tc.Transformer(10, 10, **{**defaults, **kwargs})


x3 = torch.randn(2, 4, 16)
q4 = torch.randn(2, 2, 4, 8)

CASES = [
    # (id, callable, exception, pattern the message must contain)
    ("d_model not divisible", lambda: tc.MultiHeadAttention(30, 8), ValueError,
     r"d_model=30 is not divisible by n_heads=8"),
    ("n_heads zero", lambda: tc.MultiHeadAttention(16, 0), ValueError, r"n_heads=0 must be a positive integer"),
    ("d_model float", lambda: tc.MultiHeadAttention(16.0, 2), TypeError, r"d_model must be an int"),
    ("negative dropout", lambda: tc.MultiHeadAttention(16, 2, dropout=-0.1), ValueError,
     r"dropout=-0.1 must be in \[0, 1\)"),
    ("dropout of one", lambda: tc.EncoderLayer(16, 2, 32, dropout=1.0), ValueError, r"dropout=1.0 must be in \[0, 1\)"),
    ("mask wrong shape", lambda: tc.scaled_dot_product_attention(q4, q4, q4, torch.ones(3, 4, dtype=torch.bool)),
     ValueError, r"mask has shape \(3, 4\), expected a shape broadcastable to \(\.\.\., 4, 4\)"),
    ("mask float dtype", lambda: tc.scaled_dot_product_attention(q4, q4, q4, torch.ones(4, 4)), TypeError,
     r"mask must have dtype torch.bool \(True = may attend\), got torch.float32"),
    ("mask uint8 like post 1", lambda: tc.MultiHeadAttention(16, 2)(x3, x3, x3, torch.ones(4, 4).byte()),
     TypeError, r"mask must have dtype torch.bool.*torch.uint8"),
    ("ambiguous 3-D mask", lambda: tc.MultiHeadAttention(16, 2)(x3, x3, x3, torch.ones(2, 4, 4, dtype=torch.bool)),
     ValueError, r"mask has shape \(2, 4, 4\); expected \(T_q, T_k\) or"),
    ("mask batch mismatch", lambda: tc.MultiHeadAttention(16, 2)(x3, x3, x3, torch.ones(5, 1, 4, 4, dtype=torch.bool)),
     ValueError, r"mask has shape \(5, 1, 4, 4\), expected \(2 or 1, 2 or 1, T_q, T_k\)"),
    ("query width", lambda: tc.MultiHeadAttention(16, 2)(torch.randn(2, 4, 8), x3, x3), ValueError,
     r"query has 8 features, expected d_model=16"),
    ("q and k widths", lambda: tc.scaled_dot_product_attention(q4, torch.randn(2, 2, 4, 6), q4), ValueError,
     r"q and k must share their last dimension d_k, got 8 and 6"),
    ("integer queries", lambda: tc.scaled_dot_product_attention(q4.long(), q4, q4), TypeError,
     r"q must be a floating-point tensor"),
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
    ("unknown activation", lambda: tc.PositionwiseFeedForward(8, 16, activation="swish"), ValueError,
     r"activation='swish' is not one of"),
    ("causal mask of size zero", lambda: tc.causal_mask(0), ValueError, r"size=0 must be a positive integer"),
    ("MLP on integer inputs", lambda: tc.MLP([3, 4, 2])(torch.zeros(2, 3, dtype=torch.long)), TypeError,
     r"x must be a floating-point tensor, got dtype torch.int64"),
    ("MLP on a scalar", lambda: tc.MLP([3, 4, 2])(torch.tensor(1.0)), ValueError, r"x has 0 features"),
    ("masks that do not broadcast", lambda: tc.combine_masks(torch.ones(2, 3, dtype=torch.bool),
     torch.ones(4, 5, dtype=torch.bool)), ValueError, r"masks of shapes \(2, 3\), \(4, 5\) do not broadcast"),
    ("padding mask of floats", lambda: tc.padding_mask(torch.zeros(2, 3)), TypeError,
     r"tokens must be an integer tensor of token ids"),
    ("padding mask of 1-D tokens", lambda: tc.padding_mask(torch.zeros(3, dtype=torch.long)), ValueError,
     r"tokens must have 2 dimensions, got shape \(3,\)"),
    ("LayerNorm eps", lambda: tc.LayerNorm(8, eps=-1e-5), ValueError, r"eps=-1e-05 must be positive"),
    ("LayerNorm width", lambda: tc.LayerNorm(8)(torch.randn(2, 4)), ValueError,
     r"x has 4 features, expected d_model=8"),
    ("noam step zero", lambda: tc.noam_lr(0, 512, 4000), ValueError, r"step=0 must be a positive integer"),
    ("label smoothing above one", lambda: tc.LabelSmoothingLoss(10, smoothing=1.5), ValueError,
     r"smoothing=1.5 must be in \[0, 1\)"),
    ("beam search on a batch", lambda: tc.beam_search(tiny(), torch.ones(2, 3, dtype=torch.long), 2, 5, 1, 2),
     ValueError, r"src must be \(1, S\), got \(2, 3\)"),
    ("bos id outside the vocabulary", lambda: tc.greedy_decode(tiny(), torch.ones(1, 3, dtype=torch.long), 5, 10, 2),
     ValueError, r"bos_id=10 must be a token id in \[0, 9\]"),
    ("unknown word", lambda: tc.Vocab.build(["我 喜欢 你"]).encode("我 喜欢 猫"), ValueError,
     r"unknown word\(s\) '猫': not in the vocabulary"),
    ("empty corpus", lambda: tc.ParallelCorpus([]), ValueError, r"pairs is empty"),
    ("half a sentence pair", lambda: tc.ParallelCorpus([("我 喜欢 你", "")]), ValueError,
     r"pairs\[0\]=.* must be two non-empty strings"),
    ("from_torch of the wrong module", lambda: tc.MultiHeadAttention.from_torch(nn.Linear(4, 4)), TypeError,
     r"m must be a torch.nn.MultiheadAttention, got Linear"),
    ("collapse of a non-Linear", lambda: tc.collapse_linear([nn.Linear(2, 3), nn.ReLU()]), TypeError,
     r"layers\[1\] must be an nn.Linear, got ReLU"),
    ("collapse of mismatched widths", lambda: tc.collapse_linear([nn.Linear(2, 3), nn.Linear(4, 1)]), ValueError,
     r"layers\[0\] gives 3 features but layers\[1\] expects 4"),
    ("positional table too long", lambda: tc.PositionalEncoding(8, max_len=4)(torch.randn(1, 5, 8)), ValueError,
     r"sequence length 5 exceeds max_len=4"),
    # Issue 13: errors that used to come from deep inside PyTorch (RuntimeError, AssertionError) or not at all.
    ("mask that does not broadcast", lambda: tc.scaled_dot_product_attention(q4, q4, q4, torch.ones(5, 4, 4).bool()),
     ValueError, r"mask has shape \(5, 4, 4\), expected a shape broadcastable to \(\.\.\., 4, 4\) that does not "
     r"enlarge the scores \(2, 2, 4, 4\)"),
    ("mask that would enlarge the output",
     lambda: tc.scaled_dot_product_attention(q4[0, 0], q4[0, 0], q4[0, 0], torch.ones(2, 1, 4, 4).bool()),
     ValueError, r"mask has shape \(2, 1, 4, 4\).*does not enlarge the scores \(4, 4\)"),
    ("fused mask that does not broadcast", lambda: tc.fused_attention(q4, q4, q4, torch.ones(3, 1, 4, 4).bool()),
     ValueError, r"mask has shape \(3, 1, 4, 4\)"),
    ("q and k batches that do not broadcast",
     lambda: tc.scaled_dot_product_attention(q4, torch.randn(3, 2, 4, 8), torch.randn(3, 2, 4, 8)), ValueError,
     r"the leading dimensions of q \(2, 2, 4, 8\), k \(3, 2, 4, 8\) and v \(3, 2, 4, 8\) do not broadcast"),
    ("q, k and v of different dtypes", lambda: tc.scaled_dot_product_attention(q4, q4.double(), q4), TypeError,
     r"q, k and v must share one dtype, got torch.float32, torch.float64 and torch.float32"),
    ("fused dropout below zero", lambda: tc.fused_attention(q4, q4, q4, dropout_p=-0.1), ValueError,
     r"dropout_p=-0.1 must be in \[0, 1\)"),
    ("attention dropout of one", lambda: tc.scaled_dot_product_attention(q4, q4, q4, dropout_p=1.0), ValueError,
     r"dropout_p=1.0 must be in \[0, 1\)"),
    ("split_heads that does not divide", lambda: tc.split_heads(torch.randn(2, 3, 10), 3), ValueError,
     r"x has 10 features, which n_heads=3 does not divide"),
    ("split_heads of a 2-D tensor", lambda: tc.split_heads(torch.randn(3, 16), 2), ValueError,
     r"x must have 3 dimensions, got shape \(3, 16\)"),
    ("split_heads of zero heads", lambda: tc.split_heads(x3, 0), ValueError, r"n_heads=0 must be a positive integer"),
    ("attention input of another dtype", lambda: tc.MultiHeadAttention(16, 2)(x3.double(), x3.double(), x3.double()),
     TypeError, r"query has dtype torch.float64 but the weights torch.float32"),
    ("LayerNorm of integers", lambda: tc.LayerNorm(4)(torch.ones(2, 4, dtype=torch.long)), TypeError,
     r"x must be a floating-point tensor, got dtype torch.int64"),
    ("RMSNorm of integers", lambda: tc.RMSNorm(4)(torch.ones(2, 4, dtype=torch.int32)), TypeError,
     r"x must be a floating-point tensor, got dtype torch.int32"),
    ("RMSNorm width", lambda: tc.RMSNorm(8)(torch.randn(2, 4)), ValueError, r"x has 4 features, expected d_model=8"),
    ("LayerNorm of a scalar", lambda: tc.LayerNorm(8)(torch.tensor(1.0)), ValueError,
     r"x has 0 features, expected d_model=8"),
    ("LayerNorm eps NaN", lambda: tc.LayerNorm(8, eps=float("nan")), ValueError, r"eps=nan must be positive"),
    ("LayerNorm bias not a bool", lambda: tc.LayerNorm(8, bias="no"), TypeError, r"bias must be a bool, got str"),
    ("feed-forward of integers", lambda: tc.PositionwiseFeedForward(4, 8)(torch.ones(2, 4, dtype=torch.long)),
     TypeError, r"x must be a floating-point tensor"),
    ("norm_first not a bool", lambda: tc.EncoderLayer(16, 2, 32, norm_first=1), TypeError,
     r"norm_first must be a bool, got int"),
    ("uint8 token ids", lambda: tiny()(torch.tensor([[1, 2]], dtype=torch.uint8), torch.tensor([[1]])), TypeError,
     r"src must be an integer tensor of token ids \(torch.long or torch.int\), got dtype torch.uint8"),
    ("uint8 target ids", lambda: tiny()(torch.tensor([[1, 2]]), torch.tensor([[1]], dtype=torch.uint8)), TypeError,
     r"tgt_in must be an integer tensor of token ids"),
    ("bool token ids", lambda: tc.TokenEmbedding(10, 8)(torch.ones(1, 2, dtype=torch.bool)), TypeError,
     r"tokens must be an integer tensor of token ids \(torch.long or torch.int\), got dtype torch.bool"),
    ("padding mask of uint8 tokens", lambda: tc.padding_mask(torch.zeros(2, 3, dtype=torch.uint8)), TypeError,
     r"tokens must be an integer tensor of token ids"),
    ("TokenEmbedding pad_id outside the vocabulary", lambda: tc.TokenEmbedding(10, 8, pad_id=10), ValueError,
     r"pad_id=10 must be a token id in \[0, 9\] \(vocabulary of 10\)"),
    ("TokenEmbedding negative pad_id", lambda: tc.TokenEmbedding(10, 8, pad_id=-1), ValueError,
     r"pad_id=-1 must be a token id in \[0, 9\]"),
    ("TokenEmbedding pad_id a float", lambda: tc.TokenEmbedding(10, 8, pad_id=0.0), TypeError,
     r"pad_id must be an int token id, got float"),
    ("negative positional offset", lambda: tc.PositionalEncoding(8, max_len=10)(torch.randn(1, 3, 8), offset=-2),
     ValueError, r"offset=-2 must be >= 0"),
    ("None model in greedy decoding", lambda: tc.greedy_decode(None, torch.ones(1, 3, dtype=torch.long), 5, 1, 2),
     TypeError, r"model must be a transformer_course.Transformer, got NoneType"),
    ("decoding beyond the positional table", lambda: tc.greedy_decode(tiny(), torch.ones(1, 3, dtype=torch.long), 11,
     1, 2), ValueError, r"max_len=11 \(tokens to generate, bos included\) exceeds the model's positional table, "
     r"config.max_len=10"),
    ("length_penalty not a number",
     lambda: tc.beam_search(tiny(), torch.ones(1, 3, dtype=torch.long), 2, 5, 1, 2, length_penalty="long"),
     TypeError, r"length_penalty must be a float, got str"),
]  # fmt: skip


@pytest.mark.parametrize(("call", "exc", "pattern"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_raises_a_clear_error(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()


def test_at_least_fifteen_distinct_cases():
    assert len({c[0] for c in CASES}) == len(CASES) >= 15
