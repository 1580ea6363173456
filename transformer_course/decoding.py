"""Chapter 12: generating a translation token by token (自回归解码).

The decoder is trained to predict y_t from y_0..y_{t-1}, so at inference it must be *fed its own
previous outputs*: start from `<sos>`, pick the next token, append it, repeat until `<eos>`.
Feeding `<sos> <pad> <pad> ...` once and reading every position (post 1) asks each position to
guess without the words before it, which is why that model printed `NLP NLP NLP NLP NLP`.

A search needs one thing from the model: the logits of the next token after each prefix. A *scorer*
gives them: `PrefixScorer` runs the decoder over the whole prefix at every step; `efficient.CachedScorer`
(chapter 13) computes the same logits from the new position alone. `run_greedy` and `run_beam` are the
searches; `greedy_decode` and `beam_search` run them on a model (with the cached scorer unless
`use_cache=False`).
"""

from __future__ import annotations

import math
from typing import Protocol

import torch
from torch import nn

from ._modes import evaluating
from ._validate import check_bool, check_device, check_positive_int, check_token_id, check_token_ids, checked
from .efficient import CachedScorer
from .model import Transformer, check_tokens


class Scorer(Protocol):
    """What `run_greedy` and `run_beam` decode with: next-token logits for growing sequences."""

    def __call__(self, ys: torch.Tensor) -> torch.Tensor: ...

    def select(self, rows: torch.Tensor) -> None: ...


class PrefixScorer:
    """Next-token logits for growing prefixes: the decoder re-reads the whole prefix at every step.

    The source (B, S) is encoded once; `select(rows)` keeps the rows that beam search keeps.
    """

    def __init__(self, model: Transformer, src: torch.Tensor):
        self.model, self.src = model, src
        self.memory = model.encode(src)  # (B, S, D): the source does not change while decoding

    def __call__(self, ys: torch.Tensor) -> torch.Tensor:
        """ys (N, t) prefixes -> (N, V) logits of the token after each."""
        return self.model.decode(ys, self.memory, self.src)[:, -1]  # (N, t, V) -> (N, V)

    def select(self, rows: torch.Tensor) -> None:
        self.src, self.memory = self.src[rows], self.memory[rows]


def run_greedy(scorer: Scorer, start: torch.Tensor, max_len: int, eos_id: int, pad_id: int) -> torch.Tensor:
    """Append the most likely next token to every row of start (B, 1) until each has produced eos_id.

    A finished row is padded with pad_id while the others go on. Returns (B, <= max_len).
    """
    ys = start
    finished = torch.zeros(ys.shape[0], dtype=torch.bool, device=ys.device)
    for _ in range(max_len - 1):
        next_token = scorer(ys).argmax(dim=-1).masked_fill(finished, pad_id)  # (B,)
        ys = torch.cat([ys, next_token[:, None]], dim=1)  # (B, t) -> (B, t + 1)
        finished |= next_token == eos_id
        if finished.all():
            break
    return ys


def run_beam(
    scorer: Scorer,
    start: torch.Tensor,
    beam_size: int,
    max_len: int,
    eos_id: int,
    pad_id: int,
    length_penalty: float = 0.0,
) -> torch.Tensor:
    """Keep the `beam_size` best partial sequences at each step. start (1, 1) -> tokens (1, <= max_len).

    A hypothesis' score is the sum of its tokens' log-probabilities; finished hypotheses are ranked by
    score / length**length_penalty (0: the raw sum).
    """
    seqs = start  # (n, t): the hypotheses kept, n <= beam_size
    scores = torch.zeros(1, device=start.device)  # (n,) their summed log-probabilities
    finished = torch.zeros(1, dtype=torch.bool, device=start.device)
    for _ in range(max_len - 1):
        log_probs = torch.log_softmax(scorer(seqs).float(), dim=-1)  # (n, V)
        candidates = scores[:, None] + log_probs  # (n, V): every hypothesis times every next token
        # A finished hypothesis has one continuation, padding, which keeps its score unchanged.
        candidates[finished] = float("-inf")
        candidates[finished, pad_id] = scores[finished]
        flat = candidates.flatten()  # (n, V) -> (n * V,)
        k = min(beam_size, int(torch.isfinite(flat).sum()))
        scores, index = flat.topk(k)
        beam, token = index // log_probs.shape[-1], index % log_probs.shape[-1]  # the row and column of each
        seqs = torch.cat([seqs[beam], token[:, None]], dim=1)  # (k, t) -> (k, t + 1)
        finished = finished[beam] | (token == eos_id)
        scorer.select(beam)
        if finished.all():
            break
    # Tokens after the start, up to and including the first eos (what follows it is padding).
    is_eos = seqs[:, 1:] == eos_id
    lengths = (is_eos.cumsum(dim=1) == 0).sum(dim=1) + is_eos.any(dim=1)  # tokens before the first eos, + the eos
    best = int((scores / lengths.clamp(min=1).float() ** length_penalty).argmax())
    return seqs[best : best + 1, : int(lengths[best]) + 1]


