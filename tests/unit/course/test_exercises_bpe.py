"""Chapter 17's wrong answers (`WRONG_ANSWERS`) and the tests specific to its checkers.

The wrong answers below are written the way a reader might write them, independently of the variants the
checkers use to recognise the mistakes; at least ten per exercise.

test_exercise_checkers.py runs every row of the table against its checker (the mistake's key and the
words of its message), with the reference solution and the checks common to every checker.
"""

import codecs
from collections import Counter
from itertools import pairwise

import transformer_course as tc
from transformer_course.bpe import merge, pretokenize
from transformer_course.course.exercises import bpe as exercises
from transformer_course.course.exercises import check, solutions


def train_byte_values(text, n_merges):
    """BPE on GPT-2's pre-tokens with byte values as ids, recounting every pair after each merge."""
    words = {tuple(w.encode()): n for w, n in Counter(pretokenize(text)).items()}
    merges = []
    for new_id in range(256, 256 + n_merges):
        counts = Counter()
        for word, n in words.items():
            for pair in pairwise(word):
                counts[pair] += n
        pair = max(counts, key=lambda p: (counts[p], -p[0], -p[1]))
        merges.append(pair)
        words = {tuple(merge(w, pair, new_id)): n for w, n in words.items()}
    return merges, words


def test_the_merges_of_the_cases_are_what_training_learns():
    tiny = "low " * 5 + "lower " * 2 + "newest " * 6 + "widest " * 3
    merges, _ = train_byte_values(tiny, 8)
    assert exercises._to_one_cases()[0].args[1] == tuple(merges)


def test_pair_changes_keep_training_counts_up_to_date():
    # The incremental update of tc.BPETokenizer.train: after each merge, the counts changed by pair_changes for
    # every word (times its count) equal the counts recounted from scratch.
    text = "the cat sat on the mat; the aaaa and the banana bandana abcabc " * 3 + "注意力 注意 力"
    words = {tuple(w.encode()): n for w, n in Counter(pretokenize(text)).items()}
    counts = Counter()
    for word, n in words.items():
        for pair in pairwise(word):
            counts[pair] += n
    for new_id in range(256, 276):
        pair = max(counts, key=lambda p: (counts[p], -p[0], -p[1]))
        for word, n in list(words.items()):
            lost, gained = solutions.pair_changes(word, pair, new_id)
            counts.subtract({p: n * k for p, k in Counter(lost).items()})
            counts.update({p: n * k for p, k in Counter(gained).items()})
        words = {tuple(merge(w, pair, new_id)): n for w, n in words.items()}
        recounted = Counter()
        for word, n in words.items():
            for p in pairwise(word):
                recounted[p] += n
        assert +counts == recounted


def test_merges_to_one_token_agrees_with_the_package():
    # The package's merges, renumbered to the exercise's ids (byte values, the i-th merge 256 + i): a word is one
    # token of the package's tokenizer with its first n merges exactly when n >= the exercise's answer.
    text = "the theme of these theses is the thesaurus " * 4 + "then there they the"
    package = tc.BPETokenizer.train(text, 256 + 12)
    renumber = {i: b for i, b in enumerate(tc.bpe.BYTE_ORDER)}
    for i, pair in enumerate(package.merges):
        renumber[package.ranks[pair][1]] = 256 + i
    merges = tuple((renumber[a], renumber[b]) for a, b in package.merges)
    answers = set()
    for word in [" the", " these", " thesaurus", "the", " theme", " t", " then", "t"]:
        k = solutions.merges_to_one_token(word, merges)
        ones = [n for n in range(13) if len(tc.BPETokenizer(package.merges[:n])._encode_word(word)) == 1]
        assert k == (ones[0] if ones else -1), word
        answers.add(k)
    assert -1 in answers and 0 in answers and len(answers) >= 4


def test_complete_length_streams_a_tokenizers_output_without_replacement_characters():
    tok = tc.BPETokenizer.train("注意力 is attention; 自注意力 is self-attention. 🤖 " * 3, 300)
    text = "注意力 and 自注意力, naïve 🤖!"
    pending, shown = b"", []
    for i in tok.encode(text):
        pending += tok.vocab[i]
        n = solutions.complete_length(pending)
        shown.append(pending[:n].decode("utf-8"))  # would raise if n cut a character
        pending = pending[n:]
    assert pending == b"" and "".join(shown) == text
    assert "" in shown  # some tokens ended inside a character and showed nothing


