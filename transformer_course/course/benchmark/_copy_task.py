"""The copy task of The Annotated Transformer, trained until it is solved."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence

import torch

from ...data import Batch
from ...decoding import greedy_decode
from ...model import Transformer, count_parameters
from ...training import cross_entropy_loss, fit, noam_scheduler
from ._core import Table, resolve_device


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
    device = resolve_device(device)
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
