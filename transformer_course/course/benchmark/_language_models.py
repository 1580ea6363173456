"""The language-model sections (chapter 14): GPT trained towards the known floor; sampling with and without the cache.

* `gpt_training`: the chapter's GPT trained on the grammar's language (`grammar.Language.english()`), its
  whole-language loss (every sentence of the language once) measured against the floor log N / tokens per
  sentence; reports the training throughput (predicted tokens per second), the seconds until the loss first comes within
  0.05 nats per token of the floor, and the loss at the end of the schedule.
* `gpt_sampling`: `generate` with the KV cache against recomputing the whole sequence at every step.

Training seconds count the optimizer steps only: the periodic evaluations over the whole language are timed
apart and left out.
"""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable, Sequence

import torch

from ...gpt import GPT, evaluate_lm, generate, train_lm
from ...grammar import Language
from ...model import count_parameters
from ._core import Table, resolve_device, time_variants

# The model of chapter 14, section "Training to the floor".
CHAPTER_GPT = dict(d_model=64, n_heads=4, n_layers=2, d_ff=256, max_len=16, dropout=0.0)
WITHIN = 0.05  # nats per token: the target distance to the floor


def gpt_training(
    steps: int = 3000,
    batch_size: int = 64,
    lr: float = 3e-3,
    eval_every: int = 100,
    seeds: int = 3,
    device=None,
) -> Table:
    """Train the chapter's GPT for `steps` steps (warm-up, cosine decay) for seeds 0..seeds-1, evaluating every
    `eval_every` steps over every sentence of the language; one row per seed."""
    device = resolve_device(device)
    language = Language.english()
    every_sentence = language.encode_lm(language.sentences).to(device)
    table = Table(
        "gpt_training",
        f"GPT trained on the grammar's language: distance to the floor ({language.floor:.4f} nats/token)",
        ["seed", "parameters", "steps", "train_s", "tokens_per_s", "s_to_within_0.05", "whole_language_loss", "gap"],
    )
    for seed in range(seeds):
        row, curve = _train_to_floor(language, every_sentence, seed, steps, batch_size, lr, eval_every, device)
        table.rows.append(row)
        table.curves[seed] = curve
    reached = [s for s in table.column("s_to_within_0.05") if s is not None]
    table.notes += [
        f"language: {len(language)} sentences, floor = log N / {language.tokens_per_sentence:.3f} tokens per "
        f"sentence = {language.floor:.4f} nats per predicted token; whole_language_loss is the mean over every "
        "sentence once (each is also a training sentence: not a validation loss).",
        f"model: GPT(d_model {CHAPTER_GPT['d_model']}, {CHAPTER_GPT['n_heads']} heads, {CHAPTER_GPT['n_layers']} "
        f"layers, d_ff {CHAPTER_GPT['d_ff']}, dropout 0), AdamW lr {lr} (50 warm-up steps, cosine decay), "
        f"batches of {batch_size} fresh sentences; float32 on {device.type}.",
        "train_s and tokens_per_s: optimizer steps only (predicted tokens, padding excluded); evaluations excluded.",
        f"within {WITHIN} of the floor: {len(reached)} of {seeds} seeds"
        + (f", median {statistics.median(reached):.1f} s" if reached else ""),
    ]
    return table


def _train_to_floor(language, every_sentence, seed, steps, batch_size, lr, eval_every, device):
    torch.manual_seed(seed)
    model = GPT(len(language.vocab), **CHAPTER_GPT).to(device)
    generator = torch.Generator().manual_seed(seed + 1)
    predicted = [0]  # tokens predicted in training (targets that are not padding)
    eval_seconds = [0.0]
    curve: list[tuple[float, float]] = []  # (training seconds so far, whole-language loss)
    start = time.perf_counter()

    def batches() -> torch.Tensor:
        ids = language.encode_lm(language.sample(batch_size, generator))
        predicted[0] += int((ids[:, 1:] != language.vocab.pad_id).sum())
        return ids

    def evaluate() -> float:
        begin = time.perf_counter()
        trained = begin - start - eval_seconds[0]
        loss = evaluate_lm(model, every_sentence, language.vocab.pad_id)
        eval_seconds[0] += time.perf_counter() - begin
        curve.append((trained, loss))
        return loss

    history = train_lm(model, batches, steps, language.vocab.pad_id, lr=lr, evaluate=evaluate, eval_every=eval_every)
    train_seconds = history.seconds - eval_seconds[0]
    points = [(step, seconds, loss) for (step, _), (seconds, loss) in zip(history.evals, curve)]
    first = next((seconds for _, seconds, loss in points if loss - language.floor <= WITHIN), None)
    final = history.evals[-1][1]
    row = {
        "seed": seed, "parameters": count_parameters(model), "steps": history.steps, "train_s": train_seconds,
        "tokens_per_s": predicted[0] / train_seconds, "s_to_within_0.05": first, "whole_language_loss": final,
        "gap": final - language.floor,
    }  # fmt: skip
    return row, {"steps": [p[0] for p in points], "seconds": [p[1] for p in points], "loss": [p[2] for p in points],
                 "floor": language.floor}  # fmt: skip


