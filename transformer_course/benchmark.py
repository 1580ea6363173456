"""How fast is the package? Timings and memory, measured side by side (the "Making attention fast" appendix).

    python -m transformer_course.benchmark                        # every section: 1-2 minutes on 2 idle cores
    python -m transformer_course.benchmark --quick                # small sizes, a smoke test (about 10 s)
    python -m transformer_course.benchmark --only decoding copy   # some sections only
    python -m transformer_course.benchmark --figures figures      # also save one PNG per section
    python -m transformer_course.benchmark --only compile         # torch.compile vs eager: never run by default

Sections: `attention` (the teaching path against the fused kernel), `multihead` (the package's module
against `torch.nn.MultiheadAttention`), `decoding` (greedy decoding with and without the KV cache),
`memory` (peak memory as the length doubles) and `copy` (The Annotated Transformer's copy task,
trained until it is solved); `compile` (torch.compile against eager mode) runs only when named,
because compiling takes minutes. Each is a function that returns a `Table`, rows of plain numbers with
the shapes and the method in its notes, which `main` prints and the appendix notebook plots.

How the timings are taken: all variants of a comparison run in one process, interleaved (A B A B ...,
the order rotated every round), so a burst of background load hits them alike; each variant first
runs `warmup` times untimed, then the median of `repeats` timed runs is reported. Torch uses one
thread per core; on a busy machine, threads wait for each other and small operations slow down
many times over, so compare numbers measured under the same load only (the load is printed).
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import functools
import inspect
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from .attention import scaled_dot_product_attention
from .data import Batch
from .decoding import greedy_decode
from .masks import causal_mask
from .model import Transformer, count_parameters
from .multihead import MultiHeadAttention
from .training import cross_entropy_loss, fit, get_device, noam_scheduler, set_threads

SECTIONS = ("attention", "multihead", "decoding", "memory", "copy")
OPTIONAL_SECTIONS = ("compile",)  # run only when named with --only: compiling takes minutes
MiB = 2**20


@dataclass
class Table:
    """One section's measurements: `rows` of numbers keyed by `columns`, and notes (shapes, method).

    `curves` holds what does not fit in a row, e.g. the copy task's loss at every step.
    """

    section: str
    title: str
    columns: list[str]
    rows: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    curves: dict = field(default_factory=dict)

    def column(self, name: str, **where) -> list:
        """The values of column `name` in the rows whose other columns match `where`, e.g. mode="forward"."""
        if name not in self.columns:
            raise ValueError(f"column {name!r} is not one of {self.columns}")
        return [row[name] for row in self.rows if all(row[k] == v for k, v in where.items())]

    def format(self) -> str:
        """The table as aligned text, then its notes."""
        cells = [[_format_cell(row[c]) for c in self.columns] for row in self.rows]
        widths = [max(len(c), *(len(r[i]) for r in cells)) if cells else len(c) for i, c in enumerate(self.columns)]
        line = "  ".join("-" * w for w in widths)
        lines = [self.title, line, "  ".join(c.rjust(w) for c, w in zip(self.columns, widths)), line]
        lines += ["  ".join(v.rjust(w) for v, w in zip(r, widths)) for r in cells]
        lines += [line, *(f"  {note}" for note in self.notes)]
        return "\n".join(lines)


def _format_cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"
    return str(value)


# ----------------------------------------------------------------------------------------- timing


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_variants(
    variants: dict[str, Callable[[], object]],
    repeats: int = 5,
    warmup: int = 2,
    device: torch.device | str = "cpu",
) -> dict[str, list[float]]:
    """Seconds taken by each call of each variant: `warmup` untimed calls each, then `repeats` rounds
    in which every variant runs once, in an order rotated from round to round."""
    if repeats < 1 or warmup < 0:
        raise ValueError(f"repeats={repeats} must be >= 1 and warmup={warmup} >= 0")
    device = torch.device(device)
    for fn in variants.values():
        for _ in range(warmup):
            fn()
    names = list(variants)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(repeats):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            _synchronize(device)
            start = time.perf_counter()
            variants[name]()
            _synchronize(device)
            times[name].append(time.perf_counter() - start)
    return times


def _median_ms(times: list[float]) -> float:
    return statistics.median(times) * 1e3


def _resolve_device(device) -> torch.device:
    return get_device() if device is None else torch.device(device)


# ---------------------------------------------------------------------------------------- sections


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
    device = _resolve_device(device)
    table = Table(
        "attention",
        "Attention: naive (tc.scaled_dot_product_attention) vs fused (F.scaled_dot_product_attention), ms",
        ["length", "mode", "naive_ms", "sdpa_ms", "sdpa_is_causal_ms", "speedup", "max_abs_diff"],
    )
    for length in lengths:
        q, k, v = (torch.randn(batch, n_heads, length, d_k, device=device) for _ in range(3))
        forward, backward, diff = _time_attention(q, k, v, repeats, warmup, device)
        for name, times, max_diff in (("forward", forward, diff), ("forward+backward", backward, None)):
            ms = {n: _median_ms(t) for n, t in times.items()}
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
    device = _resolve_device(device)
    torch_mha = nn.MultiheadAttention(d_model, n_heads, batch_first=True).to(device)
    ours = MultiHeadAttention.from_torch(torch_mha)
    ours_weights = MultiHeadAttention.from_torch(torch_mha)
    ours.need_weights, ours_weights.need_weights = False, True
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
        forward = time_variants({n: (lambda c=c: c(x)) for n, c in calls.items()}, repeats, warmup, device)
    for m in modules.values():
        m.train()
    x_leaf = x.clone().requires_grad_()
    backward = time_variants(
        {
            n: (lambda c=c, m=modules[n]: torch.autograd.grad(c(x_leaf), [x_leaf, *m.parameters()], grad))
            for n, c in calls.items()
        },
        repeats,
        warmup,
        device,
    )
    for name, times, max_diff in (("forward", forward, diff), ("forward+backward", backward, None)):
        ms = {n: _median_ms(t) for n, t in times.items()}
        table.rows.append(
            dict(mode=name, torch_ms=ms["torch"], ours_ms=ms["ours"], ours_weights_ms=ms["ours_weights"],
                 ratio=ms["ours"] / ms["torch"], ratio_weights=ms["ours_weights"] / ms["torch"], max_abs_diff=max_diff)
        )  # fmt: skip
    table.notes += [
        f"x: (batch {batch}, length {length}, d_model {d_model}), {n_heads} heads, float32 on {device.type}; "
        "self-attention, no mask, same weights (from_torch).",
        "torch: nn.MultiheadAttention(batch_first=True) called with need_weights=False.",
        "ours: need_weights=False (F.scaled_dot_product_attention); ours_weights: need_weights=True (teaching path).",
        "ratio = ours / torch (below 1: ours is faster); ratio_weights = ours_weights / torch.",
        f"median of {repeats} interleaved runs after {warmup} warm-up runs each.",
    ]
    return table


def _forbid_token(model: Transformer, token: int):
    """Make `token` impossible to pick (its logit -inf), so every decode runs to max_len; returns the hook."""

    def hook(module, inputs, logits):
        return logits.index_fill(-1, torch.tensor([token], device=logits.device), float("-inf"))

    return model.generator.register_forward_hook(hook)


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
) -> Table:
    """Greedy decoding with the KV cache against recomputing the whole prefix at every step.

    `identical` says whether both produced exactly the same tokens (they must). The end token is
    forbidden so that every run generates exactly `new_tokens` tokens per sentence.
    """
    device = _resolve_device(device)
    with torch.random.fork_rng(devices=[]):  # a fixed model, leaving the caller's random state alone
        torch.manual_seed(0)
        model = Transformer(vocab_size, vocab_size, d_model, n_heads, n_layers, d_ff, dropout=0.0)
    model = model.to(device).eval()
    bos_id, eos_id = 1, 2
    hook = _forbid_token(model, eos_id)
    table = Table(
        "decoding",
        "Greedy decoding: KV cache vs recomputing the prefix",
        ["batch", "new_tokens", "cached_s", "uncached_s", "cached_tok_per_s", "uncached_tok_per_s", "speedup",
         "identical"],
    )  # fmt: skip
    try:
        for batch in batch_sizes:
            src = torch.randint(3, vocab_size, (batch, src_len), generator=torch.Generator().manual_seed(batch))
            src = src.to(device)
            outputs = {}

            def run(use_cache: bool, max_len: int, src=src, outputs=outputs):
                outputs[use_cache] = greedy_decode(model, src, max_len, bos_id, eos_id, use_cache=use_cache)

            for use_cache in (True, False):  # warm-up on a short generation: the long ones take seconds
                run(use_cache, 9)
            for n in new_tokens:
                times = time_variants(
                    {"cached": lambda n=n: run(True, n + 1), "uncached": lambda n=n: run(False, n + 1)},
                    repeats,
                    0,
                    device,
                )
                cached, uncached = statistics.median(times["cached"]), statistics.median(times["uncached"])
                same = outputs[True].shape == (batch, n + 1) and torch.equal(outputs[True], outputs[False])
                table.rows.append(
                    dict(batch=batch, new_tokens=n, cached_s=cached, uncached_s=uncached,
                         cached_tok_per_s=batch * n / cached, uncached_tok_per_s=batch * n / uncached,
                         speedup=uncached / cached, identical=same)
                )  # fmt: skip
    finally:
        hook.remove()
    table.notes += [
        f"model: Transformer(vocab {vocab_size}, d_model {d_model}, {n_heads} heads, {n_layers}+{n_layers} layers, "
        f"d_ff {d_ff}), {count_parameters(model):,} parameters, float32 on {device.type}; source length {src_len}.",
        "tok_per_s = batch x new_tokens / seconds; speedup = uncached / cached time.",
        "uncached: model.decode on the whole prefix at every step (all its logits, as decode returns them).",
        f"median of {repeats} interleaved runs after a short warm-up.",
    ]
    return table


def _read_status_kib(field_name: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    raise OSError(f"{field_name} not in /proc/self/status")


def peak_memory(fn: Callable[[], object], device: torch.device | str = "cpu") -> int | None:
    """Bytes by which memory use peaked above its level before `fn()` ran; None where it cannot be measured.

    CUDA: `torch.cuda.max_memory_allocated`. CPU: the growth of the process's peak resident set size
    (VmHWM, reset through /proc/self/clear_refs: Linux only), after returning freed heap memory to the
    system, so it counts every byte touched, tensors and library buffers alike.
    """
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        fn()
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) - before
    try:
        libc_name = ctypes.util.find_library("c")
        if libc_name and hasattr(ctypes.CDLL(libc_name), "malloc_trim"):
            ctypes.CDLL(libc_name).malloc_trim(0)  # glibc keeps freed memory otherwise, hiding new allocations
        before = _read_status_kib("VmRSS")
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM, the peak resident set size, to the current size
        fn()
        return (_read_status_kib("VmHWM") - before) * 1024
    except OSError:
        return None


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
    device = _resolve_device(device)
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
                peaks[name] = None if None in values else statistics.median(values) / MiB
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


class CopyTask:
    """The copy task of The Annotated Transformer: random sequences that the model must reproduce.

    Each sequence has `length` tokens: 1 (the start symbol) then tokens drawn from 1..vocab_size-1;
    source and target are the same sequence; 0 is padding and never occurs. Iterating yields
    `n_batches` fresh batches (a new "epoch" on every iteration), reproducible from `seed`.
    """

    def __init__(self, vocab_size: int = 11, length: int = 10, batch_size: int = 80, n_batches: int = 20,
                 seed: int = 0, device=None):  # fmt: skip
        self.vocab_size, self.length, self.batch_size, self.n_batches = vocab_size, length, batch_size, n_batches
        self.generator = torch.Generator().manual_seed(seed)
        self.device = device

    def sequences(self, n: int) -> torch.Tensor:
        """(n, length) token ids, starting with the start symbol 1."""
        data = torch.randint(1, self.vocab_size, (n, self.length), generator=self.generator)
        data[:, 0] = 1
        return data if self.device is None else data.to(self.device)

    def __iter__(self) -> Iterator[Batch]:
        for _ in range(self.n_batches):
            data = self.sequences(self.batch_size)
            yield Batch(src=data, tgt_in=data[:, :-1], tgt_out=data[:, 1:])


def copy_accuracy(model: Transformer, sequences: torch.Tensor) -> float:
    """The fraction of `sequences` (n, length) that greedy decoding copies exactly, every token right.

    Decoding starts from the start symbol 1. The task has no end token: 0 (padding, never a target)
    plays that role, so a correct copy never stops early.
    """
    out = greedy_decode(model, sequences, sequences.shape[1], bos_id=1, eos_id=0)
    if out.shape != sequences.shape:
        return 0.0
    return float((out == sequences).all(dim=1).float().mean())


COPY_CONFIGS = {
    # Copying needs one hop of attention (target position t looks up source position t + 1), so one
    # small layer each side and a short warm-up: solved in about 200-250 steps, seconds on a 2-core CPU.
    "small": dict(d_model=64, n_heads=4, n_layers=1, d_ff=256, dropout=0.0, warmup=100, lr_factor=1.0),
    # The Annotated Transformer's recipe: N=2, d_model 512, warm-up 400, Adam lr 0.5 × the schedule.
    "annotated": dict(d_model=512, n_heads=8, n_layers=2, d_ff=2048, dropout=0.1, warmup=400, lr_factor=0.5),
}


def copy_task(
    configs: Sequence[str] = ("small",),
    max_steps: int = 2000,
    eval_every: int = 5,
    n_test: int = 100,
    seed: int = 0,
    device=None,
) -> Table:
    """Train on the copy task (vocabulary 11, length 10) until greedy decoding copies all `n_test` held-out
    sequences exactly, with `tc.fit`, `tc.noam_scheduler` and `tc.greedy_decode`; report steps and seconds.

    configs: names from COPY_CONFIGS. The held-out sequences come from their own generator.
    """
    device = _resolve_device(device)
    unknown = [c for c in configs if c not in COPY_CONFIGS]
    if unknown:
        raise ValueError(f"configs {unknown} are not in {sorted(COPY_CONFIGS)}")
    table = Table(
        "copy",
        f"The copy task: trained until {n_test} held-out sequences are copied exactly",
        ["config", "parameters", "steps", "seconds", "accuracy", "solved"],
    )
    for name in configs:
        cfg = COPY_CONFIGS[name]
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            row, history = _train_copy(name, cfg, max_steps, eval_every, n_test, seed, device)
        table.rows.append(row)
        table.curves[name] = {"loss": history.losses, "accuracy": history.evals}
    for name in configs:
        cfg = COPY_CONFIGS[name]
        table.notes.append(
            f"{name}: d_model {cfg['d_model']}, {cfg['n_heads']} heads, N={cfg['n_layers']}, d_ff {cfg['d_ff']}, "
            f"dropout {cfg['dropout']}, Adam(0.9, 0.98, eps 1e-9), lr {cfg['lr_factor']} x noam(warm-up "
            f"{cfg['warmup']})."
        )
    table.notes += [
        f"batches of 80 random sequences, 20 per epoch; evaluated every {eval_every} steps by greedy decoding "
        f"of {n_test} held-out sequences; stops at 100 % or {max_steps} steps; seconds include the evaluations;",
        f"float32 on {device.type}.",
    ]
    return table


def _train_copy(name: str, cfg: dict, max_steps: int, eval_every: int, n_test: int, seed: int, device):
    """Train one config of COPY_CONFIGS until it is solved or max_steps; returns its row and its History."""
    torch.manual_seed(seed)
    task = CopyTask(seed=seed, device=device)
    held_out = CopyTask(seed=seed + 1, device=device).sequences(n_test)
    model = Transformer(
        task.vocab_size, task.vocab_size, cfg["d_model"], cfg["n_heads"], cfg["n_layers"], cfg["d_ff"],
        dropout=cfg["dropout"], pad_id=0,
    ).to(device)  # fmt: skip
    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    scheduler = noam_scheduler(optimizer, cfg["d_model"], cfg["warmup"], cfg["lr_factor"])
    history = fit(
        model, task, max_steps, optimizer, cross_entropy_loss(pad_id=0), scheduler,
        evaluate=functools.partial(copy_accuracy, model, held_out), eval_every=eval_every, target=1.0,
        progress=False,
    )  # fmt: skip
    accuracy = history.evals[-1][1]
    row = dict(config=name, parameters=count_parameters(model), steps=history.steps, seconds=history.seconds,
               accuracy=accuracy, solved=accuracy == 1.0)  # fmt: skip
    return row, history


# ----------------------------------------------------------------------------------------- compile


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
    device = _resolve_device(device)
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
        _synchronize(device)
    except Exception as error:  # no C++ compiler, an unsupported platform, ...: report it, do not stop
        eager_ms = _median_ms(time_variants({"eager": eager}, repeats, warmup, device)["eager"])
        message = f"{type(error).__name__}: {(str(error).strip().splitlines() or [''])[0][:100]}"
        return dict(workload=name, compile_s=None, eager_ms=eager_ms, compiled_ms=None, speedup=None,
                    max_abs_diff=None, error=message)  # fmt: skip
    compile_s = time.perf_counter() - start
    ms = {n: _median_ms(t) for n, t in time_variants({"eager": eager, "compiled": fn}, repeats, warmup, device).items()}
    return dict(workload=name, compile_s=compile_s, eager_ms=ms["eager"], compiled_ms=ms["compiled"],
                speedup=ms["eager"] / ms["compiled"], max_abs_diff=float((result - reference).abs().max()),
                error=None)  # fmt: skip


# ----------------------------------------------------------------------------------------- figures


def figure(table: Table):
    """A matplotlib Figure of one section's Table (matplotlib is imported here only, when asked for)."""
    from matplotlib.figure import Figure

    if table.section not in _PLOTS:
        raise ValueError(f"no figure for section {table.section!r}; sections with one: {sorted(_PLOTS)}")
    fig = Figure(figsize=(10, 3.6), layout="constrained")
    _PLOTS[table.section](fig, table)
    return fig


