"""Chapter 14's checkers: the reference solutions pass, and each usual mistake gets its own diagnosis.

The wrong answers below are written the way a reader might write them, independently of the variants the
checkers use to recognise the mistakes; at least ten per exercise.
"""

import math

import pytest
import torch
import torch.nn.functional as F

import transformer_course as tc
from transformer_course.exercises import check, solutions


@pytest.mark.parametrize("name", ["lm_loss", "top_k_filter", "top_p_filter"])
def test_reference_solution_passes(name):
    result = getattr(check, name)(getattr(solutions, name))
    assert result.passed and result.mistake is None, result
    assert repr(result).startswith(f"✅ {name}: passed all")


def test_the_package_passes_too():
    assert check.lm_loss(tc.gpt.lm_loss).passed
    assert check.top_k_filter(tc.gpt.top_k_logits).passed
    assert check.top_p_filter(tc.gpt.top_p_logits).passed


def test_solutions_are_the_package_functions_on_fresh_inputs():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 17, generator=g)
    assert torch.equal(solutions.top_k_filter(logits, 4), tc.gpt.top_k_logits(logits, 4))
    assert torch.equal(solutions.top_p_filter(logits, 0.7), tc.gpt.top_p_logits(logits, 0.7))


# ---- exercise 14.1: the causal language-model loss


def flat(logits):
    return logits.reshape(-1, logits.shape[-1])


def loss_unshifted(logits, ids, pad_id):
    return F.cross_entropy(flat(logits), ids[:, :-1].reshape(-1), ignore_index=pad_id)


def loss_shifting_logits_too(logits, ids, pad_id):
    # "Drop the last logit and the first target": but the logits already stopped one short.
    return F.cross_entropy(flat(logits[:, :-1]), ids[:, 2:].reshape(-1), ignore_index=pad_id)


def loss_counting_padding(logits, ids, pad_id):
    return F.cross_entropy(flat(logits), ids[:, 1:].reshape(-1))


def loss_with_pad_zero(logits, ids, pad_id):
    return F.cross_entropy(flat(logits), ids[:, 1:].reshape(-1), ignore_index=0)


def loss_summed(logits, ids, pad_id):
    return F.cross_entropy(flat(logits), ids[:, 1:].reshape(-1), ignore_index=pad_id, reduction="sum")


def loss_masked_by_hand(logits, ids, pad_id):
    targets = ids[:, 1:]
    nll = -torch.log_softmax(logits, dim=-1).gather(-1, targets[..., None]).squeeze(-1)
    return (nll * (targets != pad_id)).mean()  # zeros the padding, then divides by every position


def loss_per_sentence(logits, ids, pad_id):
    values = []
    for row_logits, row in zip(logits, ids):
        keep = row[1:] != pad_id
        values.append(F.cross_entropy(row_logits[keep], row[1:][keep]))
    return torch.stack(values).mean()


def loss_of_probabilities(logits, ids, pad_id):
    return F.cross_entropy(flat(logits.softmax(dim=-1)), ids[:, 1:].reshape(-1), ignore_index=pad_id)


def loss_in_bits(logits, ids, pad_id):
    log2_probs = torch.log_softmax(logits, dim=-1) / math.log(2)
    return F.nll_loss(flat(log2_probs), ids[:, 1:].reshape(-1), ignore_index=pad_id)


def loss_nll_of_logits(logits, ids, pad_id):
    return F.nll_loss(flat(logits), ids[:, 1:].reshape(-1), ignore_index=pad_id)


def loss_without_flattening(logits, ids, pad_id):
    return F.cross_entropy(logits, ids[:, 1:], ignore_index=pad_id)  # (B, T-1, V): the class axis must be 1


def loss_per_position(logits, ids, pad_id):
    return F.cross_entropy(logits.transpose(1, 2), ids[:, 1:], ignore_index=pad_id, reduction="none")


# {checker name: [(wrong answer, expected mistake key or None, words of the diagnosis)]}: every exercise
# has at least ten (tests/test_exercises.py counts them).
WRONG_ANSWERS: dict[str, list] = {}


