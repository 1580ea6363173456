"""Training: the paper's learning-rate schedule (§5.3), label smoothing (§5.4) and a small training loop.

    lrate = d_model^-0.5 · min(step^-0.5, step · warmup^-1.5)

The rate grows linearly for `warmup` steps, then decays as 1/√step. Post-LN Transformers often
diverge without the warm-up: early gradients through the final LayerNorms are large.
"""

from __future__ import annotations

import math
import os
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from ._validate import check_positive_int, check_probability


def set_seed(seed: int) -> None:
    """Seed Python's, NumPy's (when installed) and PyTorch's generators (CPU and every GPU)."""
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed % 2**32)
    except ImportError:  # NumPy is optional for the package
        pass
    torch.manual_seed(seed)


def get_device() -> torch.device:
    """CUDA when a GPU is present, else the CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def set_threads(n: int | None = None) -> int:
    """Use `n` CPU threads (default: the number of cores), never more threads than cores.

    More threads than cores makes PyTorch many times slower (measured: 25× on a 2-core machine).
    Returns the number of threads now in use.
    """
    cores = os.cpu_count() or 1
    n = cores if n is None else min(check_positive_int(n, "n"), cores)
    torch.set_num_threads(n)
    return n


def noam_lr(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    """The learning rate at `step` (>= 1) of the paper's schedule, times `factor`."""
    check_positive_int(step, "step")
    check_positive_int(d_model, "d_model")
    check_positive_int(warmup, "warmup")
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def noam_scheduler(
    optimizer: torch.optim.Optimizer, d_model: int, warmup: int, factor: float = 1.0
) -> torch.optim.lr_scheduler.LambdaLR:
    """A scheduler that sets every group's learning rate to noam_lr(step) (create the optimizer with lr=1.0)."""
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda i: noam_lr(i + 1, d_model, warmup, factor))


class LabelSmoothingLoss(nn.Module):
    """Cross-entropy against a smoothed target: 1 - smoothing on the true class plus smoothing / n_classes everywhere.

    The definition of `F.cross_entropy(label_smoothing=...)`, written out; positions whose target is
    `ignore_index` (padding) count for nothing, and the mean is over the other positions.
    logits (..., n_classes), target (...) -> scalar.
    """

    def __init__(self, n_classes: int, smoothing: float = 0.1, ignore_index: int = -100):
        super().__init__()
        self.n_classes = check_positive_int(n_classes, "n_classes")
        self.smoothing = check_probability(smoothing, "smoothing")
        self.ignore_index = ignore_index

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        if logits.shape[-1] != self.n_classes:
            raise ValueError(f"logits have {logits.shape[-1]} classes, expected n_classes={self.n_classes}")
        if logits.shape[:-1] != target.shape:
            raise ValueError(f"logits {tuple(logits.shape)} and target {tuple(target.shape)} disagree on (..)")
        log_probs = torch.log_softmax(logits.float(), dim=-1)
        keep = target != self.ignore_index
        safe_target = target.masked_fill(~keep, 0)
        nll = -log_probs.gather(-1, safe_target[..., None]).squeeze(-1)
        uniform = -log_probs.mean(dim=-1)
        loss = (1 - self.smoothing) * nll + self.smoothing * uniform
        return (loss * keep).sum() / keep.sum().clamp(min=1)


@dataclass
class History:
    """What `fit` measured: the loss and learning rate of every step, evaluations, and wall time."""

    losses: list[float] = field(default_factory=list)
    lrs: list[float] = field(default_factory=list)
    evals: list[tuple[int, float]] = field(default_factory=list)
    seconds: float = 0.0
    steps: int = 0


def fit(
    model: nn.Module,
    data: Iterable,
    steps: int,
    optimizer: torch.optim.Optimizer,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    scheduler: torch.optim.lr_scheduler.LRScheduler | None = None,
    evaluate: Callable[[], float] | None = None,
    eval_every: int = 100,
    target: float | None = None,
    clip_grad: float | None = 1.0,
    progress: bool = True,
) -> History:
    """Train `model` for up to `steps` optimizer steps on batches drawn from `data`, again and again.

    Each batch has `.src`, `.tgt_in`, `.tgt_out` (see `transformer_course.data.Batch`).
    Every `eval_every` steps `evaluate()` is called (e.g. exact-match accuracy); training stops early
    once it reaches `target`. Progress is shown with a tqdm bar (off with progress=False).
    """
    check_positive_int(steps, "steps")
    check_positive_int(eval_every, "eval_every")
    history = History()
    start = time.perf_counter()
    model.train()
    bar = tqdm(total=steps, disable=not progress, desc="training", leave=False)
    batches = iter(())
    while history.steps < steps:
        try:
            batch = next(batches)
        except StopIteration:
            batches = iter(data)  # a new pass over the data (a new shuffle, for a BatchIterator)
            batch = next(batches, None)
            if batch is None:
                raise ValueError("data yielded no batches") from None
        logits = model(batch.src, batch.tgt_in)
        loss = loss_fn(logits, batch.tgt_out)
        history.losses.append(loss.item())
        if not math.isfinite(history.losses[-1]):
            bar.close()
            raise FloatingPointError(
                f"the loss became {history.losses[-1]} at step {history.steps + 1}: "
                "lower the learning rate or add warm-up"
            )
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if clip_grad is not None:
            nn.utils.clip_grad_norm_(model.parameters(), clip_grad)
        history.lrs.append(optimizer.param_groups[0]["lr"])  # the rate this step uses (before the scheduler moves)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        history.steps += 1
        bar.update(1)
        bar.set_postfix(loss=f"{history.losses[-1]:.3f}", refresh=False)
        if evaluate is not None and (history.steps % eval_every == 0 or history.steps == steps):
            score = float(evaluate())
            model.train()  # evaluate() may have switched the model to eval mode
            history.evals.append((history.steps, score))
            if target is not None and score >= target:
                break
    bar.close()
    model.eval()
    history.seconds = time.perf_counter() - start
    return history


def cross_entropy_loss(pad_id: int, smoothing: float = 0.0) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """F.cross_entropy over (B, T, V) logits that ignores padding targets (a loss_fn for `fit`)."""

    def loss_fn(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.flatten(0, -2), target.flatten(), ignore_index=pad_id, label_smoothing=smoothing)

    return loss_fn
