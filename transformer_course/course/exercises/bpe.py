"""Chapter 17 exercises: what one merge changes in the pair counts, how many merges make a word one token, and
how many bytes of a stream are whole characters.

Here token ids are plain byte values (0-255) and the merge learned i-th (from 0) makes token 256 + i; the
package numbers bytes in GPT-2's order instead. The chapter prints a training loop that recounts every pair,
the package's training and its encoding of one word; none of these exercises is one of them: the first asks for
the net change of a word's pair counts (the package's update takes all the old pairs out and puts all the
new ones in: the same net change), the second for a question about encoding that
the chapter does not answer, the third for the streaming decoder that its pitfall only describes. The known
mistakes include pairs kept on both sides of the change, repeats lost in a set, neighbours forgotten or taken
from the word before the merge, the merge that spells a word taken for the one that encoding reaches, merges
applied out of order, characters taken for bytes, every non-ASCII character taken to be three bytes, only the
last byte looked at, and a step back past the first byte of the last character.
"""

from __future__ import annotations

from collections import Counter
from functools import partial
from itertools import pairwise

from ...bpe import merge
from ._core import Case, Mistake, Result, checker, compare, solution


def _as_tuples(x):
    """A reader's lists as tuples, so that [a, b] and (a, b) compare equal."""
    return tuple(_as_tuples(v) for v in x) if isinstance(x, list | tuple) else x


def _observe(fn, case: Case):
    return _as_tuples(fn(*case.args, **case.kwargs))


def _merge_variant(word, pair, new_id, how="left"):
    """One merge in one word: left to right (right), only the first occurrence, or right to left."""
    word = tuple(word)
    if how == "left":
        return tuple(merge(list(word), pair, new_id))
    if how == "first":
        for i in range(len(word) - 1):
            if (word[i], word[i + 1]) == pair:
                return (*word[:i], new_id, *word[i + 2 :])
        return word
    return tuple(reversed(merge(list(reversed(word)), (pair[1], pair[0]), new_id)))  # "right"


# ---------------------------------------------------------------- exercise 17.1: what a merge changes


@solution
def pair_changes(word, pair, new_id):
    """(lost, gained): the pairs of word that merging pair into new_id removes and adds, net, repeats kept."""
    before = Counter(pairwise(word))
    after = Counter(pairwise(merge(list(word), pair, new_id)))
    # Counter subtraction keeps positive counts only: a pair there before and after cancels out.
    return tuple(sorted((before - after).elements())), tuple(sorted((after - before).elements()))


def _observe_changes(fn, case: Case):
    """The reader's (lost, gained) with each side sorted: the order of the pairs is free."""
    got = _as_tuples(fn(*case.args, **case.kwargs))
    if isinstance(got, tuple) and len(got) == 2 and all(isinstance(side, tuple) for side in got):
        try:
            return tuple(tuple(sorted(side)) for side in got)
        except TypeError:  # pairs that do not compare (None among them): left as they are
            return got
    return got


def _changes_variant(word, pair, new_id, how="net", merge_how="left"):
    """pair_changes with one thing done differently (the keyword says which)."""
    word = tuple(word)
    merged = _merge_variant(word, pair, new_id, merge_how)
    before, after = Counter(pairwise(word)), Counter(pairwise(merged))
    if how == "all":  # every old pair lost, every new pair gained, as the training loop applies them
        return tuple(pairwise(word)), tuple(pairwise(merged))
    if how == "sets":
        return tuple(sorted(set(before) - set(after))), tuple(sorted(set(after) - set(before)))
    if how == "items":
        return tuple(sorted((before - after).items())), tuple(sorted((after - before).items()))
    if how == "dict":
        return {p: after[p] - before[p] for p in before | after if after[p] != before[p]}
    if how == "pair_only":  # only the merged pair lost, only pairs holding the new token gained
        n = len(word) - len(merged)
        return (pair,) * n, tuple(p for p in pairwise(merged) if new_id in p)
    if how == "local":  # each occurrence's neighbours read in the word before the merge
        lost, gained, i = [], [], 0
        while i + 1 < len(word):
            if (word[i], word[i + 1]) != pair:
                i += 1
                continue
            lost.append(pair)
            if i > 0:
                lost.append((word[i - 1], word[i]))
                gained.append((word[i - 1], new_id))
            if i + 2 < len(word):
                lost.append((word[i + 1], word[i + 2]))
                gained.append((new_id, word[i + 2]))
            i += 2
        return tuple(lost), tuple(gained)
    lost, gained = tuple((before - after).elements()), tuple((after - before).elements())
    if how == "swapped":
        return gained, lost
    if how == "lost_only":
        return lost
    return lost, gained