def test_other_right_answers_pass():
    def changes_as_unsorted_lists(word, pair, new_id):
        before, after = Counter(pairwise(word)), Counter(pairwise(merge(list(word), pair, new_id)))
        return list((before - after).elements())[::-1], list((after - before).elements())[::-1]

    def to_one_from_the_last_merge_used(word, merges):
        # Encoding with all merges; the answer is the index of the last merge used, plus one.
        rank = {pair: i for i, pair in enumerate(merges)}
        ids, last = list(word.encode()), -1
        while True:
            present = [p for p in pairwise(ids) if p in rank]
            if not present:
                break
            pair = min(present, key=rank.get)
            ids, last = merge(ids, pair, 256 + rank[pair]), rank[pair]
        return last + 1 if len(ids) == 1 else -1

    def length_incremental_decoder(data):
        return len(codecs.getincrementaldecoder("utf-8")().decode(data).encode("utf-8"))

    def length_by_trying(data):
        for cut in range(4):
            try:
                data[: len(data) - cut].decode("utf-8")
                return len(data) - cut
            except UnicodeDecodeError:
                pass
        return 0

    assert check.pair_changes(changes_as_unsorted_lists).passed
    assert check.merges_to_one_token(to_one_from_the_last_merge_used).passed
    assert check.complete_length(length_incremental_decoder).passed
    assert check.complete_length(length_by_trying).passed


# ---- exercise 17.1: what a merge changes in the pair counts


def changes_all_pairs(word, pair, new_id):
    merged = merge(list(word), pair, new_id)
    return list(pairwise(word)), list(pairwise(merged))


def changes_new_minus_old(word, pair, new_id):
    old, new = Counter(pairwise(word)), Counter(pairwise(merge(list(word), pair, new_id)))
    return tuple((new - old).elements()), tuple((old - new).elements())


def changes_with_sets(word, pair, new_id):
    old, new = set(pairwise(word)), set(pairwise(merge(list(word), pair, new_id)))
    return sorted(old - new), sorted(new - old)


def changes_with_counts(word, pair, new_id):
    old, new = Counter(pairwise(word)), Counter(pairwise(merge(list(word), pair, new_id)))
    return sorted((old - new).items()), sorted((new - old).items())


def changes_as_a_dict(word, pair, new_id):
    delta = Counter(pairwise(merge(list(word), pair, new_id)))
    delta.subtract(Counter(pairwise(word)))
    return {p: n for p, n in delta.items() if n != 0}


def changes_lost_only(word, pair, new_id):
    old, new = Counter(pairwise(word)), Counter(pairwise(merge(list(word), pair, new_id)))
    return tuple((old - new).elements())


def changes_only_the_merged_pair(word, pair, new_id):
    merged = merge(list(word), pair, new_id)
    lost = [pair] * (len(word) - len(merged))  # one pair gone per merge
    gained = [p for p in pairwise(merged) if new_id in p]
    return lost, gained


def changes_around_each_occurrence(word, pair, new_id):
    lost, gained = [], []
    i = 0
    while i < len(word) - 1:
        if (word[i], word[i + 1]) == pair:
            lost.append(pair)
            if i > 0:
                lost.append((word[i - 1], word[i]))
                gained.append((word[i - 1], new_id))
            if i + 2 < len(word):
                lost.append((word[i + 1], word[i + 2]))
                gained.append((new_id, word[i + 2]))
            i += 2
        else:
            i += 1
    return lost, gained


def changes_merged_from_the_right(word, pair, new_id):
    merged, i = list(word), len(word) - 2
    while i >= 0:
        if (merged[i], merged[i + 1]) == pair:
            merged[i : i + 2] = [new_id]
            i -= 2
        else:
            i -= 1
    old, new = Counter(pairwise(word)), Counter(pairwise(merged))
    return tuple((old - new).elements()), tuple((new - old).elements())


def changes_first_occurrence(word, pair, new_id):
    merged = list(word)
    for i in range(len(merged) - 1):
        if (merged[i], merged[i + 1]) == pair:
            merged[i : i + 2] = [new_id]
            break
    old, new = Counter(pairwise(word)), Counter(pairwise(merged))
    return tuple((old - new).elements()), tuple((new - old).elements())


def changes_through_bytes_replace(word, pair, new_id):
    merged = bytes(word).replace(bytes(pair), bytes([new_id]))
    old, new = Counter(pairwise(word)), Counter(pairwise(merged))
    return tuple((old - new).elements()), tuple((new - old).elements())


