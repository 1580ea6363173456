"""Chapter 15 exercises: BERT's masking (`mask_tokens`) and the masked-language-model loss.

A masking function is random, so its checker does not compare tensors with the package's: it runs the
reader's function on a large batch (about 33,000 ordinary tokens, a seeded generator) and compares *facts*
with those of `tc.mask_tokens`: the share of picked positions, the 80 / 10 / 10 split among them, specials
never picked, labels -100 exactly at the unpicked positions, the original ids as labels, nothing else
changed, the same output for the same seed, the input left alone. Each known wrong variant has its own set
of facts, which names the mistake. The loss checker compares numbers with `bert.mlm_loss`.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

from ..bert import IGNORE_INDEX
from ..bert import mask_tokens as package_mask_tokens
from ..bert import mlm_loss as package_mlm_loss
from ._core import Case, Mistake, Result, checker, compare, describe_difference, solution

# ---------------------------------------------------------------- exercise 15.1: BERT's masking


@solution
def mask_tokens(ids, mask_id, vocab_size, p, special_ids, generator):
    """(inputs, labels) for the masked language model, both shaped like ids (B, T)."""
    special = torch.isin(ids, torch.tensor(list(special_ids)))
    ordinary = torch.tensor([i for i in range(vocab_size) if i not in set(special_ids)])
    picked = (torch.rand(ids.shape, generator=generator) < p) & ~special  # each ordinary position with probability p
    action = torch.rand(ids.shape, generator=generator)  # one more draw per position: what happens to it
    random_tokens = ordinary[torch.randint(len(ordinary), ids.shape, generator=generator)]
    inputs = torch.where(picked & (action < 0.8), mask_id, ids)  # 80 %: <mask>
    inputs = torch.where(picked & (action >= 0.8) & (action < 0.9), random_tokens, inputs)  # 10 %: a random token
    labels = ids.masked_fill(~picked, -100)  # the original id where picked, -100 (ignored) elsewhere
    return inputs, labels  # the last 10 % of the picked positions keep their token


# The checker's vocabulary: ids 0-3 are special (<pad>, <cls>, <sep>, <mask>), 4-29 ordinary.
_V, _MASK, _SPECIALS = 30, 3, (0, 1, 2, 3)


def _masking_batch(rows: int = 600, length: int = 60, seed: int = 0) -> torch.Tensor:
    """<cls> ordinary tokens <sep>; in one row in three the last 10 positions are padding (no <sep>)."""
    ids = torch.randint(4, _V, (rows, length), generator=torch.Generator().manual_seed(seed))
    ids[:, 0] = 1
    ids[:, -1] = 2
    ids[::3, -10:] = 0
    return ids


def _near(value: float, target: float, tolerance: float) -> str:
    """A fact that does not depend on the random draw: 'about target', 'below' or 'above'."""
    if abs(value - target) <= tolerance:
        return f"about {target:g}"
    return "below" if value < target else "above"


class NotReproducible:
    """What the masking checker observes of a function that gives two results for one input and one seed."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NotReproducible)

    def __repr__(self) -> str:
        return "a different result for the same seed"


