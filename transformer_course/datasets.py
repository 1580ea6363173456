"""Chapter 12: a generated Chinese→English corpus (生成的平行语料) that needs real translation, not word lookup.

Post 1 trains on five sentence pairs; a model can memorise them without learning any grammar. This
module grows post 1's vocabulary (咖哥, 小冰, 喜欢, ...) into a small grammar whose English side
needs what a word-for-word dictionary cannot do:

    agreement      他 喜欢 小冰       -> he likes XiaoBing         我们 喜欢 小冰 -> we like XiaoBing
    pronoun case   小冰 喜欢 他       -> XiaoBing likes him        (他 is "he" as subject, "him" as object)
    do-support     咖哥 不 喜欢 他们  -> KaGe does not like them   (不 adds "does"/"do", the verb loses its -s)
    reordering     咖哥 非常 喜欢 小冰 -> KaGe likes XiaoBing very much
    questions      他 喜欢 她 吗      -> does he like her ?        (吗 at the end, "does" at the front)
    reflexives     她 喜欢 自己       -> she likes herself         (自己 depends on the subject)
    past tense     他 昨天 看见 了 她  -> he saw her yesterday      (irregular "saw"; 没有 -> "did not see")

Every sentence is subject + verb + object in one of eight forms. The held-out split is by the
(subject, verb, object) triple: no combination of the test set, in any form, occurs in training, so a
model must compose what it learnt rather than recall a sentence. Everything is deterministic from `seed`.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass

from ._validate import check_probability

# Chinese word -> (English as subject, English as object, person/number key for agreement and reflexives).
# 小冰 is post 1's female name; 咖哥 the male one.
PERSONS = {
    "咖哥": ("KaGe", "KaGe", "he"),
    "小冰": ("XiaoBing", "XiaoBing", "she"),
    "我": ("I", "me", "I"),
    "你": ("you", "you", "you"),
    "他": ("he", "him", "he"),
    "她": ("she", "her", "she"),
    "我们": ("we", "us", "we"),
    "你们": ("you", "you", "you_pl"),
    "他们": ("they", "them", "they"),
    "她们": ("they", "them", "they"),
}
THIRD_SINGULAR = {"he", "she"}  # these take "likes" / "does"
REFLEXIVE_WORD = "自己"
REFLEXIVES = {
    "I": "myself", "you": "yourself", "he": "himself", "she": "herself",
    "we": "ourselves", "you_pl": "yourselves", "they": "themselves",
}  # fmt: skip

# Chinese verb -> (base form, third-person singular, takes 非常 "very much", past tense or None).
# Only the verbs of events take 昨天 ... 了 here: "我 昨天 喜欢 了 他" is not how Chinese says it.
VERBS = {
    "喜欢": ("like", "likes", True, None),
    "讨厌": ("hate", "hates", True, None),
    "爱": ("love", "loves", True, None),
    "想念": ("miss", "misses", True, None),
    "认识": ("know", "knows", False, None),
    "相信": ("trust", "trusts", False, None),
    "帮助": ("help", "helps", False, "helped"),
    "看见": ("see", "sees", False, "saw"),
    "遇见": ("meet", "meets", False, "met"),
}

NEGATION, VERY, QUESTION, YESTERDAY, PAST_NEGATION, PERFECTIVE = "不", "非常", "吗", "昨天", "没有", "了"
PRESENT_FORMS = ("plain", "negated", "question")
VERY_FORMS = ("very", "very_question")
PAST_FORMS = ("past", "past_negated", "past_question")
FORMS = PRESENT_FORMS + VERY_FORMS + PAST_FORMS
SUBJECTS = tuple(PERSONS)
OBJECTS = (*PERSONS, REFLEXIVE_WORD)


@dataclass(frozen=True)
class Example:
    """One generated pair and the choices that made it."""

    src: str
    tgt: str
    subject: str
    verb: str
    object: str
    form: str

    @property
    def triple(self) -> tuple[str, str, str]:
        return (self.subject, self.verb, self.object)

    @property
    def pair(self) -> tuple[str, str]:
        return (self.src, self.tgt)


def _check(subject: str, verb: str, obj: str, form: str) -> None:
    for name, value, choices in (
        ("subject", subject, SUBJECTS), ("verb", verb, tuple(VERBS)), ("obj", obj, OBJECTS), ("form", form, FORMS)
    ):  # fmt: skip
        if value not in choices:
            raise ValueError(f"{name}={value!r} is not one of {', '.join(choices)}")
    if form not in forms_of(verb):
        raise ValueError(f"form={form!r} does not go with {verb} ({VERBS[verb][0]}): use one of {forms_of(verb)}")


def chinese(subject: str, verb: str, obj: str, form: str = "plain") -> str:
    """The source sentence, words separated by spaces.

    present: 咖哥 [不|非常] 喜欢 小冰 [吗]      past: 咖哥 昨天 看见 了 小冰 [吗] / 咖哥 昨天 没有 看见 小冰
    """
    _check(subject, verb, obj, form)
    before = {"negated": [NEGATION], "very": [VERY], "very_question": [VERY], "past": [YESTERDAY],
              "past_question": [YESTERDAY], "past_negated": [YESTERDAY, PAST_NEGATION]}.get(form, [])  # fmt: skip
    after = [PERFECTIVE] if form in ("past", "past_question") else []  # 了 marks a completed event
    end = [QUESTION] if form.endswith("question") else []
    return " ".join([subject, *before, verb, *after, obj, *end])


def english(subject: str, verb: str, obj: str, form: str = "plain") -> str:
    """The reference translation of chinese(subject, verb, obj, form): lower case except names and "I"."""
    _check(subject, verb, obj, form)
    subj_en, _, person = PERSONS[subject]
    base, third, _, past = VERBS[verb]
    obj_en = REFLEXIVES[person] if obj == REFLEXIVE_WORD else PERSONS[obj][1]
    singular = person in THIRD_SINGULAR
    # The auxiliary of do-support carries tense and agreement; the verb after it stays bare.
    aux = "did" if form in PAST_FORMS else "does" if singular else "do"
    # 非常 and 昨天 stand before the verb in Chinese; "very much" and "yesterday" go to the end in English.
    tail = ["very", "much"] if form in VERY_FORMS else ["yesterday"] if form in PAST_FORMS else []
    if form.endswith("negated"):
        words = [subj_en, aux, "not", base, obj_en, *tail]
    elif form.endswith("question"):  # the auxiliary moves in front of the subject
        words = [aux, subj_en, base, obj_en, *tail, "?"]
    else:
        # forms_of(verb) offers "past" only to verbs with a past tense, so `past` is set here.
        verb_en = past if form == "past" and past else third if singular else base
        words = [subj_en, verb_en, obj_en, *tail]
    return " ".join(words)


def parse(sentence: str) -> tuple[str, str, str, str]:
    """(subject, verb, object, form) of a sentence of the grammar; a ValueError if it is not one."""
    if not isinstance(sentence, str):
        raise TypeError(f"sentence must be a str, got {type(sentence).__name__}")
    found = _sentences().get(" ".join(sentence.split()))
    if found is None:
        raise ValueError(
            f"{sentence!r} is not a sentence of the grammar: subject [不|非常] verb object [吗], or "
            "subject 昨天 verb 了 object [吗], or subject 昨天 没有 verb object"
        )
    return found


@functools.cache
def _sentences() -> dict[str, tuple[str, str, str, str]]:
    return {e.src: (e.subject, e.verb, e.object, e.form) for t in all_triples() for e in examples_of(t)}


def reference_translation(sentence: str) -> str:
    """The grammar's English for a Chinese sentence of the grammar (the answer a model should give)."""
    return english(*parse(sentence))


