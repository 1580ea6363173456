"""transformer_course/training.py: the Noam schedule, label smoothing, seeding, and the training loop in one
process: accumulation, mixed precision, train/eval mode, and clear errors.

The two-process tests (torchrun) are in test_distributed.py.
"""

import copy
import itertools
import random

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.optim.optimizer import register_optimizer_step_pre_hook

import transformer_course as tc
from transformer_course import datasets, distributed, training, translate


def tiny_translator(corpus, seed=0):
    tc.set_seed(seed)
    return tc.Transformer(len(corpus.src_vocab), len(corpus.tgt_vocab), d_model=16, n_heads=2, n_layers=1,
                          d_ff=32, dropout=0.0, max_len=16)  # fmt: skip


@pytest.fixture(scope="module")
def corpus():
    # Sentences of 3 to 7 words: the rows of a batch hold very different numbers of real (unpadded) targets.
    return tc.ParallelCorpus(datasets.make_dataset(0).train_pairs[:40])


def varied_batches(corpus):
    """Batches of 12, 7 and 1 rows, each with its own padding."""
    return [corpus.batch(range(0, 12)), corpus.batch(range(12, 19)), corpus.batch([19])]


def train(corpus, batches, steps, accumulate=1, precision="fp32", optimizer="sgd", **kwargs):
    model = tiny_translator(corpus)
    if optimizer == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    loss_fn = tc.LabelSmoothingLoss(len(corpus.tgt_vocab), 0.1, corpus.tgt_vocab.pad_id)
    history = tc.fit(model, batches, steps, opt, loss_fn, progress=False, accumulate=accumulate,
                     precision=precision, **kwargs)  # fmt: skip
    return model, history


def max_weight_gap(a, b):
    return max((p - q).abs().max().item() for p, q in zip(a.parameters(), b.parameters()))


def test_one_process_fit_is_the_plain_training_loop_bit_for_bit(corpus):
    # Accumulation, precision and data parallelism left at their defaults change nothing: the same
    # numbers, to the last bit, as forward, loss, backward, clip, step.
    batches = varied_batches(corpus)
    model, history = train(corpus, batches, 5, optimizer="adam")
    plain = tiny_translator(corpus)
    opt = torch.optim.Adam(plain.parameters(), lr=1e-2)
    loss_fn = tc.LabelSmoothingLoss(len(corpus.tgt_vocab), 0.1, corpus.tgt_vocab.pad_id)
    losses = []
    for step in range(5):
        batch = batches[step % len(batches)]
        loss = loss_fn(plain(batch.src, batch.tgt_in), batch.tgt_out)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(plain.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
    assert history.losses == losses
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), plain.parameters()))


@pytest.mark.parametrize("accumulate", [2, 3, 5])
def test_micro_batches_give_the_gradient_of_the_whole_batch(corpus, accumulate):
    batch = corpus.batch(range(12))  # rows of 4 to 8 targets: micro-batches hold different numbers of them
    loss_fn = tc.LabelSmoothingLoss(len(corpus.tgt_vocab), 0.1, corpus.tgt_vocab.pad_id)
    whole, parts = tiny_translator(corpus), tiny_translator(corpus)
    loss_fn(whole(batch.src, batch.tgt_in), batch.tgt_out).backward()
    loss = training.batch_gradients(parts, batch, loss_fn, accumulate=accumulate)
    assert loss == pytest.approx(loss_fn(whole(batch.src, batch.tgt_in), batch.tgt_out).item(), abs=1e-6)
    for p, q in zip(whole.parameters(), parts.parameters()):
        torch.testing.assert_close(q.grad, p.grad, atol=1e-6, rtol=1e-5)


def test_accumulated_steps_train_like_whole_batches(corpus):
    # K micro-batches per step equal one K-times larger batch, step after step (clipping included).
    batches = varied_batches(corpus)
    whole, h1 = train(corpus, batches, 6, accumulate=1)
    parts, h4 = train(corpus, batches, 6, accumulate=4)
    assert h4.losses == pytest.approx(h1.losses, abs=1e-5)
    assert max_weight_gap(whole, parts) < 1e-5
    assert h1.losses[-1] < h1.losses[0]  # it did train