def _length_axis(ax, lengths: list[int]) -> None:
    """A log2 x axis labelled with the measured lengths only."""
    ax.set_xscale("log", base=2)
    ax.set_xticks(lengths, [str(n) for n in lengths])
    ax.set_xticks([], minor=True)
    ax.set_xlabel("sequence length T")


def _plot_attention(fig, table: Table) -> None:
    variants = (
        ("naive_ms", "naive: matmul, mask, softmax, matmul"),
        ("sdpa_ms", "F.scaled_dot_product_attention, mask"),
        ("sdpa_is_causal_ms", "F.scaled_dot_product_attention, is_causal"),
    )
    for ax, mode in zip(fig.subplots(1, 2), ("forward", "forward+backward")):
        lengths = table.column("length", mode=mode)
        for column, label in variants:
            ax.plot(lengths, table.column(column, mode=mode), marker="o", label=label)
        _length_axis(ax, lengths)
        ax.set(yscale="log", ylabel="ms (median)", title=mode)
    ax.legend(fontsize="small")


def _plot_multihead(fig, table: Table) -> None:
    ax = fig.subplots()
    modes = table.column("mode")
    variants = (("torch_ms", "nn.MultiheadAttention"), ("ours_ms", "tc, fused"), ("ours_weights_ms", "tc, weights"))
    width = 0.8 / len(variants)
    for i, (column, label) in enumerate(variants):
        x = [m + (i - 1) * width for m in range(len(modes))]
        bars = ax.bar(x, table.column(column), width, label=label)
        if column == "ours_ms":
            ax.bar_label(bars, [f"{r:.2f}x" for r in table.column("ratio")], fontsize="small")
    ax.set_xticks(range(len(modes)), modes)
    ax.set(ylabel="ms (median)", title="tc.MultiHeadAttention vs nn.MultiheadAttention (label: time ratio)")
    ax.legend(fontsize="small")


