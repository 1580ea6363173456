"""`torch.compile` against eager PyTorch (run only when named: compiling takes minutes)."""

from __future__ import annotations

import functools
import time

import torch

from ...attention import scaled_dot_product_attention
from ...masks import causal_mask
from ...model import Transformer
from ...training import cross_entropy_loss
from ._core import Table, median_ms, resolve_device, synchronize, time_variants


def compiled(
    length: int = 256,
    batch: int = 4,
    n_heads: int = 8,
    d_k: int = 32,
    repeats: int = 5,
    warmup: int = 2,
    device=None,
) -> Table:
    """`torch.compile` against eager PyTorch on two workloads: the teaching-path attention (forward, no
    grad, causal mask) and one training step (forward, backward, Adam) of a small Transformer.

    Not in the default run: compiling takes from seconds to minutes. compile_s is the first call, which
    traces the code and compiles it (with a C++ compiler on the CPU); it is shorter when an earlier run
    left compiled code in the on-disk cache (TORCHINDUCTOR_CACHE_DIR). Where compiling fails, the row
    keeps the eager time and the error instead of raising: the benchmark runs without a compiler too.
    """
    device = resolve_device(device)
    table = Table(
        "compile",
        "torch.compile vs eager PyTorch, ms",
        ["workload", "compile_s", "eager_ms", "compiled_ms", "speedup", "max_abs_diff", "error"],
    )
    q, k, v = (torch.randn(batch, n_heads, length, d_k, device=device) for _ in range(3))
    mask = causal_mask(length, device=device)

    def attend():
        with torch.no_grad():
            return scaled_dot_product_attention(q, k, v, mask)[0]

    table.rows.append(_measure_compiled("attention", attend, lambda: torch.compile(attend), repeats, warmup, device))
    eager_step = _training_step(False, batch, device)
    compiled_step = functools.partial(_training_step, True, batch, device)
    table.rows.append(_measure_compiled("training step", eager_step, compiled_step, repeats, warmup, device))
    table.notes += [
        f"attention: tc.scaled_dot_product_attention, q, k, v (batch {batch}, heads {n_heads}, length {length}, "
        f"d_k {d_k}), causal mask, no grad, float32 on {device.type}.",
        f"training step: Transformer(vocab 100, d_model 64, 4 heads, 2+2 layers, d_ff 256), batch {8 * batch}, "
        "source 20 and target 20 tokens, Adam; the model is compiled, the optimizer is not.",
        "compile_s: the first call (tracing and compiling); speedup = eager / compiled; max_abs_diff: the "
        "attention outputs, or the first step's losses (same weights, same batch).",
        f"median of {repeats} interleaved runs after {warmup} warm-up runs each.",
    ]
    return table


def _training_step(compile_model: bool, batch: int, device):
    """A function doing one Adam step of a fixed small Transformer on a fixed batch; it returns the loss."""
    with torch.random.fork_rng(devices=[]):  # the same weights and batch every time; the caller's state kept
        torch.manual_seed(0)
        model = Transformer(100, 100, d_model=64, n_heads=4, n_layers=2, d_ff=256, dropout=0.0).to(device)
        src, tgt = torch.randint(3, 100, (8 * batch, 20)).to(device), torch.randint(3, 100, (8 * batch, 21)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    loss_fn = cross_entropy_loss(pad_id=0)
    forward = torch.compile(model) if compile_model else model

    def step():
        loss = loss_fn(forward(src, tgt[:, :-1]), tgt[:, 1:])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.detach()

    return step


def _measure_compiled(name: str, eager, make_compiled, repeats: int, warmup: int, device) -> dict:
    """One row of `compiled`: eager() and make_compiled()() compute the same thing; the first call compiles."""
    reference = eager()
    start = time.perf_counter()
    try:
        fn = make_compiled()
        result = fn()
        synchronize(device)
    except Exception as error:  # no C++ compiler, an unsupported platform, ...: report it, do not stop
        eager_ms = median_ms(time_variants({"eager": eager}, repeats, warmup, device)["eager"])
        message = f"{type(error).__name__}: {(str(error).strip().splitlines() or [''])[0][:100]}"
        return dict(workload=name, compile_s=None, eager_ms=eager_ms, compiled_ms=None, speedup=None,
                    max_abs_diff=None, error=message)  # fmt: skip
    compile_s = time.perf_counter() - start
    ms = {n: median_ms(t) for n, t in time_variants({"eager": eager, "compiled": fn}, repeats, warmup, device).items()}
    return dict(workload=name, compile_s=compile_s, eager_ms=ms["eager"], compiled_ms=ms["compiled"],
                speedup=ms["eager"] / ms["compiled"], max_abs_diff=float((result - reference).abs().max()),
                error=None)  # fmt: skip