_CHANGES_MISTAKES = (
    Mistake(
        "unchanged_pairs_kept",
        partial(_changes_variant, how="all"),
        "every pair of the old word was listed as lost and every pair of the new word as gained: a pair the word "
        "holds before and after the merge (the 'e', 'r' of b'lower' when 'l', 'o' merge) did not change, so it "
        "is in neither. Subtract the counts both ways (Counter's - keeps what is left over).",
    ),
    Mistake(
        "swapped",
        partial(_changes_variant, how="swapped"),
        "lost and gained are swapped: lost first (pairs of the word before the merge that are gone after it).",
    ),
    Mistake(
        "sets_not_counts",
        partial(_changes_variant, how="sets"),
        "repeats were lost: a pair lost twice (b'aaa' loses (97, 97) twice) must be listed twice, since the "
        "training's counts go down by two. Count with a Counter, not a set.",
    ),
    Mistake(
        "counts_not_repeats",
        partial(_changes_variant, how="items"),
        "each pair came with its count: list the pair itself, once per time it is lost or gained "
        "(Counter.elements() repeats it).",
    ),
    Mistake(
        "dict_returned",
        partial(_changes_variant, how="dict"),
        "returned a dict of changes: the exercise asks for (lost, gained), two tuples of pairs, a pair repeated "
        "as often as it is lost or gained.",
    ),
    Mistake(
        "lost_only",
        partial(_changes_variant, how="lost_only"),
        "returned the lost pairs alone: return the two tuples, (lost, gained).",
    ),
    Mistake(
        "neighbours_forgotten",
        partial(_changes_variant, how="pair_only"),
        "only the merged pair was counted as lost: its neighbours change too. In b'lower' with 'l', 'o' merged, "
        "('o', 'w') is lost as well, and (new token, 'w') is gained.",
    ),
    Mistake(
        "neighbours_from_old_word",
        partial(_changes_variant, how="local"),
        "each occurrence's neighbours were read in the word before the merge: when two occurrences touch "
        "(b'abab' with 'a', 'b' merged) the pair between them is counted twice and the new pair (new, new) is "
        "missed. Merge the whole word first, then compare its pairs with the old ones.",
    ),
    Mistake(
        "merge_right_to_left",
        partial(_changes_variant, merge_how="right"),
        "the word was merged from the right: (a, a, a) with the merge (a, a) becomes (aa, a), scanning left to "
        "right, as training does.",
    ),
    Mistake(
        "merge_first_only",
        partial(_changes_variant, merge_how="first"),
        "only the first occurrence of the pair was merged: a merge replaces every occurrence in the word.",
    ),
)


