"""Attention sections: the teaching path against the fused kernel (time and memory), and the package's
multi-head attention against `torch.nn.MultiheadAttention`."""

from __future__ import annotations

import functools
import statistics
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ...attention import scaled_dot_product_attention
from ...masks import causal_mask
from ...multihead import MultiHeadAttention
from ._core import MiB, Table, median_ms, peak_memory, resolve_device, time_variants, use_fused


def attention(
    lengths: Sequence[int] = (64, 256, 1024),
    batch: int = 4,
    n_heads: int = 8,
    d_k: int = 32,
    repeats: int = 5,
    warmup: int = 2,
    device=None,
) -> Table:
    """The teaching path (matmul, mask, softmax, matmul) against `F.scaled_dot_product_attention`.

    Both get the same causal bool mask; a third variant gives the fused kernel `is_causal=True`
    instead, which lets it skip the blocks above the diagonal. Forward runs under no_grad;
    forward+backward computes the gradients of q, k and v.
    """
    device = resolve_device(device)
    table = Table(
        "attention",
        "Attention: naive (tc.scaled_dot_product_attention) vs fused (F.scaled_dot_product_attention), ms",
        ["length", "mode", "naive_ms", "sdpa_ms", "sdpa_is_causal_ms", "speedup", "max_abs_diff"],
    )
    for length in lengths:
        q, k, v = (torch.randn(batch, n_heads, length, d_k, device=device) for _ in range(3))
        forward, backward, diff = _time_attention(q, k, v, repeats, warmup, device)
        for name, times, max_diff in (("forward", forward, diff), ("forward+backward", backward, None)):
            ms = {n: median_ms(t) for n, t in times.items()}
            table.rows.append(
                dict(length=length, mode=name, naive_ms=ms["naive"], sdpa_ms=ms["sdpa"],
                     sdpa_is_causal_ms=ms["sdpa_is_causal"], speedup=ms["naive"] / ms["sdpa"], max_abs_diff=max_diff)
            )  # fmt: skip
    table.notes += [
        f"q, k, v: (batch {batch}, heads {n_heads}, length, d_k {d_k}) float32 on {device.type}; causal bool mask.",
        "speedup = naive / sdpa (same mask); max_abs_diff: largest difference of the three outputs.",
        f"median of {repeats} interleaved runs after {warmup} warm-up runs each.",
    ]
    return table


def _time_attention(q, k, v, repeats, warmup, device):
    """Forward and forward+backward times of the three attention variants, and their outputs' largest gap."""
    length = q.shape[-2]
    mask = causal_mask(length, device=q.device)
    fns = {
        "naive": lambda q, k, v: scaled_dot_product_attention(q, k, v, mask)[0],
        "sdpa": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
        "sdpa_is_causal": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
    }
    with torch.no_grad():
        outs = [fn(q, k, v) for fn in fns.values()]
        diff = max(float((o - outs[0]).abs().max()) for o in outs[1:])
        forward = time_variants({n: (lambda f=f: f(q, k, v)) for n, f in fns.items()}, repeats, warmup, device)
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    grad = torch.randn_like(q)
    backward = time_variants(
        {n: (lambda f=f: torch.autograd.grad(f(*leaves), leaves, grad)) for n, f in fns.items()},
        repeats,
        warmup,
        device,
    )
    return forward, backward, diff


