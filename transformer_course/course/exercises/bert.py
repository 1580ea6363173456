"""Chapter 15 exercises: the best answer for one masked word, and BERT's own way of choosing what to mask.

Neither answer is printed in the chapter. `best_masked_word` generalises the chapter's `language_answer` (a
uniform language) to sentences drawn with unequal probabilities: the answer is the conditional distribution
of the hidden word given both sides, which is what a masked language model's loss is lowest for. The known
mistakes include word frequencies that ignore the template, the chapter's uniform shares, a one-sided context,
a match on a longer sentence, and the joint instead of the conditional probability. `pick_like_bert` is the
choice of positions in BERT's released `create_pretraining_data.py`: a fixed count per sentence, round(p × its
length), at least 1 and at most `max_predictions`, among its ordinary tokens, where the chapter's `mask_tokens`
picks each position independently. Its checker passes the random draw in as `scores`, so the answer is exact;
the known mistakes include the per-position draw, the padding counted in the length, the floor instead of
round, and one count for the whole batch.
"""

from __future__ import annotations

import functools

import torch

from ._core import Case, Mistake, Result, checker, compare, describe_difference, solution

MASK_WORD = "<mask>"

# ---------------------------------------------------------------- exercise 15.1: the best answer for one masked word


@solution
def best_masked_word(template, sentences, weights, vocab):
    """The distribution (V,) of the word hidden by <mask> in template, when sentence i has probability ∝ weights[i]."""
    words = template.split()
    hidden = words.index(MASK_WORD)
    probs = torch.zeros(len(vocab))
    for sentence, weight in zip(sentences, weights.tolist()):
        candidate = sentence.split()
        if len(candidate) == len(words) and all(c == w for c, w in zip(candidate, words) if w != MASK_WORD):
            probs[vocab.index(candidate[hidden])] += weight  # both sides match: this sentence explains the blank
    return probs / probs.sum()  # conditioned on the words that are seen


def _fill_variant(template, sentences, weights, vocab, weight="given", match="both", normalise="fits", merge=True,
                  output="probs"):  # fmt: skip
    """best_masked_word with one thing done differently (the keyword that differs from the default says which)."""
    words = template.split()
    hidden = words.index(MASK_WORD)
    given = weights.tolist()
    if not merge:  # each distinct sentence once, with the weight of its last listing (a dict built by zip)
        last = dict(zip(sentences, given))
        sentences, given = list(last), list(last.values())
    probs = torch.zeros(len(vocab))
    for sentence, w in zip(sentences, given):
        candidate = sentence.split()
        if match == "prefix":
            fits = candidate[:hidden] == words[:hidden] and candidate[hidden + 1 : len(words)] == words[hidden + 1 :]
            fits = fits and len(candidate) >= len(words)
        elif match == "left":
            fits = len(candidate) == len(words) and candidate[:hidden] == words[:hidden]
        elif match == "right":
            fits = len(candidate) == len(words) and candidate[hidden + 1 :] == words[hidden + 1 :]
        else:
            fits = len(candidate) == len(words) and all(c == x for c, x in zip(candidate, words) if x != MASK_WORD)
        if fits:
            value = {"given": w, "count": 1.0, "uniform": 1.0}[weight]
            index = vocab.index(candidate[hidden])
            probs[index] = value if weight == "uniform" else probs[index] + value
    if normalise == "fits":
        probs = probs / probs.sum()
    elif normalise == "all":
        probs = probs / weights.sum()
    if output == "one_hot":
        return torch.nn.functional.one_hot(probs.argmax(), len(vocab)).float()
    if output == "log":
        return probs.log()
    return probs


def _word_frequencies(template, sentences, weights, vocab):
    """Every word scored by its weighted frequency anywhere in the sentences: the template is never read."""
    probs = torch.zeros(len(vocab))
    for sentence, weight in zip(sentences, weights.tolist()):
        for word in sentence.split():
            probs[vocab.index(word)] += weight
    return probs / probs.sum()


