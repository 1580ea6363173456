"""Chapter 12: generating a translation token by token (自回归解码).

The decoder is trained to predict y_t from y_0..y_{t-1}, so at inference it must be *fed its own
previous outputs*: start from `<sos>`, pick the next token, append it, repeat until `<eos>`.
Feeding `<sos> <pad> <pad> ...` once and reading every position (seed 001) asks each position to
guess without the words before it, which is why that model printed `NLP NLP NLP NLP NLP`.

Both decoders use a `KVCache` by default; `use_cache=False` recomputes the whole prefix each step
(same tokens, more work: see the "Making attention fast" appendix).
"""

from __future__ import annotations

import functools

import torch

from ._validate import check_positive_int, check_tensor
from .model import Transformer


def _check_decode_args(model, src, max_len, bos_id, eos_id) -> None:
    if not isinstance(model, Transformer):
        raise TypeError(f"model must be a transformer_course.Transformer, got {type(model).__name__}")
    check_tensor(src, "src", ndim=2, floating=False)
    check_positive_int(max_len, "max_len")
    vocab = model.config["tgt_vocab_size"]
    for name, value in (("bos_id", bos_id), ("eos_id", eos_id)):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < vocab:
            raise ValueError(f"{name}={value!r} must be a token id in [0, {vocab - 1}]")


def _eval_mode(fn):
    """Run `fn` without gradients and with dropout off, then restore the model's mode."""

    @functools.wraps(fn)
    def wrapper(model, *args, **kwargs):
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                return fn(model, *args, **kwargs)
        finally:
            model.train(was_training)

    return wrapper


@_eval_mode
def greedy_decode(
    model: Transformer,
    src: torch.Tensor,
    max_len: int,
    bos_id: int,
    eos_id: int,
    use_cache: bool = True,
) -> torch.Tensor:
    """Pick the most likely next token at each step. src (B, S) -> tokens (B, <= max_len), starting with bos_id.

    A row that has produced eos_id is padded with the model's pad id while the others go on;
    decoding stops when every row has finished or max_len tokens (bos included) are reached.
    """
    _check_decode_args(model, src, max_len, bos_id, eos_id)
    memory = model.encode(src)
    ys = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)
    finished = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    cache = model.new_cache() if use_cache else None
    for _ in range(max_len - 1):
        logits = model.decode(ys, memory, src, cache)[:, -1]
        next_token = logits.argmax(dim=-1).masked_fill(finished, model.pad_id)
        ys = torch.cat([ys, next_token[:, None]], dim=1)
        finished |= next_token == eos_id
        if finished.all():
            break
    return ys


@_eval_mode
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
    """Keep the `beam_size` best partial translations at each step. src (1, S) -> tokens (1, <= max_len).

    A hypothesis' score is the sum of its tokens' log-probabilities, divided by length**length_penalty
    when ranking finished hypotheses (0 = raw sum). beam_size=1 gives exactly the greedy output.
    """
    _check_decode_args(model, src, max_len, bos_id, eos_id)
    check_positive_int(beam_size, "beam_size")
    if src.shape[0] != 1:
        raise ValueError(f"beam_search decodes one sentence at a time: src must be (1, S), got {tuple(src.shape)}")
    memory = model.encode(src)
    seqs = torch.full((1, 1), bos_id, dtype=torch.long, device=src.device)
    scores = torch.zeros(1, device=src.device)
    finished = torch.zeros(1, dtype=torch.bool, device=src.device)
    cache = model.new_cache() if use_cache else None
    for _ in range(max_len - 1):
        n = seqs.shape[0]
        logits = model.decode(seqs, memory.expand(n, -1, -1), src.expand(n, -1), cache)[:, -1]
        candidates = scores[:, None] + torch.log_softmax(logits.float(), dim=-1)
        # A finished hypothesis has one continuation, padding, which keeps its score unchanged.
        candidates[finished] = float("-inf")
        candidates[finished, model.pad_id] = scores[finished]
        flat = candidates.flatten()
        k = min(beam_size, int(torch.isfinite(flat).sum()))
        scores, index = flat.topk(k)
        beam, token = index // logits.shape[-1], index % logits.shape[-1]
        seqs = torch.cat([seqs[beam], token[:, None]], dim=1)
        finished = finished[beam] | (token == eos_id)
        if cache is not None:
            cache.reorder(beam)
        if finished.all():
            break
    # Tokens after bos, up to and including the first eos (what follows it is padding).
    is_eos = seqs[:, 1:] == eos_id
    lengths = torch.where(is_eos.any(dim=1), is_eos.float().argmax(dim=1) + 1, seqs.shape[1] - 1)
    best = int((scores / lengths.clamp(min=1).float() ** length_penalty).argmax())
    return seqs[best : best + 1, : int(lengths[best]) + 1]


@_eval_mode
def sequence_log_prob(model: Transformer, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
    """Sum of log p(y_t | y_<t, src) over the tokens of tgt (B, T) after its first (bos) token.

    Padding after eos is not counted. Used to compare the outputs of greedy and beam search.
    """
    check_tensor(tgt, "tgt", ndim=2, floating=False)
    if tgt.shape[1] < 2:
        raise ValueError(f"tgt must hold bos and at least one token, got shape {tuple(tgt.shape)}")
    logits = model(src, tgt[:, :-1])
    log_probs = torch.log_softmax(logits.float(), dim=-1).gather(-1, tgt[:, 1:, None]).squeeze(-1)
    return (log_probs * (tgt[:, 1:] != model.pad_id)).sum(dim=1)
