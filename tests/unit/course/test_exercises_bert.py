"""Chapter 15's wrong answers (`WRONG_ANSWERS`) and the tests specific to its checkers.

The wrong answers below are written the way a reader might write them, independently of the variants the
checkers use to recognise the mistakes; at least ten per exercise.

test_exercise_checkers.py runs every row of the table against its checker (the mistake's key and the
words of its message), with the reference solution and the checks common to every checker.
"""

import torch
import torch.nn.functional as F

from transformer_course.course.exercises import solutions
from transformer_course.grammar import MASK, Language


def test_best_masked_word_with_equal_weights_is_the_chapters_uniform_answer():
    language = Language.english()
    probs = solutions.best_masked_word(
        f"he {MASK} her", list(language.sentences), torch.ones(len(language)), language.vocab.itos
    )
    fits = {language.vocab.itos[i] for i in probs.nonzero().flatten().tolist()}
    assert fits == {w for w in language.vocab.itos if f"he {w} her" in language}
    assert torch.allclose(probs[probs > 0], torch.full((len(fits),), 1 / len(fits)))


def test_pick_like_bert_follows_the_released_codes_count():
    # BERT's create_pretraining_data.py: num_to_predict = min(max_predictions_per_seq,
    # max(1, int(round(len(tokens) * masked_lm_prob)))), tokens counting [CLS] and [SEP].
    ids = torch.tensor([[1, 5, 6, 7, 8, 9, 2, 0, 0], [1, 5, 2, 0, 0, 0, 0, 0, 0], [1, *range(4, 11), 2]])
    scores = torch.rand(ids.shape, generator=torch.Generator().manual_seed(0))
    picked = solutions.pick_like_bert(ids, scores, 0.3, 0, (1, 2, 3), 2)
    assert picked.sum(dim=1).tolist() == [2, 1, 2]  # round(2.1) = 2; max(1, round(0.9)) = 1; min(2, round(2.7))
    assert not picked[torch.isin(ids, torch.tensor([0, 1, 2]))].any()


# ---- exercise 15.1: the best answer for one masked word


def fits(template, sentence):
    t, s = template.split(), sentence.split()
    return len(t) == len(s) and all(a == b for a, b in zip(t, s) if a != MASK)


def fill_uniform(template, sentences, weights, vocab):
    # The chapter's language_answer: every word that fits, equally likely.
    hidden = template.split().index(MASK)
    words = {s.split()[hidden] for s in sentences if fits(template, s)}
    return torch.tensor([1 / len(words) if w in words else 0.0 for w in vocab])


def fill_counting(template, sentences, weights, vocab):
    hidden = template.split().index(MASK)
    counts = torch.zeros(len(vocab))
    for s in sentences:
        if fits(template, s):
            counts[vocab.index(s.split()[hidden])] += 1
    return counts / counts.sum()


def fill_unnormalised(template, sentences, weights, vocab):
    hidden = template.split().index(MASK)
    out = torch.zeros(len(vocab))
    for s, w in zip(sentences, weights):
        if fits(template, s):
            out[vocab.index(s.split()[hidden])] += w
    return out


def fill_joint(template, sentences, weights, vocab):
    return fill_unnormalised(template, sentences, weights, vocab) / weights.sum()


def fill_dict_of_sentences(template, sentences, weights, vocab):
    weight_of = dict(zip(sentences, weights.tolist()))  # a sentence listed twice keeps its last weight
    hidden = template.split().index(MASK)
    out = torch.zeros(len(vocab))
    for s, w in weight_of.items():
        if fits(template, s):
            out[vocab.index(s.split()[hidden])] += w
    return out / out.sum()


def fill_startswith(template, sentences, weights, vocab):
    words = template.split()
    hidden = words.index(MASK)
    out = torch.zeros(len(vocab))
    for s, w in zip(sentences, weights.tolist()):
        ws = s.split()
        if len(ws) >= len(words) and all(a == b for a, b in zip(words, ws) if a != MASK):
            out[vocab.index(ws[hidden])] += w
    return out / out.sum()


def fill_left_only(template, sentences, weights, vocab):
    words = template.split()
    hidden = words.index(MASK)
    out = torch.zeros(len(vocab))
    for s, w in zip(sentences, weights.tolist()):
        ws = s.split()
        if len(ws) == len(words) and ws[:hidden] == words[:hidden]:  # "a left-to-right model would see this"
            out[vocab.index(ws[hidden])] += w
    return out / out.sum()


