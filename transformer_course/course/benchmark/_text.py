"""The real-text section (chapter 18): a GPT on the course's corpus in bits per byte, against gzip, bz2 and lzma.

* `text_lm`: the package's BPE tokenizer trained on the training split, then one GPT of a fixed size
  trained from scratch for each budget of CPU time (1, 2 and 5 minutes by default), each with its own
  warm-up and cosine schedule; its loss on the whole held-out split (non-overlapping blocks, `heldout_loss`)
  in bits per byte, beside what gzip, bz2 and lzma spend on the same held-out bytes, alone and with the
  training text as prior.

Budgets are CPU seconds of this process (`time.process_time`, all its threads together), so that a machine
shared with other work gives about the same number of steps; the wall-clock seconds are printed beside them. The
number of steps for a budget comes from the CPU time of a few timed steps of a throwaway model.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from ... import corpus
from ...bpe import BPETokenizer
from ...gpt import GPT, train_steps
from ...model import count_parameters
from ...textlm import bits_per_byte, compressed_bits_per_byte, get_batch, heldout_loss
from ._core import Table, resolve_device

# The model of the benchmark: small enough for thousands of steps in five minutes of one CPU thread.
BLOCK_SIZE = 64  # tokens per block: the model's max_len
TEXT_GPT: dict[str, Any] = dict(d_model=128, n_heads=4, n_layers=2, d_ff=512, max_len=BLOCK_SIZE, dropout=0.0)
METHODS = ("gzip", "bz2", "lzma")


def text_lm(
    minutes: Sequence[float] = (1, 2, 5),
    vocab_size: int = 1024,
    batch_size: int = 16,
    lr: float = 6e-3,
    train_chars: int | None = None,
    device=None,
) -> Table:
    """Train the fixed GPT for each budget of CPU minutes; one row per budget, then one per compressor and prior.

    train_chars keeps only the first characters of the training text (a smoke test); None keeps it all.
    """
    device = resolve_device(device)
    train_text, heldout_text = corpus.load_text("train"), corpus.load_text("heldout")
    if train_chars is not None:
        train_text, heldout_text = train_text[:train_chars], heldout_text[: train_chars // 4]
    train_bytes, heldout_bytes = train_text.encode("utf-8"), heldout_text.encode("utf-8")
    start = time.process_time()
    tokenizer = BPETokenizer.train(train_text, vocab_size)
    tokenizer_s = time.process_time() - start
    train_ids = torch.tensor(tokenizer.encode(train_text)).to(device)
    heldout_ids = torch.tensor(tokenizer.encode(heldout_text)).to(device)
    table = Table(
        "text_lm",
        "GPT on the course's corpus vs the standard library's compressors: bits per held-out byte (lower is better)",
        ["method", "train_text_as_prior", "cpu_min", "wall_min", "steps", "nats_per_token", "bits_per_byte"],
    )
    seconds_per_step = _cpu_seconds_per_step(len(tokenizer), train_ids, batch_size, device)
    for budget in minutes:
        row, curve = _train_for(budget, len(tokenizer), train_ids, heldout_ids, len(heldout_bytes), batch_size, lr,
                                seconds_per_step, device)  # fmt: skip
        table.rows.append(row)
        table.curves[budget] = curve
    for method in METHODS:
        for prior in (False, True):
            bpb = compressed_bits_per_byte(train_bytes, heldout_bytes, method, prior=prior)
            table.rows.append(dict(method=method, train_text_as_prior=prior, cpu_min=None, wall_min=None, steps=None,
                                   nats_per_token=None, bits_per_byte=bpb))  # fmt: skip
    table.notes += _notes(table, tokenizer, tokenizer_s, train_bytes, heldout_bytes, train_ids, heldout_ids,
                          batch_size, lr, device)  # fmt: skip
    return table


def _model(vocab_size: int, device) -> GPT:
    torch.manual_seed(0)
    return GPT(vocab_size, **TEXT_GPT).to(device)


def _step_loss(model: GPT, train_ids: torch.Tensor, batch_size: int, generator: torch.Generator):
    def step_loss() -> torch.Tensor:
        x, y = get_batch(train_ids, BLOCK_SIZE, batch_size, generator)  # (B, T) each
        return F.cross_entropy(model(x).flatten(0, 1), y.flatten())  # (B·T, V) against (B·T,)

    return step_loss


def _cpu_seconds_per_step(vocab_size: int, train_ids, batch_size: int, device) -> float:
    """CPU seconds of one training step, measured on a throwaway model after two untimed steps."""
    model = _model(vocab_size, device)
    step_loss = _step_loss(model, train_ids, batch_size, torch.Generator().manual_seed(0))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for i in range(12):
        if i == 2:
            start = time.process_time()
        optimizer.zero_grad()
        step_loss().backward()
        optimizer.step()
    return (time.process_time() - start) / 10


def _train_for(budget, vocab_size, train_ids, heldout_ids, n_bytes, batch_size, lr, seconds_per_step, device):
    model = _model(vocab_size, device)
    steps = max(1, int(60 * budget / seconds_per_step))
    step_loss = _step_loss(model, train_ids, batch_size, torch.Generator().manual_seed(1))
    cpu_start, wall_start = time.process_time(), time.perf_counter()
    history = train_steps(model, step_loss, steps, lr=lr, warmup=min(100, steps // 10 + 1), weight_decay=0.1)
    cpu_s, wall_s = time.process_time() - cpu_start, time.perf_counter() - wall_start
    loss, n_tokens = heldout_loss(model, heldout_ids, BLOCK_SIZE)
    row = dict(method=f"GPT, {budget:g} min", train_text_as_prior=True, cpu_min=cpu_s / 60, wall_min=wall_s / 60,
               steps=steps, nats_per_token=loss, bits_per_byte=bits_per_byte(loss, n_tokens, n_bytes))  # fmt: skip
    return row, history.losses


def _notes(table, tokenizer, tokenizer_s, train_bytes, heldout_bytes, train_ids, heldout_ids, batch_size, lr, device):
    models = [row for row in table.rows if row["method"].startswith("GPT")]
    best = {m: min(table.column("bits_per_byte", method=m)) for m in METHODS}
    notes = [
        f"corpus: {len(train_bytes):,} training bytes ({len(train_ids):,} tokens), {len(heldout_bytes):,} held-out "
        f"bytes ({len(heldout_ids):,} tokens); tokens per byte {len(heldout_ids) / len(heldout_bytes):.3f} "
        "on the held-out text.",
        f"tokenizer: the package's byte-level BPE, {len(tokenizer)} tokens, trained on the training split "
        f"({tokenizer_s:.0f} CPU s, not counted in the budgets).",
        f"model: GPT(d_model {TEXT_GPT['d_model']}, {TEXT_GPT['n_heads']} heads, {TEXT_GPT['n_layers']} layers, "
        f"d_ff {TEXT_GPT['d_ff']}, blocks of {TEXT_GPT['max_len']} tokens, dropout 0), "
        f"{count_parameters(_model(len(tokenizer), 'cpu')):,} parameters; AdamW lr {lr}, weight decay 0.1, warm-up "
        f"then cosine decay, {batch_size} random blocks per step; float32 on {device.type}, "
        f"{torch.get_num_threads()} thread(s).",
        "cpu_min: CPU time of the training steps (time.process_time, all threads); wall_min: the same steps on the "
        "clock (longer on a shared machine). Held-out loss: every held-out token once, non-overlapping blocks.",
        "compressors at their strongest settings (gzip 9, bz2 9, lzma preset 9 extreme); with the training text as "
        "prior: bits of compress(train + held-out) minus bits of compress(train), per held-out byte.",
    ]
    if models:
        last = models[-1]
        verdicts = ", ".join(f"{m} {'yes' if last['bits_per_byte'] < best[m] else 'no'} ({best[m]:.3f})"
                             for m in METHODS)  # fmt: skip
        notes.append(f"{last['method']} ({last['bits_per_byte']:.3f} bits per byte) beats the best of each "
                     f"compressor: {verdicts}.")  # fmt: skip
    return notes
