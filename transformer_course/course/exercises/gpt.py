"""Chapter 14 exercises: greedy generation until <eos>, top-k filtering, and the floor of a weighted language.

None of the three answers is printed in the chapter. `generate_until_eos` is checked on `TableLM`, a tiny
causal model whose greedy choices are exact whole-number comparisons, with prompts of different lengths that
stop at different steps (one never does); the known mistakes include reading a padding column, padding on the
left, stopping every row at the first <eos>, and going on after it. `top_k_filter` is compared with
`gpt.top_k_logits` by the distribution it leaves, softmax(filtered logits); the package's `gpt.top_k_logits`
and `gpt.sample_next` are refused while the reader's code runs. `floor_per_token` generalises the
chapter's floor, log N / (mean words + 1), to sentences drawn with unequal probabilities; the known mistakes
include the uniform formula, a sentence listed twice counted as two, and a mean of ratios.
"""

from __future__ import annotations

import functools
import math

import torch
from torch import nn

from ... import gpt
from ...gpt import top_k_logits
from ._core import Case, Mistake, Result, calls_refused, checker, compare, describe_difference, refused, solution

# ---------------------------------------------------------------- exercise 14.1: greedy generation until <eos>


@solution
def generate_until_eos(model, prompts, eos_id, max_new_tokens):
    """Greedy continuation of each prompt (1-D ids of any length) until it writes eos_id or max_new_tokens."""
    outputs = []
    with torch.no_grad():
        for prompt in prompts:
            ids = prompt[None]  # (t,) -> (1, t): one prompt at a time, so no padding is ever read
            for _ in range(max_new_tokens):
                next_id = model(ids)[0, -1].argmax()  # the most likely token after the prompt's last real token
                ids = torch.cat([ids, next_id.view(1, 1)], dim=1)
                if next_id.item() == eos_id:
                    break  # <eos> is kept: it says the sentence is complete
            outputs.append(ids[0])
    return tuple(outputs)


class TableLM(nn.Module):
    """The checker's language model: the logits at position t depend on the token at t and on t mod 3 only.

    forward(ids (B, T)) -> logits (B, T, 9). It is causal (no position reads a later one) and sensitive to
    positions, like a GPT, and its scores are distinct whole numbers, so greedy decoding never meets a tie.
    """

    VOCAB, PERIOD = 9, 3

    def __init__(self, seed: int = 19):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        rows = [torch.randperm(self.VOCAB, generator=g).float() for _ in range(self.VOCAB * self.PERIOD)]
        self.table = nn.Parameter(torch.stack(rows).view(self.VOCAB, self.PERIOD, self.VOCAB))  # (token, t mod 3, V)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.table[ids, torch.arange(ids.shape[1]) % self.PERIOD]  # (B, T) -> (B, T, V)


_PAD = 0  # the padding id a batched answer would use: TableLM has no special meaning for it


def _greedy_variant(model, prompts, eos_id, max_new_tokens, stop="row", keep_eos=True, prompt_out=True,
                    budget="new", window="all", read=-1):  # fmt: skip
    """Greedy decoding with one thing done differently, one prompt at a time (the keyword says which).

    stop: "row" (each row at its own <eos>), "never", "first" (every row stops when one writes <eos>), "all"
    (rows go on after their <eos> until every row has written one); budget: "new", "total" (max_new_tokens
    counts the prompt) or "one_short"; window: "all" or "last" (only the last token fed, no cache); read: the
    position whose logits are used.
    """
    rows = [prompt.tolist() for prompt in prompts]
    lengths = [len(row) for row in rows]
    limit = {"new": max_new_tokens, "total": max_new_tokens, "one_short": max(max_new_tokens - 1, 0)}[budget]
    done = [False] * len(rows)
    with torch.no_grad():
        for _ in range(limit):
            for i, row in enumerate(rows):
                if budget == "total" and len(row) >= max_new_tokens:
                    done[i] = True
                if done[i]:
                    continue
                ids = torch.tensor([row if window == "all" else row[-1:]])
                row.append(int(model(ids)[0, read].argmax()))
            wrote_eos = [row[-1] == eos_id and len(row) > lengths[i] for i, row in enumerate(rows)]
            if stop == "row":
                done = [d or e for d, e in zip(done, wrote_eos)]
            elif stop == "first" and any(wrote_eos):
                break
            elif stop == "all":
                finished = [eos_id in row[lengths[i] :] for i, row in enumerate(rows)]
                if all(finished):
                    break
    outputs = []
    for row, length in zip(rows, lengths):
        if not keep_eos and len(row) > length and row[-1] == eos_id:
            row = row[:-1]
        outputs.append(torch.tensor(row if prompt_out else row[length:], dtype=torch.long))
    return tuple(outputs)


