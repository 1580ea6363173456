"""Public functions that no other test checked against an independent computation.

Each result here is worked out by hand in the test (a loop over prefixes, an exhaustive search, a formula)
or by PyTorch, never by another package function built on the one under test.
"""

import dataclasses
import itertools
import math
import os

import pytest
import torch
from torch import nn

import transformer_course as tc
from transformer_course import data

PAD, BOS, EOS = 0, 1, 2


def tiny(vocab=7, seed=0, **kwargs):
    """A small translator left in training mode with dropout on, so a function that forgets eval mode differs."""
    torch.manual_seed(seed)
    sizes = dict(d_model=16, n_heads=2, n_layers=2, d_ff=32, dropout=0.3, max_len=12)
    return tc.Transformer(vocab, vocab, **{**sizes, **kwargs}).train()


@torch.no_grad()
def next_log_probs(model, src_row, prefix):
    """log p(· | prefix, src) for one sentence, from the model's plain forward on that prefix alone."""
    was_training = model.training
    model.eval()
    logits = model(src_row[None], torch.tensor([prefix]))[0, -1]  # (1, t, V) -> (V,)
    model.train(was_training)
    return torch.log_softmax(logits.double(), dim=-1)


# ------------------------------------------------------------------------------------------ decoding


def test_sequence_log_prob_is_the_sum_over_prefixes_by_hand():
    model = tiny()
    src = torch.tensor([[3, 4, 5, 6], [5, 3, 0, 0]])
    tgt = torch.tensor([[BOS, 3, 4, 5, EOS], [BOS, 6, EOS, PAD, PAD]])
    expected = []
    for src_row, row in zip(src, tgt.tolist()):
        total = 0.0
        for t in range(1, len(row)):
            if row[t] != PAD:  # padding after eos is not scored
                total += float(next_log_probs(model, src_row, row[:t])[row[t]])
        expected.append(total)
    got = tc.sequence_log_prob(model, src, tgt)
    torch.testing.assert_close(got.double(), torch.tensor(expected, dtype=torch.float64), atol=1e-4, rtol=0)
    assert model.training  # its mode comes back


def hand_greedy(model, src_row, max_len, eos):
    ys = [BOS]
    while len(ys) < max_len:
        ys.append(int(next_log_probs(model, src_row, ys).argmax()))
        if ys[-1] == eos:
            break
    return ys


@pytest.mark.parametrize("use_cache", [True, False])
def test_greedy_decode_is_the_argmax_loop_by_hand_with_finished_rows_padded(use_cache):
    model = tiny(vocab=10, seed=6)
    src = torch.tensor([[3, 4, 5, 6], [6, 5, 4, 3]])
    # Make eos the first word of row 1, so that row 1 stops at once while row 0 goes on.
    eos = int(next_log_probs(model, src[1], [BOS]).argmax())
    rows = [hand_greedy(model, s, 6, eos) for s in src]
    assert len(rows[1]) == 2 and len(rows[0]) > 2, rows  # the example exercises a finished row
    width = max(map(len, rows))
    expected = [r + [PAD] * (width - len(r)) for r in rows]
    assert tc.greedy_decode(model, src, 6, BOS, eos, use_cache=use_cache).tolist() == expected


@pytest.mark.parametrize("eos_is", ["likely", "unlikely"])
@pytest.mark.parametrize("length_penalty", [0.0, 1.0])
@pytest.mark.parametrize("use_cache", [True, False])
def test_a_beam_wide_enough_to_keep_everything_finds_the_exhaustive_best(eos_is, length_penalty, use_cache):
    """With beam_size >= V² and max_len 3, beam search keeps every hypothesis: its answer is the best of all
    sequences bos·a·b (or bos·eos), scored by hand as score / length**length_penalty. The end token is the
    most likely first word (bos·eos may win) or the least likely one (the winner is longer)."""
    vocab, max_len = 6, 3
    model = tiny(vocab=vocab, seed=2)
    src = torch.tensor([[3, 4, 5]])
    first = next_log_probs(model, src[0], [BOS])
    words = [w for w in range(vocab) if w not in (PAD, BOS)]
    eos = (max if eos_is == "likely" else min)(words, key=lambda w: float(first[w]))
    candidates = {}
    for a in range(vocab):
        if a == eos:
            candidates[(BOS, eos)] = (float(first[eos]), 1)
            continue
        second = next_log_probs(model, src[0], [BOS, a])
        for b in range(vocab):
            candidates[(BOS, a, b)] = (float(first[a] + second[b]), 2)
    best = max(candidates, key=lambda seq: candidates[seq][0] / candidates[seq][1] ** length_penalty)
    if eos_is == "unlikely":
        assert best != (BOS, eos)  # the finished hypothesis must keep its low score to lose
    out = tc.beam_search(model, src, vocab * vocab, max_len, BOS, eos, length_penalty, use_cache=use_cache)
    assert out.tolist() == [list(best)]


