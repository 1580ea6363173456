"""The decoding section: greedy decoding with the KV cache against recomputing the prefix at every step."""

from __future__ import annotations

import functools
import itertools
import statistics
from collections.abc import Sequence

import torch
from torch import nn

from ...decoding import greedy_decode
from ...model import Transformer, count_parameters
from ._core import Table, resolve_device, target_note, time_variants, use_fused

# The KV cache's speed-up at batch 1 that the package aims for: new tokens -> at least this.
CACHE_TARGETS = {64: 3.0, 256: 6.0}


def _forbid_token(model: Transformer, token: int):
    """Make `token` impossible to pick (its logit -inf), so every decode runs to max_len; returns the hook."""

    def hook(module, inputs, logits):
        return logits.index_fill(-1, torch.tensor([token], device=logits.device), float("-inf"))

    return output_layer(model).register_forward_hook(hook)


def output_layer(model: Transformer) -> nn.Module:
    """The Linear that writes the logits: `lm_head`, named `generator` in older revisions, which
    scripts/bench_before_after.py measures too."""
    return model.lm_head if hasattr(model, "lm_head") else model.generator


def decoding(
    batch_sizes: Sequence[int] = (1, 16),
    new_tokens: Sequence[int] = (64, 256),
    src_len: int = 32,
    vocab_size: int = 1000,
    d_model: int = 256,
    n_heads: int = 8,
    n_layers: int = 2,
    d_ff: int = 1024,
    repeats: int = 3,
    device=None,
    kernels: Sequence[str] = ("teaching", "fused"),
) -> Table:
    """Greedy decoding with the KV cache against recomputing the whole prefix at every step.

    `identical` says whether both produced exactly the same tokens (they must). The end token is
    forbidden so that every run generates exactly `new_tokens` tokens per sentence. Each kernel
    (chapter 2's teaching path, or PyTorch's fused one) runs both ways.
    """
    device = resolve_device(device)
    with torch.random.fork_rng(devices=[]):  # a fixed model, leaving the caller's random state alone
        torch.manual_seed(0)
        model = Transformer(vocab_size, vocab_size, d_model, n_heads, n_layers, d_ff, dropout=0.0)
    model = model.to(device).eval()
    bos_id, eos_id = 1, 2
    hook = _forbid_token(model, eos_id)
    table = Table(
        "decoding",
        "Greedy decoding: KV cache vs recomputing the prefix",
        ["kernel", "batch", "new_tokens", "cached_s", "uncached_s", "cached_tok_per_s", "uncached_tok_per_s", "speedup",
         "identical"],
    )  # fmt: skip
    try:
        for kernel, batch in itertools.product(kernels, batch_sizes):
            if kernel == "fused":
                use_fused(model)
            src = torch.randint(3, vocab_size, (batch, src_len), generator=torch.Generator().manual_seed(batch))
            src = src.to(device)
            outputs: dict[bool, torch.Tensor] = {}

            def run(use_cache: bool, max_len: int, src=src, outputs=outputs):
                outputs[use_cache] = greedy_decode(model, src, max_len, bos_id, eos_id, use_cache=use_cache)

            for use_cache in (True, False):  # warm-up on a short generation: the long ones take seconds
                run(use_cache, 9)
            for n in new_tokens:
                times = time_variants(
                    {"cached": functools.partial(run, True, n + 1), "uncached": functools.partial(run, False, n + 1)},
                    repeats,
                    0,
                    device,
                )
                cached, uncached = statistics.median(times["cached"]), statistics.median(times["uncached"])
                same = outputs[True].shape == (batch, n + 1) and torch.equal(outputs[True], outputs[False])
                table.rows.append(
                    dict(kernel=kernel, batch=batch, new_tokens=n, cached_s=cached, uncached_s=uncached,
                         cached_tok_per_s=batch * n / cached, uncached_tok_per_s=batch * n / uncached,
                         speedup=uncached / cached, identical=same)
                )  # fmt: skip
    finally:
        hook.remove()
    table.notes += [
        f"model: Transformer(vocab {vocab_size}, d_model {d_model}, {n_heads} heads, {n_layers}+{n_layers} layers, "
        f"d_ff {d_ff}), {count_parameters(model):,} parameters, float32 on {device.type}; source length {src_len}.",
        "tok_per_s = batch x new_tokens / seconds; speedup = uncached / cached time.",
        "uncached: model.decode on the whole prefix at every step (decoding.PrefixScorer).",
        f"median of {repeats} interleaved runs after a short warm-up.",
    ]
    for kernel, (n, bound) in itertools.product(kernels, CACHE_TARGETS.items()):
        speedup = table.column("speedup", kernel=kernel, batch=1, new_tokens=n)
        what = f"speedup at batch 1, {n} new tokens, {kernel} kernel"
        table.notes.append(target_note(what, speedup[0] if speedup else None, bound))
    return table