def _padded_batch_variant(model, prompts, eos_id, max_new_tokens, side):
    """The prompts padded into one batch with _PAD (on the right or the left), the last column read for every row.

    Each row is cut after its first <eos> among the generated tokens, and the padding is removed from it.
    """
    longest = max(len(p) for p in prompts)
    pads = [torch.full((longest - len(p),), _PAD) for p in prompts]
    batch = torch.stack([torch.cat([p, pad] if side == "right" else [pad, p]) for p, pad in zip(prompts, pads)])
    with torch.no_grad():
        for _ in range(max_new_tokens):
            batch = torch.cat([batch, model(batch)[:, -1].argmax(dim=-1, keepdim=True)], dim=1)
    outputs = []
    for row in batch:
        new = row[longest:].tolist()
        new = new[: new.index(eos_id) + 1] if eos_id in new else new
        outputs.append(torch.tensor([t for t in row[:longest].tolist() if t != _PAD] + new, dtype=torch.long))
    return tuple(outputs)


_GENERATE_MISTAKES = (
    Mistake(
        "no_stop",
        functools.partial(_greedy_variant, stop="never"),
        "every prompt got max_new_tokens new tokens: stop a row as soon as it writes eos_id (and keep that <eos>).",
    ),
    Mistake(
        "eos_dropped",
        functools.partial(_greedy_variant, keep_eos=False),
        "the rows stop at the right place, but the <eos> itself is missing: append the token, then stop if it is "
        "eos_id (it tells the reader that the sentence is complete, not cut by max_new_tokens).",
    ),
    Mistake(
        "stops_every_row",
        functools.partial(_greedy_variant, stop="first"),
        "every row stopped when the first one wrote <eos>: the others had not finished. Keep a `finished` flag "
        "per row and stop a row only at its own <eos>.",
    ),
    Mistake(
        "goes_on_after_eos",
        functools.partial(_greedy_variant, stop="all"),
        "a row that wrote <eos> went on generating until every row had finished: a finished row gets no more "
        "tokens (cut it after its first <eos>).",
    ),
    Mistake(
        "reads_padding",
        functools.partial(_padded_batch_variant, side="right"),
        "the prompts were padded on the right into one batch and every row's next token read from the last "
        "column: for a short prompt that column is padding, not its last word. Read row i at its own last real "
        "position (lengths[i] - 1), or generate one prompt at a time.",
    ),
    Mistake(
        "left_padding",
        functools.partial(_padded_batch_variant, side="left"),
        "the prompts were padded on the left: a short prompt's words then sit at later positions, and the model "
        "reads them (and the padding) as a different input. Without position ids and an attention mask that skip "
        "the padding, generate one prompt at a time (or pad on the right and read each row's own last position).",
    ),
    Mistake(
        "max_counts_prompt",
        functools.partial(_greedy_variant, budget="total"),
        "max_new_tokens was taken as the total length, prompt included: it counts the *new* tokens only, so a "
        "longer prompt does not get fewer of them.",
    ),
    Mistake(
        "one_short",
        functools.partial(_greedy_variant, budget="one_short"),
        "one new token too few where no <eos> came: a row may get max_new_tokens new tokens (range(max_new_tokens), "
        "not range(1, max_new_tokens)).",
    ),
    Mistake(
        "prompt_missing",
        functools.partial(_greedy_variant, prompt_out=False),
        "you returned the new tokens only: return each prompt followed by its continuation.",
    ),
    Mistake(
        "last_token_only",
        functools.partial(_greedy_variant, window="last"),
        "the model was given only the last token at each step: without a KV cache it must read the whole "
        "sequence (its position and its context are lost otherwise).",
    ),
    Mistake(
        "first_position",
        functools.partial(_greedy_variant, read=0),
        "the next token was read from the logits of position 0: the prediction for the next token is at the last "
        "position, logits[:, -1].",
    ),
)


def _explain_generate(got, expected, label: str) -> str:
    if isinstance(got, torch.Tensor) and isinstance(expected, tuple):
        return (
            f"returned one tensor of shape {tuple(got.shape)} on {label}: return one 1-D tensor per prompt (a tuple "
            "or a list), each as long as its own prompt and continuation, with no padding"
        )
    if isinstance(got, (tuple, list)) and isinstance(expected, tuple) and len(got) == len(expected):
        for i, (g, e) in enumerate(zip(got, expected)):
            if isinstance(g, torch.Tensor) and not torch.equal(g.cpu(), e):
                return f"prompt {i} of {label}: got {g.tolist()}, expected {e.tolist()}"
    return describe_difference(got, expected, label)