# --------------------------------------------------------------------------------------------- config


def test_transformer_config_builds_the_model_it_describes():
    config = tc.TransformerConfig(
        src_vocab_size=11, tgt_vocab_size=9, d_model=12, n_heads=3, n_layers=2, d_ff=20, dropout=0.25,
        max_len=17, norm_first=True, pad_id=4, activation="gelu", positional="learned",
    )  # fmt: skip
    model = tc.Transformer.from_config(config)
    assert model.config == config and model.pad_id == 4
    assert model.src_embed.embedding.weight.shape == (11, 12) and model.lm_head.weight.shape == (9, 12)
    assert isinstance(model.positions, tc.LearnedPositionalEncoding) and model.positions.pe.shape == (17, 12)
    assert len(model.encoder.layers) == len(model.decoder.layers) == 2
    for layer in [*model.encoder.layers, *model.decoder.layers]:
        assert layer.norm_first and all(s.norm_first for s in layer.sublayers)
        assert layer.ffn.w_1.weight.shape == (20, 12) and layer.ffn.dropout.p == 0.25
        assert isinstance(layer.ffn.activation, nn.GELU)
        assert layer.self_attn.n_heads == 3
    assert isinstance(model.encoder.norm, tc.LayerNorm)  # Pre-LN ends with a final norm
    assert config.block == tc.encoder.BlockConfig(12, 3, 20, 0.25, True, "gelu")
    # The plain constructor stores the same config, field for field.
    assert tc.Transformer(**dataclasses.asdict(config)).config == config


@pytest.mark.parametrize(
    ("change", "error", "words"),
    [
        (dict(share_embeddings=True), ValueError, "share_embeddings=True needs one vocabulary"),
        (dict(pad_id=9), ValueError, "pad_id=9 must be an int id inside both vocabularies"),
        (dict(positional="rotary"), ValueError, "positional='rotary' is not one of"),
        (dict(n_layers=0), ValueError, "n_layers"),
        (dict(d_model=10, n_heads=3), ValueError, "d_model"),
    ],
)
def test_transformer_config_refuses_bad_fields_by_name(change, error, words):
    with pytest.raises(error, match=words):
        tc.TransformerConfig(**{**dict(src_vocab_size=12, tgt_vocab_size=9), **change})


def test_transformer_config_is_frozen():
    config = tc.TransformerConfig(12, 12)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.d_model = 8  # type: ignore[misc]


# ------------------------------------------------------------------------------------------------ bert


def test_bert_mlm_logits_are_the_heads_formula_by_hand():
    """Linear, exact GELU, LayerNorm (eps 1e-5), then the tied token embedding and a bias (BERT's MLM head)."""
    torch.manual_seed(0)
    model = tc.BERT(20, d_model=16, n_heads=2, n_layers=1, d_ff=32, max_len=10, dropout=0.0).eval()
    head = model.mlm_head
    with torch.no_grad():  # a gain, shift and bias that differ from their initial 1, 0, 0
        head.norm.weight.uniform_(0.5, 1.5)
        head.norm.bias.uniform_(-0.5, 0.5)
        head.bias.uniform_(-1.0, 1.0)
    ids = torch.tensor([[1, 5, 6, 2, 0], [1, 7, 8, 9, 2]])
    with torch.no_grad():
        hidden = model(ids)
        h = nn.functional.gelu(hidden @ head.transform.weight.T + head.transform.bias)
        h = nn.functional.layer_norm(h, (16,), head.norm.weight, head.norm.bias, eps=1e-5)
        expected = h @ model.token_embedding.weight.T + head.bias
        torch.testing.assert_close(model.mlm_logits(ids), expected, atol=1e-5, rtol=1e-5)


