"""Chapter 17 exercises: the most frequent pair, BPE training, and encoding a word with learned merges.

Here token ids are plain byte values (0-255) and the merge learned i-th makes token 256 + i: the package
numbers bytes in GPT-2's order instead, so none of the answers is printed in the chapter. Words are given as
`bytes`, a list with repeats (the pre-tokens of a text), not as the chapter's dict of counts. The known
mistakes include pairs counted across word boundaries, repeats ignored, overlapping pairs counted or merged
the wrong way, ties broken another way, counts never updated after a merge, merges applied in the dict's
order or in reverse, and characters taken for bytes.
"""

from __future__ import annotations

from collections import Counter
from functools import partial
from itertools import pairwise

from ..bpe import merge
from ._core import Case, Mistake, Result, checker, compare, solution

# ---------------------------------------------------------------- shared: pairs counted, one way or another


def _count(words, boundary=False, distinct=False, overlap=True, skip_last=False, wrap=False) -> Counter:
    """Pair counts of words (tuples of ids); each flag is one way of getting them wrong."""
    if boundary:
        words = [tuple(t for w in words for t in w)]  # the whole text as one word: pairs across boundaries
    if distinct:
        words = list(dict.fromkeys(words))  # each distinct word once, whatever its repeats
    counts: Counter = Counter()
    for w in words:
        ends = w[1:] + w[:1] if wrap else w[1:]
        pairs = list(zip(w, ends))
        if skip_last:
            pairs = pairs[:-1]
        if overlap:
            counts.update(pairs)
        else:  # bytes.count: non-overlapping occurrences, so (a, a) is counted once in "aaa"
            for pair in dict.fromkeys(pairs):
                i, n = 0, 0
                while i + 1 < len(w):
                    if (w[i], w[i + 1]) == pair:
                        n, i = n + 1, i + 2
                    else:
                        i += 1
                counts[pair] += n
    return counts


def _best(counts: Counter, tie="smallest", least=False):
    """The winning pair: highest count (lowest if least), ties to the smallest pair, the largest or first seen."""
    sign = -1 if least else 1
    if tie == "smallest":
        return max(counts, key=lambda p: (sign * counts[p], -p[0], -p[1]))
    if tie == "largest":
        return max(counts, key=lambda p: (sign * counts[p], p))
    if tie == "first":
        return max(counts, key=lambda p: sign * counts[p])  # max keeps the first of equals: first seen
    top = max(sign * n for n in counts.values())  # "last": a loop with >= keeps the last of equals
    return [p for p in counts if sign * counts[p] == top][-1]


def _as_tuples(x):
    """A reader's lists as tuples, so that [a, b] and (a, b) compare equal."""
    return tuple(_as_tuples(v) for v in x) if isinstance(x, list | tuple) else x


def _observe(fn, case: Case):
    return _as_tuples(fn(*case.args, **case.kwargs))


# ---------------------------------------------------------------- exercise 17.1: the most frequent pair


@solution
def most_frequent_pair(words):
    """The most frequent pair of neighbouring bytes inside the words (bytes, repeats counted); ties: smallest."""
    counts = Counter()
    for word in words:
        counts.update(pairwise(word))  # inside one word only: bytes of two words are never neighbours
    return max(counts, key=lambda pair: (counts[pair], -pair[0], -pair[1]))


def _pair_variant(words, tie="smallest", least=False, swap=False, as_bytes=False, with_count=False, **flags):
    counts = _count([tuple(w) for w in words], **flags)
    a, b = _best(counts, tie, least)
    if swap:
        a, b = b, a
    if with_count:
        return (a, b), counts[(a, b)]
    return (bytes([a]), bytes([b])) if as_bytes else (a, b)