def _changes_cases() -> list[Case]:
    return [
        Case("b'lower' with (l, o) merged into 256", (tuple(b"lower"), (108, 111), 256)),
        Case("b'newest' with (e, s) merged into 256", (tuple(b"newest"), (101, 115), 256)),
        Case("b'abab' with (a, b) merged into 256 (occurrences side by side)", (tuple(b"abab"), (97, 98), 256)),
        Case("b'aaaa' with (a, a) merged into 256 (a run)", (tuple(b"aaaa"), (97, 97), 256)),
        Case("b'aaa' with (a, a) merged into 256 (a run of three)", (tuple(b"aaa"), (97, 97), 256)),
        Case("b'xaax' with (a, x) merged into 300", (tuple(b"xaax"), (97, 120), 300)),
        Case("(256, 119, 256, 119) with (256, 119) merged into 257", ((256, 119, 256, 119), (256, 119), 257)),
        Case("b'low' with (e, s) merged (the pair is not in the word)", (tuple(b"low"), (101, 115), 256)),
        Case("'注意' as UTF-8 with (230, 179) merged into 256", (tuple("注意".encode()), (230, 179), 256)),
        Case("b'banana' with (a, n) merged into 256", (tuple(b"banana"), (97, 110), 256)),
        Case("b'abcabc' with (a, b) merged into 256 (pairs lost and gained twice)", (tuple(b"abcabc"), (97, 98), 256)),
    ]


# ---------------------------------------------------------------- exercise 17.2: merges until one token


def _encode(ids, merges, k, order="rank"):
    """ids encoded with the first k merges: the earliest learned pair present first, again and again."""
    ranks = {pair: i for i, pair in enumerate(merges[:k])}
    ids = list(ids)
    if order == "reverse":  # one pass over the merges, from the last learned to the first
        for i in reversed(range(k)):
            ids = merge(ids, merges[i], 256 + i)
        return ids
    while len(ids) > 1:
        present = [p for p in pairwise(ids) if p in ranks]
        if not present:
            break
        pair = min(present) if order == "value" else min(present, key=ranks.__getitem__)
        ids = merge(ids, pair, 256 + ranks[pair])
    return ids


@solution
def merges_to_one_token(word, merges):
    """The fewest first merges that encode word as one token; -1 if even all of them leave several tokens."""
    for k in range(len(merges) + 1):
        rank = {pair: i for i, pair in enumerate(merges[:k])}  # pair -> when it was learned
        ids = list(word.encode("utf-8"))
        while len(ids) > 1:
            pair = min(pairwise(ids), key=lambda p: rank.get(p, k))  # the earliest learned pair present
            if pair not in rank:
                break  # no pair of the word is among the first k merges
            ids = merge(ids, pair, 256 + rank[pair])
        if len(ids) == 1:
            return k
    return -1


def _to_one_variant(word, merges, how="encode", order="rank", units="utf8", never=-1, short=False):
    """merges_to_one_token with one thing done differently (the keyword says which)."""
    merges = list(merges)
    ids = [ord(c) for c in word] if units == "chars" else list(word.encode("utf-8"))
    if how == "spelled":  # the first merge whose token spells the word, whether encoding reaches it or not
        spelled = {b: bytes([b]) for b in range(256)}
        for i, (a, b) in enumerate(merges):
            spelled[256 + i] = spelled[a] + spelled[b]
            if len(ids) > 1 and spelled[256 + i] == bytes(ids):
                return i + 1
        return 0 if len(ids) == 1 else never
    if how == "applied":  # the number of merges applied while encoding with all of them
        rank = {pair: i for i, pair in enumerate(merges)}
        n = 0
        while len(ids) > 1 and any(p in rank for p in pairwise(ids)):
            pair = min((p for p in pairwise(ids) if p in rank), key=rank.__getitem__)
            ids, n = merge(ids, pair, 256 + rank[pair]), n + 1
        return n if len(ids) == 1 else never
    if how == "token_id":  # the id of the one token that encoding with every merge leaves
        ids = _encode(ids, merges, len(merges))
        return ids[0] if len(ids) == 1 else never
    first = 1 if units == "from_one" else 0
    for k in range(first, len(merges) if short else len(merges) + 1):
        if len(_encode(ids, merges, k, order)) == 1:
            return k
    return never