def _plot_decoding(fig, table: Table) -> None:
    ax = fig.subplots()
    _paired_bars(
        ax,
        [f"batch {r['batch']}, {r['new_tokens']} tokens" for r in table.rows],
        ("recompute the prefix", table.column("uncached_tok_per_s")),
        ("KV cache", table.column("cached_tok_per_s")),
        [f"{s:.1f}x" for s in table.column("speedup")],
    )
    ax.set(yscale="log", ylabel="tokens per second", title="Greedy decoding (label: speedup of the cache)")


def _plot_memory(fig, table: Table) -> None:
    ax = fig.subplots()
    lengths = table.column("length")
    ax.plot(lengths, table.column("scores_mib"), "k--", label="one score matrix, B·H·T²·4 bytes")
    for column, label in (("naive_mib", "naive (tc.scaled_dot_product_attention)"), ("sdpa_mib", "fused (SDPA)")):
        values = table.column(column)
        if None not in values:
            ax.plot(lengths, values, marker="o", label=label)
    _length_axis(ax, lengths)
    ax.set(yscale="log", ylabel="peak memory, MiB")
    ax.set_title("Attention memory as the length doubles: ×4 for the naive path")
    ax.legend(fontsize="small")


def _plot_copy(fig, table: Table) -> None:
    loss_ax, accuracy_ax = fig.subplots(1, 2)
    for name, curve in table.curves.items():
        loss_ax.plot(range(1, len(curve["loss"]) + 1), curve["loss"], label=name)
        steps, accuracy = zip(*curve["accuracy"])
        accuracy_ax.plot(steps, [100 * a for a in accuracy], marker=".", label=name)
    loss_ax.set(yscale="log", xlabel="step", ylabel="training loss", title="loss")
    accuracy_ax.set(xlabel="step", ylabel="% copied exactly", title="held-out sequences copied exactly")
    accuracy_ax.legend(fontsize="small")