def test_the_naive_accumulation_is_not_the_whole_batch(corpus):
    # Dividing each micro-batch's mean loss by K weighs a short sentence's targets more than a long one's.
    batch = corpus.batch(range(12))
    loss_fn = tc.LabelSmoothingLoss(len(corpus.tgt_vocab), 0.1, corpus.tgt_vocab.pad_id)
    model = tiny_translator(corpus)
    whole = loss_fn(model(batch.src, batch.tgt_in), batch.tgt_out)
    naive = sum(loss_fn(model(s, i), o) for s, i, o in training.micro_batches(
        (batch.src, batch.tgt_in, batch.tgt_out), 4)) / 4  # fmt: skip
    assert abs(naive.item() - whole.item()) > 1e-3


def test_micro_batches_and_shards_cover_the_batch_once(corpus):
    batch = corpus.batch(range(7))
    rows = (batch.src, batch.tgt_in, batch.tgt_out)
    pieces = training.micro_batches(rows, 3)
    assert [len(p[0]) for p in pieces] == [3, 2, 2]
    assert torch.equal(torch.cat([p[0] for p in pieces]), batch.src)
    assert len(training.micro_batches(rows, 10)) == 7  # never an empty micro-batch
    shares = [training.shard(batch, rank, 3) for rank in range(3)]
    assert [len(s[0]) for s in shares] == [3, 2, 2]
    assert torch.equal(shares[1][2], batch.tgt_out[[1, 4]])  # rows rank, rank + world_size, ...
    assert len(training.shard(corpus.batch([0]), 1, 2)[0]) == 0


def test_counted_targets_follow_the_loss_ignore_index():
    target = torch.tensor([[5, 6, 0, 0], [7, 0, 0, 0]])
    assert training.counted_targets(tc.LabelSmoothingLoss(10, 0.1, ignore_index=0), target) == 3
    assert training.counted_targets(training.cross_entropy_loss(pad_id=0), target) == 3
    assert training.counted_targets(nn.CrossEntropyLoss(ignore_index=0), target) == 3

    def every_target(logits, t):
        return logits.sum()

    every_target.ignore_index = None  # said explicitly: every target counts
    assert training.counted_targets(every_target, target) == 8


def test_counted_targets_refuses_a_loss_that_does_not_say_what_it_ignores():
    # F.cross_entropy with ignore_index inside a lambda skips the padding, but nothing outside can see it.
    def loss_fn(logits, t):
        return F.cross_entropy(logits.flatten(0, 1), t.flatten(), ignore_index=0)

    with pytest.raises(TypeError, match="loss_fn has no ignore_index attribute"):
        training.counted_targets(loss_fn, torch.tensor([[5, 6, 0, 0]]))


def test_each_rank_draws_its_own_dropout_masks_from_one_shared_stream():
    masks, after = [], []
    for rank in range(2):  # two processes that ran the same program from the same seed
        tc.set_seed(0)
        with training.rank_stream(rank, 2, torch.device("cpu")):
            masks.append(F.dropout(torch.ones(4, 64), 0.5, training=True))
        after.append(torch.rand(3))
    assert not torch.equal(masks[0], masks[1])  # row k of rank 0 and row k of rank 1: different masks
    assert torch.equal(after[0], after[1])  # the shared stream goes on alike on every rank
    tc.set_seed(0)
    with training.rank_stream(0, 1, torch.device("cpu")):  # one process: nothing changes
        alone = F.dropout(torch.ones(4, 64), 0.5, training=True)
    tc.set_seed(0)
    assert torch.equal(alone, F.dropout(torch.ones(4, 64), 0.5, training=True))


@pytest.mark.parametrize(("precision", "dtype"), [("fp32", torch.float32), ("bf16", torch.bfloat16),
                                                  ("fp16", torch.float16)])  # fmt: skip
def test_precision_runs_the_forward_pass_under_autocast(corpus, precision, dtype):
    seen = []
    inner = tc.LabelSmoothingLoss(len(corpus.tgt_vocab), 0.1, corpus.tgt_vocab.pad_id)

    def loss_fn(logits, target):
        seen.append(logits.dtype)
        return inner(logits, target)

    loss_fn.ignore_index = inner.ignore_index
    model = tiny_translator(corpus)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    history = tc.fit(model, varied_batches(corpus), 9, opt, loss_fn, progress=False, precision=precision)
    assert set(seen) == {dtype}
    assert all(p.dtype == torch.float32 for p in model.parameters())  # the weights stay float32
    assert history.losses[-1] < history.losses[0] - 0.5