_PAIR_MISTAKES = (
    Mistake(
        "across_boundaries",
        partial(_pair_variant, boundary=True),
        "pairs were counted across word boundaries: the last byte of one word and the first byte of the next are "
        "not neighbours (BPE never merges across pre-tokens). Count inside each word only.",
    ),
    Mistake(
        "repeats_ignored",
        partial(_pair_variant, distinct=True),
        "each distinct word was counted once: a word that occurs 3 times in the list adds its pairs 3 times.",
    ),
    Mistake(
        "non_overlapping",
        partial(_pair_variant, overlap=False),
        "overlapping pairs were missed: in b'aaa' the pair (97, 97) occurs twice, at positions 0 and 1 "
        "(bytes.count counts non-overlapping occurrences only). Count every neighbouring pair, zip(w, w[1:]).",
    ),
    Mistake(
        "tie_largest",
        partial(_pair_variant, tie="largest"),
        "a tie went to the largest pair: among equally frequent pairs, return the smallest (a, b).",
    ),
    Mistake(
        "tie_first_seen",
        partial(_pair_variant, tie="first"),
        "a tie went to the pair seen first (Counter.most_common keeps that order): among equally frequent pairs, "
        "return the smallest (a, b), whatever the order of the words.",
    ),
    Mistake(
        "tie_last_seen",
        partial(_pair_variant, tie="last"),
        "a tie went to the pair seen last (a loop with >=): among equally frequent pairs, return the smallest (a, b).",
    ),
    Mistake("reversed", partial(_pair_variant, swap=True), "the pair is reversed: return (first byte, second byte)."),
    Mistake(
        "least_frequent",
        partial(_pair_variant, least=True),
        "this is the least frequent pair: BPE merges the most frequent one (max, not min).",
    ),
    Mistake(
        "last_pair_skipped",
        partial(_pair_variant, skip_last=True),
        "the last pair of each word was skipped: a word of n bytes has n - 1 pairs, range(len(w) - 1).",
    ),
    Mistake(
        "wrap_around",
        partial(_pair_variant, wrap=True),
        "a pair was counted from the last byte of a word back to its first: a word is not a circle.",
    ),
    Mistake(
        "bytes_not_ints",
        partial(_pair_variant, as_bytes=True),
        "the pair holds bytes objects: return the two byte values as ints, (104, 101), not (b'h', b'e').",
    ),
    Mistake(
        "count_returned",
        partial(_pair_variant, with_count=True),
        "the count came back with the pair: return the pair (a, b) alone.",
    ),
)


def _pair_cases() -> list[Case]:
    sentence = [w.encode() for w in ["the", " cat", " sat", " on", " the", " mat", ",", " the", " end"]]
    return [
        Case("the pre-tokens of 'the cat sat on the mat, the end'", (sentence,)),
        Case(
            "[b'to', b'to', b'to', b'is', b'it', b'in'] (a word repeated)",
            ([b"to", b"to", b"to", b"is", b"it", b"in"],),
        ),
        Case("[b'aaaa', b'ab', b'ab', b'ab'] (overlapping pairs)", ([b"aaaa", b"ab", b"ab", b"ab"],)),
        Case("[b'xy', b'ab'] (a tie)", ([b"xy", b"ab"],)),
        Case("[b'ab', b'xy', b'ab', b'xy'] (a tie)", ([b"ab", b"xy", b"ab", b"xy"],)),
        Case(
            "[b'ha', b'ha', b'ha', b'ah', b'ah', b'zz'] (pairs across boundaries)",
            ([b"ha", b"ha", b"ha", b"ah", b"ah", b"zz"],),
        ),
        Case(
            "two Chinese words, '注意' twice and '力', as UTF-8", (["注意".encode(), "注意".encode(), "力".encode()],)
        ),
        Case("[b'abc', b'bc', b'xab'] (the last pair of a word)", ([b"abc", b"bc", b"xab"],)),
    ]


# ---------------------------------------------------------------- exercise 17.2: training merges


@solution
def train_merges(words, n_merges):
    """Learn up to n_merges merges from words (bytes, repeats counted); the i-th merge makes token 256 + i."""
    words = [tuple(word) for word in words]
    merges = []
    for new_id in range(256, 256 + n_merges):
        counts = Counter(pair for word in words for pair in pairwise(word))
        if not counts:
            break  # every word is a single token: nothing is left to merge
        pair = max(counts, key=lambda p: (counts[p], -p[0], -p[1]))
        merges.append(pair)
        words = [tuple(merge(list(word), pair, new_id)) for word in words]
    return tuple(merges)


def _merge_variant(word, pair, new_id, how="left"):
    """One merge in one word: left to right (right), only the first occurrence, or right to left."""
    if how == "left":
        return tuple(merge(list(word), pair, new_id))
    if how == "first":
        for i in range(len(word) - 1):
            if (word[i], word[i + 1]) == pair:
                return (*word[:i], new_id, *word[i + 2 :])
        return word
    return tuple(reversed(merge(list(reversed(word)), (pair[1], pair[0]), new_id)))  # "right"