def all_triples() -> list[tuple[str, str, str]]:
    """Every (subject, verb, object) of the grammar.

    A word is never its own object (自己 is used instead), and 我/我们 or 你/你们 never meet as subject
    and object: "we like me" is English, but not a sentence anyone would teach with.
    """
    return [(s, v, o) for s in SUBJECTS for v in VERBS for o in OBJECTS if not _overlap(s, o)]


def _overlap(subject: str, obj: str) -> bool:
    group = {"I": 1, "we": 1, "you": 2, "you_pl": 2}
    if obj == REFLEXIVE_WORD:
        return False
    same_group = group.get(PERSONS[subject][2], -1) == group.get(PERSONS[obj][2], -2)
    return subject == obj or same_group


def forms_of(verb: str) -> tuple[str, ...]:
    """The sentence forms a verb allows: 非常 with verbs of feeling, 昨天 with verbs of events."""
    _, _, very, past = VERBS[verb]
    return PRESENT_FORMS + (VERY_FORMS if very else ()) + (PAST_FORMS if past else ())


def examples_of(triple: tuple[str, str, str]) -> list[Example]:
    """All the sentences of one (subject, verb, object) triple, one per form."""
    s, v, o = triple
    return [Example(chinese(s, v, o, f), english(s, v, o, f), s, v, o, f) for f in forms_of(v)]


