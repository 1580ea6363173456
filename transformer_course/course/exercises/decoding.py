"""Chapter 12 exercises: greedy decoding token by token, and one step of beam search.

The greedy checker runs the reader's `greedy(model, src, max_len, bos, eos)` on a small Transformer
trained on post 1's five sentence pairs (trained once per process, about a second) and compares it
with `tc.greedy_decode`. The beam-step checker compares `beam_step(...)` with a brute-force ranking of
every (hypothesis, token) continuation. Known wrong variants are recognised and named: post 1's
one-pass decoding, reading the wrong position, a missing causal mask, not stopping at <eos>, ranking
by the token's log-probability alone, a top-k per hypothesis, finished hypotheses lost or extended.
"""

from __future__ import annotations

import functools

import torch

from ...data import POST1_PAIRS, ParallelCorpus
from ...decoding import greedy_decode
from ...masks import causal_mask, padding_mask
from ...model import Transformer
from ._core import Case, Mistake, Result, checker, compare, describe_difference, solution

# ---------------------------------------------------------------- exercise 12.1: greedy decoding


def decoder_logits(
    model: Transformer, ys: torch.Tensor, memory: torch.Tensor, src: torch.Tensor, tgt_mask: torch.Tensor | None
) -> torch.Tensor:
    """The decoder and the output layer on the prefix ys (B, T) with the target mask you give: logits (B, T, V).

    memory = model.encode(src). The mask is yours to build (bool, True = may attend, (T, T)); the
    source padding is masked for you.
    """
    x = model.positions(model.tgt_embed(ys))
    return model.lm_head(model.decoder(x, memory, tgt_mask, padding_mask(src, model.pad_id)))


@functools.cache
def post1_pairs_model() -> tuple[Transformer, ParallelCorpus]:
    """The checker's model and corpus: a small Transformer trained until it translates post 1's five pairs.

    Trained once per process (10 steps, about a second); try your function on it as the checker does:
    model, corpus = post1_pairs_model(); src = corpus.encode_source(["自然语言处理 很 强大"]).
    """
    from ...demo import train_post1_pairs  # imported here: the demo module is not needed until a check runs

    model, corpus, _ = train_post1_pairs(seed=0, progress=False)
    return model.eval(), corpus


@solution
@torch.no_grad()
def greedy(model, src, max_len, bos, eos):
    """Decode src (B, S) token by token, always taking the most likely next token: (B, <= max_len) ids."""
    memory = model.encode(src)
    ys = torch.full((src.shape[0], 1), bos, dtype=torch.long)
    finished = torch.zeros(src.shape[0], dtype=torch.bool)
    while ys.shape[1] < max_len:
        # The same causal mask as in training: position t sees positions 0..t of the prefix.
        logits = decoder_logits(model, ys, memory, src, causal_mask(ys.shape[1]))
        next_token = logits[:, -1].argmax(dim=-1)  # the last position predicts the next token
        next_token = next_token.masked_fill(finished, model.pad_id)  # a finished row only pads
        ys = torch.cat([ys, next_token[:, None]], dim=1)  # fed back in at the next step
        finished |= next_token == eos
        if finished.all():
            break
    return ys


@torch.no_grad()
def _greedy_variant(
    model, src, max_len, bos, eos, mask=True, position=-1, pad_after_eos=True, stop="all", keep_bos=True
):
    """Greedy decoding with one thing done wrong (the keyword that differs from the default says which)."""
    memory = model.encode(src)
    ys = torch.full((src.shape[0], 1), bos, dtype=torch.long)
    finished = torch.zeros(src.shape[0], dtype=torch.bool)
    while ys.shape[1] < max_len:
        tgt_mask = causal_mask(ys.shape[1]) if mask else None
        next_token = decoder_logits(model, ys, memory, src, tgt_mask)[:, position].argmax(dim=-1)
        if pad_after_eos:
            next_token = next_token.masked_fill(finished, model.pad_id)
        ys = torch.cat([ys, next_token[:, None]], dim=1)
        finished |= next_token == eos
        if (stop == "all" and finished.all()) or (stop == "any" and finished.any()):
            break
    return ys if keep_bos else ys[:, 1:]