def test_fp16_skips_a_step_whose_gradients_overflow(corpus):
    # A loss so large that its scaled gradients overflow: the GradScaler skips the update, and the
    # learning-rate schedule does not move either.
    model = tiny_translator(corpus)
    before = copy.deepcopy(model.state_dict())
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: 1.0 / (i + 1))
    ce = tc.training.cross_entropy_loss(corpus.tgt_vocab.pad_id)

    def huge(logits, target):
        return ce(logits, target) * 1e37

    huge.ignore_index = ce.ignore_index
    history = tc.fit(model, varied_batches(corpus), 1, opt, huge, scheduler, progress=False, precision="fp16")
    assert history.steps == 1
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert opt.param_groups[0]["lr"] == 1.0


def test_bf16_translator_still_translates_held_out_sentences():
    # The chapter's translator trained with bfloat16 autocast on the CPU: >= 95 % held-out exact match.
    result = translate.train_translator(seed=0, device="cpu", progress=False, precision="bf16")
    test = translate.evaluate(result.model, result.corpus, result.dataset.test_pairs)
    assert test.exact_match >= 0.95


def test_fit_evaluates_after_the_last_step(corpus):
    _, history = train(corpus, varied_batches(corpus), 5, evaluate=lambda: 0.5, eval_every=3)
    assert [step for step, _ in history.evals] == [3, 5]
    _, history = train(corpus, varied_batches(corpus), 6, evaluate=lambda: 0.0, eval_every=3)
    assert [step for step, _ in history.evals] == [3, 6]  # no second evaluation at a multiple


def test_fit_stops_at_the_target(corpus):
    scores = iter([0.2, 0.9, 1.0])
    _, history = train(corpus, varied_batches(corpus), 50, evaluate=lambda: next(scores), eval_every=2, target=0.9)
    assert history.steps == 4 and history.evals == [(2, 0.2), (4, 0.9)]


def test_fit_trains_in_train_mode_and_leaves_eval_mode(corpus):
    model = tiny_translator(corpus).eval()
    modes = []
    ce = tc.training.cross_entropy_loss(corpus.tgt_vocab.pad_id)

    def loss_fn(logits, target):
        modes.append(model.training)
        return ce(logits, target)

    loss_fn.ignore_index = ce.ignore_index

    def evaluate():
        model.eval()  # as translate_batch does
        return 0.0

    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    tc.fit(model, varied_batches(corpus), 4, opt, loss_fn, evaluate=evaluate, eval_every=1, progress=False)
    assert modes == [True] * 4  # back in train mode after every evaluation
    assert not model.training


@pytest.mark.parametrize("where", ["loss", "evaluate"])
def test_fit_leaves_eval_mode_after_an_error(corpus, where):
    model = tiny_translator(corpus).train()
    ce = tc.training.cross_entropy_loss(corpus.tgt_vocab.pad_id)

    def failing(*args):
        raise RuntimeError("boom")

    failing.ignore_index = ce.ignore_index
    loss_fn = failing if where == "loss" else ce
    evaluate = failing if where == "evaluate" else None
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(RuntimeError, match="boom"):
        tc.fit(model, varied_batches(corpus), 3, opt, loss_fn, evaluate=evaluate, eval_every=1, progress=False)
    assert not model.training


def test_fit_on_a_one_shot_iterator_says_it_is_exhausted(corpus):
    batches = varied_batches(corpus)
    _, history = train(corpus, (b for b in batches), 3)  # enough batches: fine
    assert history.steps == 3
    with pytest.raises(ValueError, match=r"ran out after 3 batches: a one-shot iterator .* exhausted"):
        train(corpus, (b for b in batches), 5)
    with pytest.raises(ValueError, match="data yielded no batches"):
        train(corpus, [], 5)


