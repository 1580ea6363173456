"""Unit tests of each module's own claims, in chapter order."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import transformer_course as tc
from transformer_course import masks
from transformer_course.efficient import decode_cached

# --- mlp -------------------------------------------------------------------------------------------------


def test_stacked_linear_layers_collapse_to_one():
    layers = [nn.Linear(3, 5), nn.Linear(5, 4), nn.Linear(4, 2, bias=False)]
    x = torch.randn(7, 3)
    torch.testing.assert_close(tc.collapse_linear(layers)(x), nn.Sequential(*layers)(x), atol=1e-5, rtol=0)


def test_mlp_shapes_and_activation_placement():
    mlp = tc.MLP([2, 8, 8, 3])
    assert [type(m).__name__ for m in mlp.layers] == ["Linear", "ReLU", "Linear", "ReLU", "Linear"]
    assert mlp(torch.randn(5, 2)).shape == (5, 3)


# --- attention ---------------------------------------------------------------------------------------------


def test_seed_002_worked_example():
    """Post 2's X, W^Q, W^K, W^V: Q, K, V and the scaled scores it prints (its QKᵀ product is right)."""
    x = torch.tensor([[1.0, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]])
    w_q = torch.tensor([[1.0, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 1]])
    w_k = torch.tensor([[0.0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 0]])
    w_v = torch.tensor([[0.0, 2, 0], [0, 3, 0], [1, 0, 3], [1, 1, 0]])
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    assert q.tolist() == [[1, 0, 2], [2, 2, 2], [2, 1, 3]]
    assert k.tolist() == [[0, 1, 1], [4, 4, 0], [2, 3, 1]]
    assert v.tolist() == [[1, 2, 3], [2, 8, 0], [2, 6, 3]]
    out, weights = tc.scaled_dot_product_attention(q, k, v)
    scores = q @ k.T / math.sqrt(3)
    torch.testing.assert_close(weights, torch.softmax(scores, -1))
    torch.testing.assert_close(out, torch.softmax(scores, -1) @ v)


def test_apple_banana_chair_lookup():
    """Post 0's soft dictionary: weights 0.6, 0.4, 0 over values 10, 5, 2 give 8."""
    values = torch.tensor([[10.0], [5.0], [2.0]])
    weights = torch.tensor([[0.6, 0.4, 0.0]])
    assert (weights @ values).item() == pytest.approx(8.0)


def test_fully_masked_row_gives_zeros_and_finite_gradients():
    q = torch.randn(1, 3, 4, requires_grad=True)
    mask = torch.tensor([[True, True, False], [False, False, False], [True, False, False]])
    out, weights = tc.scaled_dot_product_attention(q, q, q, mask)
    assert torch.all(out[0, 1] == 0) and torch.all(weights[0, 1] == 0)
    out.sum().backward()
    assert torch.isfinite(q.grad).all()
    assert torch.all(tc.fused_attention(q, q, q, mask)[0, 1] == 0)


def test_attention_dropout_zeroes_weights_and_rescales_the_rest():
    """dropout_p zeroes a share of the weights and scales the others by 1 / (1 - p), as nn.Dropout does."""
    q, k, v = (torch.randn(2, 4, 16, 8) for _ in range(3))
    _, clean = tc.scaled_dot_product_attention(q, k, v)
    out, dropped = tc.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    kept = dropped != 0
    assert 0.3 < kept.float().mean() < 0.7
    torch.testing.assert_close(dropped[kept], clean[kept] * 2)
    torch.testing.assert_close(out, dropped @ v)


def test_multihead_attention_drops_weights_in_training_only():
    mha = tc.MultiHeadAttention(16, 2, dropout=0.5)
    x = torch.randn(2, 6, 16)
    mha.train()(x, x, x)
    assert (mha.attn_weights == 0).float().mean() > 0.3  # dropout applied to the weights
    mha.eval()(x, x, x)
    assert (mha.attn_weights > 0).all()  # no dropout in evaluation


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_masking_is_safe_in_half_precision(dtype):
    """`masked_fill(mask, -1e9)` overflows float16; the package uses the dtype's own minimum."""
    q = torch.randn(2, 5, 8).to(dtype)
    with pytest.raises(RuntimeError, match="overflow"):
        q.masked_fill(torch.ones_like(q, dtype=torch.bool), -1e9) if dtype == torch.float16 else q.half().masked_fill(
            torch.ones_like(q, dtype=torch.bool), -1e9
        )
    out, weights = tc.scaled_dot_product_attention(q, q, q, tc.causal_mask(5))
    assert out.dtype == dtype and torch.isfinite(out).all()
    torch.testing.assert_close(weights.float().sum(-1), torch.ones(2, 5), atol=1e-2, rtol=0)


# --- masks -----------------------------------------------------------------------------------------------