@torch.no_grad()
def _one_pass(model, src, max_len, bos, eos):
    # Post 1's test: <sos> <pad> <pad> ... through the decoder once, the argmax of every position.
    ys = torch.full((src.shape[0], max_len - 1), model.pad_id, dtype=torch.long)
    ys[:, 0] = bos
    logits = decoder_logits(model, ys, model.encode(src), src, causal_mask(max_len - 1))
    return torch.cat([ys[:, :1], logits.argmax(dim=-1)], dim=1)


_GREEDY_MISTAKES = (
    Mistake(
        "one_pass",
        _one_pass,
        "this is post 1's test: <sos> <pad> <pad> ... goes through the decoder once and every position's "
        "argmax is read. No position sees a word of the translation, only <sos> and padding, so each one "
        "guesses blindly (post 1 got 'NLP NLP NLP NLP NLP'). Decode in a loop: predict one token, append it "
        "to ys, run the decoder again on the longer ys.",
    ),
    Mistake(
        "first_position",
        functools.partial(_greedy_variant, position=0),
        "every step predicts from <sos> alone (reading logits[:, 0], or giving the decoder only <sos>), so the "
        "first word repeats. Run the decoder on the whole prefix ys and read its last position, logits[:, -1].",
    ),
    Mistake(
        "no_causal_mask",
        functools.partial(_greedy_variant, mask=False),
        "the tokens drift from greedy decoding once a sentence has a few words: the decoder ran without the "
        "causal mask (tgt_mask=None). It was trained with one, so that position t sees positions 0..t only; "
        "without it the earlier positions see later tokens, which they never did in training. Pass "
        "tgt_mask=tc.causal_mask(ys.shape[1]).",
    ),
    Mistake(
        "never_stops",
        functools.partial(_greedy_variant, pad_after_eos=False, stop="never"),
        "decoding does not stop at <eos>: the rows go on producing words after it, up to max_len. Keep a "
        "`finished` flag per row, write model.pad_id after a row's <eos>, and stop once every row has finished.",
    ),
    Mistake(
        "no_pad_after_eos",
        functools.partial(_greedy_variant, pad_after_eos=False),
        "a row that has produced <eos> goes on producing words while the other rows finish. After its <eos> a "
        "row must only pad: next_token = next_token.masked_fill(finished, model.pad_id).",
    ),
    Mistake(
        "runs_to_max_len",
        functools.partial(_greedy_variant, stop="never"),
        "the tokens are right but decoding does not stop when every row has produced <eos>: the output always "
        "has max_len columns. Stop as soon as finished.all().",
    ),
    Mistake(
        "stops_at_first_eos",
        functools.partial(_greedy_variant, stop="any"),
        "decoding stops as soon as one row has produced <eos>, which cuts the longer sentences short. Stop when "
        "every row has finished: finished.all(), not .any().",
    ),
    Mistake(
        "no_bos",
        functools.partial(_greedy_variant, keep_bos=False),
        "the tokens are right, but each row must start with bos (as tc.greedy_decode's rows do): return ys "
        "with its first column.",
    ),
)


def _explain_greedy(bos: int, eos: int, pad: int):
    """Words for a wrong greedy output that no known mistake matches exactly."""

    def explain(got, expected, label: str) -> str:
        if not (isinstance(got, torch.Tensor) and got.dim() == 2 and got.shape[0] == expected.shape[0]):
            return describe_difference(got, expected, label)
        if got.shape[1] == 0 or not bool((got[:, 0] == bos).all()):
            return f"on {label} the rows do not start with bos={bos}: start from ys = [[bos]] and keep it"
        for row in got.tolist():
            if eos in row and any(t != pad for t in row[row.index(eos) + 1 :]):
                return f"on {label} a row goes on after <eos> (id {eos}): after its <eos> a row only pads"
        words = [row[1:] for row in got.tolist()]
        if any(len(set(w)) == 1 and len(w) > 2 for w in words):
            return (
                f"on {label} a row repeats one word: is the prediction fed back in? Each step must run the "
                "decoder on the whole prefix so far and read the last position, logits[:, -1]."
            )
        return describe_difference(got, expected, label)

    return explain