def _train_variant(words, n_merges, tie="smallest", merge_how="left", first_id=256, update=True, min_count=1,
                   swap=False, fewer=0, **flags):  # fmt: skip
    """train_merges with one thing done differently (the keyword says which)."""
    words = [tuple(w) for w in words]
    if flags.pop("boundary", False):  # trained on the joined text, as if it were one word
        words = [tuple(t for w in words for t in w)]
    merges = []
    initial = _count(words, **flags)
    for step in range(max(n_merges - fewer, 0)):
        counts = _count(words, **flags) if update else Counter({p: n for p, n in initial.items() if p not in merges})
        counts = Counter({p: n for p, n in counts.items() if n > 0})
        if not counts:
            break
        pair = _best(counts, tie)
        if counts[pair] < min_count:
            break
        merges.append(pair)
        words = [_merge_variant(w, pair, first_id + step, merge_how) for w in words]
    return tuple((b, a) for a, b in merges) if swap else tuple(merges)


_TRAIN_MISTAKES = (
    Mistake(
        "counts_not_updated",
        partial(_train_variant, update=False),
        "the pairs were counted once, before the first merge: after each merge the words change (new tokens, "
        "pairs gone), so count again on the merged words; a merge can then use a token made by an earlier one.",
    ),
    Mistake(
        "across_boundaries",
        partial(_train_variant, boundary=True),
        "pairs were counted across word boundaries: count inside each word only (merges never cross pre-tokens).",
    ),
    Mistake(
        "repeats_ignored",
        partial(_train_variant, distinct=True),
        "each distinct word was counted once: a word that occurs 3 times adds its pairs 3 times.",
    ),
    Mistake(
        "non_overlapping",
        partial(_train_variant, overlap=False),
        "overlapping pairs were missed when counting: in b'aaa' the pair (97, 97) occurs twice.",
    ),
    Mistake(
        "tie_largest",
        partial(_train_variant, tie="largest"),
        "a tie went to the largest pair: among equally frequent pairs, take the smallest (a, b).",
    ),
    Mistake(
        "tie_first_seen",
        partial(_train_variant, tie="first"),
        "a tie went to the pair seen first: among equally frequent pairs, take the smallest (a, b).",
    ),
    Mistake(
        "merge_first_only",
        partial(_train_variant, merge_how="first"),
        "each merge replaced only the first occurrence of the pair in a word: replace every occurrence.",
    ),
    Mistake(
        "merge_right_to_left",
        partial(_train_variant, merge_how="right"),
        "overlapping pairs were merged from the right: (a, a, a) with the merge (a, a) is (aa, a), scanning "
        "left to right.",
    ),
    Mistake(
        "ids_off_by_one",
        partial(_train_variant, first_id=257),
        "the first merge made token 257: the bytes are 0-255, so the i-th merge (from 0) makes 256 + i.",
    ),
    Mistake(
        "ids_from_255",
        partial(_train_variant, first_id=255),
        "the first merge made token 255, which is the byte 255: the i-th merge (from 0) makes 256 + i.",
    ),
    Mistake(
        "stops_at_count_one",
        partial(_train_variant, min_count=2),
        "training stopped when the best pair occurred only once: make n_merges merges as long as any pair is "
        "left, even pairs seen once.",
    ),
    Mistake(
        "one_merge_short",
        partial(_train_variant, fewer=1),
        "one merge too few: n_merges merges, the first making 256 and the last 256 + n_merges - 1.",
    ),
    Mistake("reversed", partial(_train_variant, swap=True), "the pairs are reversed: (first token, second token)."),
)


def _train_cases() -> list[Case]:
    tiny = [w.encode() for w in ["low"] * 5 + ["lower"] * 2 + ["newest"] * 6 + ["widest"] * 3]
    sentence = [w.encode() for w in ["the", " cat", " sat", " on", " the", " mat", " and", " the", " hat"]]
    return [
        Case("low x5, lower x2, newest x6, widest x3; n_merges=6", (tiny, 6)),
        Case("the pre-tokens of 'the cat sat on the mat and the hat'; n_merges=5", (sentence, 5)),
        Case("[b'aaaaa', b'aab', b'ba']; n_merges=3 (overlapping pairs)", ([b"aaaaa", b"aab", b"ba"], 3)),
        Case("[b'xy', b'ab', b'xy', b'ab']; n_merges=2 (ties)", ([b"xy", b"ab", b"xy", b"ab"], 2)),
        Case("[b'aaa', b'ab', b'ab']; n_merges=1 (overlapping pairs)", ([b"aaa", b"ab", b"ab"], 1)),
        Case("[b'abab', b'ab']; n_merges=4 (fewer pairs than merges)", ([b"abab", b"ab"], 4)),
        Case("'注意' x2 and '力' as UTF-8; n_merges=4", (["注意".encode(), "注意".encode(), "力".encode()], 4)),
        Case("[b'ha', b'ha', b'ah', b'ah', b'ah', b'q']; n_merges=2", ([b"ha", b"ha", b"ah", b"ah", b"ah", b"q"], 2)),
        Case("[b'\\xff\\xffa', b'\\xffa']; n_merges=3 (the byte 255)", ([b"\xff\xffa", b"\xffa"], 3)),
    ]


