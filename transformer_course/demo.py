"""A one-minute demo: train a small Transformer on post 1's five sentence pairs and translate them.

python -m transformer_course.demo     # its command line: transformer_course/cli/demo.py
"""

from __future__ import annotations

import torch

from . import data, decoding, model, training


def train_post1_pairs(
    seed: int = 0, max_steps: int = 300, progress: bool = True, eval_every: int = 5
) -> tuple[model.Transformer, data.ParallelCorpus, training.History]:
    """Train until greedy decoding translates all five pairs of post 1 exactly; returns (model, corpus, history).

    The five pairs are checked every `eval_every` steps (1 counts the steps to success exactly).
    """
    training.set_seed(seed)
    corpus = data.ParallelCorpus(data.POST1_PAIRS)
    net = model.Transformer(
        len(corpus.src_vocab), len(corpus.tgt_vocab), d_model=64, n_heads=4, n_layers=2, d_ff=128, dropout=0.0
    )
    batch = corpus.batch()
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
    references = [corpus.tgt_vocab.decode(row) for row in batch.tgt_out]

    def exact_match() -> float:
        out = decoding.greedy_decode(net, batch.src, 10, corpus.tgt_vocab.sos_id, corpus.tgt_vocab.eos_id)
        return sum(corpus.tgt_vocab.decode(row) == ref for row, ref in zip(out, references)) / len(references)

    history = training.fit(
        net,
        [batch],
        max_steps,
        optimizer,
        training.cross_entropy_loss(corpus.tgt_vocab.pad_id),
        evaluate=exact_match,
        eval_every=eval_every,
        target=1.0,
        progress=progress,
    )
    return net, corpus, history


if __name__ == "__main__":  # the command line lives in transformer_course.cli.demo
    from transformer_course.cli.demo import main

    raise SystemExit(main())
