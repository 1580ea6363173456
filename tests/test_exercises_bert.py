"""Chapter 15's checkers: the reference solutions pass, and each usual mistake gets its own diagnosis.

The wrong answers below are written the way a reader might write them, independently of the variants the
checkers use to recognise the mistakes; at least ten per exercise.
"""

import pytest
import torch
import torch.nn.functional as F

import transformer_course as tc
from transformer_course.exercises import check, solutions


@pytest.mark.parametrize("name", ["mask_tokens", "mlm_loss"])
def test_reference_solution_passes(name):
    result = getattr(check, name)(getattr(solutions, name))
    assert result.passed and result.mistake is None, result
    assert repr(result).startswith(f"✅ {name}: passed all")


def test_the_package_passes_too():
    assert check.mask_tokens(tc.mask_tokens).passed
    assert check.mlm_loss(tc.bert.mlm_loss).passed


def test_the_solution_draws_like_the_package():
    ids = torch.randint(4, 30, (20, 12), generator=torch.Generator().manual_seed(0))
    ours = solutions.mask_tokens(ids, 3, 30, 0.3, (0, 1, 2, 3), torch.Generator().manual_seed(1))
    package = tc.mask_tokens(ids, 3, 30, 0.3, (0, 1, 2, 3), torch.Generator().manual_seed(1))
    assert all(torch.equal(a, b) for a, b in zip(ours, package))


# ---- exercise 15.1: masking


def ordinary_tokens(vocab_size, special_ids):
    return torch.tensor([t for t in range(vocab_size) if t not in special_ids])


def masking_everything_picked(ids, mask_id, vocab_size, p, special_ids, generator):
    picked = (torch.rand(ids.shape, generator=generator) < p) & ~torch.isin(ids, torch.tensor(special_ids))
    return ids.masked_fill(picked, mask_id), ids.masked_fill(~picked, -100)


def masking_one_draw(ids, mask_id, vocab_size, p, special_ids, generator):
    # One random number per position for both decisions: r < p picks, r < 0.8 masks, so every pick is masked.
    r = torch.rand(ids.shape, generator=generator)
    picked = (r < p) & ~torch.isin(ids, torch.tensor(special_ids))
    inputs = torch.where(picked & (r < 0.8), torch.tensor(mask_id), ids)
    return inputs, torch.where(picked, ids, torch.tensor(-100))


def masking_twenty_percent_random(ids, mask_id, vocab_size, p, special_ids, generator):
    picked = (torch.rand(ids.shape, generator=generator) < p) & ~torch.isin(ids, torch.tensor(special_ids))
    choice = torch.rand(ids.shape, generator=generator)
    pool = ordinary_tokens(vocab_size, special_ids)
    random_ids = pool[torch.randint(len(pool), ids.shape, generator=generator)]
    inputs = torch.where(picked & (choice < 0.8), mask_id, ids)
    inputs = torch.where(picked & (choice >= 0.8), random_ids, inputs)
    return inputs, torch.where(picked, ids, -100)


def masking_with_specials(ids, mask_id, vocab_size, p, special_ids, generator):
    picked = torch.rand(ids.shape, generator=generator) < p  # forgot the specials
    choice = torch.rand(ids.shape, generator=generator)
    pool = ordinary_tokens(vocab_size, special_ids)
    random_ids = pool[torch.randint(len(pool), ids.shape, generator=generator)]
    inputs = torch.where(picked & (choice < 0.8), mask_id, ids)
    inputs = torch.where(picked & (choice >= 0.8) & (choice < 0.9), random_ids, inputs)
    return inputs, torch.where(picked, ids, -100)


def bert_masking(ids, mask_id, vocab_size, p, special_ids, generator, label_rule="picked", pool_all=False,
                 fill=-100, in_place=False, use_generator=True):  # fmt: skip
    """A reader's version with a loop-free layout; the keywords introduce one mistake each."""
    g = generator if use_generator else None
    special = torch.isin(ids, torch.tensor(special_ids))
    picked = (torch.rand(ids.shape, generator=g) < p) & ~special
    choice = torch.rand(ids.shape, generator=g)
    pool = torch.arange(vocab_size) if pool_all else ordinary_tokens(vocab_size, special_ids)
    random_ids = pool[torch.randint(len(pool), ids.shape, generator=g)]
    original = ids.clone()
    inputs = ids if in_place else ids.clone()
    inputs[picked & (choice < 0.8)] = mask_id
    swap = picked & (choice >= 0.8) & (choice < 0.9)
    inputs[swap] = random_ids[swap]
    if label_rule == "picked":
        labels = torch.where(picked, original, torch.full_like(ids, fill))
    elif label_rule == "everywhere":
        labels = original
    elif label_rule == "from_inputs":
        labels = torch.where(picked, inputs, torch.full_like(ids, fill))
    else:  # "changed"
        labels = torch.where(inputs != original, original, torch.full_like(ids, fill))
    return inputs, labels


def masking_labels_everywhere(*args):
    return bert_masking(*args, label_rule="everywhere")


def masking_labels_zero(*args):
    return bert_masking(*args, fill=0)


def masking_labels_from_inputs(*args):
    return bert_masking(*args, label_rule="from_inputs")


def masking_labels_changed_only(*args):
    return bert_masking(*args, label_rule="changed")


def masking_random_from_whole_vocabulary(*args):
    return bert_masking(*args, pool_all=True)


def masking_in_place(*args):
    return bert_masking(*args, in_place=True)


def masking_global_generator(*args):
    return bert_masking(*args, use_generator=False)