# ---------------------------------------------------------------- exercise 17.3: encoding with learned merges


@solution
def encode_word(word, merges):
    """The ids of one pre-token: its UTF-8 bytes, then the merges, the earliest learned (smallest new id) first."""
    ids = list(word.encode("utf-8"))
    while len(ids) > 1:
        # Among the pairs present, the one whose merge was learned first: its new id is the smallest.
        pair = min(pairwise(ids), key=lambda p: merges.get(p, float("inf")))
        if pair not in merges:
            break  # no pair of this word was ever merged in training
        ids = merge(ids, pair, merges[pair])
    return tuple(ids)


def _encode_variant(word, merges, order="rank", units="utf8", merge_how="left"):
    """encode_word with one thing done differently (the keyword says which)."""
    ids = [ord(c) for c in word] if units == "chars" else list(word.encode("utf-8"))
    if order in ("dict", "reverse"):  # one pass over the merges, in the dict's order or from the last learned
        items = list(merges.items()) if order == "dict" else sorted(merges.items(), key=lambda m: -m[1])
        for pair, new_id in items:
            ids = list(_merge_variant(tuple(ids), pair, new_id, merge_how))
        return tuple(ids)
    if order == "scan":  # one left-to-right scan, merging any learned pair met, whatever its rank
        out: list[int] = []
        for t in ids:
            while out and (out[-1], t) in merges:
                t = merges[(out.pop(), t)]
            out.append(t)
        return tuple(out)
    if order == "longest":  # the longest known token at each position, as WordPiece does
        vocab = {(b,): b for b in range(256)}
        for pair, new_id in sorted(merges.items(), key=lambda m: m[1]):
            spelled = {v: k for k, v in vocab.items()}
            vocab[spelled[pair[0]] + spelled[pair[1]]] = new_id
        out, i = [], 0
        while i < len(ids):
            j = max(j for j in range(i + 1, len(ids) + 1) if tuple(ids[i:j]) in vocab)
            out.append(vocab[tuple(ids[i:j])])
            i = j
        return tuple(out)
    if order == "once":  # the pairs present at the start only, in rank order
        for pair in sorted({p for p in pairwise(ids) if p in merges}, key=merges.get):
            ids = list(_merge_variant(tuple(ids), pair, merges[pair], merge_how))
        return tuple(ids)
    steps = 0
    while len(ids) > 1:
        present = [p for p in pairwise(ids) if p in merges]
        if not present or (order == "single" and steps == 1):
            break
        if order == "frequent":  # the pair most frequent in the word, ties to the earliest learned
            pair = max(present, key=lambda p: (present.count(p), -merges[p]))
        elif order == "value":  # the smallest pair of ids, not the earliest learned
            pair = min(present)
        else:
            pair = min(present, key=merges.get)
        ids = list(_merge_variant(tuple(ids), pair, merges[pair], merge_how))
        steps += 1
    return tuple(ids)


