"""Chapter 14: a decoder-only language model (GPT, 仅解码器语言模型) and sampling from it.

    ids (B, T) ─ embedding + learned positions ─ N × [pre-LN block, causal mask] ─ LayerNorm ─ ·Eᵀ ─ logits (B, T, V)

GPT keeps one half of the Transformer: a stack of self-attention + feed-forward blocks whose causal mask
lets position t see positions 0..t only. Without an encoder there is no cross-attention, so each block
is exactly the package's `EncoderLayer` run with a causal mask (pre-LN and GELU, as in GPT-2). The
logits at position t predict token t + 1: the model is trained on the sequence against itself shifted by
one position (causal language modelling, 因果语言建模), and generates by sampling one token at a time.

The output projection reuses the token embedding matrix E (weight tying, 权重共享), as in GPT-2.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Protocol, cast, runtime_checkable

import torch
import torch.nn.functional as F
from torch import nn

from ._modes import evaluating
from ._validate import (
    at_the_door,
    check_bool,
    check_device,
    check_positive_int,
    check_tensor,
    check_token_ids,
    checked,
)
from .checkpoint import register_model
from .decoding import check_finite_logits
from .efficient import KVCache
from .embedding import LearnedPositionalEncoding
from .encoder import BlockConfig, Encoder, EncoderLayer
from .masks import causal_mask
from .training import History, train_steps, warmup_cosine  # noqa: F401 -- re-exported: notebooks call gpt.train_steps


@dataclass(frozen=True)
class GPTConfig:
    """Everything that builds a `GPT`: `GPT.from_config(config)` rebuilds it, and a checkpoint stores it.
    Every field is checked once, when the config is made."""

    vocab_size: int
    d_model: int = 256
    n_heads: int = 4
    n_layers: int = 4
    d_ff: int = 1024
    max_len: int = 256
    dropout: float = 0.1

    def __post_init__(self) -> None:
        if at_the_door():  # inside a checked call (GPT's constructor), the fields were checked at its door
            self.block  # noqa: B018 -- building the BlockConfig checks the blocks' fields
            for name in ("vocab_size", "n_layers", "max_len"):
                check_positive_int(getattr(self, name), name)

    @functools.cached_property
    def block(self) -> BlockConfig:
        """Every block's sizes and options: pre-LN and GELU, as in GPT-2."""
        return BlockConfig(self.d_model, self.n_heads, self.d_ff, self.dropout, norm_first=True, activation="gelu")


def check_lm_inputs(model: LanguageModel, ids: torch.Tensor, cache: KVCache | None = None) -> None:
    """A decoder-only model's forward(ids (B, T), cache) arguments: token ids in range, a cache of its depth, and
    no more than max_len positions in all."""
    vocab_size, n_blocks, max_len = model.vocab_size, model.config.n_layers, model.max_len
    check_tensor(ids, "ids", ndim=2, floating=False)
    if ids.shape[1] == 0:
        raise ValueError("ids is empty: expected shape (B, T) with T >= 1")
    check_device(ids, "ids", cast(nn.Module, model))  # GPT or ModernDecoder, at its forward's door
    check_token_ids(ids, "ids", vocab_size)
    if cache is not None and not isinstance(cache, KVCache):
        raise TypeError(f"cache must be a KVCache from model.new_cache(), got {type(cache).__name__}")
    if cache is not None and len(cache.layers) != n_blocks:
        raise ValueError(f"cache has {len(cache.layers)} layers, the model has {n_blocks} blocks")
    if cache is not None and cache.batch is not None and cache.batch != ids.shape[0]:
        raise ValueError(f"cache holds {cache.batch} rows but ids has {ids.shape[0]}: use one cache per batch")
    length = ids.shape[1] + (0 if cache is None else cache.length)
    if length > max_len:
        raise ValueError(f"{length} positions exceed max_len={max_len}: shorten ids or build a larger model")


def _check_config(model: GPT, *args: Any, **kwargs: Any) -> None:
    GPTConfig(*args, **kwargs)