def test_bert_accuracy_is_the_share_of_argmax_hits_by_hand():
    torch.manual_seed(0)
    model = tc.BERT(20, d_model=16, n_heads=2, n_layers=1, d_ff=32, max_len=10, dropout=0.5)
    classifier = tc.BERTClassifier(model, 3, dropout=0.5).train()
    ids = torch.tensor([[1, 5, 6, 2], [1, 7, 8, 2], [1, 9, 2, 0]])
    with torch.no_grad():
        predicted = classifier.eval()(ids).argmax(dim=-1)  # (3,): the class of each sentence
    classifier.train()
    labels = predicted.clone()
    labels[2] = (labels[2] + 1) % 3  # two right, one wrong
    assert tc.bert.accuracy(classifier, ids, labels) == pytest.approx(2 / 3)
    assert tc.bert.accuracy(classifier, ids, (predicted + 1) % 3) == 0.0
    assert classifier.training  # its mode comes back


# ------------------------------------------------------------------------------------------------- gpt


def test_evaluate_lm_is_the_mean_over_every_predicted_token_by_hand():
    """Rows split into batches of 2 with different numbers of targets: the mean is over tokens, not batches."""
    torch.manual_seed(0)
    model = tc.GPT(12, d_model=16, n_heads=2, n_layers=1, d_ff=32, max_len=8, dropout=0.3).train()
    ids = torch.tensor([[1, 4, 5, 6, 7], [1, 8, 0, 0, 0], [1, 3, 9, 10, 0]])
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for row in ids.tolist():
            for t in range(1, len(row)):
                if row[t] != 0:  # padding is not predicted
                    logits = model(torch.tensor([row[:t]]))[0, -1]
                    total -= float(torch.log_softmax(logits.double(), dim=-1)[row[t]])
                    count += 1
    model.train()
    assert count == 4 + 1 + 3
    got = tc.gpt.evaluate_lm(model, ids, pad_id=0, batch_size=2)
    assert got == pytest.approx(total / count, rel=1e-5)
    assert model.training


# ----------------------------------------------------------------------------------------------- data


def test_make_batch_by_hand():
    src_vocab = tc.Vocab(["<pad>", "我", "喜欢", "你"])
    tgt_vocab = tc.Vocab(["<pad>", "<sos>", "<eos>", "I", "like", "you"])
    pairs = [("我 喜欢 你", "I like you"), ("你", "you")]
    batch = tc.make_batch(pairs, src_vocab, tgt_vocab)
    assert batch.src.tolist() == [[1, 2, 3], [3, 0, 0]]
    assert batch.tgt_in.tolist() == [[1, 3, 4, 5], [1, 5, 0, 0]]  # <sos> first, no <eos>
    assert batch.tgt_out.tolist() == [[3, 4, 5, 2], [5, 2, 0, 0]]  # shifted by one, ending with <eos>
    assert batch.src.dtype == batch.tgt_in.dtype == torch.long
    fixed = tc.make_batch(pairs, src_vocab, tgt_vocab, src_len=5, tgt_len=6)
    assert fixed.src.tolist() == [[1, 2, 3, 0, 0], [3, 0, 0, 0, 0]]
    assert fixed.tgt_out.tolist() == [[3, 4, 5, 2, 0, 0], [5, 2, 0, 0, 0, 0]]
    with pytest.raises(ValueError, match="length=2 is shorter than the longest row"):
        tc.make_batch(pairs, src_vocab, tgt_vocab, src_len=2)
    with pytest.raises(ValueError, match="pairs is empty"):
        tc.make_batch([], src_vocab, tgt_vocab)


def test_tokenize_splits_on_whitespace():
    assert data.tokenize(" 我  喜欢\t你\n") == ["我", "喜欢", "你"]


def test_the_decoding_budget_fits_every_reference_translation_with_its_sos_and_eos():
    from transformer_course import datasets, translate

    split = datasets.make_dataset(0)
    pairs = [*tc.POST1_PAIRS, *split.train_pairs, *split.valid_pairs, *split.test_pairs]
    tightest = min(translate.default_max_len(len(zh.split())) - (len(en.split()) + 2) for zh, en in pairs)
    assert tightest >= 0  # no reference translation is cut off by the budget