WRONG_CHANGES = [
    (changes_all_pairs, "unchanged_pairs_kept", "is in neither"),
    (changes_new_minus_old, "swapped", "lost and gained are swapped"),
    (changes_with_sets, "sets_not_counts", "not a set"),
    (changes_with_counts, "counts_not_repeats", "Counter.elements()"),
    (changes_as_a_dict, "dict_returned", "returned a dict"),
    (changes_lost_only, "lost_only", "the lost pairs alone"),
    (changes_only_the_merged_pair, "neighbours_forgotten", "neighbours change too"),
    (changes_around_each_occurrence, "neighbours_from_old_word", "counted twice"),
    (changes_merged_from_the_right, "merge_right_to_left", "merged from the right"),
    (changes_first_occurrence, "merge_first_only", "every occurrence"),
    (changes_through_bytes_replace, None, "raised ValueError"),
]


# ---- exercise 17.2: how many merges make a word one token


def encode_first(word, merges, k):
    rank = {pair: i for i, pair in enumerate(merges[:k])}
    ids = list(word.encode("utf-8"))
    while len(ids) > 1:
        present = [p for p in pairwise(ids) if p in rank]
        if not present:
            break
        pair = min(present, key=rank.get)
        ids = merge(ids, pair, 256 + rank[pair])
    return ids


def to_one_spelled(word, merges):
    vocab = {i: bytes([i]) for i in range(256)}
    for i, (a, b) in enumerate(merges):
        vocab[256 + i] = vocab[a] + vocab[b]
    target = word.encode("utf-8")
    if len(target) == 1:
        return 0
    for token, spelling in vocab.items():
        if token >= 256 and spelling == target:
            return token - 255
    return -1


def to_one_longest_match(word, merges):
    for k in range(len(merges) + 1):
        vocab = {bytes([i]) for i in range(256)}
        spelled = {i: bytes([i]) for i in range(256)}
        for i, (a, b) in enumerate(merges[:k]):
            spelled[256 + i] = spelled[a] + spelled[b]
            vocab.add(spelled[256 + i])
        data, n, start = word.encode("utf-8"), 0, 0
        while start < len(data):
            end = max(e for e in range(start + 1, len(data) + 1) if data[start:e] in vocab)
            n, start = n + 1, end
        if n == 1:
            return k
    return -1


def to_one_counting_merges(word, merges):
    rank = {pair: i for i, pair in enumerate(merges)}
    ids, used = list(word.encode("utf-8")), 0
    while True:
        present = [p for p in pairwise(ids) if p in rank]
        if not present:
            break
        pair = min(present, key=rank.get)
        ids = merge(ids, pair, 256 + rank[pair])
        used += 1
    return used if len(ids) == 1 else -1


def to_one_token_id(word, merges):
    ids = encode_first(word, merges, len(merges))
    return ids[0] if len(ids) == 1 else -1


def to_one_none(word, merges):
    for k in range(len(merges) + 1):
        if len(encode_first(word, merges, k)) == 1:
            return k
    return None


def to_one_zero(word, merges):
    for k in range(len(merges) + 1):
        if len(encode_first(word, merges, k)) == 1:
            return k
    return 0


def to_one_range_too_short(word, merges):
    for k in range(len(merges)):
        if len(encode_first(word, merges, k)) == 1:
            return k
    return -1


def to_one_at_least_one_merge(word, merges):
    for k in range(1, len(merges) + 1):
        if len(encode_first(word, merges, k)) == 1:
            return k
    return -1


def to_one_characters(word, merges):
    for k in range(len(merges) + 1):
        rank = {pair: i for i, pair in enumerate(merges[:k])}
        ids = [ord(c) for c in word]
        while any(p in rank for p in pairwise(ids)):
            pair = min((p for p in pairwise(ids) if p in rank), key=rank.get)
            ids = merge(ids, pair, 256 + rank[pair])
        if len(ids) == 1:
            return k
    return -1


def to_one_newest_merge_first(word, merges):
    for k in range(len(merges) + 1):
        ids = list(word.encode("utf-8"))
        for i in range(k - 1, -1, -1):
            ids = merge(ids, merges[i], 256 + i)
        if len(ids) == 1:
            return k
    return -1


def to_one_smallest_pair_first(word, merges):
    for k in range(len(merges) + 1):
        known = {pair: 256 + i for i, pair in enumerate(merges[:k])}
        ids = list(word.encode("utf-8"))
        while any(p in known for p in pairwise(ids)):
            pair = min(p for p in pairwise(ids) if p in known)
            ids = merge(ids, pair, known[pair])
        if len(ids) == 1:
            return k
    return -1


def to_one_counting_up_forever(word, merges):
    k = 0
    while True:  # never ends for a word that no number of merges makes one token
        if len(encode_first(word, merges, k)) == 1:
            return k
        k += 1