def fill_right_only(template, sentences, weights, vocab):
    words = template.split()
    hidden = words.index(MASK)
    out = torch.zeros(len(vocab))
    for s, w in zip(sentences, weights.tolist()):
        ws = s.split()
        if len(ws) == len(words) and ws[hidden + 1 :] == words[hidden + 1 :]:
            out[vocab.index(ws[hidden])] += w
    return out / out.sum()


def fill_one_hot(template, sentences, weights, vocab):
    probs = solutions.best_masked_word(template, sentences, weights, vocab)
    return F.one_hot(probs.argmax(), len(vocab)).float()


def fill_log(template, sentences, weights, vocab):
    return torch.log(solutions.best_masked_word(template, sentences, weights, vocab))


def fill_float64(template, sentences, weights, vocab):
    hidden = template.split().index(MASK)
    out = torch.zeros(len(vocab), dtype=torch.float64)
    for s, w in zip(sentences, weights.tolist()):
        if fits(template, s):
            out[vocab.index(s.split()[hidden])] += w
    return out / out.sum()


def fill_normalises_weights_in_place(template, sentences, weights, vocab):
    weights /= weights.sum()
    return solutions.best_masked_word(template, sentences, weights, vocab)


def fill_a_dict(template, sentences, weights, vocab):
    probs = solutions.best_masked_word(template, sentences, weights, vocab)
    return {w: p for w, p in zip(vocab, probs.tolist()) if p > 0}


def fill_position_of_cls(template, sentences, weights, vocab):
    # Counts <cls> as word 0, so the blank is looked for one word too far.
    hidden = template.split().index(MASK) + 1
    out = torch.zeros(len(vocab))
    for s, w in zip(sentences, weights.tolist()):
        if fits(template, s) and hidden < len(s.split()):
            out[vocab.index(s.split()[hidden])] += w
    return out / out.sum()


def fill_how_often(template, sentences, weights, vocab):
    # "The model's prior": how often each word occurs, whatever the template says.
    total = {}
    for s, w in zip(sentences, weights.tolist()):
        for word in s.split():
            total[word] = total.get(word, 0.0) + w
    out = torch.tensor([total.get(word, 0.0) for word in vocab])
    return out / out.sum()


WRONG_ANSWERS: dict[str, list] = {}

WRONG_ANSWERS["best_masked_word"] = [
    (fill_how_often, "ignores_the_template", "never read"),
    (fill_uniform, "uniform_over_fits", "the same probability"),
    (fill_counting, "counts_not_weights", "not 1"),
    (fill_unnormalised, "not_normalised", "does not sum to 1"),
    (fill_joint, "joint_not_conditional", "*every* sentence"),
    (fill_dict_of_sentences, "duplicates_once", "listed twice"),
    (fill_startswith, "longer_sentences_match", "longer sentences"),
    (fill_left_only, "left_context_only", "both sides"),
    (fill_right_only, "right_context_only", "before it count"),
    (fill_one_hot, "argmax", "one-hot"),
    (fill_log, "log_probabilities", "log-probabilities"),
    (fill_float64, "dtype", "torch.float64"),
    (fill_normalises_weights_in_place, "in_place", "in place"),
    (fill_a_dict, None, "type dict"),
    (fill_position_of_cls, None, "positive probability differ"),
]


# ---- exercise 15.2: BERT's choice of positions


def candidates_of(ids, pad_id, special_ids):
    return (ids != pad_id) & ~torch.isin(ids, torch.tensor(list(special_ids)))


def pick_bernoulli(ids, scores, p, pad_id, special_ids, max_predictions):
    return (scores < p) & candidates_of(ids, pad_id, special_ids)


def pick_with(ids, scores, p, pad_id, special_ids, max_predictions, count, allowed=None, largest=False):
    allowed = candidates_of(ids, pad_id, special_ids) if allowed is None else allowed
    out = torch.zeros_like(ids, dtype=torch.bool)
    for b in range(len(ids)):
        k = count(b)
        order = torch.argsort(scores[b].masked_fill(~allowed[b], -1.0 if largest else 2.0), descending=largest)
        out[b, order[:k]] = True
    return out & allowed


def pick_padded_length(ids, scores, p, pad_id, special_ids, max_predictions):
    k = min(max_predictions, max(1, round(p * ids.shape[1])))
    return pick_with(ids, scores, p, pad_id, special_ids, max_predictions, lambda b: k)