def _observe_masking(fn, case: Case):
    """The dtypes of fn's (inputs, labels) and facts about its masking of a large batch (a dict, compared key by key).

    An input changed in place is caught by compare itself (it checks the case's tensors after the call).
    """
    ids, mask_id, vocab_size, p, special_ids, seed = case.args
    original = ids.clone()
    result = fn(ids, mask_id, vocab_size, p, special_ids, torch.Generator().manual_seed(seed))
    ids = original
    if not (
        isinstance(result, (tuple, list)) and len(result) == 2 and all(isinstance(x, torch.Tensor) for x in result)
    ):
        return {"returns": f"{type(result).__name__}, not (inputs, labels)"}
    inputs, labels = result
    if inputs.shape != ids.shape or labels.shape != ids.shape:
        return {"returns": f"shapes {tuple(inputs.shape)} and {tuple(labels.shape)}, expected {tuple(ids.shape)} each"}
    again = fn(ids.clone(), mask_id, vocab_size, p, special_ids, torch.Generator().manual_seed(seed))
    if not all(isinstance(b, torch.Tensor) and torch.equal(a, b) for a, b in zip(result, again)):
        return NotReproducible()  # random numbers drawn elsewhere than from `generator`: nothing else is comparable
    special = torch.isin(ids, torch.tensor(list(special_ids)))
    picked = labels != IGNORE_INDEX
    n_picked = max(int(picked.sum()), 1)
    masked = picked & (inputs == mask_id)
    kept = picked & (inputs == ids)
    replaced = picked & ~masked & ~kept
    return (inputs.dtype, labels.dtype), {
        "returns": "(inputs, labels)",
        "specials picked": bool((picked & special).any()),
        "share of ordinary positions picked": _near(int((picked & ~special).sum()) / int((~special).sum()), p, 0.008),
        "labels at picked positions are the original ids": bool(torch.equal(labels[picked], ids[picked])),
        "labels elsewhere are -100": bool((labels[~picked] == IGNORE_INDEX).all()),
        "unpicked inputs unchanged": bool(torch.equal(inputs[~picked], ids[~picked])),
        "picked -> <mask>": _near(int(masked.sum()) / n_picked, 0.8, 0.03),
        "picked -> a random token": _near(int(replaced.sum()) / n_picked, 0.1, 0.025),
        "random tokens are ordinary": not bool(torch.isin(inputs[replaced], torch.tensor(list(special_ids))).any()),
    }


def _explain_masking(got, expected, label: str) -> str:
    # (dtypes, facts): a difference of dtypes is named by compare itself; here only the facts matter.
    got = got[1] if isinstance(got, tuple) else got
    expected = expected[1] if isinstance(expected, tuple) else expected
    if not isinstance(got, dict):
        return describe_difference(got, expected, label)
    if got.get("returns") != expected["returns"]:
        return f"on {label} your function returned {got.get('returns')}: return the pair (inputs, labels)"
    differences = [f"{key}: {got[key]} (expected {expected[key]})" for key in expected if got.get(key) != expected[key]]
    return f"on {label}: " + "; ".join(differences)


def _masking_variant(ids, mask_id, vocab_size, p, special_ids, generator, split=(0.8, 0.9), specials=True,
                     labels="picked", fill=-100, random_from="ordinary", use_generator=True):  # fmt: skip
    """BERT's masking with one thing done differently (the keyword that differs from the default says which)."""
    g = generator if use_generator else None
    special = torch.isin(ids, torch.tensor(list(special_ids)))
    pool = (
        [i for i in range(vocab_size) if i not in set(special_ids)] if random_from == "ordinary" else range(vocab_size)
    )
    pool_t = torch.tensor(list(pool))
    picked = torch.rand(ids.shape, generator=g) < p
    if specials:
        picked &= ~special
    action = torch.rand(ids.shape, generator=g)
    random_tokens = pool_t[torch.randint(len(pool_t), ids.shape, generator=g)]
    inputs = ids.clone()
    original = ids.clone()
    to_mask = picked & (action < split[0])
    to_random = picked & (action >= split[0]) & (action < split[1])
    inputs[to_mask] = mask_id
    inputs[to_random] = random_tokens[to_random]
    if labels == "picked":
        out_labels = original.masked_fill(~picked, fill)
    elif labels == "everywhere":
        out_labels = original
    elif labels == "inputs":
        out_labels = inputs.clone().masked_fill(~picked, fill)
    else:  # "changed": only the positions whose input changed
        out_labels = original.masked_fill(~(to_mask | to_random), fill)
    return inputs, out_labels