_TO_ONE_MISTAKES = (
    Mistake(
        "spelling_merge",
        partial(_to_one_variant, how="spelled"),
        "this is the first merge whose token spells the word, but encoding does not always reach that token: "
        "with the merges (b, c), (a, b), (ab, c), b'abc' merges (b, c) first and stays (a, bc). Encode the word "
        "with the first k merges, for k = 0, 1, 2, ..., and return the first k that leaves one token.",
    ),
    Mistake(
        "merges_applied_counted",
        partial(_to_one_variant, how="applied"),
        "this counts the merges applied to the word; k counts the merges learned, the unused ones between them "
        "included: it is the index of the last merge the encoding uses, plus one.",
    ),
    Mistake(
        "token_id_returned",
        partial(_to_one_variant, how="token_id"),
        "returned the id of the word's token: return k, the number of first merges needed (for a token made by "
        "a merge, its id minus 255; 0 for a word of one byte).",
    ),
    Mistake(
        "none_for_never",
        partial(_to_one_variant, never=None),
        "returned None for a word that never becomes one token: the exercise asks for -1 there.",
    ),
    Mistake(
        "zero_for_never",
        partial(_to_one_variant, never=0),
        "returned 0 for a word that never becomes one token: 0 means a word of one byte, which needs no merge; "
        "return -1.",
    ),
    Mistake(
        "last_merge_never_tried",
        partial(_to_one_variant, short=True),
        "the last value of k was never tried: k runs from 0 to len(merges) included (range(len(merges) + 1)).",
    ),
    Mistake(
        "one_byte_word",
        partial(_to_one_variant, units="from_one"),
        "a word of one byte is one token before any merge: k = 0.",
    ),
    Mistake(
        "characters_not_bytes",
        partial(_to_one_variant, units="chars"),
        "the word was read as characters (ord(c)) instead of UTF-8 bytes: '注' is the three bytes 230, 179, 168; "
        "start from list(word.encode('utf-8')).",
    ),
    Mistake(
        "reverse_order",
        partial(_to_one_variant, order="reverse"),
        "the merges were applied from the last learned to the first: encoding applies the earliest learned first.",
    ),
    Mistake(
        "smallest_pair",
        partial(_to_one_variant, order="value"),
        "the pair with the smallest ids was merged first: rank the pairs by when their merge was learned (its "
        "index in merges), not by the ids of the pair itself.",
    ),
)


def _to_one_cases() -> list[Case]:
    # The first 8 merges of training on 'low ' * 5 + 'lower ' * 2 + 'newest ' * 6 + 'widest ' * 3, byte values as
    # ids: es, est, lo, low, ' n', ' low', ew, ' new' (tests/unit/course/test_exercises_bpe.py trains them again).
    tiny = ((101, 115), (256, 116), (108, 111), (258, 119), (32, 110), (32, 259), (101, 119), (260, 262))
    return [
        Case("' low' with 8 merges learned from low/lower/newest/widest", (" low", tiny)),
        Case("'lowest' with the same merges (never one token)", ("lowest", tiny)),
        Case("'est' with the same merges", ("est", tiny)),
        Case("' new' with the same merges (it needs the last one)", (" new", tiny)),
        Case("'abc' with the merges (b, c), (a, b), (ab, c)", ("abc", ((98, 99), (97, 98), (257, 99)))),
        Case("'abc' with the merges (b, c), (a, b), (a, bc)", ("abc", ((98, 99), (97, 98), (97, 256)))),
        Case("'abc' with the merges (a, b), (x, y), (ab, c)", ("abc", ((97, 98), (120, 121), (256, 99)))),
        Case("'x' (one byte) with the merges (a, b)", ("x", ((97, 98),))),
        Case("'aaaa' with the merges (a, a), (aa, aa)", ("aaaa", ((97, 97), (256, 256)))),
        Case("'aaa' with the merges (a, a), (aa, aa)", ("aaa", ((97, 97), (256, 256)))),
        Case("'注' with the merges (179, 168), (230, 179), (230, 256)", ("注", ((179, 168), (230, 179), (230, 256)))),
        Case(
            "'abcd' with the merges (c, d), (a, b), (b, c), (a, 258), (257, 256)",
            ("abcd", ((99, 100), (97, 98), (98, 99), (97, 258), (257, 256))),
        ),
    ]