def multihead(
    batch: int = 16,
    length: int = 128,
    d_model: int = 256,
    n_heads: int = 8,
    repeats: int = 7,
    warmup: int = 2,
    device=None,
) -> Table:
    """`tc.MultiHeadAttention` (fused fast path, and the teaching path) against `torch.nn.MultiheadAttention`.

    Self-attention (query = key = value = x) with the same weights, no mask. Forward: eval mode under
    no_grad, where torch's module takes its own fused inference path. Forward+backward: train mode
    (dropout 0), gradients of x and of every parameter.
    """
    device = resolve_device(device)
    torch_mha = nn.MultiheadAttention(d_model, n_heads, batch_first=True).to(device)
    ours = use_fused(MultiHeadAttention.from_torch(torch_mha))
    ours_weights = MultiHeadAttention.from_torch(torch_mha)
    modules = {"torch": torch_mha, "ours": ours, "ours_weights": ours_weights}
    calls = {
        "torch": lambda x: torch_mha(x, x, x, need_weights=False)[0],
        "ours": lambda x: ours(x, x, x),
        "ours_weights": lambda x: ours_weights(x, x, x),
    }
    x = torch.randn(batch, length, d_model, device=device)
    grad = torch.randn_like(x)
    table = Table(
        "multihead",
        "MultiHeadAttention: tc.MultiHeadAttention vs torch.nn.MultiheadAttention, ms",
        ["mode", "torch_ms", "ours_ms", "ours_weights_ms", "ratio", "ratio_weights", "max_abs_diff"],
    )
    for m in modules.values():
        m.eval()
    with torch.no_grad():
        outs = [call(x) for call in calls.values()]
        diff = max(float((o - outs[0]).abs().max()) for o in outs[1:])
        forward = time_variants({n: functools.partial(c, x) for n, c in calls.items()}, repeats, warmup, device)
    for m in modules.values():
        m.train()
    x_leaf = x.clone().requires_grad_()
    backward = time_variants(
        {n: functools.partial(_gradients, c, [x_leaf, *modules[n].parameters()], grad) for n, c in calls.items()},
        repeats,
        warmup,
        device,
    )
    for name, times, max_diff in (("forward", forward, diff), ("forward+backward", backward, None)):
        ms = {n: median_ms(t) for n, t in times.items()}
        table.rows.append(
            dict(mode=name, torch_ms=ms["torch"], ours_ms=ms["ours"], ours_weights_ms=ms["ours_weights"],
                 ratio=ms["ours"] / ms["torch"], ratio_weights=ms["ours_weights"] / ms["torch"], max_abs_diff=max_diff)
        )  # fmt: skip
    table.notes += [
        f"x: (batch {batch}, length {length}, d_model {d_model}), {n_heads} heads, float32 on {device.type}; "
        "self-attention, no mask, same weights (from_torch).",
        "torch: nn.MultiheadAttention(batch_first=True) called with need_weights=False.",
        "ours: the fused-kernel switch on (F.scaled_dot_product_attention); ours_weights: the teaching path.",
        "ratio = ours / torch (below 1: ours is faster); ratio_weights = ours_weights / torch.",
        f"median of {repeats} interleaved runs after {warmup} warm-up runs each.",
    ]
    return table


def _gradients(call, inputs: list[torch.Tensor], grad: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The gradients of every tensor of `inputs` (x first) for call(x) against `grad`: one backward pass."""
    return torch.autograd.grad(call(inputs[0]), inputs, grad)


def memory(
    lengths: Sequence[int] = (256, 512, 1024, 2048),
    batch: int = 1,
    n_heads: int = 8,
    d_k: int = 32,
    repeats: int = 3,
    device=None,
) -> Table:
    """Peak memory of one attention forward pass, naive against fused, as the length doubles.

    The naive path materialises the (T × T) score and weight matrices of every head, so its memory
    grows 4× per doubling; the fused kernel works block by block and grows like its inputs (2×).
    """
    device = resolve_device(device)
    table = Table(
        "memory",
        "Peak memory of attention (forward, no grad), MiB",
        ["length", "scores_mib", "naive_mib", "sdpa_mib", "naive_over_sdpa"],
    )
    for length in lengths:
        q, k, v = (torch.randn(batch, n_heads, length, d_k, device=device) for _ in range(3))
        fns = {
            "naive": lambda q=q, k=k, v=v: scaled_dot_product_attention(q, k, v)[0],
            "sdpa": lambda q=q, k=k, v=v: F.scaled_dot_product_attention(q, k, v),
        }
        peaks = {}
        with torch.no_grad():
            for name, fn in fns.items():
                fn()  # warm-up: load the kernel's code and one-off buffers before measuring
                values = [peak_memory(fn, device) for _ in range(repeats)]
                measured = [v for v in values if v is not None]
                peaks[name] = statistics.median(measured) / MiB if len(measured) == len(values) else None
        naive, sdpa = peaks["naive"], peaks["sdpa"]
        table.rows.append(
            dict(length=length, scores_mib=batch * n_heads * length**2 * 4 / MiB, naive_mib=naive, sdpa_mib=sdpa,
                 naive_over_sdpa=None if naive is None or not sdpa else naive / sdpa)
        )  # fmt: skip
    method = (
        "torch.cuda.max_memory_allocated above the level before the call"
        if device.type == "cuda"
        else "growth of the peak resident set size (Linux VmHWM, reset before each call; '-' elsewhere)"
    )
    table.notes += [
        f"q, k, v: (batch {batch}, heads {n_heads}, length, d_k {d_k}) float32 on {device.type}, no mask.",
        "scores_mib: the size of one (batch, heads, T, T) float32 score matrix, B*H*T^2*4 bytes.",
        f"naive_mib, sdpa_mib: {method}; median of {repeats}. The output (B, H, T, d_k) is included in both.",
    ]
    return table