WRONG_ANSWERS["lm_loss"] = [
    (loss_unshifted, "no_shift", "targets are not shifted"),
    (loss_shifting_logits_too, "shifted_twice", "shifted by two positions"),
    (loss_counting_padding, "padding_counted", "ignore_index=pad_id"),
    (loss_with_pad_zero, "pad_id_hardcoded", "not the number 0"),
    (loss_summed, "sum", "sum of the losses"),
    (loss_masked_by_hand, "mean_over_padding_too", "counted in the mean"),
    (loss_per_sentence, "mean_of_sentence_means", "each sentence's mean"),
    (loss_of_probabilities, "softmax_first", "before F.cross_entropy"),
    (loss_in_bits, "bits", "in bits"),
    (loss_nll_of_logits, "nll_of_logits", "expects log-probabilities"),
    (loss_without_flattening, None, "raised"),
    (loss_per_position, None, "the loss is one number"),
]


@pytest.mark.parametrize(("reader", "mistake", "words"), WRONG_ANSWERS["lm_loss"])
def test_lm_loss_mistakes_are_named(reader, mistake, words):
    result = check.lm_loss(reader)
    assert not result.passed
    assert result.mistake == mistake, result
    assert words in result.message, result.message


# ---- exercise 14.2: top-k filtering


def top_k_strict(logits, k):
    kth = torch.topk(logits, min(k, logits.shape[-1])).values[..., -1:]
    return torch.where(logits > kth, logits, torch.full_like(logits, -math.inf))


def top_k_smallest(logits, k):
    kth = torch.topk(logits, min(k, logits.shape[-1]), largest=False).values[..., -1:]
    return logits.masked_fill(logits > kth, -math.inf)


def top_k_zeros(logits, k):
    kth = torch.topk(logits, min(k, logits.shape[-1])).values[..., -1:]
    return torch.where(logits >= kth, logits, torch.zeros_like(logits))


def top_k_slice(logits, k):
    out = logits.clone()
    out[..., k:] = -math.inf
    return out


def top_k_batch_threshold(logits, k):
    kth = torch.topk(logits, min(k, logits.shape[-1])).values.reshape(-1, min(k, logits.shape[-1]))[0, -1]
    return logits.masked_fill(logits < kth, -math.inf)


def top_k_softmax(logits, k):
    kth = torch.topk(logits, min(k, logits.shape[-1])).values[..., -1:]
    return torch.softmax(logits.masked_fill(logits < kth, -math.inf), dim=-1)


def top_k_unclamped(logits, k):
    values, _ = torch.topk(logits, k)
    return logits.masked_fill(logits < values[..., [-1]], -math.inf)


def top_k_nanogpt_style(logits, k):
    # nanoGPT writes into its own tensor; here it is the caller's.
    values, _ = torch.topk(logits, min(k, logits.size(-1)))
    logits[logits < values[..., [-1]]] = -float("inf")
    return logits


def top_k_index_mask(logits, k):
    # Keeps the right tokens, but their logits are replaced by 0: the kept tokens become equally likely.
    index = torch.topk(logits, min(k, logits.shape[-1])).indices
    out = torch.full_like(logits, -math.inf)
    return out.scatter(-1, index, 0.0)


def top_k_returns_indices(logits, k):
    return torch.topk(logits, min(k, logits.shape[-1])).indices


def top_k_large_negative(logits, k):
    # -1e9 instead of -inf: the same probabilities, so this one is accepted.
    kth = torch.topk(logits, min(k, logits.shape[-1])).values[..., -1:]
    return logits.masked_fill(logits < kth, -1e9)


WRONG_ANSWERS["top_k_filter"] = [
    (top_k_strict, "keeps_k_minus_1", "one token too few"),
    (top_k_smallest, "smallest_k", "smallest"),
    (top_k_zeros, "zero_fill", "set to 0"),
    (top_k_slice, "first_k_ids", "first k token ids"),
    (top_k_batch_threshold, "first_row_threshold", "first row's"),
    (top_k_softmax, "returns_probabilities", "returned probabilities"),
    (top_k_unclamped, "no_clamp", "clamp it first"),
    (top_k_nanogpt_style, "in_place", "in place"),
    (top_k_index_mask, None, "wrong probabilities"),
    (top_k_returns_indices, None, "shape"),
]


@pytest.mark.parametrize(("reader", "mistake", "words"), WRONG_ANSWERS["top_k_filter"])
def test_top_k_mistakes_are_named(reader, mistake, words):
    result = check.top_k_filter(reader)
    assert not result.passed
    assert result.mistake == mistake, result
    assert words in result.message, result.message


def test_top_k_with_a_large_negative_fill_is_accepted():
    assert check.top_k_filter(top_k_large_negative).passed