class GPT(nn.Module):
    """A GPT-style language model. forward(ids (B, T)) -> logits (B, T, vocab_size); logits[:, t] predict ids[:, t + 1].

    With a `cache` (from `new_cache()`), ids holds only the positions after the cached ones, and only
    their logits are computed; the cache then holds their keys and values too.
    """

    @checked(_check_config)  # every argument checked once, here; the modules built inside skip their checks
    def __init__(
        self,
        vocab_size: int,
        d_model: int = 256,
        n_heads: int = 4,
        n_layers: int = 4,
        d_ff: int = 1024,
        max_len: int = 256,
        dropout: float = 0.1,
    ):
        super().__init__()
        self.config = config = GPTConfig(vocab_size, d_model, n_heads, n_layers, d_ff, max_len, dropout)
        self.vocab_size, self.max_len = vocab_size, max_len
        # No √d_model scaling (unlike chapter 8's TokenEmbedding): GPT-2 adds the raw embedding to the positions.
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        self.positions = LearnedPositionalEncoding(d_model, max_len, dropout)
        # Pre-LN blocks, and the final LayerNorm that pre-LN needs: tc.Encoder with norm_first=True.
        self.blocks = Encoder.from_config(config.block, n_layers)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        self.lm_head.weight = self.token_embedding.weight  # tied: one matrix reads and writes tokens
        self._init_weights(n_layers)

    def _init_weights(self, n_layers: int) -> None:
        # GPT-2's initialisation: N(0, 0.02) everywhere, zero biases, and the two projections that write
        # into the residual stream scaled by 1/√(2 · n_layers), so the stream's variance does not grow with depth.
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)
        for layer in self.layers:
            for projection in (layer.self_attn.w_o, layer.ffn.w_2):
                nn.init.normal_(projection.weight, std=0.02 / math.sqrt(2 * n_layers))

    @classmethod
    def from_config(cls, config: GPTConfig) -> GPT:
        if not isinstance(config, GPTConfig):
            raise TypeError(f"config must be a GPTConfig, got {type(config).__name__}")
        return cls(**asdict(config))

    @property
    def layers(self) -> list[EncoderLayer]:
        """The blocks, in order."""
        return [cast(EncoderLayer, layer) for layer in self.blocks.layers]

    @checked(check_lm_inputs)
    def forward(self, ids: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        start = 0 if cache is None else cache.length  # the position of ids' first token
        x = self.positions(self.token_embedding(ids), offset=start)
        # Rows start.. of the causal mask: each new position sees the cached ones and itself, nothing later.
        mask = causal_mask(start + ids.shape[1], device=ids.device)[start:]
        # With a cache, the blocks' attention reads and fills it (chapter 13): the blocks run their own forward.
        with contextlib.nullcontext() if cache is None else cache.attached(self.layers):
            x = self.blocks(x, mask)
        return self.lm_head(x)

    def new_cache(self) -> KVCache:
        """An empty KV cache with one entry per block."""
        return KVCache(len(self.layers))


# ----------------------------------------------------------------------------------------- sampling


def top_k_logits(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the k largest logits of each row (..., V); the others become -inf, so they get probability 0.

    Tokens tied with the k-th largest logit are kept too.
    """
    k = min(k, logits.shape[-1])
    kth_largest = logits.topk(k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth_largest, float("-inf"))


def top_p_logits(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Nucleus filtering: keep the smallest set of most likely tokens whose probabilities sum to at least p."""
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    cumulative = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
    # Drop a token when the tokens before it already reach p: the most likely token always stays.
    drop_sorted = cumulative - sorted_logits.softmax(dim=-1) >= p
    drop = drop_sorted.scatter(-1, order, drop_sorted)  # back to the vocabulary's order
    return logits.masked_fill(drop, float("-inf"))


def sample_next(
    logits: torch.Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """One token per row from logits (B, V): (B, 1) ids. temperature 0 takes the argmax (greedy decoding).

    The logits are divided by the temperature, then filtered by top-k and top-p, then sampled.
    """
    if temperature == 0:
        # Greedy: the limit of temperature -> 0. Dividing by 0 would give inf - inf = NaN probabilities.
        return logits.argmax(dim=-1, keepdim=True)
    logits = logits.float()
    # The largest logit becomes 0 before dividing: a tiny temperature then sends the others to -inf, never to inf.
    logits = (logits - logits.amax(dim=-1, keepdim=True)) / temperature
    if top_k is not None:
        logits = top_k_logits(logits, top_k)
    if top_p is not None and top_p < 1:  # p = 1 keeps every token
        logits = top_p_logits(logits, top_p)
    return torch.multinomial(logits.softmax(dim=-1), 1, generator=generator)


register_model(GPT, GPTConfig)


@runtime_checkable
class LanguageModel(Protocol):
    """What `generate` needs of a model: `GPT` and chapter 19's `ModernDecoder` both have it.

    model(ids (B, T), cache) -> logits (B, T, vocab_size), computed for the positions after the cached ones.
    """

    vocab_size: int
    max_len: int
    config: GPTConfig | Any  # n_layers: the blocks, one cache entry each (chapter 19's ModernConfig has it too)
    training: bool

    def __call__(self, ids: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor: ...

    def new_cache(self) -> KVCache: ...

    def eval(self) -> nn.Module: ...

    def train(self, mode: bool = True) -> nn.Module: ...


def _check_generate_args(
    model: LanguageModel,
    ids: torch.Tensor,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    use_cache: bool = True,
    generator: torch.Generator | None = None,
) -> None:
    if not isinstance(model, LanguageModel):
        raise TypeError(
            "model must be a transformer_course.GPT or another language model with forward(ids, cache), "
            f"new_cache(), vocab_size and max_len (e.g. ModernDecoder), got {type(model).__name__}"
        )
    check_tensor(ids, "ids", ndim=2, floating=False)
    if ids.shape[1] == 0:
        raise ValueError("ids is empty: the prompt needs at least one token (e.g. <bos>), shape (B, T >= 1)")
    check_token_ids(ids, "ids", model.vocab_size, wait=True)  # once per call: worth one wait on a GPU
    check_positive_int(max_new_tokens, "max_new_tokens")
    if ids.shape[1] > model.max_len:
        raise ValueError(f"ids has {ids.shape[1]} positions, longer than the model's max_len={model.max_len}")
    if ids.shape[1] + max_new_tokens > model.max_len:
        raise ValueError(
            f"ids ({ids.shape[1]} positions) + max_new_tokens={max_new_tokens} exceed the model's "
            f"max_len={model.max_len}: generate fewer tokens or shorten the prompt"
        )
    for name, value in (("temperature", temperature), ("top_p", top_p)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    if not 0 <= temperature < math.inf:
        raise ValueError(f"temperature={temperature!r} must be a finite number >= 0 (0 = greedy)")
    if temperature > 0 and float(torch.tensor(temperature, dtype=torch.float32)) == 0:
        raise ValueError(
            f"temperature={temperature!r} is 0 in float32, in which the logits are divided: use temperature=0 for "
            "greedy decoding"
        )
    if top_k is not None:
        check_positive_int(top_k, "top_k")
    if top_p is not None and not 0 < top_p <= 1:
        raise ValueError(f"top_p={top_p!r} must be in (0, 1]")
    if generator is not None:
        if not isinstance(generator, torch.Generator):
            raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
        if generator.device.type != ids.device.type:
            raise ValueError(f"generator is on {generator.device.type} but ids on {ids.device.type}: use one device")
    check_bool(use_cache, "use_cache")


def _check_scorer(scorer: LMScorer, model: LanguageModel, use_cache: bool = True) -> None:
    if not isinstance(model, LanguageModel):
        raise TypeError(f"model must be a GPT or another language model with new_cache(), got {type(model).__name__}")
    check_bool(use_cache, "use_cache")


def _check_prefix(scorer: LMScorer, ids: torch.Tensor) -> None:
    check_tensor(ids, "ids", ndim=2, floating=False)
    if scorer.cache is not None and ids.shape[1] <= scorer.cache.length:
        raise ValueError(
            f"ids has {ids.shape[1]} positions and the cache already holds {scorer.cache.length}: "
            "call with the sequence grown by at least one token"
        )


class LMScorer:
    """Next-token logits for growing sequences, the language model's twin of the translator's scorers
    (chapter 12's `PrefixScorer`, chapter 13's `CachedScorer`): with the KV cache, each call runs the model on
    the tokens added since the last call only; without it, on the whole sequence."""

    @checked(_check_scorer)
    def __init__(self, model: LanguageModel, use_cache: bool = True):
        self.model = model
        self.cache = model.new_cache() if use_cache else None

    @checked(_check_prefix)
    def __call__(self, ids: torch.Tensor) -> torch.Tensor:
        """ids (B, t) -> (B, V): the logits of the token after each row."""
        new = ids if self.cache is None else ids[:, self.cache.length :]  # (B, t - cached)
        return self.model(new, self.cache)[:, -1]

    def select(self, rows: torch.Tensor) -> None:
        """Keep the rows `rows` (a search that drops or repeats sequences)."""
        if self.cache is not None:
            self.cache.select(rows)


@torch.no_grad()
@checked(_check_generate_args)
def generate(
    model: GPT,
    ids: torch.Tensor,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    use_cache: bool = True,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Continue each prompt of ids (B, T) by max_new_tokens sampled tokens: (B, T + max_new_tokens).

    temperature=0 is greedy decoding; top_k / top_p restrict sampling to the most likely tokens.
    With a seeded `generator` the samples are reproducible; the KV cache (use_cache=True) changes the
    work, and the logits only by rounding (so the tokens, except where two logits tie to the last digits).
    Every argument is checked before any work is done. Runs in eval mode.
    """
    with evaluating(model):  # each submodule gets its own mode back afterwards
        scorer = LMScorer(model, use_cache)  # the first call reads the whole prompt, later ones the new token
        for _ in range(max_new_tokens):
            logits = scorer(ids)  # (B, V)
            check_finite_logits(model, logits, ids.shape[1])  # NaN logits would make argmax pick token 0
            ids = torch.cat([ids, sample_next(logits, temperature, top_k, top_p, generator)], dim=1)  # (B, t + 1)
    return ids


# ----------------------------------------------------------------------------------------- training


def lm_loss(logits: torch.Tensor, ids: torch.Tensor, pad_id: int) -> torch.Tensor:
    """The causal language-model loss: the mean cross-entropy of logits (B, T - 1, V) against ids[:, 1:].

    logits are the model's outputs on ids[:, :-1] (B, T): position t predicts token t + 1. Padding
    targets count for nothing, so the mean is over the real tokens only.
    """
    targets = ids[:, 1:]  # (B, T - 1): the inputs shifted left by one position
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=pad_id)  # (B·(T-1), V)


@torch.no_grad()
def evaluate_lm(model: GPT, ids: torch.Tensor, pad_id: int, batch_size: int = 1024) -> float:
    """The mean loss per predicted token over the rows of ids (B, T), padding not counted; in eval mode.

    Each submodule's train/eval flag is restored afterwards (`evaluating`), a frozen one included.
    """
    check_tensor(ids, "ids", ndim=2, floating=False)
    targets = ids[:, 1:]
    if not bool((targets != pad_id).any()):
        raise ValueError(f"ids has no token to predict: every position after the first is padding (pad_id={pad_id})")
    total = 0.0
    with evaluating(model):
        for rows in ids.split(batch_size):
            logits = model(rows[:, :-1])
            total += float(
                F.cross_entropy(logits.flatten(0, 1), rows[:, 1:].flatten(), ignore_index=pad_id, reduction="sum")
            )
    return total / int((targets != pad_id).sum())


def train_lm(
    model: GPT,
    batches: Callable[[], torch.Tensor],
    steps: int,
    pad_id: int,
    lr: float = 3e-3,
    warmup: int = 50,
    evaluate: Callable[[], float] | None = None,
    eval_every: int = 100,
) -> History:
    """Train `model` as a causal language model on `batches()`, a function returning fresh (B, T) ids.

    Each step reads ids[:, :-1] and predicts ids[:, 1:] (`lm_loss`). Returns the History of `train_steps`.
    """
    device = next(model.parameters()).device

    def step_loss() -> torch.Tensor:
        ids = batches().to(device)
        return lm_loss(model(ids[:, :-1]), ids, pad_id)

    return train_steps(model, step_loss, steps, lr, warmup, weight_decay=0.0, evaluate=evaluate, eval_every=eval_every)