# ---------------------------------------------------------------- exercise 17.3: whole characters of a stream


@solution
def complete_length(data):
    """How many leading bytes of data are whole characters (data: UTF-8 text, perhaps cut at the end)."""
    if not data:
        return 0
    start = len(data) - 1
    while start > 0 and data[start] >> 6 == 0b10:  # a byte 10xxxxxx continues a character
        start -= 1
    lead = data[start]  # the first byte of the last character says how long the character is
    size = 1 if lead < 0b1000_0000 else 2 if lead < 0b1110_0000 else 3 if lead < 0b1111_0000 else 4
    return len(data) if start + size <= len(data) else start


def _length_variant(data, how):
    """complete_length with one thing done differently (the keyword says which)."""
    n = len(data)
    tail = n - len(data.rstrip(bytes(range(128, 256))))  # trailing non-ASCII bytes
    right = complete_length(data)
    if how == "three":
        return n - tail % 3
    if how == "all_tail":
        return n - tail
    if how == "last_byte":
        return n - 1 if data and data[-1] >= 0b1100_0000 else n
    if how == "held":
        return n - right
    if how == "chars":
        return len(data[:right].decode("utf-8"))
    if how == "text":
        return data[:right].decode("utf-8")
    if how == "replace":
        return len(data.decode("utf-8", errors="replace").encode("utf-8"))
    if how == "strict":
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return 0
        return n
    if not data:
        return 0
    start = n - 1
    if how == "stepped_past":  # back to the first byte of the run of non-ASCII bytes at the end
        while start > 0 and data[start] >= 0b1000_0000 and data[start - 1] >= 0b1000_0000:
            start -= 1
    while start > 0 and data[start] >> 6 == 0b10:  # back to the first byte of the last character
        start -= 1
    lead = data[start]
    if how == "whole_held":
        return start if lead >= 0b1000_0000 else n
    sizes = (1, 2, 3, 3) if how == "no_four" else (1, 2, 3, 4)
    size = (
        sizes[0]
        if lead < 0b1100_0000
        else sizes[1]
        if lead < 0b1110_0000
        else sizes[2]
        if lead < 0b1111_0000
        else sizes[3]
    )
    return n if start + size <= n else start


_LENGTH_MISTAKES = (
    Mistake(
        "three_bytes_assumed",
        partial(_length_variant, how="three"),
        "every non-ASCII character was taken to be three bytes: that holds for Chinese, but 'é' is two bytes and "
        "an emoji four. Read the length from the character's first byte: 110xxxxx two, 1110xxxx three, "
        "11110xxx four.",
    ),
    Mistake(
        "all_non_ascii_held",
        partial(_length_variant, how="all_tail"),
        "all the non-ASCII bytes at the end were held back, whole characters too: only an unfinished last "
        "character waits for the next token.",
    ),
    Mistake(
        "everything_held_when_cut",
        partial(_length_variant, how="strict"),
        "when the bytes do not decode, 0 was returned: the characters before the cut are whole and can be shown; "
        "only the unfinished last one waits.",
    ),
    Mistake(
        "last_byte_only",
        partial(_length_variant, how="last_byte"),
        "only the last byte was looked at: a character of three bytes cut after two ends in a continuation byte "
        "(10xxxxxx); go back to the character's first byte and compare its length with the bytes present.",
    ),
    Mistake(
        "stepped_past_first_byte",
        partial(_length_variant, how="stepped_past"),
        "stepping back went past the first byte of the last character: only bytes 10xxxxxx continue a character; "
        "stop at the first byte (11xxxxxx), which says how many bytes the character has.",
    ),
    Mistake(
        "no_four_byte_characters",
        partial(_length_variant, how="no_four"),
        "a first byte 11110xxx starts a character of four bytes (an emoji), not three.",
    ),
    Mistake(
        "complete_character_held",
        partial(_length_variant, how="whole_held"),
        "the last character was held back although it is complete: hold it back only when fewer bytes are "
        "present than its first byte announces.",
    ),
    Mistake(
        "held_back_returned",
        partial(_length_variant, how="held"),
        "returned the number of bytes held back: return the number of whole bytes at the start, so that "
        "data[:n] is shown now and data[n:] waits.",
    ),
    Mistake(
        "characters_counted",
        partial(_length_variant, how="chars"),
        "returned a number of characters: return a number of bytes (the caller slices bytes with it).",
    ),
    Mistake(
        "text_returned",
        partial(_length_variant, how="text"),
        "returned the text: return the number of bytes n, so that the caller shows data[:n] and keeps data[n:] "
        "for the next token.",
    ),
    Mistake(
        "replacement_counted",
        partial(_length_variant, how="replace"),
        "errors='replace' turned the unfinished character into '\\ufffd' (3 bytes) and that was counted: the cut "
        "bytes are not a character yet.",
    ),
)