@checker
def check_greedy(fn) -> Result:
    """Check `fn(model, src, max_len, bos, eos)` against tc.greedy_decode on a model trained on the five pairs."""
    model, corpus = post1_pairs_model()
    bos, eos = corpus.tgt_vocab.sos_id, corpus.tgt_vocab.eos_id
    five = corpus.encode_source([s for s, _ in POST1_PAIRS])
    g = torch.Generator().manual_seed(12)
    n_words = len(corpus.src_vocab)

    def random_batch():  # sentences the model never saw: where a decoding mistake shows most
        return torch.randint(1, n_words, (4, 5), generator=g)

    cases = [
        Case("the five sentences of post 1 (a batch of 5), max_len 10", (model, five, 10, bos, eos)),
        Case("'自然语言处理 很 强大' alone, max_len 10", (model, five[3:4, :3], 10, bos, eos)),
        Case("4 random word sequences, max_len 8", (model, random_batch(), 8, bos, eos)),
        Case("4 more random word sequences, max_len 8", (model, random_batch(), 8, bos, eos)),
        Case("the five sentences of post 1, max_len 3 (too short to reach <eos>)", (model, five, 3, bos, eos)),
    ]
    return compare(
        "greedy",
        fn,
        greedy_decode,
        cases,
        _GREEDY_MISTAKES,
        explain=_explain_greedy(bos, eos, model.pad_id),
        passed=f"passed all {len(cases)} cases: the five sentences of post 1 as a batch, one sentence alone, two "
        "batches of random word sequences, and a max_len too short to reach <eos>; the same tokens as "
        "tc.greedy_decode",
    )


# ---------------------------------------------------------------- exercise 12.2: one step of beam search


@solution
def beam_step(scores, log_probs, finished, k, pad_id):
    """The k best continuations of n hypotheses, over all of them at once, best first.

    scores (n,): each hypothesis' sum of log-probabilities so far; log_probs (n, V): the log-probability
    of each next token; finished (n,) bool: hypotheses that have produced <eos>.
    Returns (beam, token, new_score), each of shape (k,): continuation i extends hypothesis beam[i].
    """
    candidates = scores[:, None] + log_probs  # (n, V): the score of every one-token continuation
    # A finished hypothesis has one continuation, padding, which keeps its score unchanged.
    candidates = candidates.masked_fill(finished[:, None], float("-inf"))
    candidates[finished, pad_id] = scores[finished]
    new_scores, index = candidates.flatten().topk(k)  # over all n * V continuations at once
    vocab = log_probs.shape[1]
    return index // vocab, index % vocab, new_scores


def _beam_step_reference(scores, log_probs, finished, k, pad_id):
    """Every continuation listed one by one, then sorted: an independent check of the vectorised version."""
    options = []
    for b in range(scores.shape[0]):
        if finished[b]:
            options.append((float(scores[b]), b, pad_id))
        else:
            options += [(float(scores[b] + log_probs[b, t]), b, t) for t in range(log_probs.shape[1])]
    best = sorted(options, key=lambda option: -option[0])[:k]
    return (
        torch.tensor([b for _, b, _ in best]),
        torch.tensor([t for _, _, t in best]),
        torch.tensor([s for s, _, _ in best]),
    )


def _step_variant(scores, log_probs, finished, k, pad_id, add_score=True, finished_rule="pad", swap=False):
    candidates = (scores[:, None] + log_probs) if add_score else log_probs.clone()
    if finished_rule in ("pad", "drop"):
        candidates = candidates.masked_fill(finished[:, None], float("-inf"))
    if finished_rule == "pad":
        candidates[finished, pad_id] = scores[finished]
    new_scores, index = candidates.flatten().topk(k)
    vocab = log_probs.shape[1]
    if swap:
        return index % vocab, index // vocab, new_scores
    return index // vocab, index % vocab, new_scores


def _best_per_hypothesis(scores, log_probs, finished, k, pad_id):
    # Each hypothesis extended by its own best token, then the k best of those: a beam never branches.
    candidates = (scores[:, None] + log_probs).masked_fill(finished[:, None], float("-inf"))
    candidates[finished, pad_id] = scores[finished]
    best, token = candidates.max(dim=-1)
    order = best.argsort(descending=True)[:k]
    return order, token[order], best[order]


