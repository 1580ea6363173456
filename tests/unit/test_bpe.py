"""Chapter 17: the byte-level BPE tokenizer and the real-text corpus it is trained on.

The reference is Hugging Face ``tokenizers`` (Rust), trained with the same settings on the same text: the
same merges in the same order and the same ids. Ids differ by design in one place only: ``tokenizers`` puts
the special tokens before the 256 bytes, this package after them (GPT-2 style bytes-first), so with special
tokens the comparison maps ids through that fixed permutation.
"""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import transformer_course as tc
from transformer_course import bpe, corpus

EOT = "<|endoftext|>"
VOCAB = 600


@pytest.fixture(scope="module")
def text():
    """About 120 kB of the training split: English docstrings, course prose and every Chinese poem."""
    return "\n\n".join(
        [
            corpus.load_text("train", "python-docs")[:60_000],
            corpus.load_text("train", "course")[:30_000],
            *corpus.load_documents("train", "poems"),
        ]
    )


@pytest.fixture(scope="module")
def trained(text):
    return tc.BPETokenizer.train(text, VOCAB, special_tokens=[EOT])


@pytest.fixture(scope="module")
def reference(text):
    return bpe.train_huggingface(text, VOCAB, special_tokens=[EOT])


def to_hf_id(i: int, n_special: int = 1) -> int:
    """This package's id -> tokenizers' id: specials come first there, then the bytes; merges agree."""
    if i < 256:
        return i + n_special
    return i - 256 if i < 256 + n_special else i


# ---- the corpus


def test_heldout_split_is_whole_documents_never_in_train():
    train, heldout = corpus.load_documents("train"), corpus.load_documents("heldout")
    assert not set(train) & set(heldout)
    train_text = corpus.load_text("train")
    assert all(doc not in train_text for doc in heldout)  # not even inside a longer document
    for source in corpus.SOURCES:  # every source has documents on both sides
        assert corpus.load_documents("train", source) and corpus.load_documents("heldout", source)


def test_corpus_size_and_languages():
    train, heldout = corpus.load_text("train").encode(), corpus.load_text("heldout").encode()
    assert 500_000 < len(train) + len(heldout) < 2_000_000
    assert 0.05 < len(heldout) / (len(train) + len(heldout)) < 0.2
    assert "床前明月光" in corpus.load_text("train") + corpus.load_text("heldout")  # 李白《静夜思》
    assert "Return" in corpus.load_text("train", "python-docs")


def test_corpus_ships_its_licences():
    folder = corpus.DATA.parent
    assert "PYTHON SOFTWARE FOUNDATION LICENSE" in (folder / "PSF-LICENSE.txt").read_text(encoding="utf-8")
    notice = (folder / "NOTICE.md").read_text(encoding="utf-8")
    assert all(source in notice for source in corpus.SOURCES)
    # NOTICE.md names the modules whose docstrings keep their authors' own lines: each is there, in that module.
    authors = {"ast": "Armin Ronacher", "logging": "Vinay Sajip", "optparse": "Greg Ward",
               "socketserver": "Luke Kenneth Casson Leighton"}  # fmt: skip
    docs = {r["name"]: r["text"] for r in map(json.loads, corpus.DATA.read_text(encoding="utf-8").splitlines())
            if r["source"] == "python-docs"}  # fmt: skip
    assert all(author in docs[module] and f"`{module}` ({author})" in notice for module, author in authors.items())
    assert "宋诗" in notice and "Song lyrics" not in notice  # song100 holds Song-dynasty shi, not ci


def test_corpus_rejects_an_unknown_split_or_source():
    with pytest.raises(ValueError, match="split='test'"):
        corpus.load_text("test")
    with pytest.raises(ValueError, match="source='wiki'"):
        corpus.load_documents("train", "wiki")


# ---- equality with tokenizers


def test_same_merges_as_tokenizers(trained, reference):
    mine = [(trained.vocab[a], trained.vocab[b]) for a, b in trained.merges]
    assert mine == bpe.huggingface_merges(reference)
    assert len(trained) == reference.get_vocab_size() == VOCAB


def test_same_ids_as_tokenizers_on_heldout_text(trained, reference):
    heldout = corpus.load_text("heldout")[:40_000] + "\n".join(corpus.load_documents("heldout", "poems"))
    ids = trained.encode(heldout)
    assert [to_hf_id(i) for i in ids] == reference.encode(heldout).ids
    assert trained.decode(ids) == heldout == reference.decode(reference.encode(heldout).ids)


