"""The generated zh→en corpus: its grammar, its phenomena, and a held-out split with no triple overlap."""

import pytest

from transformer_course import datasets as ds
from transformer_course.data import POST1_PAIRS


@pytest.fixture(scope="module")
def dataset():
    return ds.make_dataset(seed=0)


# Hand-written translations: each line is one phenomenon the corpus must teach.
GOLDEN = [
    ("他 喜欢 她", "he likes her"),  # agreement and pronoun case on both sides
    ("她 喜欢 他", "she likes him"),
    ("我们 喜欢 他", "we like him"),  # no -s with a plural subject
    ("我 喜欢 她们", "I like them"),
    ("小冰 喜欢 我们", "XiaoBing likes us"),
    ("咖哥 喜欢 小冰", "KaGe likes XiaoBing"),  # post 1's first pair
    ("他们 想念 咖哥", "they miss KaGe"),
    ("她 想念 你", "she misses you"),  # -es, not -s
    ("我们 不 认识 他", "we do not know him"),  # do-support
    ("咖哥 不 喜欢 他们", "KaGe does not like them"),  # does + bare verb
    ("咖哥 非常 喜欢 小冰", "KaGe likes XiaoBing very much"),  # reordering
    ("我 非常 讨厌 他", "I hate him very much"),
    ("他 喜欢 她 吗", "does he like her ?"),  # the auxiliary moves to the front
    ("你们 非常 爱 我 吗", "do you love me very much ?"),
    ("她 喜欢 自己", "she likes herself"),  # the reflexive follows the subject
    ("咖哥 相信 自己", "KaGe trusts himself"),
    ("你们 帮助 自己", "you help yourselves"),
    ("他们 不 认识 自己", "they do not know themselves"),
    ("他 昨天 看见 了 她", "he saw her yesterday"),  # irregular past, time adverb moved to the end
    ("我们 昨天 没有 遇见 小冰", "we did not meet XiaoBing yesterday"),  # did + bare verb for every person
    ("她 昨天 帮助 了 你 吗", "did she help you yesterday ?"),
]


@pytest.mark.parametrize(("src", "tgt"), GOLDEN)
def test_reference_translation_of_each_phenomenon(src, tgt):
    assert ds.reference_translation(src) == tgt


@pytest.mark.parametrize(("src", "tgt"), GOLDEN)
def test_golden_sentences_are_in_the_corpus(dataset, src, tgt):
    everything = dataset.train_pairs + dataset.valid_pairs + dataset.test_pairs
    assert (src, tgt) in everything


def test_the_corpus_extends_the_seed_vocabulary():
    seed_words = {w for src, _ in POST1_PAIRS for w in src.split()}
    grammar_words = set(ds.PERSONS) | set(ds.VERBS)
    assert {"咖哥", "小冰", "我", "喜欢", "非常"} <= seed_words | grammar_words
    assert {"咖哥", "小冰", "我", "喜欢"} <= grammar_words
    assert ds.reference_translation(POST1_PAIRS[0][0]) == POST1_PAIRS[0][1]


def test_sizes(dataset):
    assert len(dataset.train) >= 2000
    assert len(dataset.test) >= 200
    assert len(dataset.valid) >= 100


def test_split_has_no_triple_overlap(dataset):
    train, valid, test = (dataset.triples(s) for s in ("train", "valid", "test"))
    assert not train & test
    assert not train & valid
    assert not valid & test
    # a partition of the whole grammar: nothing lost, nothing duplicated
    assert train | valid | test == set(ds.all_triples())
    every_pair = dataset.train_pairs + dataset.valid_pairs + dataset.test_pairs
    assert len(every_pair) == len(set(every_pair)) == sum(len(ds.examples_of(t)) for t in ds.all_triples())


def test_every_held_out_word_is_seen_in_training(dataset):
    train_words = {w for pair in dataset.train_pairs for side in pair for w in side.split()}
    held_out = {w for pair in dataset.valid_pairs + dataset.test_pairs for side in pair for w in side.split()}
    assert held_out <= train_words


def test_deterministic_from_seed():
    a, b, c = ds.make_dataset(3), ds.make_dataset(3), ds.make_dataset(4)
    assert a.train == b.train and a.test == b.test and a.valid == b.valid
    assert a.triples("test") != c.triples("test")


