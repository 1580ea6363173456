"""A one-minute demo: train a small Transformer on post 1's five sentence pairs and translate them.

python -m transformer_course.demo
"""

from __future__ import annotations

import argparse

import torch

from . import data, decoding, model, training
from ._validate import seed_argument


def train_post1_pairs(seed: int = 0, max_steps: int = 300, progress: bool = True, eval_every: int = 5):
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=seed_argument, default=0, help="random seed (default 0)")
    args = parser.parse_args(argv)
    training.set_threads()
    net, corpus, history = train_post1_pairs(args.seed)
    print(f"trained {model.count_parameters(net):,} parameters for {history.steps} steps in {history.seconds:.1f} s")
    batch = corpus.batch()
    out = decoding.greedy_decode(net, batch.src, 10, corpus.tgt_vocab.sos_id, corpus.tgt_vocab.eos_id)
    for (src, ref), row in zip(corpus.pairs, out):
        hyp = " ".join(corpus.tgt_vocab.decode(row))
        print(f"{src:<14} -> {hyp:<28} {'ok' if hyp == ref else 'expected: ' + ref}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
