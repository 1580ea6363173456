"""The translation sections: how fast the chapter 12 models learn their tasks on this machine.

* `post1_pairs`: post 1's five sentence pairs; training steps and seconds until greedy decoding translates
  all five exactly (the model of `demo.train_post1_pairs`: d_model 64, 2 layers, Adam 1e-3, the full batch,
  checked after every step).
* `translation`: the generated zh→en corpus; seconds until the held-out test set (triples never seen in
  training) reaches 95 % exact match with `translate.train_translator`'s default model and schedule; then
  the CLI's default run (stop at 100 % on the validation set) and its test score.

Seconds are the wall time of the training loop including its periodic evaluations.
"""

from __future__ import annotations

import statistics

from ... import translate
from ...demo import train_post1_pairs
from ...model import count_parameters
from ._core import Table


def post1_pairs(seeds: int = 5, device=None) -> Table:
    """Steps and seconds until all five pairs of post 1 decode exactly, for seeds 0..seeds-1."""
    table = Table(
        "post1",
        "Post 1's five sentence pairs: trained until all five are translated exactly",
        ["seed", "steps", "seconds", "solved"],
    )
    train_post1_pairs(seed=0, progress=False)  # warm-up: first calls pay for lazy initialisation
    for seed in range(seeds):
        _, _, history = train_post1_pairs(seed=seed, progress=False, eval_every=1)
        table.rows.append(
            dict(seed=seed, steps=history.steps, seconds=history.seconds, solved=history.evals[-1][1] == 1.0)
        )
    table.notes += [
        f"median: {statistics.median(table.column('steps')):g} steps, "
        f"{statistics.median(table.column('seconds')):.3f} s; all solved: {all(table.column('solved'))}",
        "model: d_model 64, 2+2 layers, Adam 1e-3, the five pairs as one batch, greedy decoding after every step.",
    ]
    return table


def translation(seeds: int = 5, device=None) -> Table:
    """Seconds until the held-out test set reaches 95 % exact match, for seeds 0..seeds-1; then the default run."""
    table = Table(
        "translation",
        "The generated zh→en corpus: trained until 95 % of the held-out test sentences are translated exactly",
        ["seed", "test_sentences", "exact_match", "steps", "seconds", "reached"],
    )
    for seed in range(seeds):
        result = translate.train_translator(seed=seed, eval_split="test", target=0.95, progress=False, device=device)
        step, score = result.history.evals[-1]
        table.rows.append(
            dict(seed=seed, test_sentences=len(result.dataset.test), exact_match=score, steps=step,
                 seconds=result.history.seconds, reached=score >= 0.95)
        )  # fmt: skip
    result = translate.train_translator(seed=0, progress=False, device=device)
    test = translate.evaluate(result.model, result.corpus, result.dataset.test_pairs)
    table.notes += [
        f"median: {statistics.median(table.column('seconds')):.1f} s; all reached 95 %: {all(table.column('reached'))}",
        f"default run (stop at 100 % validation, seed 0): {result.history.steps} steps, "
        f"{result.history.seconds:.1f} s, {count_parameters(result.model):,} parameters; "
        f"test exact match {test.exact_match:.1%}, BLEU {test.bleu:.1f}",
    ]
    return table