def test_same_ids_without_special_tokens_need_no_mapping(text):
    small = text[:20_000]
    mine, ref = tc.BPETokenizer.train(small, 300), bpe.train_huggingface(small, 300)
    held = corpus.load_documents("heldout", "course")[0][:5_000]
    assert mine.encode(held) == ref.encode(held).ids


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=40))
def test_same_ids_as_tokenizers_on_any_text(trained, reference, s):
    assert [to_hf_id(i) for i in trained.encode(s)] == reference.encode(s).ids


def test_a_corpus_too_small_for_the_vocabulary_stops_early_like_tokenizers():
    mine, ref = tc.BPETokenizer.train("abab abab", 1000), bpe.train_huggingface("abab abab", 1000)
    assert len(mine) == ref.get_vocab_size() < 1000
    assert [(mine.vocab[a], mine.vocab[b]) for a, b in mine.merges] == bpe.huggingface_merges(ref)


# ---- behaviour


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text())
def test_any_unicode_text_round_trips(trained, s):
    assert trained.decode(trained.encode(s)) == s


@pytest.mark.parametrize("s", ["注意力机制", "🤖 emoji 👍🏽", "naïve café", "\x00\x7f\t\r\n", "", " " * 7])
def test_round_trip_of_chinese_emoji_and_control_bytes(trained, s):
    assert trained.decode(trained.encode(s)) == s


def test_chinese_character_is_three_byte_tokens_without_merges():
    tok = tc.BPETokenizer()
    ids = tok.encode("注")
    assert len(ids) == 3 and b"".join(tok.vocab[i] for i in ids) == "注".encode()
    assert tok.decode(ids[:1]) == "\ufffd"  # one byte of a three-byte character is not a character


def test_pretokens_keep_the_space_before_the_word_and_never_merge_across():
    assert bpe.pretokenize("Hello world!! it's 2026   x") == ["Hello", " world", "!!", " it", "'s", " 2026", "  ", " x"]
    tok = tc.BPETokenizer.train("a b " * 100, 300)
    assert all(b" " not in t[1:] for t in tok.vocab)  # a space only ever starts a token


def test_training_is_deterministic_and_takes_strings_or_iterables(text):
    docs = corpus.load_documents("train", "poems")
    a = tc.BPETokenizer.train(docs, 400)
    assert a.merges == tc.BPETokenizer.train(list(docs), 400).merges
    assert a.merges == tc.BPETokenizer.train(iter(docs), 400).merges
    ties = tc.BPETokenizer.train("ab cd", 257)  # (a, b) and (c, d) both seen once: the smaller ids win
    assert ties.vocab[256] == b"ab"


def test_merge_applies_left_to_right_without_overlap():
    assert bpe.merge([1, 1, 1], (1, 1), 9) == [9, 1]
    assert bpe.merge([1, 1, 1, 1], (1, 1), 9) == [9, 9]
    assert bpe.count_pairs({(1, 2, 3): 2, (2, 3): 1}) == {(1, 2): 2, (2, 3): 3}


def test_unseen_word_falls_back_to_smaller_pieces(trained):
    ids = trained.encode(" Zyzzyvaquux")
    assert len(ids) > 1 and trained.decode(ids) == " Zyzzyvaquux"


def test_save_load_round_trip_is_plain_json(trained, tmp_path):
    path = tmp_path / "tok.json"
    trained.save(path)
    state = json.loads(path.read_text(encoding="utf-8"))
    assert state["special_tokens"] == [EOT] and len(state["merges"]) == len(trained.merges)
    loaded = tc.BPETokenizer.load(path)
    assert loaded.vocab == trained.vocab and loaded.special_tokens == trained.special_tokens
    s = "Attention 注意力 <|endoftext|>"
    assert loaded.encode(s, allow_special=True) == trained.encode(s, allow_special=True)
    path.write_text(json.dumps({"format": "pickle"}), encoding="utf-8")
    with pytest.raises(ValueError, match="path="):
        tc.BPETokenizer.load(path)


def test_special_tokens_cannot_be_forged_by_user_text(trained, reference):
    eot = trained.special_tokens[EOT]
    assert eot == 256
    s = f"end{EOT}start"
    assert eot not in trained.encode(s)  # the user's "<|endoftext|>" is plain text
    assert trained.decode(trained.encode(s)) == s
    allowed = trained.encode(s, allow_special=True)
    assert allowed.count(eot) == 1 and trained.decode(allowed) == s
    # tokenizers always turns the text "<|endoftext|>" into the special token: the package does when asked.
    assert [to_hf_id(i) for i in allowed] == reference.encode(s).ids


