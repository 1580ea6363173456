"""The language of chapters 14 and 15: its sentences, its floor (the best possible loss), sampling and near-misses."""

import math
from collections import Counter

import pytest
import torch

from transformer_course import datasets
from transformer_course.grammar import BOS, EOS, SPECIALS, Language, english_sentences

LANGUAGE = Language.english()


def test_the_language_is_the_english_side_of_the_translators_grammar_without_repeats():
    translations = {english for _, english in datasets.make_dataset().train_pairs}
    assert len(LANGUAGE) == 2816
    assert list(LANGUAGE.sentences) == sorted(set(LANGUAGE.sentences))
    assert translations <= set(LANGUAGE.sentences)
    assert LANGUAGE.sentences == english_sentences()
    assert "he likes her" in LANGUAGE and "  he likes   her " in LANGUAGE
    assert "he like her" not in LANGUAGE and 3 not in LANGUAGE


def test_the_floor_is_log_n_over_the_tokens_per_sentence():
    tokens = sum(len(s.split()) + 1 for s in LANGUAGE.sentences)  # words and <eos>
    assert LANGUAGE.entropy_per_sentence == pytest.approx(math.log(2816))
    assert LANGUAGE.floor == pytest.approx(2816 * math.log(2816) / tokens)
    assert 1.35 < LANGUAGE.floor < 1.37


def test_the_true_next_token_distribution_reaches_the_floor_exactly():
    # p(next | prefix) = (sentences continuing prefix with next) / (sentences with prefix): the best model there is.
    prefixes = Counter()
    for sentence in LANGUAGE.sentences:
        words = [BOS, *sentence.split(), EOS]
        for t in range(1, len(words) + 1):
            prefixes[tuple(words[:t])] += 1
    total, count = 0.0, 0
    for sentence in LANGUAGE.sentences:
        words = [BOS, *sentence.split(), EOS]
        for t in range(1, len(words)):
            total -= math.log(prefixes[tuple(words[: t + 1])] / prefixes[tuple(words[:t])])
            count += 1
    assert total / count == pytest.approx(LANGUAGE.floor, rel=1e-12)


def test_any_other_model_of_the_language_scores_above_the_floor():
    # Gibbs' inequality, numerically: sentence probabilities q that are not uniform cost more than log N.
    g = torch.Generator().manual_seed(0)
    q = torch.softmax(0.3 * torch.randn(len(LANGUAGE), generator=g, dtype=torch.float64), dim=0)
    cross_entropy = -q.log().mean().item()  # the sentences are equally likely: the mean over all of them
    assert cross_entropy > LANGUAGE.entropy_per_sentence


def test_sampling_is_uniform_and_reproducible():
    draws = LANGUAGE.sample(20_000, torch.Generator().manual_seed(1))
    assert draws == LANGUAGE.sample(20_000, torch.Generator().manual_seed(1))
    assert all(s in LANGUAGE for s in draws[:100])
    questions = sum(s.endswith("?") for s in draws) / len(draws)
    expected = sum(s.endswith("?") for s in LANGUAGE.sentences) / len(LANGUAGE)
    assert abs(questions - expected) < 0.015
    with pytest.raises(ValueError, match="n=-1"):
        LANGUAGE.sample(-1)


def test_encodings_put_the_specials_in_place_and_decode_back():
    lm = LANGUAGE.encode_lm(["he likes her", "do you miss KaGe ?"])
    vocab = LANGUAGE.vocab
    assert lm.shape == (2, 7)
    assert lm[0].tolist() == [vocab[BOS], vocab["he"], vocab["likes"], vocab["her"], vocab[EOS], 0, 0]
    mlm = LANGUAGE.encode_mlm(["he likes her"])
    assert mlm[0].tolist() == [vocab["<cls>"], vocab["he"], vocab["likes"], vocab["her"], vocab["<sep>"]]
    assert [LANGUAGE.decode(row) for row in lm] == ["he likes her", "do you miss KaGe ?"]
    assert LANGUAGE.decode(mlm[0]) == "he likes her"
    assert vocab.itos[: len(SPECIALS)] == list(SPECIALS) and vocab.pad_id == 0
    assert LANGUAGE.special_ids == tuple(range(len(SPECIALS)))


def test_corrupt_swaps_one_word_and_leaves_the_language():
    g = torch.Generator().manual_seed(2)
    for sentence in LANGUAGE.sample(300, g):
        bad = LANGUAGE.corrupt(sentence, g)
        assert bad not in LANGUAGE
        changed = [(a, b) for a, b in zip(sentence.split(), bad.split()) if a != b]
        assert len(bad.split()) == len(sentence.split()) and len(changed) == 1
    assert LANGUAGE.corrupt("he likes her", torch.Generator().manual_seed(3)) == LANGUAGE.corrupt(
        "he likes her", torch.Generator().manual_seed(3)
    )
    with pytest.raises(ValueError, match="no one-word swap"):
        LANGUAGE.corrupt("KaGe KaGe KaGe")


def test_labelled_is_balanced_and_labels_say_whether_the_sentence_is_in_the_language():
    texts, labels = LANGUAGE.labelled(LANGUAGE.sentences[:200], torch.Generator().manual_seed(4))
    assert sum(labels) == 100
    assert all((text in LANGUAGE) == bool(label) for text, label in zip(texts, labels))
