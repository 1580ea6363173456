"""The decoding section: greedy decoding with the KV cache against recomputing the prefix at every step."""

from __future__ import annotations

import functools
import itertools
import statistics
from collections.abc import Sequence
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn

from ..._modes import evaluating
from ...decoder import DecoderLayer
from ...decoding import greedy_decode
from ...model import Transformer, count_parameters
from ...residual import SublayerConnection
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


def functional_greedy(
    model: Transformer, src: torch.Tensor, max_len: int, bos_id: int, use_cache: bool
) -> torch.Tensor:
    """Greedy decoding of `model` by a decoder written as bare torch.nn.functional calls: a floor, not the package.

    The same weights and arithmetic as `greedy_decode` on a post-LN model without padding (the end token never
    stops it, so every row runs to max_len; `decoding` forbids it in both): F.linear, F.layer_norm and
    F.scaled_dot_product_attention on tensors, no module calls but the output layer's, no checks, no masks built
    (the prefix through is_causal, the cached step through a buffer of keys and values). It measures how little a
    step can cost in eager PyTorch: `decoding`'s "functional" rows. src (B, S) -> tokens (B, max_len).
    """
    layers = cast("list[DecoderLayer]", list(model.decoder.layers))
    if any(layer.sublayers[0].norm_first for layer in layers) or not isinstance(model.decoder.norm, nn.Identity):
        raise ValueError("functional_greedy runs post-LN decoders only (the paper's, the benchmark's)")
    heads, d_model = layers[0].self_attn.n_heads, model.config.d_model
    activation = F.relu if isinstance(layers[0].ffn.activation, nn.ReLU) else F.gelu
    batch = src.shape[0]

    def split(x: torch.Tensor) -> torch.Tensor:  # (B, T, D) -> (B, H, T, d_k)
        return x.view(batch, x.shape[1], heads, d_model // heads).transpose(1, 2)

    def linear(x: torch.Tensor, layer: nn.Linear) -> torch.Tensor:
        return F.linear(x, layer.weight, layer.bias)

    def add_norm(x: torch.Tensor, y: torch.Tensor, sublayer: nn.Module) -> torch.Tensor:
        norm = cast(SublayerConnection, sublayer).norm
        return F.layer_norm(x + y, (d_model,), norm.weight, norm.bias, norm.eps)

    with evaluating(model):
        memory = model.encode(src)  # (B, S, D), once, as the package's scorers do
        cross = [(split(linear(memory, layer.cross_attn.w_k)), split(linear(memory, layer.cross_attn.w_v)))
                 for layer in layers]  # fmt: skip
        shape = (batch, heads, max_len, d_model // heads)
        keys, values = [memory.new_empty(shape) for _ in layers], [memory.new_empty(shape) for _ in layers]
        ys = torch.full((batch, 1), bos_id, dtype=torch.long, device=src.device)
        for t in range(max_len - 1):
            new = ys[:, -1:] if use_cache else ys  # the new position, or the whole prefix again
            start = t if use_cache else 0
            x = F.embedding(new, model.tgt_embed.weight) * model.tgt_embed.scale + model.positions.pe[start : t + 1]
            for i, layer in enumerate(layers):
                attn, sub = layer.self_attn, layer.sublayers
                q, k, v = (split(linear(x, w)) for w in (attn.w_q, attn.w_k, attn.w_v))  # (B, H, T, d_k)
                if use_cache:
                    keys[i][:, :, t : t + 1], values[i][:, :, t : t + 1] = k, v
                    out = F.scaled_dot_product_attention(q, keys[i][:, :, : t + 1], values[i][:, :, : t + 1])
                else:
                    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                x = add_norm(x, linear(out.transpose(1, 2).reshape(x.shape), attn.w_o), sub[0])  # (B, T, D)
                out = F.scaled_dot_product_attention(split(linear(x, layer.cross_attn.w_q)), *cross[i])
                x = add_norm(x, linear(out.transpose(1, 2).reshape(x.shape), layer.cross_attn.w_o), sub[1])
                x = add_norm(x, linear(activation(linear(x, layer.ffn.w_1)), layer.ffn.w_2), sub[2])
            logits = output_layer(model)(
                x[:, -1]
            )  # (B, V); a module call, so the benchmark's hook forbids eos here too
            ys = torch.cat([ys, logits.argmax(dim=-1, keepdim=True)], dim=1)
    return ys


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
    kernels: Sequence[str] = ("teaching", "fused", "functional"),
) -> Table:
    """Greedy decoding with the KV cache against recomputing the whole prefix at every step.

    `identical` says whether both produced exactly the same tokens (they must). The end token is
    forbidden so that every run generates exactly `new_tokens` tokens per sentence. Each kernel runs both
    ways: chapter 2's teaching path and chapter 6's LayerNorm, PyTorch's fused kernels (`use_fused_attention`
    and `use_fused_norms`), or `functional_greedy`, the same weights without the package's modules: a floor.
    """
    unknown = set(kernels) - {"teaching", "fused", "functional"}
    if unknown:
        raise ValueError(f"kernels: unknown {sorted(unknown)}, expected 'teaching', 'fused' or 'functional'")
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

            def run(use_cache: bool, max_len: int, src=src, outputs=outputs, kernel=kernel):
                if kernel == "functional":
                    outputs[use_cache] = functional_greedy(model, src, max_len, bos_id, use_cache)
                else:
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
        "uncached: model.decode on the whole prefix at every step (decoding.PrefixScorer; functional: see below).",
        "teaching: chapter 2's attention, chapter 6's LayerNorm; fused: PyTorch's kernels for both (chapter 13's "
        "switches); functional: the same weights run by a decoder of bare torch.nn.functional calls, no modules or "
        "checks, its uncached step over the whole prefix with is_causal (functional_greedy): about the least a step "
        "costs in eager PyTorch.",
        f"median of {repeats} interleaved runs after a short warm-up.",
    ]
    for kernel, (n, bound) in itertools.product([k for k in kernels if k != "functional"], CACHE_TARGETS.items()):
        speedup = table.column("speedup", kernel=kernel, batch=1, new_tokens=n)
        what = f"speedup at batch 1, {n} new tokens, {kernel} kernel"
        table.notes.append(target_note(what, speedup[0] if speedup else None, bound))
    return table