@dataclass
class TranslationDataset:
    """Train / validation / test pairs whose (subject, verb, object) triples are disjoint."""

    train: list[Example]
    valid: list[Example]
    test: list[Example]
    seed: int

    @staticmethod
    def pairs(examples: list[Example]) -> list[tuple[str, str]]:
        return [e.pair for e in examples]

    @property
    def train_pairs(self) -> list[tuple[str, str]]:
        return self.pairs(self.train)

    @property
    def valid_pairs(self) -> list[tuple[str, str]]:
        return self.pairs(self.valid)

    @property
    def test_pairs(self) -> list[tuple[str, str]]:
        return self.pairs(self.test)

    def triples(self, split: str) -> set[tuple[str, str, str]]:
        if split not in ("train", "valid", "test"):
            raise ValueError(f"split={split!r} must be 'train', 'valid' or 'test'")
        return {e.triple for e in getattr(self, split)}

    def __repr__(self) -> str:
        return (
            f"TranslationDataset(seed={self.seed}: {len(self.train)} train, {len(self.valid)} valid, "
            f"{len(self.test)} test pairs)"
        )


def make_dataset(seed: int = 0, test_fraction: float = 0.12, valid_fraction: float = 0.06) -> TranslationDataset:
    """Generate every sentence of the grammar and split it by (subject, verb, object) triple.

    With the defaults: 864 triples, 4 224 pairs: about 3 460 train, 260 validation and 500 test pairs.
    The split is drawn with `random.Random(seed)`, so it is the same on every machine. Each split's
    examples come in a shuffled order. Every word of the validation and test sets occurs in training.
    """
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    check_probability(test_fraction, "test_fraction")
    check_probability(valid_fraction, "valid_fraction")
    if test_fraction + valid_fraction >= 0.5:
        raise ValueError(f"test_fraction + valid_fraction = {test_fraction + valid_fraction} must stay below 0.5")
    rng = random.Random(seed)
    triples = all_triples()
    rng.shuffle(triples)
    n_test, n_valid = round(test_fraction * len(triples)), round(valid_fraction * len(triples))
    splits = triples[:n_test], triples[n_test : n_test + n_valid], triples[n_test + n_valid :]
    test, valid, train = ([e for t in part for e in examples_of(t)] for part in splits)
    for part in (train, valid, test):
        rng.shuffle(part)
    # With ~90 % of the triples in training every word is seen there; check rather than assume.
    train_words = {w for e in train for side in e.pair for w in side.split()}
    unseen = sorted({w for e in valid + test for side in e.pair for w in side.split()} - train_words)
    if unseen:
        raise ValueError(f"seed={seed} leaves the word(s) {unseen} out of training: choose smaller fractions")
    return TranslationDataset(train, valid, test, seed)