_FILL_MISTAKES = (
    Mistake(
        "ignores_the_template",
        _word_frequencies,
        "every word got its weighted frequency in the sentences, wherever it occurs: the template was never read. "
        "Only the sentences that fit the template count (as many words, the same words everywhere but at "
        "<mask>), and of each only the word at the blank.",
    ),
    Mistake(
        "uniform_over_fits",
        functools.partial(_fill_variant, weight="uniform"),
        "every word that fits got the same probability: that is the chapter's uniform language. Here sentence i "
        "is drawn with probability ∝ weights[i], so a word's probability is the total weight of the sentences it "
        "completes, divided by the total weight of every sentence that fits.",
    ),
    Mistake(
        "counts_not_weights",
        functools.partial(_fill_variant, weight="count"),
        "each fitting sentence counted once, whatever its weight: add up weights[i], not 1.",
    ),
    Mistake(
        "not_normalised",
        functools.partial(_fill_variant, normalise="none"),
        "the result does not sum to 1: divide the words' weights by the total weight of the sentences that fit.",
    ),
    Mistake(
        "joint_not_conditional",
        functools.partial(_fill_variant, normalise="all"),
        "you divided by the total weight of *every* sentence: that is the probability of the whole sentence, not "
        "of the hidden word given the words you see. Divide by the weight of the sentences that fit the template.",
    ),
    Mistake(
        "duplicates_once",
        functools.partial(_fill_variant, merge=False),
        "a sentence listed twice kept only one of its weights (a dict built from zip keeps the last): add up the "
        "weights of every listing.",
    ),
    Mistake(
        "longer_sentences_match",
        functools.partial(_fill_variant, match="prefix"),
        "longer sentences were counted: 'he likes her very much' does not fit 'he <mask> her'. A sentence fits "
        "only if it has as many words as the template and agrees with it everywhere but at <mask>.",
    ),
    Mistake(
        "left_context_only",
        functools.partial(_fill_variant, match="left"),
        "only the words before <mask> were compared: a masked language model sees both sides, and the words "
        "after the blank rule out candidates too (BERT's whole point).",
    ),
    Mistake(
        "right_context_only",
        functools.partial(_fill_variant, match="right"),
        "only the words after <mask> were compared: the words before it count as well.",
    ),
    Mistake(
        "argmax",
        functools.partial(_fill_variant, output="one_hot"),
        "you returned the single most likely word (one-hot): the best answer is the whole distribution, which is "
        "what minimises the expected cross-entropy when several words fit.",
    ),
    Mistake(
        "log_probabilities",
        functools.partial(_fill_variant, output="log"),
        "these are log-probabilities: return the probabilities themselves (they sum to 1).",
    ),
)


def _explain_fill(got, expected, label: str) -> str:
    if isinstance(got, torch.Tensor) and isinstance(expected, torch.Tensor) and got.shape == expected.shape:
        if not torch.isclose(got.double().sum(), torch.tensor(1.0, dtype=torch.float64), atol=1e-4):
            return f"on {label}: your probabilities sum to {got.double().sum().item():.4g}, not 1"
        wrong = ((got > 0) != (expected > 0)).nonzero().flatten().tolist()
        if wrong:
            return f"on {label}: the words with a positive probability differ (vocabulary ids {wrong})"
    return describe_difference(got, expected, label)


