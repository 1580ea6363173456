"""Post 1's five sentence pairs, translated exactly once decoding is autoregressive.

The seed fed `<sos> <pad> <pad> ...` through the decoder once and printed `NLP NLP NLP NLP NLP`; the
same kind of model, decoded token by token, translates all five pairs word for word.
"""

import pytest
import torch

import transformer_course as tc
from transformer_course import translate
from transformer_course.demo import train_post1_pairs
from transformer_course.efficient import decode_cached


@pytest.fixture(scope="module", params=[0, 1, 2], ids=lambda s: f"seed{s}")
def trained(request):
    net, corpus, history = train_post1_pairs(seed=request.param, progress=False)
    return net, corpus, history


def test_training_stops_when_all_five_pairs_are_exact(trained):
    _, _, history = trained
    assert history.evals[-1][1] == 1.0
    assert history.steps < 300  # stopped early, well before the budget


def test_greedy_decoding_translates_all_five_pairs_exactly(trained):
    net, corpus, _ = trained
    src = corpus.encode_source([s for s, _ in tc.POST1_PAIRS])
    out = tc.greedy_decode(net, src, 12, corpus.tgt_vocab.sos_id, corpus.tgt_vocab.eos_id)
    got = [" ".join(corpus.tgt_vocab.decode(row)) for row in out]
    assert got == [t for _, t in tc.POST1_PAIRS]


@pytest.mark.parametrize("beam_size", [1, 3])
def test_each_pair_alone_with_greedy_and_beam_search(trained, beam_size):
    net, corpus, _ = trained
    for src, tgt in tc.POST1_PAIRS:
        result = translate.translate_sentence(net, corpus, src, beam_size=beam_size)
        assert result.text == tgt
        assert result.source == src.split()
        assert result.log_prob <= 0.0


def test_the_seed_failure_case(trained):
    # The sentence post 1 printed as "NLP NLP NLP NLP NLP".
    net, corpus, _ = trained
    assert translate.translate_sentence(net, corpus, "自然语言处理 很 强大").tokens == ["NLP", "is", "powerful"]


def test_one_pass_decoding_reproduces_the_seed_failure(trained):
    # Post 1 fed "<sos> <pad> <pad> <pad> <pad>" once: every position, seeing only <sos>, says "NLP".
    net, corpus, _ = trained
    src = corpus.encode_source(["自然语言处理 很 强大"])
    out = translate.one_pass_decode(net, src, 5, corpus.tgt_vocab.sos_id)
    assert corpus.tgt_vocab.decode(out[0]) == ["NLP"] * 5
    assert net.training is False


def test_evaluate_reports_exact_match_and_bleu(trained):
    net, corpus, _ = trained
    perfect = translate.evaluate(net, corpus, tc.POST1_PAIRS)
    assert perfect.exact_match == 1.0
    assert perfect.bleu == pytest.approx(100.0)
    assert perfect.errors([s for s, _ in tc.POST1_PAIRS]) == []
    # swap two references: those two sentences now count as wrong
    swapped = [tc.POST1_PAIRS[1], tc.POST1_PAIRS[0], *tc.POST1_PAIRS[2:]]
    pairs = [(s, t) for (s, _), (_, t) in zip(tc.POST1_PAIRS, swapped)]
    worse = translate.evaluate(net, corpus, pairs)
    assert worse.exact_match == pytest.approx(3 / 5)
    assert worse.bleu < 100.0
    assert [e[0] for e in worse.errors([s for s, _ in pairs])] == [tc.POST1_PAIRS[0][0], tc.POST1_PAIRS[1][0]]


def test_cross_attention_map_is_the_one_used_while_decoding(trained):
    net, corpus, _ = trained
    result = translate.translate_sentence(net, corpus, "咖哥 喜欢 小冰")
    n_layers, n_heads = net.config.n_layers, net.config.n_heads
    assert result.cross_attention.shape == (n_layers, n_heads, len(result.tokens) + 1, 3)
    assert torch.all(result.cross_attention >= 0)
    torch.testing.assert_close(result.cross_attention.sum(-1), torch.ones(n_layers, n_heads, len(result.tokens) + 1))
    # Decode again step by step with the KV cache and keep each step's row: the same map.
    src = corpus.encode_source(["咖哥 喜欢 小冰"])
    ys = torch.tensor([[corpus.tgt_vocab.sos_id] + [corpus.tgt_vocab[w] for w in result.tokens]])
    memory, cache, rows = net.encode(src), tc.KVCache(len(net.decoder.layers)), []
    with torch.no_grad():
        for t in range(1, ys.shape[1] + 1):
            decode_cached(net, ys[:, :t], memory, src, cache)
            rows.append(torch.stack([w[0] for w in net.decoder.cross_attn_weights]))
    torch.testing.assert_close(torch.cat(rows, dim=2), result.cross_attention)


def test_translate_sentence_leaves_the_attention_setting_alone(trained):
    net, corpus, _ = trained
    tc.use_fused_attention(net)
    try:
        translate.translate_sentence(net, corpus, "咖哥 喜欢 小冰")
        attention = [m for m in net.modules() if isinstance(m, tc.MultiHeadAttention)]
        assert not any(m.attention is tc.scaled_dot_product_attention for m in attention)
    finally:
        tc.use_fused_attention(net, False)


def test_unknown_and_empty_input(trained):
    net, corpus, _ = trained
    with pytest.raises(translate.UnknownWordsError, match="猫") as info:
        translate.translate_sentence(net, corpus, "咖哥 喜欢 猫")
    assert info.value.words == ["猫"]
    assert isinstance(info.value, ValueError)
    with pytest.raises(ValueError, match="empty"):
        translate.translate_sentence(net, corpus, "   ")
    with pytest.raises(TypeError, match="vocabs"):
        translate.translate_sentence(net, "not a corpus", "咖哥 喜欢 小冰")


def test_segmentation_by_longest_match(trained):
    _, corpus, _ = trained
    vocab = corpus.src_vocab
    assert translate.segment("咖哥喜欢小冰", vocab) == ["咖哥", "喜欢", "小冰"]
    assert translate.segment("深度学习 改变世界", vocab) == ["深度学习", "改变", "世界"]
    with pytest.raises(translate.UnknownWordsError) as info:
        translate.segment("咖哥喜欢猫狗", vocab)
    assert info.value.words == ["猫狗"]


def test_exact_match_checks_its_arguments():
    assert translate.exact_match(["a b", "c"], ["a b", "d"]) == 0.5
    assert translate.exact_match(["a  b"], ["a b"]) == 1.0  # word for word, not character for character
    with pytest.raises(ValueError, match="as many"):
        translate.exact_match(["a"], ["a", "b"])
    with pytest.raises(ValueError, match="as many"):
        translate.exact_match([], [])