_ENCODE_MISTAKES = (
    Mistake(
        "dict_order",
        partial(_encode_variant, order="dict"),
        "the merges were applied in the dict's order: the order that counts is the order of learning, given by "
        "the new ids (the merge that made 256 first, then 257, ...), not the order of the dict.",
    ),
    Mistake(
        "reverse_order",
        partial(_encode_variant, order="reverse"),
        "the merges were applied from the last learned to the first: apply the earliest learned (smallest new id) "
        "first, as training did.",
    ),
    Mistake(
        "characters_not_bytes",
        partial(_encode_variant, units="chars"),
        "the word was read as characters (ord(c)) instead of UTF-8 bytes: 'é' is the two bytes 195, 169, and a "
        "Chinese character three bytes; start from list(word.encode('utf-8')).",
    ),
    Mistake(
        "merge_right_to_left",
        partial(_encode_variant, merge_how="right"),
        "overlapping pairs were merged from the right: with the merge (a, a), (a, a, a) becomes (aa, a), "
        "scanning left to right.",
    ),
    Mistake(
        "pairs_of_the_start_only",
        partial(_encode_variant, order="once"),
        "only the pairs present before any merge were tried: after a merge new pairs appear (a new token and its "
        "neighbour), and merges learned later apply to them; look at the pairs again after every merge.",
    ),
    Mistake(
        "one_merge_only",
        partial(_encode_variant, order="single"),
        "the loop stopped after the first merge: keep merging until no pair of the word has a merge.",
    ),
    Mistake(
        "left_to_right_scan",
        partial(_encode_variant, order="scan"),
        "the merges were applied while scanning the word once from the left, whatever their rank: always merge "
        "the pair learned earliest among those present.",
    ),
    Mistake(
        "longest_match",
        partial(_encode_variant, order="longest"),
        "this is the longest-match rule (WordPiece's), not BPE: BPE applies merges in the order learned, which "
        "can cut a word differently.",
    ),
    Mistake(
        "most_frequent_in_word",
        partial(_encode_variant, order="frequent"),
        "the pair most frequent in the word was merged first: encoding follows the order of training (smallest "
        "new id first); counts matter only while training.",
    ),
    Mistake(
        "smallest_pair",
        partial(_encode_variant, order="value"),
        "the pair with the smallest ids was merged first: rank pairs by their merge's new id (the order learned), "
        "not by the ids of the pair itself.",
    ),
)


def _encode_cases() -> list[Case]:
    merges = train_merges([w.encode() for w in ["low"] * 5 + ["lower"] * 2 + ["newest"] * 6 + ["widest"] * 3], 12)
    by_pair = dict(sorted({pair: 256 + i for i, pair in enumerate(merges)}.items()))  # dict order: by pair
    runs = {(97, 97): 256, (256, 97): 257, (256, 256): 258}  # "aa", "aaa", "aaaa"
    chinese = {(230, 179): 256, (256, 168): 257, (229, 138): 258, (195, 169): 259}  # 注 and 力, then é
    skewed = {(99, 100): 256, (98, 99): 257, (97, 98): 258, (257, 100): 259, (258, 256): 260}
    return [
        Case("'lowest' with 12 merges learned from low/lower/newest/widest", ("lowest", by_pair)),
        Case("'newer' with the same merges", ("newer", by_pair)),
        Case("'widest' with the same merges", ("widest", by_pair)),
        Case("'aaaaa' with the merges aa (256), aa+a (257), aa+aa (258)", ("aaaaa", runs)),
        Case("'aaa' with the same merges", ("aaa", runs)),
        Case("'注力é' with merges inside the characters' bytes", ("注力é", chinese)),
        Case("'abcd' with merges cd, bc, ab, bc+d, ab+cd", ("abcd", skewed)),
        Case("'abc' with merges bc (256), ab (257)", ("abc", {(98, 99): 256, (97, 98): 257})),
        Case("'abcbc' with merges ab (256), bc (257)", ("abcbc", {(97, 98): 256, (98, 99): 257})),
        Case("'xyz' with no merge that applies", ("xyz", runs)),
    ]


# ---------------------------------------------------------------- the checkers


@checker
def check_most_frequent_pair(fn) -> Result:
    """Check `fn(words)` on lists of pre-tokens as bytes: repeats, overlaps, ties, Chinese bytes."""
    cases = _pair_cases()
    return compare(
        "most_frequent_pair",
        fn,
        most_frequent_pair,
        cases,
        _PAIR_MISTAKES,
        observe=_observe,
        passed=f"passed all {len(cases)} cases (repeated words, overlapping pairs, ties, pairs at word boundaries, "
        "Chinese bytes): the same pair as the reference",
    )


@checker
def check_train_merges(fn) -> Result:
    """Check `fn(words, n_merges)` on small corpora: ties, overlapping pairs, fewer pairs than merges, byte 255."""
    cases = _train_cases()
    return compare(
        "train_merges",
        fn,
        train_merges,
        cases,
        _TRAIN_MISTAKES,
        observe=_observe,
        passed=f"passed all {len(cases)} cases: the same merges, in the same order, as the reference",
    )


@checker
def check_encode_word(fn) -> Result:
    """Check `fn(word, merges)` with merges given in a dict whose order is not the order of learning."""
    cases = _encode_cases()
    return compare(
        "encode_word",
        fn,
        encode_word,
        cases,
        _ENCODE_MISTAKES,
        observe=_observe,
        passed=f"passed all {len(cases)} cases (merges applied in the order learned, runs of one letter, Chinese "
        "bytes, a word no merge applies to): the same ids as the reference",
    )