def masking_returns_inputs_only(ids, mask_id, vocab_size, p, special_ids, generator):
    return bert_masking(ids, mask_id, vocab_size, p, special_ids, generator)[0]


def masking_probability_per_sentence(ids, mask_id, vocab_size, p, special_ids, generator):
    # p read as "the chance that a sentence is masked at all": picks whole rows.
    rows = torch.rand(ids.shape[0], 1, generator=generator) < p
    picked = rows & ~torch.isin(ids, torch.tensor(special_ids))
    return ids.masked_fill(picked, mask_id), ids.masked_fill(~picked, -100)


# {checker name: [(wrong answer, expected mistake key or None, words of the diagnosis)]}: every exercise
# has at least ten (tests/test_exercises.py counts them).
WRONG_ANSWERS: dict[str, list] = {}


WRONG_ANSWERS["mask_tokens"] = [
    (masking_everything_picked, "always_mask", "80 %"),
    (masking_one_draw, "always_mask", "second random number"),
    (masking_twenty_percent_random, "no_unchanged", "keep their own token"),
    (masking_with_specials, "specials_picked", "special tokens"),
    (masking_labels_everywhere, "labels_everywhere", "-100"),
    (masking_labels_zero, "labels_zero", "<pad>"),
    (masking_labels_from_inputs, "labels_are_inputs", "*new* input"),
    (masking_labels_changed_only, "unchanged_not_labelled", "kept their token"),
    (masking_random_from_whole_vocabulary, "random_specials", "ordinary tokens"),
    (masking_in_place, "in_place", "in place"),
    (masking_global_generator, "nondeterministic", "generator=generator"),
    (masking_returns_inputs_only, None, "return the pair (inputs, labels)"),
    (masking_probability_per_sentence, None, "picked -> <mask>"),
]


@pytest.mark.parametrize(("reader", "mistake", "words"), WRONG_ANSWERS["mask_tokens"])
def test_mask_tokens_mistakes_are_named(reader, mistake, words):
    result = check.mask_tokens(reader)
    assert not result.passed
    assert result.mistake == mistake, result
    assert words in result.message, result.message


# ---- exercise 15.2: the MLM loss


def flat(logits):
    return logits.reshape(-1, logits.shape[-1])


def mlm_mean_over_every_position(logits, labels):
    picked = labels != -100
    losses = F.cross_entropy(flat(logits), labels.clamp(min=0).reshape(-1), reduction="none")
    return (losses * picked.reshape(-1)).mean()


def mlm_summed(logits, labels):
    return F.cross_entropy(flat(logits), labels.reshape(-1), reduction="sum")


def mlm_per_sentence(logits, labels):
    per_row = [F.cross_entropy(row_logits[row != -100], row[row != -100]) for row_logits, row in zip(logits, labels)]
    return torch.stack([v for v in per_row if not v.isnan()]).mean()


def mlm_ignore_padding_id(logits, labels):
    return F.cross_entropy(flat(logits), labels.reshape(-1), ignore_index=0)


def mlm_softmax_first(logits, labels):
    return F.cross_entropy(flat(torch.softmax(logits, dim=-1)), labels.reshape(-1))


def mlm_nll_of_logits(logits, labels):
    return F.nll_loss(flat(logits), labels.reshape(-1))


def mlm_probabilities(logits, labels):
    picked = labels != -100
    probs = logits[picked].softmax(-1)
    return -probs[torch.arange(len(probs)), labels[picked]].mean()


def mlm_log_by_hand_summed(logits, labels):
    picked = labels != -100
    log_probs = torch.log_softmax(logits[picked], dim=-1)
    return -log_probs[torch.arange(len(log_probs)), labels[picked]].sum()


def mlm_without_flattening(logits, labels):
    return F.cross_entropy(logits, labels)  # the class axis must be 1: (B, V, T)


def mlm_per_position(logits, labels):
    return F.cross_entropy(logits.transpose(1, 2), labels, reduction="none")


def mlm_counting_zero_labels_as_unpicked(logits, labels):
    keep = labels > 0  # "-100 and 0 are both not-a-token"
    return F.cross_entropy(logits[keep], labels[keep])


def mlm_transposed_correctly(logits, labels):
    # The class axis moved to 1 instead of flattening: also right.
    return F.cross_entropy(logits.transpose(1, 2), labels)


WRONG_ANSWERS["mlm_loss"] = [
    (mlm_mean_over_every_position, "mean_over_every_position", "counted in the mean"),
    (mlm_summed, "sum", "not their mean"),
    (mlm_log_by_hand_summed, "sum", "not their mean"),
    (mlm_per_sentence, "mean_of_row_means", "each sentence's mean"),
    (mlm_ignore_padding_id, "ignore_index_zero", "ignore_index=0"),
    (mlm_counting_zero_labels_as_unpicked, "zero_label_skipped", "0 is a token id"),
    (mlm_softmax_first, "softmax_first", "before F.cross_entropy"),
    (mlm_nll_of_logits, "nll_of_logits", "log-probabilities"),
    (mlm_probabilities, "probability_not_log", "-log p"),
    (mlm_without_flattening, None, "raised"),
    (mlm_per_position, None, "the loss is one number"),
]


@pytest.mark.parametrize(("reader", "mistake", "words"), WRONG_ANSWERS["mlm_loss"])
def test_mlm_loss_mistakes_are_named(reader, mistake, words):
    result = check.mlm_loss(reader)
    assert not result.passed
    assert result.mistake == mistake, result
    assert words in result.message, result.message


def test_moving_the_class_axis_instead_of_flattening_is_accepted():
    assert check.mlm_loss(mlm_transposed_correctly).passed
