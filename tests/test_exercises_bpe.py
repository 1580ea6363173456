"""Chapter 17's checkers: the reference solutions pass, and each usual mistake gets its own diagnosis.

The wrong answers below are written the way a reader might write them, independently of the variants the
checkers use to recognise the mistakes; at least ten per exercise.
"""

from collections import Counter, defaultdict
from itertools import pairwise

import pytest

import transformer_course as tc
from transformer_course.exercises import check, solutions

NAMES = ["most_frequent_pair", "train_merges", "encode_word"]


@pytest.mark.parametrize("name", NAMES)
def test_reference_solution_passes(name):
    result = getattr(check, name)(getattr(solutions, name))
    assert result.passed and result.mistake is None, result
    assert repr(result).startswith(f"✅ {name}: passed all")


def test_solutions_agree_with_the_package():
    # Ids differ (the package numbers bytes in GPT-2's order), merges as bytes do not when no count ties.
    texts = ["ab"] * 5 + ["cd"] * 3 + ["ef"] + ["abcd"] * 2
    merges = solutions.train_merges([t.encode() for t in texts], 4)
    spelled = {b: bytes([b]) for b in range(256)}
    for i, (a, b) in enumerate(merges):
        spelled[256 + i] = spelled[a] + spelled[b]
    package = tc.BPETokenizer.train(texts, 256 + 4)
    assert [spelled[256 + i] for i in range(4)] == package.vocab[256:] == [b"ab", b"cd", b"abcd", b"ef"]
    table = {pair: 256 + i for i, pair in enumerate(merges)}
    assert solutions.encode_word("abcdab", table) == (258, 256)
    assert solutions.most_frequent_pair([t.encode() for t in texts]) == (97, 98)


def test_solutions_accept_lists_as_well_as_tuples():
    assert check.most_frequent_pair(lambda words: list(solutions.most_frequent_pair(words))).passed
    assert check.train_merges(lambda words, n: [list(p) for p in solutions.train_merges(words, n)]).passed
    assert check.encode_word(lambda word, merges: list(solutions.encode_word(word, merges))).passed


# ---- exercise 17.1: the most frequent pair


def pair_joined_text(words):
    data = b"".join(words)
    counts = Counter(pairwise(data))
    return max(counts, key=lambda p: (counts[p], -p[0], -p[1]))


def pair_from_a_set(words):
    counts = Counter()
    for w in set(words):
        counts.update(pairwise(w))
    return max(counts, key=lambda p: (counts[p], -p[0], -p[1]))


def pair_with_bytes_count(words):
    counts = {}
    for w in words:
        for i in range(len(w) - 1):
            pair = w[i : i + 2]
            counts[pair] = counts.get(pair, 0) + 1
    # recount with bytes.count, "more accurate"
    totals = {p: sum(w.count(p) for w in words) for p in counts}
    best = max(totals, key=lambda p: (totals[p], -p[0], -p[1]))
    return best[0], best[1]


def pair_most_common(words):
    counts = Counter()
    for w in words:
        counts.update(pairwise(w))
    return counts.most_common(1)[0][0]


def pair_sorted_descending(words):
    counts = Counter()
    for w in words:
        counts.update(pairwise(w))
    return sorted(counts.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)[0][0]


def pair_greater_equal_loop(words):
    counts = defaultdict(int)
    for w in words:
        for a, b in pairwise(w):
            counts[(a, b)] += 1
    best, best_n = None, -1
    for pair, n in counts.items():
        if n >= best_n:
            best, best_n = pair, n
    return best


def pair_reversed(words):
    counts = Counter()
    for w in words:
        counts.update(zip(w[1:], w))
    return max(counts, key=lambda p: (counts[p], -p[1], -p[0]))


def pair_min(words):
    counts = Counter()
    for w in words:
        counts.update(pairwise(w))
    return min(counts, key=lambda p: (counts[p], p))


def pair_off_by_one(words):
    counts = Counter()
    for w in words:
        for i in range(len(w) - 2):
            counts[(w[i], w[i + 1])] += 1
    return max(counts, key=lambda p: (counts[p], -p[0], -p[1]))


def pair_circular(words):
    counts = Counter()
    for w in words:
        for i in range(len(w)):
            counts[(w[i], w[(i + 1) % len(w)])] += 1
    return max(counts, key=lambda p: (counts[p], -p[0], -p[1]))


def pair_as_bytes(words):
    counts = Counter()
    for w in words:
        counts.update(pairwise(w))
    a, b = max(counts, key=lambda p: (counts[p], -p[0], -p[1]))
    return bytes([a]), bytes([b])


def pair_with_its_count(words):
    counts = Counter()
    for w in words:
        counts.update(pairwise(w))
    best = max(counts, key=lambda p: (counts[p], -p[0], -p[1]))
    return best, counts[best]


