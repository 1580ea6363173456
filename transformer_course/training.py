"""Training: the paper's learning-rate schedule (§5.3), label smoothing (§5.4) and a small training loop.

    lrate = d_model^-0.5 · min(step^-0.5, step · warmup^-1.5)

The rate grows linearly for `warmup` steps, then decays as 1/√step. Post-LN Transformers often
diverge without the warm-up: early gradients through the final LayerNorms are large.

`fit` also does what larger runs need (appendix B): gradient accumulation over micro-batches, mixed
precision with `torch.autocast`, and data-parallel training with DistributedDataParallel when the
program runs under torchrun (see `transformer_course.distributed`).

`fit` trains the translator, model(src, tgt_in), on batches; `train_steps` trains GPT (`gpt.train_lm`) and
BERT (`bert.pretrain_mlm`, `bert.fine_tune`): AdamW, warm-up then cosine decay (`warmup_cosine`) and clipping,
on the loss of a fresh batch at every step. Both run the same loop, `train_loop`, and return its `History`.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import os
import random
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from tqdm.auto import tqdm

from ._validate import check_positive_int, check_probability, check_tensor
from .data import Batch


def set_seed(seed: int) -> None:
    """Seed Python's, NumPy's (when installed) and PyTorch's generators (CPU and every GPU).

    seed is an int in [0, 2**64 - 1], the range PyTorch's generators take; it is checked before any
    generator is touched, so a bad seed leaves every generator as it was.
    """
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    if not 0 <= seed < 2**64:
        raise ValueError(f"seed={seed} must be in [0, 2**64 - 1] (the range of PyTorch's generators)")
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

    More threads than cores take turns on the cores, and every parallel operation waits for its slowest thread:
    PyTorch can then be much slower than with fewer threads (chapter 13 times it).
    Returns the number of threads now in use.
    """
    cores = os.cpu_count() or 1
    n = cores if n is None else min(check_positive_int(n, "n"), cores)
    torch.set_num_threads(n)
    return n


def _check_factor(factor: object) -> float:
    if isinstance(factor, bool) or not isinstance(factor, (int, float)):
        raise TypeError(f"factor must be a number, got {type(factor).__name__}")
    if not (math.isfinite(factor) and factor > 0):
        raise ValueError(f"factor={factor} must be a positive number (it multiplies the learning rate)")
    return float(factor)


