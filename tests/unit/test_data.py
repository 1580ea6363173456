"""transformer_course/data.py: vocabularies, the parallel corpus and its batches."""

import pytest

import transformer_course as tc

# ---------------------------------------------------------------------------------------------------------
# The module's own claims


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


# ---------------------------------------------------------------------------------------------------------
# Bad input gets a ValueError or TypeError whose message names the argument and what was expected


BAD_INPUT = [
    # (id, callable, exception, pattern the message must contain)
    ("unknown word", lambda: tc.Vocab.build(["我 喜欢 你"]).encode("我 喜欢 猫"), ValueError,
     r"unknown word\(s\) '猫': not in the vocabulary"),
    ("empty corpus", lambda: tc.ParallelCorpus([]), ValueError, r"pairs is empty"),
    ("half a sentence pair", lambda: tc.ParallelCorpus([("我 喜欢 你", "")]), ValueError,
     r"pairs\[0\]=.* must be two non-empty strings"),
]  # fmt: skip


@pytest.mark.parametrize(("call", "exc", "pattern"), [c[1:] for c in BAD_INPUT], ids=[c[0] for c in BAD_INPUT])
def test_bad_input_raises_a_clear_error(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()