@checker
def check_generate_until_eos(fn) -> Result:
    """Check `fn(model, prompts, eos_id, max_new_tokens)` against the reference on TableLM and prompts of 1-4 ids."""
    model = TableLM().eval()

    def prompts(*rows):
        return [torch.tensor(row) for row in rows]

    cases = [
        Case("prompts of 1 and 3 ids, eos_id=2, max_new_tokens=8", (model, prompts([1], [1, 4, 6]), 2, 8)),
        Case(
            "prompts of 4, 1 and 2 ids, eos_id=2, max_new_tokens=5", (model, prompts([1, 8, 3, 4], [1], [1, 3]), 2, 5)
        ),
        Case("the same prompts with eos_id=5, max_new_tokens=6", (model, prompts([1], [1, 4, 6], [1, 8, 3, 4]), 5, 6)),
        Case("one prompt that never reaches <eos>, max_new_tokens=4", (model, prompts([1, 7]), 2, 4)),
        Case("max_new_tokens=0", (model, prompts([1, 4, 6], [1]), 2, 0)),
    ]
    return compare(
        "generate_until_eos",
        fn,
        generate_until_eos,
        cases,
        _GENERATE_MISTAKES,
        explain=_explain_generate,
        passed=f"passed all {len(cases)} cases (prompts of 1 to 4 ids, rows that stop at different steps, one that "
        "never stops, eos_id 2 and 5): the same tokens as the reference",
    )


# ---------------------------------------------------------------- exercise 14.2: top-k filtering


@solution
def top_k_filter(logits, k):
    """Keep the k largest logits of each row (..., V); set the others to -inf."""
    k = min(k, logits.shape[-1])  # k above the vocabulary size keeps everything
    kth_largest = logits.topk(k, dim=-1).values[..., -1:]  # (..., 1): the k-th largest of each row
    return logits.masked_fill(logits < kth_largest, float("-inf"))


# The package's own answers, refused while the reader's code runs (owner, attribute, the name the reader used).
_TOP_K_REFUSED = ((gpt, "top_k_logits", "tc.gpt.top_k_logits"), (gpt, "sample_next", "tc.gpt.sample_next"))


def _observe_filter(fn, case: Case):
    """What sampling would see: softmax(filtered logits), in the result's own dtype so that a wrong one shows.

    The package's top_k_logits and sample_next are refused during the reader's call. (An answer that filters its
    input in place is caught before this is compared: compare checks the inputs.)
    """
    with refused(_TOP_K_REFUSED):
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
        "package_called",
        calls_refused,
        "your function calls the package's tc.gpt.top_k_logits (or sample_next): this exercise asks you to write "
        "the filter yourself, from logits.topk and masked_fill.",
    ),
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


# ---------------------------------------------------------------- exercise 14.3: the floor of a weighted language


@solution
def floor_per_token(sentences, weights):
    """The lowest loss per predicted token (nats) when sentence i is drawn with probability ∝ weights[i]."""
    probability = {}
    for sentence, weight in zip(sentences, (weights / weights.sum()).tolist()):
        probability[sentence] = probability.get(sentence, 0.0) + weight  # a sentence listed twice: one sentence
    entropy = -sum(p * math.log(p) for p in probability.values() if p > 0)  # nats per sentence
    tokens = sum(p * (len(s.split()) + 1) for s, p in probability.items())  # expected words + <eos> per sentence
    return entropy / tokens


def _floor_variant(sentences, weights, weighted=True, merge=True, normalise=True, extra=1, log=math.log,
                   per="token", length=lambda s: len(s.split())):  # fmt: skip
    """floor_per_token with one thing done differently (the keyword that differs from the default says which)."""
    w = (weights / weights.sum() if normalise else weights).tolist()
    if not weighted:
        w = [1 / len(set(sentences)) if merge else 1 / len(sentences)] * len(sentences)
    probability: dict = {}
    for i, (sentence, p) in enumerate(zip(sentences, w)):
        key = sentence if merge else i
        probability[key] = p if (key in probability and not weighted) else probability.get(key, 0.0) + p
    text = dict(enumerate(sentences)) if not merge else {s: s for s in probability}
    entropy = -sum(p * log(p) for p in probability.values() if p > 0)
    if per == "sentence":
        return entropy
    if per == "ratio":  # the mean over sentences of -log p(s) / (length + 1)
        return sum(-p * log(p) / (length(text[k]) + extra) for k, p in probability.items())
    if per == "unweighted_length":
        distinct = set(sentences)
        return entropy / (sum(length(s) for s in distinct) / len(distinct) + extra)
    return entropy / sum(p * (length(text[k]) + extra) for k, p in probability.items())