def gpt_sampling(
    batch_sizes: Sequence[int] = (1, 8),
    new_tokens: Sequence[int] = (32, 128),
    vocab_size: int = 1000,
    d_model: int = 256,
    n_heads: int = 4,
    n_layers: int = 4,
    d_ff: int = 1024,
    repeats: int = 3,
    device=None,
) -> Table:
    """`generate` (temperature 1, seeded) with and without the KV cache, from a one-token prompt; `identical` says
    whether both produced exactly the same tokens (they must)."""
    device = resolve_device(device)
    max_len = 1 + max(new_tokens)
    with torch.random.fork_rng(devices=[]):  # a fixed model, leaving the caller's random state alone
        torch.manual_seed(0)
        model = GPT(vocab_size, d_model, n_heads, n_layers, d_ff, max_len=max_len, dropout=0.0)
    model = model.to(device).eval()
    table = Table(
        "gpt_sampling",
        "Sampling from a GPT: KV cache vs recomputing the sequence",
        ["batch", "new_tokens", "cached_s", "uncached_s", "cached_tok_per_s", "uncached_tok_per_s", "speedup",
         "identical"],
    )  # fmt: skip
    for batch in batch_sizes:
        prompt = torch.zeros(batch, 1, dtype=torch.long, device=device)
        outputs: dict[bool, torch.Tensor] = {}

        def run(use_cache: bool, n: int, prompt=prompt, outputs=outputs) -> None:
            generator = torch.Generator(device=device).manual_seed(0)
            outputs[use_cache] = generate(model, prompt, n, use_cache=use_cache, generator=generator)

        for use_cache in (True, False):  # warm-up on a short generation
            run(use_cache, 8)
        for n in new_tokens:
            variants: dict[str, Callable[[], object]] = {
                "cached": functools.partial(run, True, n),
                "uncached": functools.partial(run, False, n),
            }
            times = time_variants(variants, repeats, 0, device)
            cached, uncached = statistics.median(times["cached"]), statistics.median(times["uncached"])
            same = outputs[True].shape == (batch, n + 1) and torch.equal(outputs[True], outputs[False])
            table.rows.append(
                dict(batch=batch, new_tokens=n, cached_s=cached, uncached_s=uncached,
                     cached_tok_per_s=batch * n / cached, uncached_tok_per_s=batch * n / uncached,
                     speedup=uncached / cached, identical=same)
            )  # fmt: skip
    table.notes += [
        f"model: GPT(vocab {vocab_size}, d_model {d_model}, {n_heads} heads, {n_layers} layers, d_ff {d_ff}), "
        f"{count_parameters(model):,} parameters, untrained, float32 on {device.type}; prompt: one token.",
        "tok_per_s = batch x new_tokens / seconds; speedup = uncached / cached time; temperature 1, seeded.",
        f"median of {repeats} interleaved runs after a short warm-up.",
    ]
    return table


def plot_gpt_training(fig, table: Table) -> None:
    loss_ax, gap_ax = fig.subplots(1, 2)
    floor = None
    for seed, curve in table.curves.items():
        floor = curve["floor"]
        loss_ax.plot(curve["seconds"], curve["loss"], marker=".", label=f"seed {seed}")
        gap_ax.plot(curve["seconds"], [loss - floor for loss in curve["loss"]], marker=".", label=f"seed {seed}")
    if floor is not None:
        loss_ax.axhline(floor, color="k", ls="--", lw=1, label="floor")
    gap_ax.axhline(WITHIN, color="gray", ls=":", lw=1, label=f"floor + {WITHIN}")
    loss_ax.set(xlabel="training seconds", ylabel="whole-language loss (nats/token)", title="loss over the language")
    gap_ax.set(xlabel="training seconds", ylabel="loss - floor", yscale="log", title="distance to the floor")
    for ax in (loss_ax, gap_ax):
        ax.legend(fontsize="small")


def plot_gpt_sampling(fig, table: Table) -> None:
    from ._figures import _paired_bars

    ax = fig.subplots()
    _paired_bars(
        ax,
        [f"batch {r['batch']}, {r['new_tokens']} tokens" for r in table.rows],
        ("recompute the sequence", table.column("uncached_tok_per_s")),
        ("KV cache", table.column("cached_tok_per_s")),
        [f"{s:.1f}x" for s in table.column("speedup")],
    )
    ax.set(yscale="log", ylabel="tokens per second", title="Sampling from a GPT (label: speedup of the cache)")