def _length_cases() -> list[Case]:
    mixed = "naïve 注意力 🤖".encode()
    return [
        Case("b'hello'", (b"hello",)),
        Case("'注意' as UTF-8", ("注意".encode(),)),
        Case("'注意' cut after 4 bytes", ("注意".encode()[:4],)),
        Case("'注' cut after 2 bytes", ("注".encode()[:2],)),
        Case("'café' cut after 4 bytes", ("café".encode()[:4],)),
        Case("'é' whole", ("é".encode(),)),
        Case("'a🤖' whole", ("a🤖".encode(),)),
        Case("'a🤖' cut after 4 bytes", ("a🤖".encode()[:4],)),
        Case("'a🤖' cut after 3 bytes", ("a🤖".encode()[:3],)),
        Case("'naïve 注意力 🤖' without its last byte", (mixed[:-1],)),
        Case("'床前明月光' cut after 10 bytes", ("床前明月光".encode()[:10],)),
        Case("b'' (nothing yet)", (b"",)),
    ]


# ---------------------------------------------------------------- the checkers


@checker
def check_pair_changes(fn) -> Result:
    """Check `fn(word, pair, new_id)` on words with runs, touching occurrences, merged tokens and no occurrence."""
    cases = _changes_cases()
    return compare(
        "pair_changes",
        fn,
        pair_changes,
        cases,
        _CHANGES_MISTAKES,
        observe=_observe_changes,
        passed=f"passed all {len(cases)} cases (neighbours, runs, occurrences side by side, a pair not in the word, "
        "Chinese bytes): the same pairs lost and gained as the reference",
    )


@checker
def check_merges_to_one_token(fn) -> Result:
    """Check `fn(word, merges)` on words that encoding makes one token late, never, or at once."""
    cases = _to_one_cases()
    return compare(
        "merges_to_one_token",
        fn,
        merges_to_one_token,
        cases,
        _TO_ONE_MISTAKES,
        observe=_observe,
        passed=f"passed all {len(cases)} cases (tokens that encoding reaches and tokens it never reaches, a "
        "one-byte word, runs, Chinese bytes): the same number of merges as the reference",
    )


@checker
def check_complete_length(fn) -> Result:
    """Check `fn(data)` on UTF-8 text cut inside characters of two, three and four bytes, and not cut."""
    cases = _length_cases()
    return compare(
        "complete_length",
        fn,
        complete_length,
        cases,
        _LENGTH_MISTAKES,
        observe=_observe,
        passed=f"passed all {len(cases)} cases (ASCII, accented, Chinese and emoji characters, whole or cut): the "
        "same length as the reference",
    )