def test_fit_refuses_torchrun_without_a_process_group(corpus, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "0")  # as torchrun sets it
    with pytest.raises(RuntimeError, match=r"WORLD_SIZE=2.*distributed.setup\(\)"):
        train(corpus, varied_batches(corpus), 1)


def test_a_single_process_ignores_distributed_setup():
    process = distributed.setup("cpu")
    assert (process.rank, process.world_size, process.is_main) == (0, 1, True)
    assert not torch.distributed.is_initialized()


@pytest.mark.parametrize(
    ("kwargs", "error", "pattern"),
    [
        ({"accumulate": 0}, ValueError, r"accumulate=0 must be a positive integer"),
        ({"accumulate": 2.0}, TypeError, r"accumulate must be an int"),
        ({"precision": "fp8"}, ValueError, r"precision='fp8' must be one of 'fp32', 'bf16', 'fp16'"),
    ],
)
def test_fit_names_bad_arguments(corpus, kwargs, error, pattern):
    with pytest.raises(error, match=pattern):
        train(corpus, varied_batches(corpus), 1, **kwargs)


@pytest.mark.parametrize(
    ("factor", "error", "pattern"),
    [
        ("2", TypeError, r"factor must be a number, got str"),
        (None, TypeError, r"factor must be a number, got NoneType"),
        (-1.0, ValueError, r"factor=-1.0 must be a positive number"),
        (0, ValueError, r"factor=0 must be a positive number"),
        (float("nan"), ValueError, r"factor=nan must be a positive number"),
    ],
)
def test_noam_factor_is_checked(factor, error, pattern):
    with pytest.raises(error, match=pattern):
        tc.noam_lr(10, 64, 100, factor)
    opt = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0)
    with pytest.raises(error, match=pattern):
        tc.noam_scheduler(opt, 64, 100, factor)


def test_noam_factor_scales_the_rate():
    assert tc.noam_lr(10, 64, 100, 2) == pytest.approx(2 * tc.noam_lr(10, 64, 100))


@pytest.mark.parametrize(
    ("target", "error", "pattern"),
    [
        (torch.tensor([[1.0, 2.0, 0.0]]), TypeError, r"target must be an integer tensor"),
        (
            torch.tensor([[1, 2, 11]]),
            ValueError,
            r"target holds class 11, expected classes in \[0, 10\] or "
            r"ignore_index=0",
        ),
        (torch.tensor([[1, -3, 0]]), ValueError, r"target holds class -3"),
    ],
)
def test_label_smoothing_names_bad_targets(target, error, pattern):
    with pytest.raises(error, match=pattern):
        tc.LabelSmoothingLoss(11, 0.1, ignore_index=0)(torch.randn(1, 3, 11), target)


def test_label_smoothing_accepts_the_ignore_index_outside_the_classes():
    logits, target = torch.randn(2, 3, 5), torch.tensor([[1, 4, -100], [0, -100, -100]])
    expected = F.cross_entropy(logits.reshape(-1, 5), target.reshape(-1), label_smoothing=0.2)
    torch.testing.assert_close(tc.LabelSmoothingLoss(5, 0.2)(logits, target), expected)


def test_set_seed_seeds_python_numpy_and_torch():
    tc.set_seed(7)
    first = (random.random(), np.random.rand(), torch.rand(1).item())
    tc.set_seed(7)
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == first


@pytest.mark.parametrize(("seed", "error"), [(2**64, ValueError), (-1, ValueError), (1.5, TypeError)])
def test_a_bad_seed_is_refused_before_anything_is_reseeded(seed, error):
    random.seed(11)
    torch.manual_seed(11)
    with pytest.raises(error, match="seed"):
        tc.set_seed(seed)
    after = (random.random(), torch.rand(1).item())
    random.seed(11)
    torch.manual_seed(11)
    assert after == (random.random(), torch.rand(1).item())  # the call reseeded nothing


def test_the_largest_seed_pytorch_takes_is_accepted():
    tc.set_seed(2**64 - 1)
    assert torch.initial_seed() == 2**64 - 1


