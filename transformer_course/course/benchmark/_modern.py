"""The `modern` section (chapter 19): the package's Llama-style decoder against Hugging Face's, same weights.

* forward: logits of a batch, `ModernDecoder` vs `transformers`' `LlamaForCausalLM` (weights copied by
  `tc.to_hf`), with the largest difference of their logits;
* greedy generation with the KV cache: `tc.generate(temperature=0)` vs `LlamaForCausalLM.generate(do_sample=False)`,
  with whether the tokens are identical;
* the KV cache's bytes per token for multi-head (H_kv = H), grouped (H_kv = H/4) and multi-query (H_kv = 1)
  attention, measured on the cache after a prompt.

speed_ratio = HF's time / the package's time: above 1, the package is faster. Runs only when named
(`--only modern`): `transformers` is not a dependency of the package.
"""

from __future__ import annotations

import dataclasses
import functools
import statistics
from collections.abc import Callable
from typing import Any

import torch

from ...gpt import generate as tc_generate
from ...hf import to_hf
from ...model import count_parameters
from ...modern import ModernConfig, ModernDecoder, cache_bytes_per_token
from ._core import Table, resolve_device, time_variants


def modern(
    vocab_size: int = 1000,
    d_model: int = 256,
    n_layers: int = 4,
    n_heads: int = 8,
    n_kv_heads: int = 2,
    batch: int = 4,
    length: int = 128,
    new_tokens: int = 64,
    repeats: int = 5,
    device=None,
) -> Table:
    """Forward and cached greedy generation of `ModernDecoder` vs `LlamaForCausalLM` with the same weights, and
    the KV cache's bytes per token at n_kv_heads = n_heads, n_kv_heads and 1."""
    from transformers.utils import logging

    logging.set_verbosity_error()  # a random config has no generation settings: transformers would say so
    device = resolve_device(device)
    config = ModernConfig(
        vocab_size=vocab_size, d_model=d_model, n_layers=n_layers, n_heads=n_heads, n_kv_heads=n_kv_heads,
        max_len=max(length, 8 + new_tokens), rope_theta=10000.0,
    )  # fmt: skip
    with torch.random.fork_rng(devices=[]):  # a fixed model, leaving the caller's random state alone
        torch.manual_seed(0)
        ours = ModernDecoder(config).to(device).eval()
        ids = torch.randint(vocab_size, (batch, length), device=device)
        prompt = ids[:1, :8]
    theirs: Any = to_hf(ours)  # a LlamaForCausalLM
    table = Table(
        "modern",
        "Llama-style decoder: the package vs Hugging Face transformers (same weights)",
        ["measure", "kv_heads", "ours_ms", "hf_ms", "speed_ratio", "max_abs_diff", "identical", "bytes_per_token"],
    )
    outputs: dict[str, torch.Tensor] = {}
    mask = torch.ones_like(prompt)

    @torch.no_grad()
    def run(name: str) -> None:
        if name == "ours_forward":
            outputs[name] = ours(ids)
        elif name == "hf_forward":
            outputs[name] = theirs(ids).logits
        elif name == "ours_generate":
            # tc.generate's annotation names GPT; any model with new_cache(), vocab_size and max_len is accepted.
            outputs[name] = tc_generate(ours, prompt, new_tokens, 0.0)  # type: ignore[arg-type]
        else:
            outputs[name] = theirs.generate(
                prompt, attention_mask=mask, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False
            )

    variants: dict[str, Callable[[], object]] = {
        name: functools.partial(run, name) for name in ("ours_forward", "hf_forward")
    }
    times = time_variants(variants, repeats, 1, device)
    ours_ms, hf_ms = (statistics.median(times[name]) * 1e3 for name in ("ours_forward", "hf_forward"))
    gap = (outputs["ours_forward"] - outputs["hf_forward"]).abs().max().item()
    table.rows.append(
        dict(measure=f"forward, batch {batch} x {length} tokens", kv_heads=n_kv_heads, ours_ms=ours_ms, hf_ms=hf_ms,
             speed_ratio=hf_ms / ours_ms, max_abs_diff=gap, identical=None, bytes_per_token=None)
    )  # fmt: skip
    variants = {name: functools.partial(run, name) for name in ("ours_generate", "hf_generate")}
    times = time_variants(variants, repeats, 1, device)
    ours_ms, hf_ms = (statistics.median(times[name]) * 1e3 for name in ("ours_generate", "hf_generate"))
    same = torch.equal(outputs["ours_generate"], outputs["hf_generate"])
    table.rows.append(
        dict(measure=f"greedy generation, {new_tokens} new tokens, cached", kv_heads=n_kv_heads, ours_ms=ours_ms,
             hf_ms=hf_ms, speed_ratio=hf_ms / ours_ms, max_abs_diff=None, identical=same, bytes_per_token=None)
    )  # fmt: skip
    for kv_heads, name in ((n_heads, "MHA"), (n_kv_heads, "GQA"), (1, "MQA")):
        with torch.random.fork_rng(devices=[]):
            sized = ModernDecoder(dataclasses.replace(config, n_kv_heads=kv_heads)).to(device).eval()
        cache = sized.new_cache()
        with torch.no_grad():
            sized(prompt, cache)
        table.rows.append(
            dict(measure=f"KV cache, {name}", kv_heads=kv_heads, ours_ms=None, hf_ms=None, speed_ratio=None,
                 max_abs_diff=None, identical=None, bytes_per_token=cache_bytes_per_token(cache))
        )  # fmt: skip
    table.notes += [
        f"model: ModernDecoder(vocab {vocab_size}, d_model {d_model}, {n_layers} layers, {n_heads} query heads, "
        f"{n_kv_heads} KV heads, SwiGLU width {config.d_ff}), {count_parameters(ours):,} parameters, untrained, "
        f"float32 on {device.type}; the same weights in LlamaForCausalLM (sdpa attention).",
        "speed_ratio = hf_ms / ours_ms (above 1: the package is faster); generation from an 8-token prompt, batch 1.",
        f"median of {repeats} interleaved runs after one warm-up run each.",
        "bytes_per_token: keys and values of every layer, per cached position, measured on the cache "
        f"(2 x {n_layers} layers x H_kv x {config.head_dim} features x 4 bytes).",
    ]
    return table