def _plot_compile(fig, table: Table) -> None:
    ax = fig.subplots()
    _paired_bars(
        ax,
        table.column("workload"),
        ("eager", table.column("eager_ms")),
        ("torch.compile", [0.0 if ms is None else ms for ms in table.column("compiled_ms")]),
        ["failed" if s is None else f"{s:.2f}x" for s in table.column("speedup")],
    )
    ax.set(ylabel="ms (median)", title="torch.compile vs eager (label: speedup)")


def _paired_bars(ax, names: list[str], before: tuple, after: tuple, after_labels: list[str]) -> None:
    """Two bars per name, (legend, values) `before` on the left and `after` on the right, the latter labelled."""
    x = range(len(names))
    ax.bar([i - 0.2 for i in x], before[1], 0.4, label=before[0])
    bars = ax.bar([i + 0.2 for i in x], after[1], 0.4, label=after[0])
    ax.bar_label(bars, after_labels, fontsize="small")
    ax.set_xticks(list(x), names)
    ax.legend(fontsize="small")


_PLOTS = {
    "attention": _plot_attention,
    "multihead": _plot_multihead,
    "decoding": _plot_decoding,
    "memory": _plot_memory,
    "copy": _plot_copy,
    "compile": _plot_compile,
}


# ------------------------------------------------------------------------------------ command line