def test_len_and_repr(trained):
    assert len(trained) == len(trained.vocab) == 256 + 1 + len(trained.merges)
    assert repr(trained).startswith(f"BPETokenizer(vocab_size={VOCAB}")


# ---- errors


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"texts": "ab", "vocab_size": 256, "special_tokens": [EOT]}, ValueError, "vocab_size=256"),
        ({"texts": "ab", "vocab_size": 100}, ValueError, "vocab_size=100"),
        ({"texts": "ab", "vocab_size": 300.0}, TypeError, "vocab_size"),
        ({"texts": "ab", "vocab_size": True}, TypeError, "vocab_size"),
        ({"texts": 12, "vocab_size": 300}, TypeError, "texts"),
        ({"texts": b"ab", "vocab_size": 300}, TypeError, "texts"),
        ({"texts": ["ab", 3], "vocab_size": 300}, TypeError, "texts"),
        ({"texts": ["ok", "bad \ud800"], "vocab_size": 300}, ValueError, "texts\\[1\\] holds a surrogate"),
        ({"texts": "ab", "vocab_size": 300, "special_tokens": EOT}, TypeError, "special_tokens"),
        ({"texts": "ab", "vocab_size": 300, "special_tokens": [EOT, EOT]}, ValueError, "twice"),
        ({"texts": "ab", "vocab_size": 300, "special_tokens": [""]}, ValueError, "special_tokens"),
    ],
)
def test_train_errors_name_the_argument(kwargs, error, words):
    with pytest.raises(error, match=words):
        tc.BPETokenizer.train(**kwargs)


def test_encode_and_decode_errors_name_the_argument(trained):
    with pytest.raises(ValueError, match="text holds a surrogate '\\\\udc80' at position 2"):
        trained.encode("ab\udc80")
    # A high and a low surrogate side by side stay two code points in a str: no UTF-8 bytes either.
    with pytest.raises(ValueError, match="text holds a surrogate '\\\\ud83d' at position 1"):
        trained.encode("a\ud83d\ude00")
    with pytest.raises(TypeError, match="text must be a str"):
        trained.encode(b"bytes")
    with pytest.raises(TypeError, match="allow_special"):
        trained.encode("a", allow_special="yes")
    with pytest.raises(ValueError, match=f"ids holds {VOCAB}, not a token id in \\[0, {VOCAB - 1}\\]"):
        trained.decode([1, VOCAB])
    with pytest.raises(ValueError, match="ids holds -1"):
        trained.decode([-1])
    with pytest.raises(TypeError, match="ids must hold int token ids, got float"):
        trained.decode([1.0])
    with pytest.raises(TypeError, match="ids must be an iterable"):
        trained.decode("abc")
    assert trained.decode(iter([trained.encode("x")[0]])) == "x"


def test_benchmark_section_compares_with_tokenizers():
    from transformer_course.course.benchmark._bpe import bpe as bpe_section

    table = bpe_section(vocab_sizes=(280,), max_chars=3_000)
    (row,) = table.rows
    assert list(row) == table.columns and row["same_merges"] and row["same_ids"]
    assert 0 < row["tokens_per_byte"] < 1 and row["train_ratio"] > 0


# ---- special tokens that share a prefix


def test_a_special_token_that_extends_another_wins_over_its_prefix():
    """ "<|a|>" begins "<|a|><|b|>": the longer special is matched, whatever order the specials were given in."""
    tokenizer = tc.BPETokenizer(special_tokens=["<|a|>", "<|a|><|b|>"])  # ids 256 and 257: after the bytes
    x, y = ord("x") - ord("!"), ord("y") - ord("!")  # printable ASCII bytes come first: id = byte - 33 (GPT-2's order)
    assert tokenizer.encode("x<|a|><|b|>y", allow_special=True) == [x, 257, y]
    assert tokenizer.encode("x<|a|>y", allow_special=True) == [x, 256, y]


def test_a_special_token_that_extends_another_matches_tokenizers():
    """`tokenizers` matches its added tokens leftmost-longest: the same specials come out here."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    specials = ["<|a|>", "<|a|><|b|>"]
    reference = Tokenizer(models.BPE())
    reference.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    reference.add_special_tokens(specials)
    text = "hi<|a|><|b|> there<|a|>!"
    ours = tc.BPETokenizer(special_tokens=specials)
    pieces = [ours.vocab[i].decode() for i in ours.encode(text, allow_special=True) if i >= 256]
    theirs = [token for token in reference.encode(text).tokens if token in specials]
    assert pieces == theirs == ["<|a|><|b|>", "<|a|>"]