_BEAM_MISTAKES = (
    Mistake(
        "score_not_added",
        functools.partial(_step_variant, add_score=False),
        "the continuations are ranked by the next token's log-probability alone: add each hypothesis' score "
        "first (scores[:, None] + log_probs), or a weak hypothesis with one likely next word overtakes a "
        "strong one. The new score is the sum of every log-probability so far.",
    ),
    Mistake(
        "best_per_hypothesis",
        _best_per_hypothesis,
        "each hypothesis was extended by its own best token only, so a beam never branches: take the k best "
        "of all n × V continuations at once (flatten, then topk), so a strong hypothesis can continue in two "
        "ways and a weak one drop out.",
    ),
    Mistake(
        "finished_extended",
        functools.partial(_step_variant, finished_rule="open"),
        "a finished hypothesis (it has produced <eos>) was extended like the others: its only continuation is "
        "pad_id, with its score unchanged (set candidates[finished] to -inf, then candidates[finished, pad_id] "
        "= scores[finished]).",
    ),
    Mistake(
        "finished_dropped",
        functools.partial(_step_variant, finished_rule="drop"),
        "the finished hypotheses disappeared: a hypothesis that has produced <eos> stays in the running with "
        "its score, continued by pad_id (candidates[finished, pad_id] = scores[finished]), or a short, complete "
        "translation is lost to longer ones.",
    ),
    Mistake(
        "div_mod_swapped",
        functools.partial(_step_variant, swap=True),
        "the right continuations, but hypothesis and token are swapped: in the flattened (n × V) index i, the "
        "hypothesis is i // V and the token i % V.",
    ),
)


def _explain_beam(got, expected, label: str) -> str:
    if isinstance(got, (tuple, list)) and len(got) == 3 and all(isinstance(x, torch.Tensor) for x in got):
        if any(x.dim() == 2 for x in got):
            return (
                f"on {label} you returned a 2-D result {tuple(got[0].shape)}: it looks like a top-k per hypothesis. "
                "Take the k best over all hypotheses at once: flatten the (n, V) candidates, then topk(k)."
            )
        if all(x.shape == e.shape for x, e in zip(got, expected)):
            pairs = sorted(zip(got[0].tolist(), got[1].tolist()))
            if pairs == sorted(zip(expected[0].tolist(), expected[1].tolist())):
                return f"on {label} you found the right continuations, but not sorted best first"
    return describe_difference(got, expected, label)


@checker
def check_beam_step(fn) -> Result:
    """Check `fn(scores, log_probs, finished, k, pad_id)` against a brute-force ranking of all continuations."""
    g = torch.Generator().manual_seed(21)

    def log_probs(n, vocab):
        return torch.log_softmax(2 * torch.randn(n, vocab, generator=g), dim=-1)

    def flags(*values):
        return torch.tensor(values, dtype=torch.bool)

    cases = [
        Case("the first step: one hypothesis (<sos>), k=3, V=6", (torch.zeros(1), log_probs(1, 6), flags(0), 3, 0)),
        Case(
            "3 open hypotheses, the first far ahead, k=3, V=7",
            (torch.tensor([-0.5, -3.0, -4.0]), log_probs(3, 7), flags(0, 0, 0), 3, 0),
        ),
        Case(
            "4 hypotheses, the best one finished, k=4, V=8",
            (torch.tensor([-1.0, -1.5, -2.5, -3.0]), log_probs(4, 8), flags(1, 0, 0, 0), 4, 0),
        ),
        Case(
            "3 hypotheses, a weak one finished, k=3, V=5",
            (torch.tensor([-0.2, -0.9, -6.0]), log_probs(3, 5), flags(0, 0, 1), 3, 0),
        ),
        Case(
            "3 hypotheses, two finished, k=3, V=6",
            (torch.tensor([-2.0, -1.0, -1.5]), log_probs(3, 6), flags(1, 0, 1), 3, 0),
        ),
        Case(
            "4 hypotheses with close scores, k=4, V=50",
            (torch.tensor([-3.1, -3.2, -3.4, -3.5]), log_probs(4, 50), flags(0, 1, 0, 0), 4, 0),
        ),
    ]
    return compare(
        "beam_step",
        fn,
        _beam_step_reference,
        cases,
        _BEAM_MISTAKES,
        explain=_explain_beam,
        passed=f"passed all {len(cases)} cases: the first step, open and finished hypotheses, close scores, "
        "vocabularies of 5 to 50 tokens",
    )
