"""Chapter 14 exercises: the causal language-model loss, top-k filtering and top-p (nucleus) filtering.

Each checker runs the reader's function and the package's (`gpt.lm_loss`, `gpt.top_k_logits`,
`gpt.top_p_logits`) on random and edge-case inputs. The filters are compared by the distribution they leave,
softmax(filtered logits), so -inf and a very large negative number both count as "removed"; the checker also
notices a function that changes its input in place. Known wrong variants are recognised and named: the
targets not shifted, padding counted, sums for means, the k-th token dropped, the token that crosses p
dropped, the sort forgotten or not undone, and more.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..gpt import lm_loss as package_lm_loss
from ..gpt import top_k_logits, top_p_logits
from ._core import Case, Mistake, Result, checker, compare, describe_difference, solution

# ---------------------------------------------------------------- exercise 14.1: the causal language-model loss


@solution
def lm_loss(logits, ids, pad_id):
    """Mean cross-entropy of logits (B, T - 1, V), computed on ids[:, :-1], against the next tokens ids[:, 1:]."""
    targets = ids[:, 1:]  # position t predicts token t + 1: the inputs shifted left by one
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=pad_id)  # padding counts for nothing


def _loss_variant(logits, ids, pad_id, shift=1, ignore=True, reduction="mean", pad=None):
    """The loss with one thing done differently (the keyword that differs from the default says which)."""
    if shift == 2:  # the logits shifted too: the last one dropped, the targets from ids[:, 2:]
        logits = logits[:, :-1]
    targets = ids[:, shift : shift + logits.shape[1]]
    pad = pad_id if pad is None else pad
    flat_logits, flat_targets = logits.flatten(0, 1), targets.flatten()
    if not ignore:
        return F.cross_entropy(flat_logits, flat_targets, reduction=reduction)
    return F.cross_entropy(flat_logits, flat_targets, ignore_index=pad, reduction=reduction)


def _mean_over_every_position(logits, ids, pad_id):
    targets = ids[:, 1:]
    losses = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=pad_id, reduction="none")
    return losses.sum() / targets.numel()


def _mean_of_sentence_means(logits, ids, pad_id):
    targets = ids[:, 1:]
    losses = F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=pad_id, reduction="none")  # (B, T - 1)
    real = (targets != pad_id).float()
    return ((losses * real).sum(dim=1) / real.sum(dim=1)).mean()


def _softmax_twice(logits, ids, pad_id):
    return package_lm_loss(torch.softmax(logits, dim=-1), ids, pad_id)


def _in_bits(logits, ids, pad_id):
    return package_lm_loss(logits, ids, pad_id) / math.log(2)


def _nll_of_raw_logits(logits, ids, pad_id):
    return F.nll_loss(logits.flatten(0, 1), ids[:, 1:].flatten(), ignore_index=pad_id)


_LOSS_MISTAKES = (
    Mistake(
        "no_shift",
        lambda logits, ids, pad_id: _loss_variant(logits, ids, pad_id, shift=0),
        "the targets are not shifted: position t is scored on token t, which it can see, instead of token t + 1. "
        "The logits were computed on ids[:, :-1]; their targets are ids[:, 1:].",
    ),
    Mistake(
        "shifted_twice",
        lambda logits, ids, pad_id: _loss_variant(logits, ids, pad_id, shift=2),
        "the targets are shifted by two positions: the logits already belong to ids[:, :-1], so the targets are "
        "ids[:, 1:] (shifting the logits too counts the shift twice).",
    ),
    Mistake(
        "padding_counted",
        lambda logits, ids, pad_id: _loss_variant(logits, ids, pad_id, ignore=False),
        "padding is counted: the model is scored on predicting <pad> after <eos>. Pass ignore_index=pad_id to "
        "F.cross_entropy so that padded targets count for nothing.",
    ),
    Mistake(
        "pad_id_hardcoded",
        lambda logits, ids, pad_id: _loss_variant(logits, ids, pad_id, pad=0),
        "right when pad_id is 0, wrong otherwise: use the pad_id argument as ignore_index, not the number 0.",
    ),
    Mistake(
        "sum",
        lambda logits, ids, pad_id: _loss_variant(logits, ids, pad_id, reduction="sum"),
        "this is the sum of the losses, not their mean: divide by the number of real (non-padding) targets, as "
        "F.cross_entropy's default reduction='mean' does.",
    ),
    Mistake(
        "mean_over_padding_too",
        _mean_over_every_position,
        "the padding contributes nothing to the sum, but it is counted in the mean: divide by the number of real "
        "targets, not by B × (T - 1) (F.cross_entropy with ignore_index does this for you).",
    ),
    Mistake(
        "mean_of_sentence_means",
        _mean_of_sentence_means,
        "this is the mean of each sentence's mean loss, which weighs a token of a short sentence more than a token "
        "of a long one: average over all real tokens of the batch at once.",
    ),
    Mistake(
        "softmax_first",
        _softmax_twice,
        "the logits went through a softmax before F.cross_entropy, which applies log_softmax itself: pass the raw "
        "logits.",
    ),
    Mistake(
        "bits",
        _in_bits,
        "the loss is in bits (log base 2): the course measures it in nats, with the natural logarithm, as "
        "F.cross_entropy does.",
    ),
    Mistake(
        "nll_of_logits",
        _nll_of_raw_logits,
        "F.nll_loss expects log-probabilities, and got raw logits: take log_softmax first, or use F.cross_entropy, "
        "which does both.",
    ),
)


def _explain_loss(got, expected, label: str) -> str:
    if isinstance(got, torch.Tensor) and got.dim() > 0:
        return f"returned a tensor of shape {tuple(got.shape)} on {label}: the loss is one number, a 0-dim tensor"
    close = (
        isinstance(got, torch.Tensor)
        and isinstance(expected, torch.Tensor)
        and got.dim() == 0
        and math.isclose(got.item(), expected.item(), rel_tol=0.2)
    )
    if close:
        return (
            f"close to the expected loss but not equal on {label} ({got.item():.4f} instead of "
            f"{expected.item():.4f}): check which targets and which positions you average over"
        )
    return describe_difference(got, expected, label)


@checker
def check_lm_loss(fn) -> Result:
    """Check `fn(logits, ids, pad_id)` against gpt.lm_loss on padded and unpadded batches."""
    g = torch.Generator().manual_seed(14)

    def batch(rows, length, vocab, pad_id, lengths):
        ids = torch.randint(vocab, (rows, length), generator=g)
        ids[ids == pad_id] = (pad_id + 1) % vocab  # no accidental padding inside a sentence
        for row, n in enumerate(lengths):
            ids[row, n:] = pad_id
        logits = 2 * torch.randn(rows, length - 1, vocab, generator=g)
        return logits, ids

    cases = [
        Case("a batch of 3 sentences padded with 0", (*batch(3, 8, 11, 0, [8, 5, 3]), 0)),
        Case("one sentence without padding", (*batch(1, 6, 9, 0, [6]), 0)),
        Case("4 sentences padded with pad_id=2", (*batch(4, 7, 13, 2, [7, 7, 4, 2]), 2)),
        Case("2 sentences of very different lengths", (*batch(2, 10, 8, 0, [10, 3]), 0)),
    ]
    return compare(
        "lm_loss",
        fn,
        package_lm_loss,
        cases,
        _LOSS_MISTAKES,
        explain=_explain_loss,
        passed=f"passed all {len(cases)} cases (padding 0 and 2, sentences of different lengths): the same loss as "
        "gpt.lm_loss",
    )


# ---------------------------------------------------------------- exercises 14.2 and 14.3: top-k and top-p


@solution
def top_k_filter(logits, k):
    """Keep the k largest logits of each row (..., V); set the others to -inf."""
    k = min(k, logits.shape[-1])  # k above the vocabulary size keeps everything
    kth_largest = logits.topk(k, dim=-1).values[..., -1:]  # (..., 1): the k-th largest of each row
    return logits.masked_fill(logits < kth_largest, float("-inf"))


@solution
def top_p_filter(logits, p):
    """Keep the smallest set of most likely tokens of each row whose probabilities sum to at least p."""
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    sorted_probs = sorted_logits.softmax(dim=-1)
    before = sorted_probs.cumsum(dim=-1) - sorted_probs  # the mass of the tokens ranked above each one
    drop_sorted = before >= p  # they already reach p: this token is not needed
    drop = drop_sorted.scatter(-1, order, drop_sorted)  # back to the vocabulary's order
    return logits.masked_fill(drop, float("-inf"))


def _observe_filter(fn, case: Case):
    """What sampling would see: softmax(filtered logits), in the result's own dtype so that a wrong one shows.

    (An answer that filters its input in place is caught before this is compared: compare checks the inputs.)
    """
    out = fn(*case.args)
    if not (isinstance(out, torch.Tensor) and out.is_floating_point()):
        return out
    return torch.softmax(out.float(), dim=-1).to(out.dtype)


def _explain_filter(got, expected, label: str) -> str:
    if isinstance(got, torch.Tensor) and isinstance(expected, torch.Tensor):
        probs, want = got, expected
        if probs.shape != want.shape:
            return (
                f"returned shape {tuple(probs.shape)} on {label}, expected {tuple(want.shape)}: filter, keep the shape"
            )
        kept, want_kept = probs > 0, want > 0
        if torch.equal(kept, want_kept):
            return f"the right tokens are kept on {label}, with the wrong probabilities: keep their logits unchanged"
        extra, missing = int((kept & ~want_kept).sum()), int((want_kept & ~kept).sum())
        return f"on {label} you keep {extra} token(s) too many and {missing} too few"
    return describe_difference(got, expected, label)


def _top_k_variant(logits, k, keep="largest", fill=float("-inf"), strict=False, clamp=True):
    k = min(k, logits.shape[-1]) if clamp else k
    values = logits.topk(k, dim=-1, largest=keep == "largest").values[..., -1:]
    below = logits <= values if strict else logits < values
    drop = logits > values if keep == "smallest" else below
    return logits.masked_fill(drop, fill)


def _top_k_first_ids(logits, k):
    out = torch.full_like(logits, float("-inf"))
    out[..., :k] = logits[..., :k]
    return out


def _top_k_first_row_threshold(logits, k):
    values = logits.topk(min(k, logits.shape[-1]), dim=-1).values
    kth = values.reshape(-1, values.shape[-1])[0, -1]  # the first row's k-th largest, for every row
    return logits.masked_fill(logits < kth, float("-inf"))


def _top_k_probabilities(logits, k):
    return torch.softmax(top_k_logits(logits, k), dim=-1)


_TOP_K_MISTAKES = (
    Mistake(
        "keeps_k_minus_1",
        lambda logits, k: _top_k_variant(logits, k, strict=True),
        "one token too few: the k-th largest logit itself must stay. Drop the logits strictly below it "
        "(logits < kth), not those below or equal.",
    ),
    Mistake(
        "smallest_k",
        lambda logits, k: _top_k_variant(logits, k, keep="smallest"),
        "you kept the k *smallest* logits: topk returns the largest by default (largest=True); sampling should "
        "only choose among the most likely tokens.",
    ),
    Mistake(
        "zero_fill",
        lambda logits, k: _top_k_variant(logits, k, fill=0.0),
        "the removed logits were set to 0, and a logit of 0 still has probability e^0 / Σ > 0 after the softmax: "
        "set them to -inf (float('-inf')), whose probability is exactly 0.",
    ),
    Mistake(
        "first_k_ids",
        _top_k_first_ids,
        "you kept the first k token ids of the vocabulary, not the k most likely tokens: find them with "
        "logits.topk(k, dim=-1).",
    ),
    Mistake(
        "first_row_threshold",
        _top_k_first_row_threshold,
        "every row was filtered with the first row's k-th largest logit: take the k-th largest of each row, "
        "topk(...).values[..., -1:] (the last axis, kept for broadcasting).",
    ),
    Mistake(
        "returns_probabilities",
        _top_k_probabilities,
        "you returned probabilities (after a softmax); return the filtered logits, and let the sampler take the "
        "softmax.",
    ),
    Mistake(
        "no_clamp",
        lambda logits, k: _top_k_variant(logits, k, clamp=False),
        "k larger than the vocabulary makes topk fail: clamp it first, k = min(k, logits.shape[-1]) (nothing to "
        "remove then).",
    ),
)


@checker
def check_top_k_filter(fn) -> Result:
    """Check `fn(logits, k)` against gpt.top_k_logits by softmax(result); compare also checks the input is untouched."""
    g = torch.Generator().manual_seed(142)
    cases = [
        Case("one row of 8 logits, k=3", (torch.randn(8, generator=g), 3)),
        Case("a batch of 4 rows of 10 logits, k=2", (3 * torch.randn(4, 10, generator=g), 2)),
        Case("k=1 (greedy)", (torch.randn(3, 6, generator=g), 1)),
        Case("k=20, more than the 7 tokens", (torch.randn(2, 7, generator=g), 20)),
        Case("logits of shape (2, 3, 9), k=4", (torch.randn(2, 3, 9, generator=g), 4)),
    ]
    return compare(
        "top_k_filter",
        fn,
        top_k_logits,
        cases,
        _TOP_K_MISTAKES,
        observe=_observe_filter,
        explain=_explain_filter,
        passed=f"passed all {len(cases)} cases (k = 1 to 20, one row to a 3-D batch): softmax of your result "
        "equals that of gpt.top_k_logits, and the input is left unchanged",
    )


def _top_p_variant(logits, p, rule="before", order="descending", unsort="scatter", fill=float("-inf"), on="probs"):
    if order == "none":
        sorted_logits, index = logits, torch.arange(logits.shape[-1]).expand_as(logits)
    else:
        sorted_logits, index = logits.sort(dim=-1, descending=order == "descending")
    values = sorted_logits.softmax(dim=-1) if on == "probs" else sorted_logits
    cumulative = values.cumsum(dim=-1)
    if rule == "before":
        drop_sorted = cumulative - values >= p
    elif rule == "crossing":  # drops the token whose addition crosses p
        drop_sorted = cumulative > p
    else:  # "keep_tail": the complement
        drop_sorted = cumulative - values < p
    if unsort == "scatter":
        drop = drop_sorted.scatter(-1, index, drop_sorted)
    elif unsort == "gather":
        drop = drop_sorted.gather(-1, index)
    else:  # "none": the sorted order is returned as it is
        return sorted_logits.masked_fill(drop_sorted, fill)
    return logits.masked_fill(drop, fill)


def _top_p_probabilities(logits, p):
    return torch.softmax(top_p_logits(logits, p), dim=-1)


def _top_p_own_probability(logits, p):
    # Keeps each token whose own probability is at least 1 - p: a threshold, not a cumulative mass.
    return logits.masked_fill(logits.softmax(dim=-1) < 1 - p, float("-inf"))


_TOP_P_MISTAKES = (
    Mistake(
        "drops_crossing_token",
        lambda logits, p: _top_p_variant(logits, p, rule="crossing"),
        "the token whose probability makes the sum reach p was dropped: the nucleus is the smallest set whose "
        "probabilities sum to *at least* p, so that token belongs to it. Drop a token when the mass of the tokens "
        "ranked above it already reaches p (cumsum - probs >= p).",
    ),
    Mistake(
        "not_sorted",
        lambda logits, p: _top_p_variant(logits, p, order="none"),
        "the cumulative sum was taken in the vocabulary's order: sort the tokens by probability, most likely "
        "first (sort(descending=True)), then add up.",
    ),
    Mistake(
        "ascending",
        lambda logits, p: _top_p_variant(logits, p, order="ascending"),
        "the tokens were sorted least likely first, so the set kept is made of unlikely tokens: sort with "
        "descending=True.",
    ),
    Mistake(
        "not_unsorted",
        lambda logits, p: _top_p_variant(logits, p, unsort="none"),
        "the result is in sorted order, not in the vocabulary's: position i must still be token i. Put the "
        "decisions back with drop = drop_sorted.scatter(-1, order, drop_sorted).",
    ),
    Mistake(
        "gather_instead_of_scatter",
        lambda logits, p: _top_p_variant(logits, p, unsort="gather"),
        "the decisions were put back with gather(-1, order), which applies the permutation a second time instead "
        "of undoing it: use scatter(-1, order, drop_sorted).",
    ),
    Mistake(
        "cumsum_of_logits",
        lambda logits, p: _top_p_variant(logits, p, on="logits"),
        "the cumulative sum was taken over the logits: p is a probability mass, so add up softmax probabilities.",
    ),
    Mistake(
        "keeps_the_tail",
        lambda logits, p: _top_p_variant(logits, p, rule="keep_tail"),
        "the mask is inverted: you kept the unlikely tail and dropped the nucleus. Drop where the mass above a "
        "token already reaches p.",
    ),
    Mistake(
        "zero_fill",
        lambda logits, p: _top_p_variant(logits, p, fill=0.0),
        "the removed logits were set to 0, which still has a positive probability after the softmax: use -inf.",
    ),
    Mistake(
        "own_probability",
        _top_p_own_probability,
        "each token was kept or dropped by its own probability: top-p keeps the most likely tokens until their "
        "*summed* probability reaches p (sort, cumsum).",
    ),
    Mistake(
        "returns_probabilities",
        _top_p_probabilities,
        "you returned probabilities (after a softmax, or renormalised by hand); return the filtered logits, and "
        "let the sampler take the softmax.",
    ),
)


@checker
def check_top_p_filter(fn) -> Result:
    """Check `fn(logits, p)` against gpt.top_p_logits by softmax(result); compare also checks the input is untouched."""
    g = torch.Generator().manual_seed(143)
    # Probabilities 0.5, 0.3, 0.15, 0.05 (shuffled): p = 0.6 must keep 0.5 and 0.3, the token that crosses p.
    crafted = torch.tensor([0.15, 0.5, 0.05, 0.3]).log()
    cases = [
        Case("probabilities 0.15, 0.5, 0.05, 0.3 and p=0.6", (crafted, 0.6)),
        Case("one row of 12 logits, p=0.9", (2 * torch.randn(12, generator=g), 0.9)),
        Case("a batch of 5 rows of 8 logits, p=0.5", (3 * torch.randn(5, 8, generator=g), 0.5)),
        Case("a peaked row (one token above p), p=0.3", (torch.tensor([[4.0, 0.0, -1.0, 0.5, -2.0]]), 0.3)),
        Case("logits of shape (2, 3, 6), p=0.75", (torch.randn(2, 3, 6, generator=g), 0.75)),
    ]
    return compare(
        "top_p_filter",
        fn,
        top_p_logits,
        cases,
        _TOP_P_MISTAKES,
        observe=_observe_filter,
        explain=_explain_filter,
        passed=f"passed all {len(cases)} cases (p = 0.3 to 0.9, a crafted row where the crossing token matters, "
        "batches): softmax of your result equals that of gpt.top_p_logits, and the input is left unchanged",
    )