def test_source_determines_target():
    # A translation task, not a guessing game: each Chinese sentence has exactly one English answer.
    examples = [e for t in ds.all_triples() for e in ds.examples_of(t)]
    targets = {}
    for e in examples:
        assert targets.setdefault(e.src, e.tgt) == e.tgt
    assert len(targets) == len(examples)


def _all_examples():
    return [e for t in ds.all_triples() for e in ds.examples_of(t)]


def test_agreement_over_the_whole_grammar():
    singular = {"咖哥", "小冰", "他", "她"}
    for e in _all_examples():
        words = e.tgt.split()
        if e.form in ("plain", "very"):
            verb = words[1]
            base, third = ds.VERBS[e.verb][:2]
            assert verb == (third if e.subject in singular else base), e
        elif e.form in ("negated", "question", "very_question"):
            aux = words[1] if e.form == "negated" else words[0]
            assert aux == ("does" if e.subject in singular else "do"), e
        else:  # past: "did" for every person
            assert "did" in words or words[1] == ds.VERBS[e.verb][3], e


def test_pronoun_case_over_the_whole_grammar():
    nominative = {"I", "he", "she", "we", "they"}
    accusative = {"me", "him", "her", "us", "them"}
    for e in _all_examples():
        words = e.tgt.split()
        subject = words[1] if words[0] in ("do", "does", "did") else words[0]
        assert subject not in accusative, e
        assert not nominative & set(words) - {subject}, e  # a nominative only as the subject


def test_negation_uses_do_support_with_a_bare_verb():
    for e in _all_examples():
        words = e.tgt.split()
        if e.form.endswith("negated"):
            i = words.index("not")
            assert words[i - 1] in ("do", "does", "did") and words[i + 1] == ds.VERBS[e.verb][0], e
        else:
            assert "not" not in words, e


def test_very_much_and_yesterday_go_after_the_object():
    for e in _all_examples():
        tail = e.tgt.removesuffix(" ?")
        if e.form in ds.VERY_FORMS:
            assert ds.VERY in e.src.split()[1:2] and tail.endswith(" very much"), e
        elif e.form in ds.PAST_FORMS:
            assert e.src.split()[1] == ds.YESTERDAY and tail.endswith(" yesterday"), e
        else:
            assert "very" not in e.tgt and "yesterday" not in e.tgt, e
        assert e.tgt.endswith("?") == e.src.endswith(ds.QUESTION), e


def test_reflexives_follow_the_subject():
    for e in _all_examples():
        if e.object == ds.REFLEXIVE_WORD:
            expected = ds.REFLEXIVES[ds.PERSONS[e.subject][2]]
            assert expected in e.tgt.split(), e
        else:
            assert not e.tgt.split()[-1].endswith(("self", "selves")), e


def test_parse_round_trips_every_sentence():
    for e in _all_examples():
        assert ds.parse(e.src) == (e.subject, e.verb, e.object, e.form)


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "猫 喜欢 他",  # unknown subject
        "他 喜欢",  # no object
        "他 不 喜欢 她 吗",  # the grammar has no negated questions
        "我 喜欢 我",  # the grammar says 自己
        "他 非常 认识 她",  # 非常 only with verbs of feeling
        "他 昨天 喜欢 了 她",  # past only with verbs of events
    ],
)
def test_parse_rejects_sentences_outside_the_grammar(bad):
    with pytest.raises(ValueError, match="not a sentence of the grammar"):
        ds.parse(bad)


def test_argument_errors():
    with pytest.raises(TypeError, match="seed"):
        ds.make_dataset(seed="0")
    with pytest.raises(ValueError, match="test_fraction"):
        ds.make_dataset(test_fraction=1.5)
    with pytest.raises(ValueError, match=r"below 0\.5"):
        ds.make_dataset(test_fraction=0.3, valid_fraction=0.3)
    with pytest.raises(ValueError, match="form"):
        ds.english("他", "认识", "她", "very")
    with pytest.raises(ValueError, match="verb"):
        ds.chinese("他", "吃", "她")
    with pytest.raises(TypeError, match="sentence"):
        ds.parse(None)
    with pytest.raises(ValueError, match="split"):
        ds.make_dataset(0).triples("dev")