_MASKING_MISTAKES = (
    Mistake(
        "always_mask",
        functools.partial(_masking_variant, split=(1.0, 1.0)),
        "every picked position became <mask>: BERT replaces 80 % of them by <mask>, 10 % by a random token and "
        "leaves 10 % unchanged, so that the model cannot rely on seeing <mask> (which never occurs when it is "
        "fine-tuned). Draw a second random number per position to choose.",
    ),
    Mistake(
        "no_unchanged",
        functools.partial(_masking_variant, split=(0.8, 1.0)),
        "the picked positions are 80 % <mask> and 20 % random tokens: 10 % must keep their own token (action >= "
        "0.9), and still be predicted.",
    ),
    Mistake(
        "specials_picked",
        functools.partial(_masking_variant, specials=False),
        "special tokens (<cls>, <sep>, <pad>) were picked too: exclude every position whose id is in special_ids, "
        "picked = (rand < p) & ~torch.isin(ids, special_ids).",
    ),
    Mistake(
        "labels_everywhere",
        functools.partial(_masking_variant, labels="everywhere"),
        "labels hold the original id at every position: only the picked positions are predicted, so the others "
        "must be -100, the value F.cross_entropy ignores. Otherwise the loss mostly rewards copying visible tokens.",
    ),
    Mistake(
        "labels_zero",
        functools.partial(_masking_variant, fill=0),
        "the unpicked labels are 0, which is a token id (<pad>), so the loss would train every position to say "
        "<pad>: use -100, F.cross_entropy's ignore_index.",
    ),
    Mistake(
        "labels_are_inputs",
        functools.partial(_masking_variant, labels="inputs"),
        "the labels hold the *new* input (often the <mask> id) instead of the original token: take the labels "
        "from ids before you change anything.",
    ),
    Mistake(
        "unchanged_not_labelled",
        functools.partial(_masking_variant, labels="changed"),
        "the picked positions that kept their token got the label -100: they were picked, so the model must "
        "predict them too (BERT counts all three cases in the loss).",
    ),
    Mistake(
        "random_specials",
        functools.partial(_masking_variant, random_from="all"),
        "the random replacements are drawn from the whole vocabulary, specials included: draw them from the "
        "ordinary tokens (ids not in special_ids), as the package does.",
    ),
    Mistake(
        "nondeterministic",
        functools.partial(_masking_variant, use_generator=False),
        "your function gives different results on the same input (the same ids and the same generator seed): "
        "dropout or random noise in the answer? Draw every random number from the generator it is given: pass "
        "generator=generator to every torch.rand / torch.randint call, so that the masking is reproducible.",
    ),
)


@checker
def check_mask_tokens(fn) -> Result:
    """Check `fn(ids, mask_id, vocab_size, p, special_ids, generator)` by the facts of its masking of large batches."""
    cases = [
        Case("600 sentences of 60 tokens, p=0.15", (_masking_batch(seed=1), _MASK, _V, 0.15, _SPECIALS, 5)),
        Case("600 sentences of 60 tokens, p=0.3", (_masking_batch(seed=2), _MASK, _V, 0.3, _SPECIALS, 6)),
    ]
    return compare(
        "mask_tokens",
        fn,
        package_mask_tokens,
        cases,
        _MASKING_MISTAKES,
        observe=_observe_masking,
        explain=_explain_masking,
        passed=f"passed all {len(cases)} cases: p of the ordinary tokens picked, never a special one; 80 % <mask>, "
        "10 % random ordinary tokens, 10 % unchanged; labels = the original ids there, -100 elsewhere; "
        "reproducible with a seed",
    )


# ---------------------------------------------------------------- exercise 15.2: the masked-language-model loss


@solution
def mlm_loss(logits, labels):
    """Cross-entropy of logits (B, T, V) at the positions whose label is not -100, averaged over those."""
    return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100)  # (B·T, V) against (B·T,)


def _mean_over_every_position(logits, labels):
    losses = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), reduction="none")  # 0 at ignored positions
    return losses.sum() / labels.numel()


def _sum_over_picked(logits, labels):
    return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), reduction="sum")


def _mean_of_row_means(logits, labels):
    losses = F.cross_entropy(logits.transpose(1, 2), labels, reduction="none")  # (B, T), 0 where ignored
    picked = (labels != -100).float()
    rows = picked.sum(dim=1) > 0  # a sentence without picks has no mean
    return ((losses * picked).sum(dim=1)[rows] / picked.sum(dim=1)[rows]).mean()


def _ignore_zero(logits, labels):
    return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=0)


def _zero_label_skipped(logits, labels):
    keep = labels > 0  # -100 and 0 both treated as "not picked"
    return F.cross_entropy(logits[keep], labels[keep])