QUICK = {
    "attention": dict(lengths=(64, 256), batch=2, repeats=3, warmup=1),
    "multihead": dict(batch=4, length=64, repeats=3, warmup=1),
    "decoding": dict(batch_sizes=(1, 4), new_tokens=(16, 32), d_model=64, n_heads=4, d_ff=256, repeats=1),
    "memory": dict(lengths=(256, 512), repeats=1),
    "copy": dict(),
    "compile": dict(length=64, repeats=3, warmup=1),
}
FUNCTIONS = {
    "attention": attention,
    "multihead": multihead,
    "decoding": decoding,
    "memory": memory,
    "copy": copy_task,
    "compile": compiled,
}


def environment(device: torch.device) -> list[str]:
    """Lines describing where the numbers were measured: versions, processor, threads, load."""
    lines = [f"torch {torch.__version__}, Python {platform.python_version()}, {platform.system()} {platform.machine()}"]
    if device.type == "cuda":
        lines.append(f"device: {torch.cuda.get_device_name(device)}")
    else:
        lines.append(f"device: CPU {_cpu_name()}, {os.cpu_count()} logical cores")
    lines.append(f"torch threads: {torch.get_num_threads()}")
    if hasattr(os, "getloadavg"):
        lines.append("load average (1, 5, 15 min): " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))
    return lines


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "(unknown model)"