@checker
def check_best_masked_word(fn) -> Result:
    """Check `fn(template, sentences, weights, vocab)` against the reference on small weighted languages."""
    sentences = [
        "he likes her", "he loves her", "he likes her very much", "she likes her", "he hates him",
        "we like her", "he loves her", "they like us", "he likes them",
    ]  # fmt: skip
    weights = torch.tensor([1.0, 2.0, 4.0, 1.0, 3.0, 1.0, 1.0, 2.0, 5.0])
    vocab = sorted({w for s in sentences for w in s.split()} | {"<pad>", MASK_WORD})
    cases = [
        Case("'he <mask> her', a sentence listed twice", (f"he {MASK_WORD} her", sentences, weights, vocab)),
        Case("'<mask> likes her'", (f"{MASK_WORD} likes her", sentences, weights, vocab)),
        Case("'he likes <mask>'", (f"he likes {MASK_WORD}", sentences, weights, vocab)),
        Case("'we <mask> her', one word fits", (f"we {MASK_WORD} her", sentences, weights, vocab)),
        Case("'they like <mask>' with equal weights", (f"they like {MASK_WORD}", sentences, torch.ones(9), vocab)),
    ]
    return compare(
        "best_masked_word",
        fn,
        best_masked_word,
        cases,
        _FILL_MISTAKES,
        explain=_explain_fill,
        passed=f"passed all {len(cases)} cases (the blank first, in the middle and last; a repeated sentence; one "
        "word that fits): the same distribution as the reference",
    )


# ---------------------------------------------------------------- exercise 15.2: BERT's choice of positions


@solution
def pick_like_bert(ids, scores, p, pad_id, special_ids, max_predictions):
    """(B, T) bool: in each row, the k ordinary positions with the lowest scores, k = min(max, max(1, round(p·n)))."""
    length = (ids != pad_id).sum(dim=1)  # (B,): n, the tokens of each sentence, <cls> and <sep> included
    ordinary = ~torch.isin(ids, torch.tensor([pad_id, *special_ids]))
    picked = torch.zeros_like(ordinary)
    for row in range(ids.shape[0]):
        k = min(max_predictions, max(1, round(p * int(length[row]))))  # BERT's num_to_predict
        ranked = scores[row].masked_fill(~ordinary[row], float("inf")).argsort()  # ordinary positions first
        picked[row, ranked[:k]] = True
    return picked & ordinary  # never a special token, even where a row has fewer than k ordinary ones


def _pick_variant(ids, scores, p, pad_id, special_ids, max_predictions, length="tokens", rounding=round,
                  minimum=1, cap=True, candidates="ordinary", order="lowest", per_row=True):  # fmt: skip
    """pick_like_bert with one thing done differently (the keyword that differs from the default says which)."""
    real = ids != pad_id
    ordinary = ~torch.isin(ids, torch.tensor([pad_id, *special_ids]))
    allowed = {"ordinary": ordinary, "real": real, "any": torch.ones_like(real)}[candidates]
    n = {"tokens": real.sum(dim=1), "padded": torch.full((ids.shape[0],), ids.shape[1]),
         "ordinary": ordinary.sum(dim=1)}[length]  # fmt: skip
    if not per_row:
        n = n.max().expand(ids.shape[0])
    picked = torch.zeros_like(real)
    for row in range(ids.shape[0]):
        k = max(minimum, int(rounding(p * int(n[row]))))
        k = min(max_predictions, k) if cap else k
        sign = 1.0 if order == "lowest" else -1.0
        ranked = (sign * scores[row]).masked_fill(~allowed[row], float("inf")).argsort()
        picked[row, ranked[:k]] = True
    return picked & allowed


def _bernoulli(ids, scores, p, pad_id, special_ids, max_predictions):
    return (scores < p) & ~torch.isin(ids, torch.tensor([pad_id, *special_ids]))