def _tiny_setup():
    torch.manual_seed(0)
    corpus = tc.ParallelCorpus(tc.POST1_PAIRS)
    model = tc.Transformer(len(corpus.src_vocab), len(corpus.tgt_vocab), d_model=16, n_heads=2, n_layers=1, d_ff=32)
    loss_fn = training.cross_entropy_loss(corpus.tgt_vocab.pad_id)
    return corpus, model, loss_fn, torch.optim.SGD(model.parameters(), lr=0.1)


@pytest.mark.parametrize(
    ("clip_grad", "exc", "words"),
    [(0, ValueError, "clip_grad=0 must be a positive"), (-1.0, ValueError, "clip_grad=-1.0"),
     (float("inf"), ValueError, "finite"), ("1", TypeError, "clip_grad must be a number")],
)  # fmt: skip
def test_fit_refuses_a_clipping_norm_that_cannot_train(clip_grad, exc, words):
    # clip_grad=0 scaled every gradient to zero (nothing learnt); -1 flipped them (training away from the target).
    corpus, model, loss_fn, optimizer = _tiny_setup()
    before = [p.detach().clone() for p in model.parameters()]
    with pytest.raises(exc, match=words):
        tc.fit(model, [corpus.batch()], 2, optimizer, loss_fn, clip_grad=clip_grad, progress=False)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters())), "refused before any step"


def test_fit_given_the_corpus_or_tuples_names_what_it_wants():
    corpus, model, loss_fn, optimizer = _tiny_setup()
    with pytest.raises(TypeError, match=r"corpus.batches\(batch_size\)"):
        tc.fit(model, corpus, 2, optimizer, loss_fn, progress=False)
    batch = corpus.batch()
    with pytest.raises(TypeError, match=r"must have .src, .tgt_in and .tgt_out .* got tuple"):
        tc.fit(model, [(batch.src, batch.tgt_in, batch.tgt_out)], 2, optimizer, loss_fn, progress=False)


@pytest.mark.parametrize("returned", [None, "0.5", [0.5]])
def test_fit_refuses_an_evaluate_that_returns_no_number(returned):
    corpus, model, loss_fn, optimizer = _tiny_setup()
    with pytest.raises(TypeError, match="evaluate\\(\\) must return a number"):
        tc.fit(model, [corpus.batch()], 2, optimizer, loss_fn, evaluate=lambda: returned, eval_every=1, progress=False)


def test_fit_accepts_a_one_element_tensor_score():
    corpus, model, loss_fn, optimizer = _tiny_setup()
    history = tc.fit(model, [corpus.batch()], 2, optimizer, loss_fn, evaluate=lambda: torch.tensor(0.25),
                     eval_every=1, progress=False)  # fmt: skip
    assert history.evals == [(1, 0.25), (2, 0.25)]


def test_fit_refuses_fp16_autocast_on_half_weights():
    corpus, model, loss_fn, _ = _tiny_setup()
    model.half()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="needs float32 weights"):
        tc.fit(model, [corpus.batch()], 2, optimizer, loss_fn, precision="fp16", progress=False)


@pytest.mark.parametrize(
    ("env", "exc", "words"),
    [({"WORLD_SIZE": "abc"}, ValueError, "WORLD_SIZE='abc' must be a positive integer"),
     ({"WORLD_SIZE": "0"}, ValueError, "WORLD_SIZE='0'"),
     ({"WORLD_SIZE": "4"}, RuntimeError, "torchrun did not start this program"),
     ({"WORLD_SIZE": "4", "LOCAL_RANK": "0"}, RuntimeError, "no process group is running")],
)  # fmt: skip
def test_world_explains_a_bad_or_stale_world_size(monkeypatch, env, exc, words):
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(exc, match=words):
        training.world()


def test_fit_refuses_a_language_model_in_one_line_naming_train_lm():
    corpus, _, loss_fn, _ = _tiny_setup()
    model = tc.GPT(len(corpus.tgt_vocab), d_model=16, n_heads=2, n_layers=1, d_ff=32, max_len=16)
    before = [p.detach().clone() for p in model.parameters()]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(TypeError, match=r"^model .*\(src, tgt_in\).*GPT.*gpt\.train_lm") as error:
        tc.fit(model, [corpus.batch()], 2, optimizer, loss_fn, progress=False)
    assert "\n" not in str(error.value)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters())), "refused before any step"


