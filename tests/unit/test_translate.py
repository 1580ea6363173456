"""The translator's functions on bad input: special tokens are not words, an empty sentence gets no made-up
translation, and vocabularies that do not fit the model are refused up front (never a KeyError later).

An untrained model is enough here: these tests are about what is refused, not about what is translated.
"""

import pytest
import torch

import transformer_course as tc
from transformer_course import translate
from transformer_course.translate import UnknownWordsError, segment, translate_batch, translate_sentence


@pytest.fixture(scope="module")
def setup():
    torch.manual_seed(0)
    corpus = tc.ParallelCorpus(tc.POST1_PAIRS)
    model = tc.Transformer(len(corpus.src_vocab), len(corpus.tgt_vocab), d_model=16, n_heads=2, n_layers=1,
                           d_ff=32, max_len=12).eval()  # fmt: skip
    return model, corpus


SENTENCE = tc.POST1_PAIRS[0][0]


@pytest.mark.parametrize("special", ["<pad>", "<sos>", "<eos>"])
def test_special_tokens_are_not_words(setup, special):
    _, corpus = setup
    vocab = tc.ParallelCorpus(tc.POST1_PAIRS, shared_vocab=True).src_vocab  # holds all three specials
    for v in (corpus.src_vocab, vocab):
        with pytest.raises(UnknownWordsError, match=f"'{special}'"):
            segment(special, v)
        with pytest.raises(UnknownWordsError, match=f"'{special}'"):
            segment(f"{SENTENCE} {special}", v)


def test_translate_sentence_refuses_pad(setup):
    model, corpus = setup
    with pytest.raises(UnknownWordsError, match="'<pad>'"):
        translate_sentence(model, corpus, "<pad>")


@pytest.mark.parametrize(
    ("sentences", "exc", "message"),
    [
        ([SENTENCE, ""], ValueError, r"sentences\[1\]='': sentence is empty"),
        ([SENTENCE, "   "], ValueError, r"sentences\[1\]='   ': sentence is empty"),
        (["<pad>"], ValueError, r"sentences\[0\]='<pad>': unknown word\(s\) '<pad>'"),
        ([SENTENCE, "咖哥 喜欢 猫"], ValueError, r"sentences\[1\]=.*unknown word\(s\) '猫'"),
        ([SENTENCE, None], TypeError, r"sentences\[1\]: sentence must be a str, got NoneType"),
        (SENTENCE, TypeError, "sentences must be a list of str, got str"),
        ([" ".join(["咖哥"] * 13)], ValueError, r"sentences\[0\] has 13 words; this model reads at most max_len=12"),
    ],
    ids=["empty", "blank", "pad", "unknown word", "None", "a string", "too long"],
)
def test_translate_batch_refuses_bad_sentences(setup, sentences, exc, message):
    model, corpus = setup
    with pytest.raises(exc, match=message):
        translate_batch(model, corpus, sentences)


def test_translate_batch_of_nothing_is_nothing(setup):
    model, corpus = setup
    assert translate_batch(model, corpus, []) == []


def test_translate_batch_segments_like_translate_sentence(setup):
    model, corpus = setup
    together = SENTENCE.replace(" ", "")
    assert translate_batch(model, corpus, [together]) == translate_batch(model, corpus, [SENTENCE])
    assert translate_batch(model, corpus, [SENTENCE]) == [translate_sentence(model, corpus, together).text]


def test_translate_batch_size(setup):
    model, corpus = setup
    sentences = [s for s, _ in tc.POST1_PAIRS]
    assert translate_batch(model, corpus, sentences, batch_size=2) == translate_batch(model, corpus, sentences)
    with pytest.raises(ValueError, match="batch_size=0 must be a positive integer"):
        translate_batch(model, corpus, sentences, batch_size=0)


@pytest.mark.parametrize("translate_fn", [translate_batch, translate_sentence], ids=["batch", "sentence"])
def test_swapped_vocabularies_are_refused_up_front(setup, translate_fn):
    model, corpus = setup
    arg = [SENTENCE] if translate_fn is translate_batch else SENTENCE
    with pytest.raises(ValueError, match="swapped"):
        translate_fn(model, (corpus.tgt_vocab, corpus.src_vocab), arg)


@pytest.mark.parametrize("translate_fn", [translate_batch, translate_sentence], ids=["batch", "sentence"])
def test_vocabularies_of_another_model_are_refused(setup, translate_fn):
    model, _ = setup
    other = tc.ParallelCorpus(tc.POST1_PAIRS[:2])
    arg = [SENTENCE] if translate_fn is translate_batch else SENTENCE
    with pytest.raises(ValueError, match=r"src_vocab has \d+ tokens but the model's src_vocab_size is \d+"):
        translate_fn(model, other, arg)


def test_net_must_be_a_transformer(setup):
    _, corpus = setup
    with pytest.raises(TypeError, match=r"net must be a transformer_course\.Transformer, got NoneType"):
        translate_batch(None, corpus, [SENTENCE])


def test_evaluate_refuses_malformed_pairs(setup):
    model, corpus = setup
    with pytest.raises(ValueError, match=r"pairs\[1\]=.* must be a \(source, reference\) pair of strings"):
        translate.evaluate(model, corpus, [tc.POST1_PAIRS[0], (SENTENCE,)])


def test_an_error_on_a_long_input_stays_short(setup):
    # 20,000 unknown words: the message names a few and counts the rest, and cuts the sentence it quotes.
    model, corpus = setup
    sentence = " ".join(f"词{i}" for i in range(20_000))
    with pytest.raises(ValueError, match=r"and 19990 more") as error:
        translate_batch(model, corpus, [sentence])
    assert len(str(error.value)) < 500
    with pytest.raises(ValueError, match=r"and 19990 more: not in the vocabulary") as error:
        corpus.src_vocab.encode(sentence)
    assert len(str(error.value)) < 500