def test_causal_and_padding_masks():
    assert tc.causal_mask(3).tolist() == [[True, False, False], [True, True, False], [True, True, True]]
    tokens = torch.tensor([[1, 2, 3, 0, 0]])
    assert tc.padding_mask(tokens).shape == (1, 1, 1, 5)
    assert tc.padding_mask(tokens)[0, 0, 0].tolist() == [True, True, True, False, False]
    combined = masks.decoder_self_mask(tokens)
    assert combined.shape == (1, 1, 5, 5)
    assert combined[0, 0, 4].tolist() == [True, True, True, False, False]


def test_mask_conventions_convert_to_true_means_attend():
    hide = torch.tensor([[0, 1], [0, 0]], dtype=torch.uint8)  # post 1: 1 = hide
    keep = torch.tensor([[1, 0], [1, 1]])  # post 3: 0 = hide
    expected = [[True, False], [True, True]]
    assert tc.from_hide_mask(hide).tolist() == expected
    assert tc.from_keep_mask(keep).tolist() == expected
    assert masks.to_hide_mask(tc.from_hide_mask(hide)).tolist() == hide.bool().tolist()
    additive = masks.to_additive_mask(tc.from_keep_mask(keep), torch.float16)
    assert additive[0, 1] == torch.finfo(torch.float16).min and additive[0, 0] == 0


def test_additive_mask_equals_bool_mask_in_sdpa():
    q = torch.randn(1, 2, 4, 8)
    mask = tc.causal_mask(4)
    expected = F.scaled_dot_product_attention(q, q, q, attn_mask=mask)
    got = F.scaled_dot_product_attention(q, q, q, attn_mask=masks.to_additive_mask(mask))
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)


# --- multihead -------------------------------------------------------------------------------------------


def test_split_then_merge_heads_is_identity_and_keeps_feature_blocks():
    x = torch.arange(2 * 3 * 8, dtype=torch.float32).view(2, 3, 8)
    heads = tc.split_heads(x, 4)
    assert heads.shape == (2, 4, 3, 2)
    torch.testing.assert_close(heads[:, 1], x[..., 2:4])
    torch.testing.assert_close(tc.merge_heads(heads), x)


def test_fast_path_equals_teaching_path_and_skips_weights():
    mha = tc.MultiHeadAttention(16, 4).eval()
    x = torch.randn(2, 5, 16)
    mask = tc.padding_mask(torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]))
    slow = mha(x, x, x, mask)
    assert mha.attn_weights.shape == (2, 4, 5, 5)
    tc.use_fused_attention(mha)
    fast = mha(x, x, x, mask)
    assert mha.attn_weights is None
    torch.testing.assert_close(fast, slow, atol=1e-5, rtol=0)


# --- ffn, norm, residual ---------------------------------------------------------------------------------


def test_ffn_equals_conv1d_with_kernel_one_and_same_parameter_count():
    ffn = tc.PositionwiseFeedForward(8, 32)
    conv1, conv2 = nn.Conv1d(8, 32, kernel_size=1), nn.Conv1d(32, 8, kernel_size=1)
    with torch.no_grad():
        conv1.weight.copy_(ffn.w_1.weight[:, :, None])
        conv1.bias.copy_(ffn.w_1.bias)
        conv2.weight.copy_(ffn.w_2.weight[:, :, None])
        conv2.bias.copy_(ffn.w_2.bias)
    x = torch.randn(2, 5, 8)
    conv_out = conv2(torch.relu(conv1(x.transpose(1, 2)))).transpose(1, 2)
    torch.testing.assert_close(ffn(x), conv_out, atol=1e-5, rtol=0)
    assert tc.count_parameters(ffn) == tc.count_parameters(conv1) + tc.count_parameters(conv2)


def test_seed_000_layernorm_differs_from_the_real_one():
    x = torch.randn(4, 16)
    seed_style = (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + 1e-6)  # unbiased, eps outside
    ours = tc.LayerNorm(16)(x)
    torch.testing.assert_close(ours, F.layer_norm(x, (16,)), atol=1e-5, rtol=0)
    assert (seed_style - ours).abs().max() > 1e-2


def test_rmsnorm_formula():
    x = torch.randn(3, 8)
    expected = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
    torch.testing.assert_close(tc.RMSNorm(8)(x), expected, atol=1e-6, rtol=0)


@pytest.mark.parametrize("norm_first", [False, True])
def test_sublayer_connection_order(norm_first):
    sub = tc.SublayerConnection(8, dropout=0.0, norm_first=norm_first)
    x = torch.randn(2, 3, 8)

    def double(y):
        return 2 * y

    expected = x + double(sub.norm(x)) if norm_first else sub.norm(x + double(x))
    torch.testing.assert_close(sub(x, double), expected)


# --- embedding -------------------------------------------------------------------------------------------


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


# --- model, decoding -------------------------------------------------------------------------------------


def test_cached_decode_equals_full_decode():
    torch.manual_seed(0)
    model = tc.Transformer(12, 12, d_model=16, n_heads=2, n_layers=2, d_ff=32, dropout=0.0).eval()
    src = torch.tensor([[3, 4, 5, 0], [6, 7, 8, 9]])
    tgt = torch.tensor([[1, 4, 5, 6, 7], [1, 8, 9, 3, 2]])
    memory = model.encode(src)
    full = model.decode(tgt, memory, src)
    cache = tc.KVCache(len(model.decoder.layers))
    steps = [decode_cached(model, tgt[:, : t + 1], memory, src, cache) for t in range(tgt.shape[1])]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=0)