def test_warmup_cosine_rises_linearly_then_falls_to_zero():
    factors = [training.warmup_cosine(step, 10, 4) for step in range(10)]
    assert factors[:4] == [0.25, 0.5, 0.75, 1.0]
    assert factors[4] == 1.0 and factors[7] == pytest.approx(0.5) and factors[-1] == pytest.approx(0.0669873)
    assert all(a >= b for a, b in itertools.pairwise(factors[3:]))


def test_train_steps_is_adamw_with_warmup_cosine_and_clipping_step_for_step():
    def make():
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Dropout(0.1), nn.Linear(8, 1))

    x, y = torch.randn(16, 3, generator=torch.Generator().manual_seed(1)), torch.randn(16, 1)
    model, by_hand = make(), make()
    seen = []

    def evaluate():
        seen.append(model.training)
        model.eval()  # train_steps must switch it back
        return 1.5

    norms = []  # the gradient norm each optimizer step sees: 100 · MSE's is far above 1, so clipped to 1

    def record_norm(optimizer, args, kwargs):
        norms.append(float(torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in model.parameters()]))))

    torch.manual_seed(2)
    hook = register_optimizer_step_pre_hook(record_norm)
    try:
        history = training.train_steps(model, lambda: 100 * F.mse_loss(model(x), y), 6, lr=0.1, warmup=2,
                                       weight_decay=0.05, evaluate=evaluate, eval_every=4)  # fmt: skip
    finally:
        hook.remove()
    assert norms == pytest.approx([1.0] * 6, rel=1e-5)
    # The same steps written out: AdamW (0.9, 0.95), the rate lr · warmup_cosine, gradient norm clipped at 1.
    optimizer = torch.optim.AdamW(by_hand.parameters(), lr=0.1, betas=(0.9, 0.95), weight_decay=0.05)
    torch.manual_seed(2)
    losses, lrs = [], []
    by_hand.train()
    for step in range(6):
        lrs.append(0.1 * training.warmup_cosine(step, 6, 2))
        for group in optimizer.param_groups:
            group["lr"] = lrs[-1]
        optimizer.zero_grad()
        loss = 100 * F.mse_loss(by_hand(x), y)
        loss.backward()
        nn.utils.clip_grad_norm_(by_hand.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
    assert history.losses == pytest.approx(losses, rel=1e-6) and history.lrs == pytest.approx(lrs)
    assert history.steps == 6 and history.evals == [(4, 1.5), (6, 1.5)]
    assert seen == [True, True]  # back in train mode after the first evaluation
    for p, q in zip(model.parameters(), by_hand.parameters()):
        torch.testing.assert_close(p, q)
    assert not model.training


def translator_steps(corpus, scales, entry, evaluate=None):
    """Train a tiny translator on one batch with `fit` or `train_steps`, each step's loss times next(scales).

    fit is given what train_steps builds for itself (AdamW (0.9, 0.95), warm-up then cosine, clipping at 1),
    so both run the same steps. Returns the model, its weights after each step, and the History (or the error).
    """
    model, batch = tiny_translator(corpus), corpus.batch(range(12))
    ce = training.cross_entropy_loss(corpus.tgt_vocab.pad_id)
    weights = []

    def scaled(logits, target):
        weights.append([p.detach().clone() for p in model.parameters()])  # the weights this step starts from
        return ce(logits, target) * next(scales)

    scaled.ignore_index = ce.ignore_index
    try:
        if entry == "fit":
            opt = torch.optim.AdamW(model.parameters(), lr=1e-2, betas=(0.9, 0.95), weight_decay=0.01)
            schedule = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: training.warmup_cosine(step, 4, 2))
            result = tc.fit(model, [batch], 4, opt, scaled, schedule, evaluate=evaluate, eval_every=2, progress=False)
        else:
            result = training.train_steps(model, lambda: scaled(model(batch.src, batch.tgt_in), batch.tgt_out), 4,
                                          lr=1e-2, warmup=2, evaluate=evaluate, eval_every=2)  # fmt: skip
    except Exception as error:  # returned for the test to inspect
        result = error
    return model, weights, result