WRONG_TO_ONE = [
    (to_one_spelled, "spelling_merge", "does not always reach"),
    (to_one_longest_match, "spelling_merge", "Encode the word with the first k merges"),
    (to_one_counting_merges, "merges_applied_counted", "the unused ones between them"),
    (to_one_token_id, "token_id_returned", "the id of the word's token"),
    (to_one_none, "none_for_never", "asks for -1"),
    (to_one_zero, "zero_for_never", "return -1"),
    (to_one_range_too_short, "last_merge_never_tried", "range(len(merges) + 1)"),
    (to_one_at_least_one_merge, "one_byte_word", "k = 0"),
    (to_one_characters, "characters_not_bytes", "UTF-8 bytes"),
    (to_one_newest_merge_first, "reverse_order", "from the last learned to the first"),
    (to_one_smallest_pair_first, "smallest_pair", "not by the ids of the pair"),
    (to_one_counting_up_forever, "time_limit", "stopped after"),
]


# ---- exercise 17.3: the whole characters of a stream of bytes


def length_three_bytes_each(data):
    tail = 0
    while tail < len(data) and data[len(data) - 1 - tail] >= 128:
        tail += 1
    return len(data) - tail % 3  # a Chinese character is three bytes


def length_without_the_non_ascii_tail(data):
    return len(data.rstrip(bytes(range(128, 256))))


def length_if_it_decodes(data):
    try:
        data.decode("utf-8")
        return len(data)
    except UnicodeDecodeError:
        return 0


def length_last_byte(data):
    if data and data[-1] >= 0xC0:  # a first byte with nothing after it
        return len(data) - 1
    return len(data)


def length_step_back_over_high_bytes(data):
    if not data:
        return 0
    i = len(data) - 1
    while i > 0 and data[i] & 0x80 and data[i - 1] & 0x80:
        i -= 1
    need = 4 if data[i] >= 0xF0 else 3 if data[i] >= 0xE0 else 2 if data[i] >= 0xC0 else 1
    return len(data) if i + need <= len(data) else i


def length_no_emoji(data):
    i = len(data) - 1
    while i > 0 and 0x80 <= data[i] < 0xC0:
        i -= 1
    if i < 0:
        return 0
    need = 3 if data[i] >= 0xE0 else 2 if data[i] >= 0xC0 else 1
    return len(data) if i + need <= len(data) else i


def length_hold_the_last_non_ascii(data):
    i = len(data) - 1
    while i > 0 and 0x80 <= data[i] < 0xC0:
        i -= 1
    if i >= 0 and data[i] >= 0x80:
        return i  # it might not be finished
    return len(data)


def length_of_the_unfinished_part(data):
    for cut in range(4):
        try:
            data[: len(data) - cut].decode("utf-8")
            return cut
        except UnicodeDecodeError:
            pass
    return len(data)


def length_in_characters(data):
    return len(data.decode("utf-8", errors="ignore"))


def length_as_text(data):
    return codecs.getincrementaldecoder("utf-8")().decode(data)


def length_after_replace(data):
    return len(data.decode("utf-8", errors="replace").encode("utf-8"))


def length_high_bit_continues(data):
    start = len(data)
    while start > 0 and data[start - 1] >> 7:  # "a byte with its high bit set belongs to the last character"
        start -= 1
    if start == len(data):
        return start
    first = data[start]
    size = 2 if first < 0xE0 else 3 if first < 0xF0 else 4
    return len(data) if start + size <= len(data) else start


WRONG_LENGTHS = [
    (length_three_bytes_each, "three_bytes_assumed", "'é' is two bytes"),
    (length_without_the_non_ascii_tail, "all_non_ascii_held", "whole characters too"),
    (length_if_it_decodes, "everything_held_when_cut", "the characters before the cut are whole"),
    (length_last_byte, "last_byte_only", "only the last byte was looked at"),
    (length_step_back_over_high_bytes, "stepped_past_first_byte", "went past the first byte"),
    (length_high_bit_continues, "stepped_past_first_byte", "only bytes 10xxxxxx continue"),
    (length_no_emoji, "no_four_byte_characters", "four bytes"),
    (length_hold_the_last_non_ascii, "complete_character_held", "although it is complete"),
    (length_of_the_unfinished_part, "held_back_returned", "the number of bytes held back"),
    (length_in_characters, "characters_counted", "a number of characters"),
    (length_as_text, "text_returned", "returned the text"),
    (length_after_replace, "replacement_counted", "errors='replace'"),
]


# Read by tests/exercise_cases.py; test_exercise_checkers.py requires at least ten per checker.
WRONG_ANSWERS = {"pair_changes": WRONG_CHANGES, "merges_to_one_token": WRONG_TO_ONE, "complete_length": WRONG_LENGTHS}