_FLOOR_MISTAKES = (
    Mistake(
        "uniform_formula",
        lambda s, w: _floor_variant(s, w, weighted=False),
        "this is the uniform language's floor, log N / (mean words + 1): the weights were ignored. With "
        "probabilities p(s), the entropy is -Σ p(s) log p(s) and the tokens per sentence are Σ p(s) (words + 1).",
    ),
    Mistake(
        "duplicates_apart",
        lambda s, w: _floor_variant(s, w, merge=False),
        "a sentence listed twice was counted as two different sentences: the model cannot tell them apart, so "
        "add up their probabilities first (a dict from sentence to probability), then take the entropy.",
    ),
    Mistake(
        "not_normalised",
        lambda s, w: _floor_variant(s, w, normalise=False),
        "the weights were used as probabilities without normalising them: divide by their sum first.",
    ),
    Mistake(
        "no_eos",
        lambda s, w: _floor_variant(s, w, extra=0),
        "the tokens per sentence miss the <eos>: a language model predicts every word *and* the <eos> that ends "
        "the sentence, words + 1 per sentence.",
    ),
    Mistake(
        "bos_counted",
        lambda s, w: _floor_variant(s, w, extra=2),
        "<bos> was counted as a predicted token: it is given, never predicted. A sentence costs words + 1 "
        "predictions (the words and <eos>).",
    ),
    Mistake(
        "bits",
        lambda s, w: _floor_variant(s, w, log=math.log2),
        "the floor is in bits (log base 2): the course's losses are in nats (natural logarithm), as F.cross_entropy's.",
    ),
    Mistake(
        "per_sentence",
        lambda s, w: _floor_variant(s, w, per="sentence"),
        "this is the entropy per sentence: the loss is averaged per predicted token, so divide by the expected "
        "number of predicted tokens per sentence.",
    ),
    Mistake(
        "mean_of_ratios",
        lambda s, w: _floor_variant(s, w, per="ratio"),
        "you averaged -log p(s) / (words + 1) over the sentences: the loss pools every predicted token of the "
        "language, so divide the expected -log p(s) by the expected number of tokens (a ratio of means, not a "
        "mean of ratios).",
    ),
    Mistake(
        "unweighted_length",
        lambda s, w: _floor_variant(s, w, per="unweighted_length"),
        "the entropy is weighted, but the mean length is not: a likely sentence's tokens are predicted more "
        "often, so weight the length by p(s) too.",
    ),
    Mistake(
        "characters",
        lambda s, w: _floor_variant(s, w, length=len),
        "len(sentence) counts characters: the tokens are the words, len(sentence.split()).",
    ),
)


@checker
def check_floor_per_token(fn) -> Result:
    """Check `fn(sentences, weights)` against the reference on small weighted languages."""
    cases = [
        Case("three sentences, weights 1, 1, 2",
             (["he likes her", "we see them very much", "do they know us ?"], torch.tensor([1.0, 1.0, 2.0]))),
        Case("a sentence listed twice, weights 1, 2, 1, 4",
             (["I help myself", "you saw me yesterday", "I help myself", "does she love him ?"],
              torch.tensor([1.0, 2.0, 1.0, 4.0]))),
        Case("probabilities 0.5, 0.3, 0.2 (already summing to 1)",
             (["KaGe misses XiaoBing", "she did not trust herself", "we miss you"], torch.tensor([0.5, 0.3, 0.2]))),
        Case("four sentences of equal weight 3",
             (["I see you", "they hate us", "does he know me very much ?", "you met me yesterday"],
              torch.full((4,), 3.0))),
    ]  # fmt: skip
    return compare(
        "floor_per_token",
        fn,
        floor_per_token,
        cases,
        _FLOOR_MISTAKES,
        rtol=1e-6,
        atol=1e-9,
        passed=f"passed all {len(cases)} cases (unequal weights, a repeated sentence, weights summing to 1, equal "
        "weights): the same floor as the reference, in nats per predicted token",
    )