def run(sections: Sequence[str] = SECTIONS, quick: bool = False, device=None, **overrides) -> Iterator[Table]:
    """Run `sections` in order, yielding each Table as it is done; `overrides` go to every section that takes them."""
    for name in sections:
        if name not in FUNCTIONS:
            raise ValueError(f"section {name!r} is not one of {list(SECTIONS + OPTIONAL_SECTIONS)}")
    for name in sections:
        kwargs = dict(QUICK[name]) if quick else {}
        fn = FUNCTIONS[name]
        kwargs.update({k: v for k, v in overrides.items() if k in inspect.signature(fn).parameters})
        yield fn(device=device, **kwargs)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m transformer_course.benchmark",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="small sizes and few repeats: a smoke test")
    parser.add_argument("--only", nargs="+", choices=SECTIONS + OPTIONAL_SECTIONS, default=list(SECTIONS),
                        metavar="SECTION", help=f"sections to run, among {', '.join(SECTIONS + OPTIONAL_SECTIONS)} "
                        f"(default: all but {', '.join(OPTIONAL_SECTIONS)})")  # fmt: skip
    parser.add_argument("--repeats", type=int, help="timed runs per variant (default: per section)")
    parser.add_argument("--threads", type=int, help="CPU threads (default: one per core, never more)")
    parser.add_argument("--device", help="cpu or cuda (default: cuda when available)")
    parser.add_argument(
        "--copy-annotated", action="store_true", help="also train the copy task at The Annotated Transformer's size"
    )
    parser.add_argument("--figures", metavar="DIR", help="also save each section's figure as DIR/SECTION.png")
    args = parser.parse_args(argv)
    if args.repeats is not None and args.repeats < 1:
        parser.error("--repeats must be at least 1")
    set_threads(args.threads)
    device = _resolve_device(args.device)
    print("\n".join(environment(device)), flush=True)
    overrides = {} if args.repeats is None else {"repeats": args.repeats}
    if args.copy_annotated:
        overrides["configs"] = ("small", "annotated")
    start = time.perf_counter()
    if args.figures:
        os.makedirs(args.figures, exist_ok=True)
    for table in run(args.only, args.quick, device, **overrides):
        print("\n" + table.format(), flush=True)
        if args.figures:
            path = os.path.join(args.figures, f"{table.section}.png")
            figure(table).savefig(path, dpi=120)
            print(f"figure: {path}")
    print(f"\ntotal: {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