def test_fit_and_train_steps_run_the_same_loop_to_the_last_bit(corpus):
    fit_model, _, by_fit = translator_steps(corpus, itertools.repeat(1.0), "fit", evaluate=lambda: 0.5)
    steps_model, _, by_steps = translator_steps(corpus, itertools.repeat(1.0), "train_steps", evaluate=lambda: 0.5)
    assert by_steps.losses == by_fit.losses and by_steps.lrs == by_fit.lrs
    assert by_steps.evals == by_fit.evals == [(2, 0.5), (4, 0.5)]
    assert all(torch.equal(p, q) for p, q in zip(fit_model.parameters(), steps_model.parameters()))


@pytest.mark.parametrize("entry", ["fit", "train_steps"])
def test_a_non_finite_loss_stops_either_entry_before_its_step_in_eval_mode(corpus, entry):
    # train_steps, GPT's and BERT's loop, used to step on a NaN loss and spread NaN through every weight.
    model, weights, error = translator_steps(corpus, iter([1.0, float("nan"), 1.0, 1.0]), entry)
    assert isinstance(error, FloatingPointError)
    assert str(error) == "the loss became nan at step 2: lower the learning rate or add warm-up"
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), weights[1])), "step 2 changed no weight"
    assert not model.training


@pytest.mark.parametrize("entry", ["fit", "train_steps"])
@pytest.mark.parametrize(("returned", "error"), [(RuntimeError("boom"), RuntimeError), ("0.5", TypeError)])
def test_either_entry_refuses_a_failing_or_wordy_evaluate_and_leaves_eval_mode(corpus, entry, returned, error):
    def evaluate():
        if isinstance(returned, Exception):
            raise returned
        return returned  # a string: float("0.5") would have passed it off as a score

    model, _, raised = translator_steps(corpus, itertools.repeat(1.0), entry, evaluate=evaluate)
    assert isinstance(raised, error)
    assert str(raised) == ("boom" if error is RuntimeError else "evaluate() must return a number (a score such as "
                                                                 "accuracy), got str")  # fmt: skip
    assert not model.training


# ---------------------------------------------------------------------------------------------------------
# The module's own claims


def test_noam_schedule_peaks_at_warmup():
    lrs = [tc.noam_lr(s, 512, 4000) for s in range(1, 20_000, 10)]
    peak_step = 1 + 10 * max(range(len(lrs)), key=lrs.__getitem__)
    assert abs(peak_step - 4000) <= 10
    assert tc.noam_lr(4000, 512, 4000) == pytest.approx(512**-0.5 * 4000**-0.5)


def test_noam_scheduler_sets_the_formula():
    p = nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=1.0)
    sched = tc.noam_scheduler(opt, d_model=64, warmup=10)
    seen = []
    for _ in range(3):
        seen.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert seen == pytest.approx([tc.noam_lr(s, 64, 10) for s in (1, 2, 3)])


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.3])
def test_label_smoothing_equals_torch_cross_entropy(smoothing):
    logits = torch.randn(4, 6, 11)
    target = torch.randint(0, 11, (4, 6))
    target[0, 3:] = 0
    expected = F.cross_entropy(logits.reshape(-1, 11), target.reshape(-1), ignore_index=0, label_smoothing=smoothing)
    got = tc.LabelSmoothingLoss(11, smoothing, ignore_index=0)(logits, target)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)


def test_set_seed_makes_runs_repeat():
    tc.set_seed(3)
    a = torch.randn(3)
    tc.set_seed(3)
    assert torch.equal(a, torch.randn(3))


# ---------------------------------------------------------------------------------------------------------
# Bad input gets a ValueError or TypeError whose message names the argument and what was expected


BAD_INPUT = [
    # (id, callable, exception, pattern the message must contain)
    ("noam step zero", lambda: tc.noam_lr(0, 512, 4000), ValueError, r"step=0 must be a positive integer"),
    ("label smoothing above one", lambda: tc.LabelSmoothingLoss(10, smoothing=1.5), ValueError,
     r"smoothing=1.5 must be in \[0, 1\)"),
]  # fmt: skip


@pytest.mark.parametrize(("call", "exc", "pattern"), [c[1:] for c in BAD_INPUT], ids=[c[0] for c in BAD_INPUT])
def test_bad_input_raises_a_clear_error(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()