def _scorer(model: Transformer, src: torch.Tensor, use_cache: bool) -> _FiniteScorer:
    return _FiniteScorer(model, CachedScorer(model, src) if use_cache else PrefixScorer(model, src))


def _check_decode_args(
    model: Transformer, src: torch.Tensor, max_len: int, bos_id: int, eos_id: int, use_cache: bool
) -> None:
    """Everything greedy_decode and beam_search are given, checked before any work is done."""
    if not isinstance(model, Transformer):
        raise TypeError(f"model must be a transformer_course.Transformer, got {type(model).__name__}")
    config = model.config
    check_source(model, src, "src")
    check_positive_int(max_len, "max_len")
    if max_len > config.max_len:
        raise ValueError(
            f"max_len={max_len} (tokens to generate, bos included) exceeds the model's positional table, "
            f"config.max_len={config.max_len}"
        )
    check_token_id(bos_id, "bos_id", config.tgt_vocab_size)
    check_token_id(eos_id, "eos_id", config.tgt_vocab_size)
    # bos_id == eos_id is allowed (one token that starts and ends, as in GPT-2): the start is never generated.
    # eos_id == pad_id is allowed too: a task without an end token stops where the model predicts padding.
    if bos_id == model.pad_id:
        raise ValueError(f"bos_id={bos_id} is the model's pad_id: the decoder would mask the start token as padding")
    check_bool(use_cache, "use_cache")


def check_source(model: Transformer, src: torch.Tensor, name: str) -> None:
    """Token ids (B, S) with B, S >= 1 that the model can read: ids in its source vocabulary, S within its
    positional table, on its device."""
    check_tokens(src, name)
    config = model.config
    if src.shape[0] == 0:
        raise ValueError(f"{name} has no rows: expected shape (B, S) with B >= 1")
    check_device(src, name, model)
    if src.shape[1] > config.max_len:
        raise ValueError(
            f"{name} has {src.shape[1]} positions, more than the model's positional table, "
            f"config.max_len={config.max_len}"
        )
    check_token_ids(src, name, config.src_vocab_size, wait=True)  # once per call: worth one wait on a GPU


def _check_beam_args(src: torch.Tensor, beam_size: int, length_penalty: float) -> None:
    check_positive_int(beam_size, "beam_size")
    if src.shape[0] != 1:
        raise ValueError(f"beam_search decodes one sentence at a time: src must be (1, S), got {tuple(src.shape)}")
    if isinstance(length_penalty, bool) or not isinstance(length_penalty, (int, float)):
        raise TypeError(f"length_penalty must be a float, got {type(length_penalty).__name__}")
    if not math.isfinite(length_penalty):
        raise ValueError(f"length_penalty={length_penalty} must be a finite number (0: rank by the raw sum)")


def _check_log_prob_args(model: Transformer, src: torch.Tensor, tgt: torch.Tensor) -> None:
    if not isinstance(model, Transformer):
        raise TypeError(f"model must be a transformer_course.Transformer, got {type(model).__name__}")
    check_source(model, src, "src")
    check_tokens(tgt, "tgt")
    if tgt.shape[1] < 2:
        raise ValueError(f"tgt must hold bos and at least one token, got shape {tuple(tgt.shape)}")
    if tgt.shape[0] != src.shape[0]:
        raise ValueError(f"src and tgt must share the batch size, got {src.shape[0]} and {tgt.shape[0]}")
    check_token_ids(tgt, "tgt", model.config.tgt_vocab_size, wait=True)
    if tgt.shape[1] - 1 > model.config.max_len:
        raise ValueError(
            f"tgt has {tgt.shape[1]} tokens: the decoder reads all but the last, more than the model's "
            f"positional table, config.max_len={model.config.max_len}"
        )