_PICK_MISTAKES = (
    Mistake(
        "bernoulli",
        _bernoulli,
        "each position was picked on its own when its score is below p: that is the chapter's mask_tokens (and "
        "Hugging Face's collator). BERT's released code picks a fixed number per sentence, round(p × length), the "
        "positions with the lowest scores.",
    ),
    Mistake(
        "padding_counted",
        functools.partial(_pick_variant, length="padded"),
        "the count used the padded length of the batch: a sentence's length is its own number of tokens (not "
        "<pad>), <cls> and <sep> included.",
    ),
    Mistake(
        "specials_not_counted",
        functools.partial(_pick_variant, length="ordinary"),
        "the count used the ordinary tokens only: BERT's num_to_predict rounds p × len(tokens), and its tokens "
        "include [CLS] and [SEP] (they are only excluded as candidates).",
    ),
    Mistake(
        "no_minimum",
        functools.partial(_pick_variant, minimum=0),
        "a short sentence got no position at all: BERT predicts at least one, max(1, round(p × length)).",
    ),
    Mistake(
        "no_cap",
        functools.partial(_pick_variant, cap=False),
        "a long sentence got more than max_predictions positions: the count is capped, min(max_predictions, ...).",
    ),
    Mistake(
        "floor_not_round",
        functools.partial(_pick_variant, rounding=int),
        "int(p × length) rounds down: BERT rounds to the nearest whole number, round(p × length).",
    ),
    Mistake(
        "specials_picked",
        functools.partial(_pick_variant, candidates="real"),
        "a special token (<cls>, <sep>) was picked: only ordinary tokens are candidates.",
    ),
    Mistake(
        "padding_picked",
        functools.partial(_pick_variant, candidates="any"),
        "padding or a special token was picked: only the ordinary tokens of the sentence are candidates.",
    ),
    Mistake(
        "highest_scores",
        functools.partial(_pick_variant, order="highest"),
        "you took the positions with the *highest* scores: take the lowest (argsort is ascending), as the checker "
        "asks, so that the same scores give the same positions.",
    ),
    Mistake(
        "one_count_for_the_batch",
        functools.partial(_pick_variant, per_row=False),
        "every row got the count of the longest sentence: the count is per sentence, from its own length.",
    ),
)


def _explain_pick(got, expected, label: str) -> str:
    if isinstance(got, torch.Tensor) and isinstance(expected, torch.Tensor) and got.shape == expected.shape:
        counts, wanted = got.bool().sum(dim=1).tolist(), expected.sum(dim=1).tolist()
        if counts != wanted:
            return f"on {label} you picked {counts} positions per row, expected {wanted}"
        return f"on {label} the right number per row, but other positions: take the lowest scores among the ordinary"
    return describe_difference(got, expected, label)


@checker
def check_pick_like_bert(fn) -> Result:
    """Check `fn(ids, scores, p, pad_id, special_ids, max_predictions)` against the reference on padded batches."""
    g = torch.Generator().manual_seed(15)

    def batch(lengths, width):
        # <cls>=1 words <sep>=2, right-padded with 0; ordinary ids 4..29.
        ids = torch.zeros(len(lengths), width, dtype=torch.long)
        for row, n in enumerate(lengths):
            ids[row, :n] = torch.randint(4, 30, (n,), generator=g)
            ids[row, 0], ids[row, n - 1] = 1, 2
        return ids, torch.rand(len(lengths), width, generator=g)

    cases = [
        Case("sentences of 7, 4 and 12 tokens, p=0.15", (*batch([7, 4, 12], 12), 0.15, 0, (1, 2, 3), 20)),
        Case("sentences of 9 and 5 tokens padded to 12, p=0.4", (*batch([9, 5], 12), 0.4, 0, (1, 2, 3), 20)),
        Case("a sentence of 40 tokens, p=0.3, max_predictions=5", (*batch([40, 8], 40), 0.3, 0, (1, 2, 3), 5)),
        Case("sentences of 3 and 6 tokens, p=0.15", (*batch([3, 6], 8), 0.15, 0, (1, 2, 3), 20)),
    ]
    return compare(
        "pick_like_bert",
        fn,
        pick_like_bert,
        cases,
        _PICK_MISTAKES,
        explain=_explain_pick,
        passed=f"passed all {len(cases)} cases (sentences of 3 to 40 tokens, padding, p = 0.15 to 0.4, a capped "
        "count): the same positions as BERT's rule",
    )