def test_beam_of_one_is_greedy_and_wider_beams_score_at_least_as_well():
    for seed in range(5):
        torch.manual_seed(seed)
        model = tc.Transformer(12, 12, d_model=16, n_heads=2, n_layers=1, d_ff=32, dropout=0.0).eval()
        src = torch.randint(3, 12, (1, 5))
        greedy = tc.greedy_decode(model, src, 8, 1, 2)
        assert torch.equal(tc.beam_search(model, src, 1, 8, 1, 2), greedy)
        beam = tc.beam_search(model, src, 4, 8, 1, 2)
        assert beam[0, 0] == 1
        greedy_ended = (greedy[0] == 2).any()
        beam_ended = (beam[0] == 2).any()
        if greedy_ended and beam_ended:
            assert tc.sequence_log_prob(model, src, beam) >= tc.sequence_log_prob(model, src, greedy) - 1e-5


def test_decoding_restores_training_mode():
    model = tc.Transformer(12, 12, d_model=16, n_heads=2, n_layers=1, d_ff=32).train()
    tc.greedy_decode(model, torch.tensor([[3, 4]]), 4, 1, 2)
    assert model.training


# --- training --------------------------------------------------------------------------------------------


def test_noam_schedule_peaks_at_warmup():
    lrs = [tc.noam_lr(s, 512, 4000) for s in range(1, 20_000, 10)]
    peak_step = 1 + 10 * max(range(len(lrs)), key=lrs.__getitem__)
    assert abs(peak_step - 4000) <= 10
    assert tc.noam_lr(4000, 512, 4000) == pytest.approx(512**-0.5 * 4000**-0.5)


def test_noam_scheduler_sets_the_formula():
    p = nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=1.0)
    sched = tc.noam_scheduler(opt, d_model=64, warmup=10)
    seen = []
    for _ in range(3):
        seen.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert seen == pytest.approx([tc.noam_lr(s, 64, 10) for s in (1, 2, 3)])


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.3])
def test_label_smoothing_equals_torch_cross_entropy(smoothing):
    logits = torch.randn(4, 6, 11)
    target = torch.randint(0, 11, (4, 6))
    target[0, 3:] = 0
    expected = F.cross_entropy(logits.reshape(-1, 11), target.reshape(-1), ignore_index=0, label_smoothing=smoothing)
    got = tc.LabelSmoothingLoss(11, smoothing, ignore_index=0)(logits, target)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)


def test_set_seed_makes_runs_repeat():
    tc.set_seed(3)
    a = torch.randn(3)
    tc.set_seed(3)
    assert torch.equal(a, torch.randn(3))


# --- data ------------------------------------------------------------------------------------------------


def test_corpus_ids_match_seed_001():
    """The seed prints 自然语言处理 很 强大 as [11, 12, 13] and its target as [14, 15, 16, 2]."""
    corpus = tc.ParallelCorpus(tc.POST1_PAIRS)
    assert corpus.src_vocab.encode("自然语言处理 很 强大") == [11, 12, 13]
    assert corpus.tgt_vocab.encode("NLP is powerful", add_eos=True) == [14, 15, 16, 2]
    batch = corpus.batch([3])
    assert batch.tgt_in.tolist() == [[1, 14, 15, 16]]
    assert batch.tgt_out.tolist() == [[14, 15, 16, 2]]


def test_batches_are_padded_shifted_and_reshuffled():
    corpus = tc.ParallelCorpus(tc.POST1_PAIRS)
    batch = corpus.batch()
    assert batch.src.shape == (5, 4) and batch.tgt_in.shape == batch.tgt_out.shape == (5, 5)
    vocab = corpus.tgt_vocab
    for (_, target), row_in, row_out in zip(corpus.pairs, batch.tgt_in.tolist(), batch.tgt_out.tolist()):
        words = [vocab[w] for w in target.split()]
        pads = [0] * (5 - len(words) - 1)
        assert row_in == [vocab.sos_id, *words, *pads]
        assert row_out == [*words, vocab.eos_id, *pads]

    def unpadded(batch):
        return [tuple(t for t in row if t != 0) for row in batch.src.tolist()]

    iterator = corpus.batches(2, seed=0)
    passes = [[row for b in iterator for row in unpadded(b)] for _ in range(6)]
    assert all(sorted(p) == sorted(unpadded(corpus.batch())) for p in passes), "each pass yields every pair once"
    orders = {tuple(p) for p in passes}
    assert len(orders) > 1, "every pass over the data should reshuffle"


def test_vocab_decode_stops_at_eos():
    vocab = tc.ParallelCorpus(tc.POST1_PAIRS).tgt_vocab
    assert vocab.decode([1, 3, 4, 5, 2, 7, 0]) == ["KaGe", "likes", "XiaoBing"]