def pair_of_characters(words):
    counts = Counter()
    for w in words:
        text = w.decode("utf-8")
        counts.update(pairwise(text))
    a, b = max(counts, key=lambda p: (counts[p], -ord(p[0]), -ord(p[1])))
    return ord(a), ord(b)


WRONG_PAIRS = [
    (pair_joined_text, "across_boundaries", "across word boundaries"),
    (pair_from_a_set, "repeats_ignored", "counted once"),
    (pair_with_bytes_count, "non_overlapping", "overlapping pairs were missed"),
    (pair_most_common, "tie_first_seen", "pair seen first"),
    (pair_sorted_descending, "tie_largest", "largest pair"),
    (pair_greater_equal_loop, "tie_last_seen", "pair seen last"),
    (pair_reversed, "reversed", "reversed"),
    (pair_min, "least_frequent", "least frequent"),
    (pair_off_by_one, "last_pair_skipped", "n - 1 pairs"),
    (pair_circular, "wrap_around", "not a circle"),
    (pair_as_bytes, "bytes_not_ints", "as ints"),
    (pair_with_its_count, "count_returned", "the pair (a, b) alone"),
    (pair_of_characters, None, "on two Chinese words"),
]


@pytest.mark.parametrize(("reader", "mistake", "words"), WRONG_PAIRS)
def test_most_frequent_pair_mistakes_are_named(reader, mistake, words):
    result = check.most_frequent_pair(reader)
    assert not result.passed
    assert result.mistake == mistake, result
    assert words in result.message, result.message


# ---- exercise 17.2: training merges


def best_pair(counts):
    return max(counts, key=lambda p: (counts[p], -p[0], -p[1]))


def merge_all(word, pair, new_id):
    out, i = [], 0
    while i < len(word):
        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
            out.append(new_id)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return out


def train_counting_once(words, n_merges):
    counts = Counter(p for w in words for p in pairwise(w))
    ranked = sorted(counts, key=lambda p: (-counts[p], p))
    return tuple(ranked[:n_merges])


def train_on_joined_text(words, n_merges):
    ids = list(b"".join(words))
    merges = []
    for i in range(n_merges):
        counts = Counter(pairwise(ids))
        if not counts:
            break
        pair = best_pair(counts)
        merges.append(pair)
        ids = merge_all(ids, pair, 256 + i)
    return tuple(merges)


def train_on_vocabulary(words, n_merges):
    vocab = [list(w) for w in dict.fromkeys(words)]  # the distinct words
    merges = []
    for i in range(n_merges):
        counts = Counter(p for w in vocab for p in pairwise(w))
        if not counts:
            break
        pair = best_pair(counts)
        merges.append(pair)
        vocab = [merge_all(w, pair, 256 + i) for w in vocab]
    return tuple(merges)


def train_with_most_common(words, n_merges):
    seqs = [list(w) for w in words]
    merges = []
    for i in range(n_merges):
        counts = Counter(p for w in seqs for p in pairwise(w))
        if not counts:
            break
        pair = counts.most_common(1)[0][0]
        merges.append(pair)
        seqs = [merge_all(w, pair, 256 + i) for w in seqs]
    return tuple(merges)


def train_ties_to_largest(words, n_merges):
    seqs = [list(w) for w in words]
    merges = []
    for i in range(n_merges):
        counts = Counter(p for w in seqs for p in pairwise(w))
        if not counts:
            break
        pair = max(counts, key=lambda p: (counts[p], p))
        merges.append(pair)
        seqs = [merge_all(w, pair, 256 + i) for w in seqs]
    return tuple(merges)


def train_replace_first(words, n_merges):
    seqs = [list(w) for w in words]
    merges = []
    for i in range(n_merges):
        counts = Counter(p for w in seqs for p in pairwise(w))
        if not counts:
            break
        pair = best_pair(counts)
        merges.append(pair)
        for w in seqs:
            for j in range(len(w) - 1):
                if (w[j], w[j + 1]) == pair:
                    w[j : j + 2] = [256 + i]
                    break
    return tuple(merges)


def train_merge_from_the_right(words, n_merges):
    seqs = [list(w) for w in words]
    merges = []
    for i in range(n_merges):
        counts = Counter(p for w in seqs for p in pairwise(w))
        if not counts:
            break
        pair = best_pair(counts)
        merges.append(pair)
        for w in seqs:
            j = len(w) - 2
            while j >= 0:
                if (w[j], w[j + 1]) == pair:
                    w[j : j + 2] = [256 + i]
                    j -= 2
                else:
                    j -= 1
    return tuple(merges)