def _check_greedy(
    model: Transformer, src: torch.Tensor, max_len: int, bos_id: int, eos_id: int, use_cache: bool = True
) -> None:
    _check_decode_args(model, src, max_len, bos_id, eos_id, use_cache)


def _check_beam(
    model: Transformer,
    src: torch.Tensor,
    beam_size: int,
    max_len: int,
    bos_id: int,
    eos_id: int,
    length_penalty: float = 0.0,
    use_cache: bool = True,
) -> None:
    _check_decode_args(model, src, max_len, bos_id, eos_id, use_cache)
    _check_beam_args(src, beam_size, length_penalty)


@checked(_check_greedy)
def greedy_decode(
    model: Transformer,
    src: torch.Tensor,
    max_len: int,
    bos_id: int,
    eos_id: int,
    use_cache: bool = True,
) -> torch.Tensor:
    """Greedy decoding: src (B, S) -> tokens (B, <= max_len), starting with bos_id (`run_greedy` on `model`).

    A row that has produced eos_id is padded with the model's pad id while the others go on;
    decoding stops when every row has finished or max_len tokens (bos included) are reached.
    The model runs in eval mode without gradients; each of its submodules keeps its own mode afterwards.
    """
    start = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)
    with evaluating(model):
        return run_greedy(_scorer(model, src, use_cache), start, max_len, eos_id, model.pad_id)


@checked(_check_beam)
def beam_search(
    model: Transformer,
    src: torch.Tensor,
    beam_size: int,
    max_len: int,
    bos_id: int,
    eos_id: int,
    length_penalty: float = 0.0,
    use_cache: bool = True,
) -> torch.Tensor:
    """Beam search: src (1, S) -> tokens (1, <= max_len), starting with bos_id (`run_beam` on `model`).

    beam_size=1 gives exactly the greedy output; length_penalty as in `run_beam`.
    """
    start = torch.full((1, 1), bos_id, dtype=torch.long, device=src.device)
    with evaluating(model):
        scorer = _scorer(model, src, use_cache)
        return run_beam(scorer, start, beam_size, max_len, eos_id, model.pad_id, float(length_penalty))


@checked(_check_log_prob_args)
def sequence_log_prob(model: Transformer, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
    """Sum of log p(y_t | y_<t, src) over the tokens of tgt (B, T) after its first (bos) token.

    Padding after eos is not counted. Used to compare the outputs of greedy and beam search.
    """
    with evaluating(model):
        logits = model(src, tgt[:, :-1])
    log_probs = torch.log_softmax(logits.float(), dim=-1).gather(-1, tgt[:, 1:, None]).squeeze(-1)
    return (log_probs * (tgt[:, 1:] != model.pad_id)).sum(dim=1)


class _FiniteScorer:
    """A scorer whose logits are checked at every step: with NaN logits argmax picks garbage silently
    and beam search's topk finds no candidate."""

    def __init__(self, model: Transformer, scorer: PrefixScorer | CachedScorer):
        self.model, self.scorer = model, scorer

    def __call__(self, ys: torch.Tensor) -> torch.Tensor:
        logits = self.scorer(ys)
        check_finite_logits(self.model, logits, ys.shape[1])
        return logits

    def select(self, rows: torch.Tensor) -> None:
        self.scorer.select(rows)


def check_finite_logits(model: nn.Module, logits: torch.Tensor, n_tokens: int) -> None:
    """A FloatingPointError that says why, if the next-token logits after n_tokens tokens hold NaN."""
    if torch.isnan(logits).any():
        bad = [name for name, p in model.named_parameters() if not torch.isfinite(p).all()]
        cause = (
            f"its parameters hold NaN or inf ({', '.join(bad[:3])}{', ...' if len(bad) > 3 else ''})"
            if bad
            else "its parameters are finite, so a computation overflowed (half precision?)"
        )
        raise FloatingPointError(f"the model's next-token logits are NaN after {n_tokens} token(s): {cause}")