def _softmax_first(logits, labels):
    return F.cross_entropy(torch.softmax(logits, dim=-1).flatten(0, 1), labels.flatten())


def _nll_of_logits(logits, labels):
    return F.nll_loss(logits.flatten(0, 1), labels.flatten())


def _probability_not_log(logits, labels):
    picked = labels != -100
    probs = torch.softmax(logits[picked], dim=-1)
    return -probs.gather(-1, labels[picked][:, None]).mean()


_MLM_MISTAKES = (
    Mistake(
        "mean_over_every_position",
        _mean_over_every_position,
        "the ignored positions add 0 to the sum, but they are counted in the mean: average over the picked "
        "positions only (F.cross_entropy's reduction='mean' with ignore_index does exactly that).",
    ),
    Mistake(
        "sum",
        _sum_over_picked,
        "this is the sum over the picked positions, not their mean: a batch with more picked tokens would get a "
        "larger loss. Use reduction='mean'.",
    ),
    Mistake(
        "mean_of_row_means",
        _mean_of_row_means,
        "this is the mean of each sentence's mean loss, which weighs a picked token of a sentence with few picks "
        "more: average over all picked positions of the batch at once.",
    ),
    Mistake(
        "ignore_index_zero",
        _ignore_zero,
        "ignore_index=0 skips token 0, not the unpicked positions, whose label is -100 (an invalid class, so "
        "cross_entropy fails): keep the default ignore_index=-100.",
    ),
    Mistake(
        "zero_label_skipped",
        _zero_label_skipped,
        "a picked position whose original token is 0 was left out: only -100 means 'not picked'; 0 is a token id "
        "like any other. Select with labels != -100.",
    ),
    Mistake(
        "softmax_first",
        _softmax_first,
        "the logits went through a softmax before F.cross_entropy, which applies log_softmax itself: pass the raw "
        "logits.",
    ),
    Mistake(
        "nll_of_logits",
        _nll_of_logits,
        "F.nll_loss expects log-probabilities, and got raw logits: take log_softmax first, or use F.cross_entropy.",
    ),
    Mistake(
        "probability_not_log",
        _probability_not_log,
        "this averages minus the probabilities of the right tokens, not minus their logarithms: the loss is "
        "-log p, the cross-entropy.",
    ),
)


def _explain_mlm(got, expected, label: str) -> str:
    if isinstance(got, torch.Tensor) and got.dim() > 0:
        return f"returned a tensor of shape {tuple(got.shape)} on {label}: the loss is one number, a 0-dim tensor"
    return describe_difference(got, expected, label)


@checker
def check_mlm_loss(fn) -> Result:
    """Check `fn(logits, labels)` against bert.mlm_loss on batches with a few picked positions."""
    g = torch.Generator().manual_seed(15)

    def batch(rows, length, vocab, picks):
        logits = 2 * torch.randn(rows, length, vocab, generator=g)
        labels = torch.full((rows, length), -100)
        for row, n in enumerate(picks):
            where = torch.randperm(length, generator=g)[:n]
            labels[row, where] = torch.randint(vocab, (n,), generator=g)
        return logits, labels

    cases = [
        Case("2 sentences, 3 and 1 picked positions", batch(2, 8, 12, [3, 1])),
        Case("4 sentences with 2, 0, 5 and 1 picks", batch(4, 10, 9, [2, 0, 5, 1])),
        Case("one sentence, every position picked", batch(1, 6, 7, [6])),
        Case("3 sentences, label 0 among the picks", _with_label_zero(*batch(3, 7, 10, [2, 2, 3]))),
    ]
    return compare(
        "mlm_loss",
        fn,
        package_mlm_loss,
        cases,
        _MLM_MISTAKES,
        explain=_explain_mlm,
        passed=f"passed all {len(cases)} cases (few picks, none in a row, every position, label 0 picked): the "
        "same loss as bert.mlm_loss",
    )


def _with_label_zero(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Make the first pick of row 0 the token id 0, so that ignore_index=0 shows."""
    first = int((labels[0] != -100).nonzero()[0])
    labels = labels.clone()
    labels[0, first] = 0
    return logits, labels