def train_ids_after_a_special(words, n_merges):
    seqs = [list(w) for w in words]
    merges = []
    next_id = 257  # "256 is <|endoftext|>"
    for _ in range(n_merges):
        counts = Counter(p for w in seqs for p in pairwise(w))
        if not counts:
            break
        pair = best_pair(counts)
        merges.append(pair)
        seqs = [merge_all(w, pair, next_id) for w in seqs]
        next_id += 1
    return tuple(merges)


def train_ids_from_len_minus_one(words, n_merges):
    seqs = [list(w) for w in words]
    merges = []
    for i in range(n_merges):
        counts = Counter(p for w in seqs for p in pairwise(w))
        if not counts:
            break
        pair = best_pair(counts)
        merges.append(pair)
        seqs = [merge_all(w, pair, 255 + i) for w in seqs]
    return tuple(merges)


def train_skip_rare_pairs(words, n_merges):
    seqs = [list(w) for w in words]
    merges = []
    for i in range(n_merges):
        counts = Counter(p for w in seqs for p in pairwise(w))
        pair = best_pair(counts) if counts else None
        if pair is None or counts[pair] == 1:
            break
        merges.append(pair)
        seqs = [merge_all(w, pair, 256 + i) for w in seqs]
    return tuple(merges)


def train_range_from_one(words, n_merges):
    seqs = [list(w) for w in words]
    merges = []
    for i in range(1, n_merges):
        counts = Counter(p for w in seqs for p in pairwise(w))
        if not counts:
            break
        pair = best_pair(counts)
        merges.append(pair)
        seqs = [merge_all(w, pair, 255 + i) for w in seqs]
    return tuple(merges)


def train_bytes_count(words, n_merges):
    seqs = [list(w) for w in words]
    merges = []
    for i in range(n_merges):
        pairs = {p for w in seqs for p in pairwise(w)}
        if not pairs:
            break

        def occurrences(pair, seqs=seqs):
            total = 0
            for w in seqs:
                j = 0
                while j < len(w) - 1:
                    if (w[j], w[j + 1]) == pair:
                        total, j = total + 1, j + 2
                    else:
                        j += 1
            return total

        pair = max(pairs, key=lambda p: (occurrences(p), -p[0], -p[1]))
        merges.append(pair)
        seqs = [merge_all(w, pair, 256 + i) for w in seqs]
    return tuple(merges)


def train_forever(words, n_merges):
    seqs = [list(w) for w in words]
    merges = []
    while len(merges) < n_merges:  # never ends when fewer pairs than merges are left
        counts = Counter(p for w in seqs for p in pairwise(w))
        if counts:
            pair = best_pair(counts)
            merges.append(pair)
            seqs = [merge_all(w, pair, 256 + len(merges) - 1) for w in seqs]
    return tuple(merges)


WRONG_TRAININGS = [
    (train_counting_once, "counts_not_updated", "count again on the merged words"),
    (train_on_joined_text, "across_boundaries", "inside each word only"),
    (train_on_vocabulary, "repeats_ignored", "counted once"),
    (train_with_most_common, "tie_first_seen", "pair seen first"),
    (train_ties_to_largest, "tie_largest", "largest pair"),
    (train_replace_first, "merge_first_only", "every occurrence"),
    (train_merge_from_the_right, "merge_right_to_left", "merged from the right"),
    (train_ids_after_a_special, "ids_off_by_one", "made token 257"),
    (train_ids_from_len_minus_one, "ids_from_255", "the byte 255"),
    (train_skip_rare_pairs, "stops_at_count_one", "even pairs seen once"),
    (train_range_from_one, "one_merge_short", "one merge too few"),
    (train_bytes_count, "non_overlapping", "overlapping pairs were missed"),
    (train_forever, "time_limit", "stopped after"),
]


@pytest.mark.parametrize(("reader", "mistake", "words"), WRONG_TRAININGS)
def test_train_merges_mistakes_are_named(reader, mistake, words, monkeypatch):
    from transformer_course.exercises import _core

    monkeypatch.setattr(_core, "TIME_LIMIT", 1.0)  # the endless loop is stopped sooner than in a notebook
    result = check.train_merges(reader)
    assert not result.passed
    assert result.mistake == mistake, result
    assert words in result.message, result.message


# ---- exercise 17.3: encoding a word with learned merges


def encode_in_dict_order(word, merges):
    ids = list(word.encode("utf-8"))
    for pair, new_id in merges.items():
        ids = merge_all(ids, pair, new_id)
    return tuple(ids)


def encode_newest_first(word, merges):
    ids = list(word.encode("utf-8"))
    for pair in sorted(merges, key=merges.get, reverse=True):
        ids = merge_all(ids, pair, merges[pair])
    return tuple(ids)