def pick_words_only(ids, scores, p, pad_id, special_ids, max_predictions):
    n = candidates_of(ids, pad_id, special_ids).sum(1)
    return pick_with(ids, scores, p, pad_id, special_ids, max_predictions,
                     lambda b: min(max_predictions, max(1, round(p * n[b].item()))))  # fmt: skip


def pick_no_minimum(ids, scores, p, pad_id, special_ids, max_predictions):
    n = (ids != pad_id).sum(1)
    return pick_with(ids, scores, p, pad_id, special_ids, max_predictions,
                     lambda b: min(max_predictions, round(p * n[b].item())))  # fmt: skip


def pick_no_cap(ids, scores, p, pad_id, special_ids, max_predictions):
    n = (ids != pad_id).sum(1)
    return pick_with(ids, scores, p, pad_id, special_ids, max_predictions,
                     lambda b: max(1, round(p * n[b].item())))  # fmt: skip


def pick_int(ids, scores, p, pad_id, special_ids, max_predictions):
    n = (ids != pad_id).sum(1)
    return pick_with(ids, scores, p, pad_id, special_ids, max_predictions,
                     lambda b: min(max_predictions, max(1, int(p * n[b].item()))))  # fmt: skip


def pick_specials_too(ids, scores, p, pad_id, special_ids, max_predictions):
    n = (ids != pad_id).sum(1)
    return pick_with(ids, scores, p, pad_id, special_ids, max_predictions,
                     lambda b: min(max_predictions, max(1, round(p * n[b].item()))), allowed=ids != pad_id)  # fmt: skip


def pick_topk_scores(ids, scores, p, pad_id, special_ids, max_predictions):
    n = (ids != pad_id).sum(1)
    return pick_with(ids, scores, p, pad_id, special_ids, max_predictions,
                     lambda b: min(max_predictions, max(1, round(p * n[b].item()))), largest=True)  # fmt: skip


def pick_longest_count(ids, scores, p, pad_id, special_ids, max_predictions):
    k = min(max_predictions, max(1, round(p * (ids != pad_id).sum(1).max().item())))
    return pick_with(ids, scores, p, pad_id, special_ids, max_predictions, lambda b: k)


def pick_any_position(ids, scores, p, pad_id, special_ids, max_predictions):
    n = (ids != pad_id).sum(1)
    allowed = torch.ones_like(ids, dtype=torch.bool)
    return pick_with(ids, scores, p, pad_id, special_ids, max_predictions,
                     lambda b: min(max_predictions, max(1, round(p * n[b].item()))), allowed=allowed)  # fmt: skip


def pick_indices(ids, scores, p, pad_id, special_ids, max_predictions):
    return solutions.pick_like_bert(ids, scores, p, pad_id, special_ids, max_predictions).nonzero()


def pick_as_ints(ids, scores, p, pad_id, special_ids, max_predictions):
    return solutions.pick_like_bert(ids, scores, p, pad_id, special_ids, max_predictions).long()


def pick_masks_scores_in_place(ids, scores, p, pad_id, special_ids, max_predictions):
    scores[~candidates_of(ids, pad_id, special_ids)] = float("inf")
    return solutions.pick_like_bert(ids, scores, p, pad_id, special_ids, max_predictions)


def pick_ceil(ids, scores, p, pad_id, special_ids, max_predictions):
    n = (ids != pad_id).sum(1)
    return pick_with(ids, scores, p, pad_id, special_ids, max_predictions,
                     lambda b: min(max_predictions, max(1, -(-int(p * n[b].item() * 1000) // 1000))))  # fmt: skip


WRONG_ANSWERS["pick_like_bert"] = [
    (pick_bernoulli, "bernoulli", "fixed number per sentence"),
    (pick_padded_length, "padding_counted", "padded length"),
    (pick_words_only, "specials_not_counted", "[CLS] and [SEP]"),
    (pick_no_minimum, "no_minimum", "at least one"),
    (pick_no_cap, "no_cap", "capped"),
    (pick_int, "floor_not_round", "rounds down"),
    (pick_specials_too, "specials_picked", "special token"),
    (pick_any_position, "padding_picked", "padding"),
    (pick_topk_scores, "highest_scores", "*highest*"),
    (pick_longest_count, "one_count_for_the_batch", "longest sentence"),
    (pick_as_ints, "dtype", "torch.bool"),
    (pick_masks_scores_in_place, "in_place", "in place"),
    (pick_indices, None, "shape"),
    (pick_ceil, None, "positions per row"),
]