# ---- exercise 14.3: top-p filtering


def sorted_probs(logits, descending=True):
    values, order = torch.sort(logits, dim=-1, descending=descending)
    return values, order, torch.softmax(values, dim=-1)


def unsort(flags, order):
    return torch.zeros_like(flags).scatter(-1, order, flags)


def top_p_drops_crossing(logits, p):
    _values, order, probs = sorted_probs(logits)
    remove = torch.cumsum(probs, dim=-1) > p
    return logits.masked_fill(unsort(remove, order), -math.inf)


def top_p_unsorted(logits, p):
    probs = torch.softmax(logits, dim=-1)
    remove = torch.cumsum(probs, dim=-1) - probs >= p
    return logits.masked_fill(remove, -math.inf)


def top_p_ascending(logits, p):
    _values, order, probs = sorted_probs(logits, descending=False)
    remove = torch.cumsum(probs, dim=-1) - probs >= p
    return logits.masked_fill(unsort(remove, order), -math.inf)


def top_p_sorted_result(logits, p):
    values, _order, probs = sorted_probs(logits)
    return values.masked_fill(torch.cumsum(probs, dim=-1) - probs >= p, -math.inf)


def top_p_gather_back(logits, p):
    _values, order, probs = sorted_probs(logits)
    remove = torch.cumsum(probs, dim=-1) - probs >= p
    return logits.masked_fill(remove.gather(-1, order), -math.inf)


def top_p_cumsum_logits(logits, p):
    values, order, _ = sorted_probs(logits)
    remove = torch.cumsum(values, dim=-1) - values >= p
    return logits.masked_fill(unsort(remove, order), -math.inf)


def top_p_inverted(logits, p):
    _values, order, probs = sorted_probs(logits)
    keep = torch.cumsum(probs, dim=-1) - probs < p
    return logits.masked_fill(unsort(keep, order), -math.inf)


def top_p_zeros(logits, p):
    _values, order, probs = sorted_probs(logits)
    remove = unsort(torch.cumsum(probs, dim=-1) - probs >= p, order)
    return torch.where(remove, torch.zeros_like(logits), logits)


def top_p_threshold(logits, p):
    return torch.where(logits.softmax(-1) >= 1 - p, logits, torch.tensor(-math.inf))


def top_p_in_place(logits, p):
    _values, order, probs = sorted_probs(logits)
    logits[unsort(torch.cumsum(probs, dim=-1) - probs >= p, order)] = -math.inf
    return logits


def top_p_min_one_token_forgotten(logits, p):
    # Keeps the tokens whose cumulative probability stays at most p: can remove every token.
    _values, order, probs = sorted_probs(logits)
    remove = torch.cumsum(probs, dim=-1) > p
    remove[..., 1:] = remove[..., 1:] | remove[..., :-1]
    return logits.masked_fill(unsort(remove, order), -math.inf)


def top_p_renormalised_probabilities(logits, p):
    _values, order, probs = sorted_probs(logits)
    keep = unsort(torch.cumsum(probs, dim=-1) - probs < p, order)
    kept = torch.softmax(logits, dim=-1) * keep
    return kept / kept.sum(dim=-1, keepdim=True)


WRONG_ANSWERS["top_p_filter"] = [
    (top_p_drops_crossing, "drops_crossing_token", "makes the sum reach p"),
    (top_p_min_one_token_forgotten, "drops_crossing_token", "at least"),
    (top_p_unsorted, "not_sorted", "vocabulary's order"),
    (top_p_ascending, "ascending", "least likely first"),
    (top_p_sorted_result, "not_unsorted", "sorted order"),
    (top_p_gather_back, "gather_instead_of_scatter", "gather"),
    (top_p_cumsum_logits, "cumsum_of_logits", "over the logits"),
    (top_p_inverted, "keeps_the_tail", "inverted"),
    (top_p_zeros, "zero_fill", "set to 0"),
    (top_p_threshold, "own_probability", "its own probability"),
    (top_p_in_place, "in_place", "in place"),
    (top_p_renormalised_probabilities, "returns_probabilities", "returned probabilities"),
]


@pytest.mark.parametrize(("reader", "mistake", "words"), WRONG_ANSWERS["top_p_filter"])
def test_top_p_mistakes_are_named(reader, mistake, words):
    result = check.top_p_filter(reader)
    assert not result.passed
    assert result.mistake == mistake, result
    assert words in result.message, result.message