def encode_characters(word, merges):
    ids = [ord(c) for c in word]
    while True:
        candidates = [p for p in pairwise(ids) if p in merges]
        if not candidates:
            return tuple(ids)
        pair = min(candidates, key=merges.get)
        ids = merge_all(ids, pair, merges[pair])


def encode_merge_from_the_right(word, merges):
    ids = list(word.encode("utf-8"))
    while True:
        candidates = [p for p in pairwise(ids) if p in merges]
        if not candidates:
            return tuple(ids)
        pair = min(candidates, key=merges.get)
        j = len(ids) - 2
        while j >= 0:
            if (ids[j], ids[j + 1]) == pair:
                ids[j : j + 2] = [merges[pair]]
                j -= 2
            else:
                j -= 1


def encode_pairs_found_first(word, merges):
    ids = list(word.encode("utf-8"))
    found = [p for p in pairwise(ids) if p in merges]
    for pair in sorted(set(found), key=merges.get):
        ids = merge_all(ids, pair, merges[pair])
    return tuple(ids)


def encode_if_not_while(word, merges):
    ids = list(word.encode("utf-8"))
    candidates = [p for p in pairwise(ids) if p in merges]
    if candidates:
        pair = min(candidates, key=merges.get)
        ids = merge_all(ids, pair, merges[pair])
    return tuple(ids)


def encode_stack(word, merges):
    out = []
    for b in word.encode("utf-8"):
        out.append(b)
        while len(out) > 1 and (out[-2], out[-1]) in merges:
            right = out.pop()
            out[-1] = merges[(out[-1], right)]
    return tuple(out)


def encode_longest_token(word, merges):
    spelled = {b: bytes([b]) for b in range(256)}
    for (a, b), new_id in sorted(merges.items(), key=lambda m: m[1]):
        spelled[new_id] = spelled[a] + spelled[b]
    by_bytes = {v: k for k, v in spelled.items()}
    data, out, i = word.encode("utf-8"), [], 0
    while i < len(data):
        j = len(data)
        while data[i:j] not in by_bytes:
            j -= 1
        out.append(by_bytes[data[i:j]])
        i = j
    return tuple(out)


def encode_most_repeated_pair(word, merges):
    ids = list(word.encode("utf-8"))
    while True:
        counts = Counter(p for p in pairwise(ids) if p in merges)
        if not counts:
            return tuple(ids)
        pair = max(counts, key=lambda p: (counts[p], -merges[p]))
        ids = merge_all(ids, pair, merges[pair])


def encode_min_pair(word, merges):
    ids = list(word.encode("utf-8"))
    while True:
        candidates = [p for p in pairwise(ids) if p in merges]
        if not candidates:
            return tuple(ids)
        pair = min(candidates)
        ids = merge_all(ids, pair, merges[pair])


def encode_as_bytes(word, merges):
    return tuple(word.encode("utf-8"))


def encode_until_one_token(word, merges):
    ids = list(word.encode("utf-8"))
    while len(ids) > 1:  # "a word ends as one token": not when no merge applies
        candidates = [p for p in pairwise(ids) if p in merges]
        if candidates:
            pair = min(candidates, key=merges.get)
            ids = merge_all(ids, pair, merges[pair])
    return tuple(ids)


WRONG_ENCODINGS = [
    (encode_in_dict_order, "dict_order", "order of learning"),
    (encode_newest_first, "reverse_order", "from the last learned to the first"),
    (encode_characters, "characters_not_bytes", "UTF-8 bytes"),
    (encode_merge_from_the_right, "merge_right_to_left", "merged from the right"),
    (encode_pairs_found_first, "pairs_of_the_start_only", "new pairs appear"),
    (encode_if_not_while, "one_merge_only", "stopped after the first merge"),
    (encode_stack, "left_to_right_scan", "scanning the word once"),
    (encode_longest_token, "longest_match", "WordPiece"),
    (encode_most_repeated_pair, "most_frequent_in_word", "counts matter only while training"),
    (encode_min_pair, "smallest_pair", "not by the ids of the pair"),
    (encode_as_bytes, None, "expected"),
    (encode_until_one_token, "time_limit", "stopped after"),
]


@pytest.mark.parametrize(("reader", "mistake", "words"), WRONG_ENCODINGS)
def test_encode_word_mistakes_are_named(reader, mistake, words, monkeypatch):
    from transformer_course.exercises import _core

    monkeypatch.setattr(_core, "TIME_LIMIT", 1.0)
    result = check.encode_word(reader)
    assert not result.passed
    assert result.mistake == mistake, result
    assert words in result.message, result.message


@pytest.mark.parametrize("table", [WRONG_PAIRS, WRONG_TRAININGS, WRONG_ENCODINGS])
def test_at_least_ten_wrong_answers_per_exercise(table):
    assert len(table) >= 10