# ------------------------------------------------------------------------------------- attention, schedule


def test_fused_attention_is_the_formula_by_hand():
    torch.manual_seed(3)
    q, k, v = torch.randn(2, 2, 4, 8), torch.randn(2, 2, 5, 8), torch.randn(2, 2, 5, 8)
    keep = torch.rand(2, 1, 4, 5) > 0.3
    keep[0, 0, 1] = False  # a query that sees nothing gives zeros
    keep[1, 0, 2] = True
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(8)  # (B, H, T, S)
    weights = torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1).nan_to_num(0.0)
    torch.testing.assert_close(tc.fused_attention(q, k, v, keep), weights @ v, atol=1e-5, rtol=0)
    assert tc.fused_attention(q, k, v, keep)[0, :, 1].abs().max() == 0
    torch.testing.assert_close(tc.fused_attention(q, k, v), torch.softmax(scores, -1) @ v, atol=1e-5, rtol=0)


@pytest.mark.parametrize(("step", "expected"), [(1, 512**-0.5 * 4000**-1.5), (100, 512**-0.5 * 100 * 4000**-1.5),
                                                 (16000, 512**-0.5 * 16000**-0.5)])  # fmt: skip
def test_noam_lr_by_the_papers_formula(step, expected):
    """lrate = d_model^-0.5 · min(step^-0.5, step · warmup^-1.5) (paper §5.3), on both sides of the peak."""
    assert tc.noam_lr(step, 512, 4000) == pytest.approx(expected, rel=1e-12)


# ------------------------------------------------------------------------------------ training helpers


def test_get_device_is_the_cpu_without_a_gpu_and_cuda_with_one(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert tc.get_device() == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert tc.get_device() == torch.device("cuda")


def test_set_threads_sets_torch_and_never_exceeds_the_cores(monkeypatch):
    before = torch.get_num_threads()
    try:
        monkeypatch.setattr(os, "cpu_count", lambda: 2)
        assert tc.set_threads(1) == 1 and torch.get_num_threads() == 1
        assert tc.set_threads(8) == 2 and torch.get_num_threads() == 2  # capped at the cores
        assert tc.set_threads() == 2 and torch.get_num_threads() == 2  # default: every core
        with pytest.raises(ValueError, match="n"):
            tc.set_threads(0)
    finally:
        torch.set_num_threads(before)


def test_history_starts_empty_and_instances_share_no_list():
    a, b = tc.History(), tc.History()
    a.losses.append(1.0)
    a.lrs.append(0.1)
    a.evals.append((1, 0.5))
    assert (b.losses, b.lrs, b.evals, b.seconds, b.steps) == ([], [], [], 0.0, 0)


def test_history_of_fit_has_the_loss_and_the_rate_of_every_step():
    corpus = tc.ParallelCorpus(tc.POST1_PAIRS)
    model = tc.Transformer(len(corpus.src_vocab), len(corpus.tgt_vocab), d_model=16, n_heads=2, n_layers=1,
                           d_ff=32, dropout=0.0, max_len=16)  # fmt: skip
    batches = list(itertools.islice(corpus.batches(2, shuffle=False), 3))
    # The optimizer owns a stand-in parameter only: the model's weights never move, while its rate
    # follows a schedule whose values are known (1, 1/2, 1/3 for the steps 1, 2, 3).
    opt = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: 1 / (i + 1))
    loss_fn = tc.training.cross_entropy_loss(corpus.tgt_vocab.pad_id)
    history = tc.fit(model, batches, 3, opt, loss_fn, scheduler=scheduler, progress=False)
    assert history.steps == 3 and history.evals == []
    assert history.lrs == pytest.approx([1.0, 1 / 2, 1 / 3])  # each step's rate, before the scheduler moves
    with torch.no_grad():  # each loss is that batch's cross-entropy, computed by torch
        for loss, batch in zip(history.losses, batches, strict=True):
            logits = model(batch.src, batch.tgt_in)
            by_torch = nn.functional.cross_entropy(
                logits.reshape(-1, logits.shape[-1]), batch.tgt_out.reshape(-1), ignore_index=corpus.tgt_vocab.pad_id
            )
            assert loss == pytest.approx(float(by_torch), rel=1e-5)
