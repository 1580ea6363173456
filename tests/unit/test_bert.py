"""Chapter 15's BERT: `mask_tokens` keeps BERT's proportions, the encoder equals PyTorch's, the MLM loss is right."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import transformer_course as tc
from transformer_course import bert
from transformer_course.grammar import Language

V, MASK_ID, SPECIALS = 30, 3, (0, 1, 2, 3)
D, H, FF, L = 32, 4, 64, 2


def token_grid(rows: int = 400, length: int = 50, seed: int = 0) -> torch.Tensor:
    """Random ids with specials sprinkled in: <cls>-like 1 first, padding 0 at the end of some rows."""
    ids = torch.randint(4, V, (rows, length), generator=torch.Generator().manual_seed(seed))
    ids[:, 0] = 1
    ids[::3, -7:] = 0
    ids[::5, 10] = 2
    return ids


# ------------------------------------------------------------------------------------------- mask_tokens


def test_mask_tokens_keeps_berts_proportions_on_a_large_sample():
    ids = token_grid()
    inputs, labels = tc.mask_tokens(ids, MASK_ID, V, 0.15, SPECIALS, torch.Generator().manual_seed(1))
    special = torch.isin(ids, torch.tensor(SPECIALS))
    picked = labels != -100
    n_ordinary = int((~special).sum())
    assert abs(int(picked.sum()) / n_ordinary - 0.15) < 0.005  # about 17,000 ordinary positions
    n_picked = int(picked.sum())
    masked = (inputs == MASK_ID) & picked
    unchanged = (inputs == ids) & picked
    randomised = picked & ~masked & ~unchanged
    # A random token equals the original 1 time in 26 (26 ordinary tokens): "unchanged" gets that share of the 10 %.
    assert abs(int(masked.sum()) / n_picked - 0.80) < 0.02
    assert abs(int(randomised.sum()) / n_picked - 0.10 * 25 / 26) < 0.015
    assert abs(int(unchanged.sum()) / n_picked - (0.10 + 0.10 / 26)) < 0.015


def test_mask_tokens_never_picks_specials_and_labels_only_picked_positions():
    ids = token_grid(seed=2)
    inputs, labels = tc.mask_tokens(ids, MASK_ID, V, 0.3, SPECIALS, torch.Generator().manual_seed(3))
    special = torch.isin(ids, torch.tensor(SPECIALS))
    picked = labels != -100
    assert not (picked & special).any()
    assert torch.equal(labels[picked], ids[picked])  # the original id, wherever the input now holds
    assert (labels[~picked] == -100).all()
    assert torch.equal(inputs[~picked], ids[~picked])  # nothing else changes
    changed = inputs != ids
    assert not torch.isin(inputs[changed & (inputs != MASK_ID)], torch.tensor(SPECIALS)).any()
    assert inputs.shape == labels.shape == ids.shape and inputs.dtype == labels.dtype == torch.long


def test_mask_tokens_is_reproducible_and_p_sets_the_share():
    ids = token_grid(rows=50, seed=4)

    def run(seed, p=0.15):
        return tc.mask_tokens(ids, MASK_ID, V, p, SPECIALS, torch.Generator().manual_seed(seed))

    assert all(torch.equal(a, b) for a, b in zip(run(5), run(5)))
    assert not torch.equal(run(5)[1], run(6)[1])
    inputs, labels = run(5, p=0.0)
    assert torch.equal(inputs, ids) and (labels == -100).all()
    _, labels = run(5, p=1.0)
    assert torch.equal(labels != -100, ~torch.isin(ids, torch.tensor(SPECIALS)))


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        (dict(mask_id=V), ValueError, "mask_id=30"),
        (dict(mask_id=True), ValueError, "mask_id=True"),
        (dict(p=1.5), ValueError, "p=1.5"),
        (dict(p=-0.1), ValueError, "p=-0.1"),
        (dict(vocab_size=0), ValueError, "vocab_size=0"),
        (dict(ids=torch.zeros(2, 3)), TypeError, "ids must be an integer tensor"),
        (dict(special_ids=range(V)), ValueError, "covers the whole vocabulary"),
    ],
)
def test_mask_tokens_refuses_bad_arguments(kwargs, error, words):
    arguments = dict(ids=token_grid(rows=2), mask_id=MASK_ID, vocab_size=V, p=0.15, special_ids=SPECIALS) | kwargs
    with pytest.raises(error, match=words):
        tc.mask_tokens(**arguments)


# ------------------------------------------------------------------------------------------- the model


def make_bert(seed: int = 0, **kwargs) -> tc.BERT:
    torch.manual_seed(seed)
    return tc.BERT(V, d_model=D, n_heads=H, n_layers=L, d_ff=FF, max_len=20, dropout=0.0, **kwargs).eval()


def test_bert_equals_a_model_assembled_from_pytorch_modules():
    model = make_bert()
    torch.manual_seed(1)
    torch_layers = [
        nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, activation="gelu", batch_first=True).eval() for _ in range(L)
    ]
    with torch.no_grad():
        for i, layer in enumerate(torch_layers):
            for norm in (layer.norm1, layer.norm2):
                norm.weight.uniform_(0.5, 1.5)
                norm.bias.uniform_(-0.5, 0.5)
            model.encoder.layers[i] = tc.EncoderLayer.from_torch(layer)
        model.embedding_norm.weight.uniform_(0.5, 1.5)
    ids = torch.tensor([[1, 5, 6, 7, 2, 0, 0], [1, 8, 9, 10, 11, 12, 2]])
    with torch.no_grad():
        x = model.token_embedding(ids) + model.positions.pe[:7]
        x = F.layer_norm(x, (D,), model.embedding_norm.weight, model.embedding_norm.bias)
        for layer in torch_layers:  # post-LN (BERT's order), padding hidden as a key
            x = layer(x, src_key_padding_mask=ids == 0)
        real = ids != 0
        torch.testing.assert_close(model(ids)[real], x[real], atol=1e-5, rtol=1e-4)


def test_every_position_sees_both_sides_and_never_the_padding():
    model = make_bert()
    ids = torch.tensor([[1, 5, 6, 7, 8, 2]])
    changed = ids.clone()
    changed[0, 4] = 9
    padded = torch.cat([ids, torch.zeros(1, 3, dtype=torch.long)], dim=1)
    with torch.no_grad():
        hidden = model(ids)
        assert not torch.allclose(hidden[0, :4], model(changed)[0, :4])  # a later token changes earlier positions
        torch.testing.assert_close(model(padded)[0, :6], hidden[0], atol=1e-5, rtol=1e-4)


def test_the_mlm_head_is_tied_to_the_token_embedding_and_the_classifier_reads_cls():
    model = make_bert()
    assert model.mlm_head.embedding.weight is model.token_embedding.weight
    ids = torch.tensor([[1, 5, 6, 2, 0], [1, 7, 8, 9, 2]])
    assert model.mlm_logits(ids).shape == (2, 5, V)
    classifier = bert.BERTClassifier(model, 3).eval()
    with torch.no_grad():
        logits = classifier(ids)
        by_hand = classifier.classifier(torch.tanh(classifier.pooler(model(ids)[:, 0])))
    assert logits.shape == (2, 3)
    torch.testing.assert_close(logits, by_hand)


def test_mlm_loss_counts_the_picked_positions_only():
    logits = torch.randn(2, 5, V)
    labels = torch.full((2, 5), -100)
    labels[0, 1], labels[1, 3] = 7, 12
    expected = -(torch.log_softmax(logits[0, 1], -1)[7] + torch.log_softmax(logits[1, 3], -1)[12]) / 2
    torch.testing.assert_close(bert.mlm_loss(logits, labels), expected)


def test_pretraining_and_fine_tuning_learn_on_the_language():
    language = Language.english()
    vocab = language.vocab
    torch.manual_seed(0)
    model = tc.BERT(len(vocab), d_model=D, n_heads=H, n_layers=1, d_ff=FF, max_len=12, dropout=0.0)
    g = torch.Generator().manual_seed(1)
    history = bert.pretrain_mlm(
        model, lambda: language.encode_mlm(language.sample(64, g)), 150, vocab["<mask>"], language.special_ids,
        generator=g,
    )  # fmt: skip
    assert history.losses[0] > 3.8 and sum(history.losses[-10:]) / 10 < 3.4  # down from ln(55) = 4.0
    texts, labels = language.labelled(language.sentences[:64], g)
    classifier = bert.BERTClassifier(model, 2)
    bert.fine_tune(classifier, language.encode_mlm(texts), torch.tensor(labels), 20, generator=g)
    score = bert.accuracy(classifier, language.encode_mlm(texts), torch.tensor(labels))
    assert 0.0 <= score <= 1.0 and not classifier.training


# ---- bad input and modes: one-line errors that name the argument, a frozen encoder left frozen


def test_bert_refuses_ids_on_another_device_by_name():
    with pytest.raises(ValueError, match=r"ids is on meta but the model is on cpu: move one with .to\(\)"):
        make_bert()(torch.ones(1, 3, dtype=torch.long, device="meta"))


def test_the_classifier_refuses_an_empty_batch_by_name():
    classifier = bert.BERTClassifier(make_bert(), 2)
    with pytest.raises(ValueError, match=r"ids is empty: .*T >= 1"):
        classifier(torch.zeros(2, 0, dtype=torch.long))


@pytest.mark.parametrize(
    ("ids", "labels", "words"),
    [([], [], "ids holds no sentences"),
     (torch.zeros(0, 5, dtype=torch.long), torch.zeros(0, dtype=torch.long), "ids holds no sentences"),
     (torch.ones(3, 5, dtype=torch.long), torch.zeros(0, dtype=torch.long), "labels holds no labels"),
     (torch.ones(3, 0, dtype=torch.long), torch.zeros(3, dtype=torch.long), r"ids is empty: .*T >= 1"),
     (torch.ones(3, 5, dtype=torch.long), torch.zeros(2, dtype=torch.long), "labels has 2 rows but ids has 3")],
)  # fmt: skip
def test_fine_tune_and_accuracy_refuse_no_sentences_by_name(ids, labels, words):
    classifier = bert.BERTClassifier(make_bert(), 2)
    before = [p.detach().clone() for p in classifier.parameters()]
    with pytest.raises(ValueError, match=words):
        bert.fine_tune(classifier, ids, labels, 2)
    assert all(torch.equal(a, b) for a, b in zip(before, classifier.parameters())), "refused before any step"
    with pytest.raises(ValueError, match=words):
        bert.accuracy(classifier, ids, labels)


def test_accuracy_leaves_a_frozen_encoder_in_eval_mode():
    classifier = bert.BERTClassifier(make_bert(), 2).train()
    classifier.bert.eval()  # frozen: its dropout stays off while the head trains
    ids, labels = torch.tensor([[1, 5, 6, 2], [1, 7, 8, 2]]), torch.tensor([0, 1])
    bert.accuracy(classifier, ids, labels)
    assert classifier.training and classifier.pooler.training and classifier.dropout.training
    assert not any(module.training for module in classifier.bert.modules())


def test_bert_trains_with_the_packages_one_loop():
    assert bert.train_steps is tc.training.train_steps


@pytest.mark.parametrize(
    ("labels", "error", "words"),
    [(torch.tensor([0, 1, 7]), ValueError, r"labels holds class 7, expected classes in \[0, 1\]"),
     (torch.tensor([0, -1, 1]), ValueError, r"labels holds class -1"),
     (torch.tensor([0, 1, 1], dtype=torch.int32), TypeError, r"labels must be a torch.long tensor of class ids")],
)  # fmt: skip
def test_fine_tune_and_accuracy_refuse_labels_that_are_no_class(labels, error, words):
    # A label outside the classes failed inside F.cross_entropy only if a batch happened to draw it, and counted
    # as a wrong answer in accuracy; int32 labels failed inside F.cross_entropy.
    classifier = bert.BERTClassifier(make_bert(), 2)
    ids = torch.tensor([[1, 5, 6, 2], [1, 7, 8, 2], [1, 9, 5, 2]])
    with pytest.raises(error, match=words):
        bert.fine_tune(classifier, ids, labels, 2)
    with pytest.raises(error, match=words):
        bert.accuracy(classifier, ids, labels)


def test_fine_tune_and_accuracy_want_a_classifier_not_the_bare_encoder():
    ids, labels = torch.tensor([[1, 5, 6, 2]]), torch.tensor([0])
    for function in (bert.fine_tune, bert.accuracy):
        with pytest.raises(TypeError, match=r"classifier must be a BERTClassifier\(bert, n_classes\), got BERT"):
            function(make_bert(), ids, labels, *([2] if function is bert.fine_tune else []))