def noam_lr(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    """The learning rate at `step` (>= 1) of the paper's schedule, times `factor` (> 0)."""
    check_positive_int(step, "step")
    check_positive_int(d_model, "d_model")
    check_positive_int(warmup, "warmup")
    return _check_factor(factor) * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def noam_scheduler(
    optimizer: torch.optim.Optimizer, d_model: int, warmup: int, factor: float = 1.0
) -> torch.optim.lr_scheduler.LambdaLR:
    """A scheduler that sets every group's learning rate to noam_lr(step) (create the optimizer with lr=1.0)."""
    check_positive_int(d_model, "d_model")
    check_positive_int(warmup, "warmup")
    _check_factor(factor)
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
        check_tensor(target, "target", floating=False)
        # gather would fail obscurely on an id out of range (a device-side assertion on a GPU): name it instead.
        outside = (target != self.ignore_index) & ((target < 0) | (target >= self.n_classes))
        if outside.any():
            raise ValueError(
                f"target holds class {int(target[outside][0])}, expected classes in [0, {self.n_classes - 1}] "
                f"or ignore_index={self.ignore_index}"
            )
        log_probs = torch.log_softmax(logits.float(), dim=-1)
        keep = target != self.ignore_index
        safe_target = target.masked_fill(~keep, 0)
        nll = -log_probs.gather(-1, safe_target[..., None]).squeeze(-1)
        uniform = -log_probs.mean(dim=-1)
        loss = (1 - self.smoothing) * nll + self.smoothing * uniform
        return (loss * keep).sum() / keep.sum().clamp(min=1)


@dataclass
class History:
    """What `fit` or `train_steps` measured: the loss and learning rate of every step, evaluations, and wall time.

    losses[i] is step i's mean loss over every counted target of its whole batch (all its micro-batches,
    on every process), what one process computing the whole batch at once would report.
    """

    losses: list[float] = field(default_factory=list)
    lrs: list[float] = field(default_factory=list)
    evals: list[tuple[int, float]] = field(default_factory=list)
    seconds: float = 0.0
    steps: int = 0


# fit's `precision`: the dtype torch.autocast computes matrix products in (None: everything in float32).
PRECISIONS = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def world() -> tuple[int, int]:
    """(rank, world_size) of this process: those of the running process group, else (0, 1).

    A program that torchrun started several times (WORLD_SIZE > 1) without a process group would train
    WORLD_SIZE separate models on the same batches: that is refused with a RuntimeError.
    """
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    text = os.environ.get("WORLD_SIZE", "1")
    if not text.strip().isdigit() or int(text) < 1:
        raise ValueError(f"the environment variable WORLD_SIZE={text!r} must be a positive integer (torchrun sets it)")
    launched = int(text)
    if launched > 1 and "LOCAL_RANK" not in os.environ:
        raise RuntimeError(
            f"WORLD_SIZE={launched} is set, but torchrun did not start this program (it sets LOCAL_RANK too): "
            "unset WORLD_SIZE, left over from another run, or launch the program with torchrun"
        )
    if launched > 1:
        raise RuntimeError(
            f"this is one of {launched} processes started by torchrun (WORLD_SIZE={launched}) but no process "
            "group is running: call transformer_course.distributed.setup() before training, or each process "
            "trains a model of its own"
        )
    return 0, 1


def _all_sum(values: list[float], world_size: int) -> list[float]:
    """`values` summed over every process, in one all-reduce (returned as they are in a single process)."""
    if world_size == 1:
        return values
    # NCCL reduces tensors on the GPU, gloo on the CPU.
    on_gpu = dist.get_backend() == "nccl"
    device = torch.device("cuda", torch.cuda.current_device()) if on_gpu else torch.device("cpu")
    total = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(total)
    return total.tolist()


def shard(batch: Batch, rank: int, world_size: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Process `rank`'s rows of a global batch: rows rank, rank + world_size, ... of (src, tgt_in, tgt_out).

    The shares of the processes are disjoint and together make the whole batch, the interleaving of
    torch's DistributedSampler. A share is empty when the batch has fewer rows than there are processes.
    """
    return batch.src[rank::world_size], batch.tgt_in[rank::world_size], batch.tgt_out[rank::world_size]


def micro_batches(rows: tuple[torch.Tensor, ...], accumulate: int) -> list[tuple[torch.Tensor, ...]]:
    """`rows` (tensors of equal length) cut into `accumulate` consecutive micro-batches (fewer if fewer rows)."""
    pieces = zip(*(t.tensor_split(accumulate) for t in rows))
    return [piece for piece in pieces if len(piece[0])]


def counted_targets(loss_fn: Callable, target: torch.Tensor) -> int:
    """How many targets `loss_fn` averages over: those other than `loss_fn.ignore_index` (all if it is None).

    A loss without the attribute is refused: it may skip padding (a lambda around F.cross_entropy with
    ignore_index) while every target would be counted, which silently weights the parts of a batch wrongly.
    """
    if not hasattr(loss_fn, "ignore_index"):
        raise TypeError(
            "loss_fn has no ignore_index attribute, so the targets it averages over cannot be counted: set "
            "loss_fn.ignore_index to the padding id it skips, or to None if every target counts"
        )
    ignore = loss_fn.ignore_index
    return target.numel() if ignore is None else int((target != ignore).sum())


@contextlib.contextmanager
def rank_stream(rank: int, world_size: int, device: torch.device) -> Iterator[None]:
    """Inside, this process draws random numbers (dropout masks) from a stream of its own rank.

    Every process runs the same program from the same seed, so their generators agree: rank 1's k-th row
    would get rank 0's k-th row's dropout mask, a correlation one process never has. One number drawn
    from the shared stream (the same on every rank) plus the rank seeds the private stream; on leaving,
    the shared stream resumes, one draw further on every rank. In a single process it changes nothing.
    """
    if world_size == 1:
        yield
        return
    seed = int(torch.randint(2**62, ())) + rank
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.default_generator.manual_seed(seed)
        if device.type == "cuda":
            with torch.cuda.device(device):  # manual_seed seeds the current GPU: make it this process's
                torch.cuda.manual_seed(seed)
        yield


def batch_gradients(
    model: nn.Module,
    batch: Batch,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    accumulate: int = 1,
    precision: str = "fp32",
    scaler: torch.amp.GradScaler | None = None,
) -> float:
    """Add the gradient of the mean loss over the whole global `batch` to every parameter's .grad.

    This process (rank r of world_size) takes its share of the batch and cuts it into `accumulate`
    micro-batches, one forward and one backward each. A micro-batch's mean loss is weighted by its
    share n / N of the targets, N counted over every micro-batch of every process: the weighted
    losses add up to the batch's mean loss however the rows are split and whatever padding each
    part holds. DistributedDataParallel divides the summed gradients by world_size: hence the
    factor world_size. Returns the batch's mean loss (the same number on every process).
    """
    rank, world_size = world()
    parts = micro_batches(shard(batch, rank, world_size), accumulate)
    counts = [counted_targets(loss_fn, tgt_out) for _, _, tgt_out in parts]
    if not parts:  # fewer rows than processes: take part in the gradient averaging with row 0, weighted 0
        parts, counts = [(batch.src[:1], batch.tgt_in[:1], batch.tgt_out[:1])], [0]
    (total,) = _all_sum([float(sum(counts))], world_size)
    if total == 0:
        raise ValueError("the batch has no target to learn from: every target equals loss_fn.ignore_index")
    device = next(model.parameters()).device
    dtype = PRECISIONS[precision]
    batch_loss = 0.0
    with rank_stream(rank, world_size, device):  # each rank its own dropout masks
        for i, ((src, tgt_in, tgt_out), n) in enumerate(zip(parts, counts)):
            # DDP averages the gradients during the backward pass of the last micro-batch only.
            last = i == len(parts) - 1
            # DDP's no_sync: skip the all-reduce of this micro-batch's gradients (they add up locally).
            no_sync = getattr(model, "no_sync", contextlib.nullcontext)
            with contextlib.nullcontext() if last or world_size == 1 else no_sync():
                with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
                    loss = loss_fn(model(src, tgt_in), tgt_out)
                weighted = loss * (n * world_size / total)
                (weighted if scaler is None else scaler.scale(weighted)).backward()
            batch_loss += weighted.item() / world_size
    (batch_loss,) = _all_sum([batch_loss], world_size)
    return batch_loss


def _passes(data: Iterable) -> Iterator:
    """The batches of `data`, pass after pass; each pass calls iter(data) again (a new shuffle for a BatchIterator)."""
    served = 0
    while True:
        before = served
        for batch in data:
            if not all(hasattr(batch, name) for name in ("src", "tgt_in", "tgt_out")):
                raise TypeError(
                    "each batch of data must have .src, .tgt_in and .tgt_out (a transformer_course.data.Batch, as "
                    f"corpus.batches(batch_size) yields), got {type(batch).__name__}"
                )
            served += 1
            yield batch
        if served == before:
            if served == 0:
                raise ValueError("data yielded no batches")
            raise ValueError(
                f"data ran out after {served} batches: a one-shot iterator (such as a generator) is exhausted "
                "after its first pass, and fit draws batches until `steps` is reached; pass a list or a "
                "BatchIterator, which start again at every pass, or fewer steps"
            )


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
    accumulate: int = 1,
    precision: str = "fp32",
) -> History:
    """Train `model` for up to `steps` optimizer steps on batches drawn from `data`, again and again.

    Each batch has `.src`, `.tgt_in`, `.tgt_out` (see `transformer_course.data.Batch`); `loss_fn(logits
    (B, T, V), tgt_out (B, T))` returns the mean over the targets other than its `ignore_index` attribute,
    like `LabelSmoothingLoss` and `cross_entropy_loss(pad_id)` (`nn.CrossEntropyLoss` wants the classes in
    dimension 1: flatten the logits to (B·T, V) and the targets to (B·T) first). Every `eval_every` steps, and after
    the last step, `evaluate()` is called (e.g. exact-match accuracy); training stops early once it
    reaches `target`. Progress is shown with a tqdm bar (off with progress=False).

    accumulate=K computes each step's gradient in K micro-batches (the same gradient as the whole batch,
    in a K-th of the activation memory); clip_grad clips its norm (None: no clipping); precision
    "bf16" or "fp16" runs the forward pass under torch.autocast (the weights stay float32; "fp16" scales
    the loss with a GradScaler so small gradients survive, and skips a step whose gradients overflowed).

    Under torchrun, after `transformer_course.distributed.setup()`, every process draws the same global
    batches from `data` and computes its share (DistributedDataParallel averages the gradients): the
    same training as one process, in parallel. Only rank 0 evaluates (every process gets its score)
    and shows the progress bar.

    The model trains in training mode and is left in evaluation mode (model.eval()) when fit returns or
    raises, since what usually follows is evaluation or inference.
    """
    _check_fit_args(model, data, steps, eval_every, clip_grad, accumulate, precision)
    rank, world_size = world()
    device = next(model.parameters()).device
    trained = model
    if world_size > 1 and not isinstance(model, DistributedDataParallel):
        trained = DistributedDataParallel(model, device_ids=[device] if device.type == "cuda" else None)
    scaler = torch.amp.GradScaler(device.type) if precision == "fp16" else None
    batches = _passes(data)

    def gradients() -> float:
        return batch_gradients(trained, next(batches), loss_fn, accumulate, precision, scaler)

    return train_loop(
        model,
        gradients,
        steps,
        optimizer,
        scheduler=scheduler,
        clip_grad=clip_grad,
        scaler=scaler,
        evaluate=None if evaluate is None else _on_rank_0(evaluate, rank, world_size),
        eval_every=eval_every,
        target=target,
        progress=progress and rank == 0,
    )


def _on_rank_0(evaluate: Callable[[], float], rank: int, world_size: int) -> Callable[[], float]:
    """evaluate() run by rank 0 alone; every process gets its score, so that all of them stop at the same step."""

    def shared() -> float:
        (score,) = _all_sum([_score(evaluate) if rank == 0 else 0.0], world_size)
        return score

    return shared


def train_loop(
    model: nn.Module,
    gradients: Callable[[], float],
    steps: int,
    optimizer: torch.optim.Optimizer,
    *,
    scheduler: torch.optim.lr_scheduler.LRScheduler | None = None,
    clip_grad: float | None = None,
    scaler: torch.amp.GradScaler | None = None,
    evaluate: Callable[[], float] | None = None,
    eval_every: int = 100,
    target: float | None = None,
    progress: bool = False,
) -> History:
    """The one training loop: `fit` (the translator) and `train_steps` (GPT and BERT) both run it.

    `gradients()` adds one step's gradients to the parameters' .grad and returns the step's loss: fit's
    runs `batch_gradients` on the next batch, train_steps' runs `step_loss().backward()`. Around it, each
    step clears the old gradients, refuses a non-finite loss, clips, and steps the optimizer and the
    scheduler. The callers have checked the arguments. The model trains in training mode and is left in
    evaluation mode (model.eval()) when the loop returns or raises.
    """
    history = History()
    start = time.perf_counter()
    bar = tqdm(total=steps, disable=not progress, desc="training", leave=False)
    try:
        model.train()
        while history.steps < steps:
            optimizer.zero_grad(set_to_none=True)
            loss = gradients()
            history.losses.append(loss)
            if not math.isfinite(loss):
                raise FloatingPointError(
                    f"the loss became {loss} at step {history.steps + 1}: lower the learning rate or add warm-up"
                )
            if scaler is not None:
                scaler.unscale_(optimizer)  # clip the true gradients, not the scaled ones
            if clip_grad is not None:
                nn.utils.clip_grad_norm_(model.parameters(), clip_grad)
            history.lrs.append(optimizer.param_groups[0]["lr"])  # the rate this step uses (before the scheduler moves)
            stepped = _optimizer_step(optimizer, scaler)
            if scheduler is not None and stepped:
                scheduler.step()
            history.steps += 1
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.3f}", refresh=False)
            if evaluate is not None and (history.steps % eval_every == 0 or history.steps == steps):
                score = _score(evaluate)
                model.train()  # evaluate() may have switched the model to eval mode
                history.evals.append((history.steps, score))
                if target is not None and score >= target:
                    break
    finally:
        bar.close()
        model.eval()
    history.seconds = time.perf_counter() - start
    return history


def _check_fit_args(
    model: nn.Module,
    data: Iterable,
    steps: int,
    eval_every: int,
    clip_grad: float | None,
    accumulate: int,
    precision: str,
) -> None:
    """fit's arguments, each refused by name before any training."""
    _check_translator(model)
    check_positive_int(steps, "steps")
    check_positive_int(eval_every, "eval_every")
    check_positive_int(accumulate, "accumulate")
    if precision not in PRECISIONS:
        raise ValueError(f"precision={precision!r} must be one of {', '.join(map(repr, PRECISIONS))}")
    if clip_grad is not None:
        if isinstance(clip_grad, bool) or not isinstance(clip_grad, (int, float)):
            raise TypeError(f"clip_grad must be a number or None, got {type(clip_grad).__name__}")
        # 0 would scale every gradient to nothing, a negative norm would flip them: neither trains.
        if not 0 < clip_grad < math.inf:
            raise ValueError(f"clip_grad={clip_grad!r} must be a positive finite gradient norm (or None: no clipping)")
    if hasattr(data, "pairs") and hasattr(data, "batches"):
        raise TypeError("data is a corpus, not its batches: pass corpus.batches(batch_size) (or [corpus.batch()])")
    if precision == "fp16" and any(p.dtype == torch.float16 for p in model.parameters()):
        raise ValueError(
            'precision="fp16" needs float32 weights (autocast computes in float16, the GradScaler unscales float32 '
            "gradients): keep the model in float32 instead of calling .half()"
        )


def _check_translator(model: object) -> None:
    """A TypeError naming `model` unless it is a module called as model(src, tgt_in), as fit calls it."""
    if not isinstance(model, nn.Module):
        raise TypeError(
            f"model must be a torch.nn.Module such as transformer_course.Transformer, got {type(model).__name__}"
        )
    try:
        parameters = list(inspect.signature(model.forward).parameters.values())
    except (TypeError, ValueError):  # a forward without a signature (a C extension): let it run
        return
    if any(p.kind is p.VAR_POSITIONAL for p in parameters):  # forward(*inputs), as DistributedDataParallel's
        return
    positional = [p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in parameters if p.name in positional and p.default is p.empty]
    if len(required) < 2:
        # A language model's forward(ids, cache=None) would take tgt_in as its cache, or fail deep inside.
        raise TypeError(
            "model must be an encoder-decoder model called as model(src, tgt_in), like transformer_course.Transformer, "
            f"but {type(model).__name__}.forward takes ({', '.join(positional)}): train a language model such as GPT "
            "with gpt.train_lm (or training.train_steps with a loss of your own)"
        )


def _score(evaluate: Callable[[], float]) -> float:
    """evaluate()'s score as a float; anything but a real number is refused by name."""
    score = evaluate()
    if isinstance(score, torch.Tensor) and score.numel() == 1:
        score = score.item()
    if isinstance(score, bool) or not isinstance(score, (int, float)):
        raise TypeError(f"evaluate() must return a number (a score such as accuracy), got {type(score).__name__}")
    return float(score)


def _optimizer_step(optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler | None) -> bool:
    """Update the weights; False if the GradScaler skipped the step because a gradient overflowed."""
    if scaler is None:
        optimizer.step()
        return True
    scale = scaler.get_scale()
    scaler.step(optimizer)
    scaler.update()
    return scaler.get_scale() >= scale  # the scaler lowers its scale after an overflow


def cross_entropy_loss(pad_id: int, smoothing: float = 0.0) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """F.cross_entropy over (B, T, V) logits that ignores padding targets (a loss_fn for `fit`)."""

    def loss_fn(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        # In float32 even under autocast: the log-softmax of low-precision logits loses digits.
        logits = logits.flatten(0, -2).float()
        return F.cross_entropy(logits, target.flatten(), ignore_index=pad_id, label_smoothing=smoothing)

    loss_fn.ignore_index = pad_id  # type: ignore[attr-defined]  # what fit counts as targets (counted_targets)
    return loss_fn


def warmup_cosine(step: int, steps: int, warmup: int) -> float:
    """The learning-rate factor at `step` (0-based): linear warm-up over `warmup` steps, then a cosine to 0."""
    if step < warmup:
        return (step + 1) / warmup
    return 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup)))


def train_steps(
    model: nn.Module,
    step_loss: Callable[[], torch.Tensor],
    steps: int,
    lr: float = 1e-3,
    warmup: int = 50,
    weight_decay: float = 0.01,
    evaluate: Callable[[], float] | None = None,
    eval_every: int = 100,
) -> History:
    """`steps` AdamW steps on `step_loss()`, the loss of a fresh batch; warm-up then cosine decay, gradients clipped.

    `evaluate()` runs every `eval_every` steps and after the last. This is `fit`'s loop (`train_loop`): a
    non-finite loss raises a FloatingPointError, and the model is left in eval mode, whether it returns or raises.
    """
    check_positive_int(steps, "steps")
    check_positive_int(eval_every, "eval_every")
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: warmup_cosine(step, steps, warmup))

    def gradients() -> float:
        loss = step_loss()
        loss.backward()
        return loss.item()

    return train_loop(
        model, gradients, steps, optimizer, scheduler=scheduler, clip_grad=1.0, evaluate=evaluate, eval_every=eval_every
    )
