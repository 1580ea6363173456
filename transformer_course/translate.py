"""Chapter 12: train a small Transformer on the generated zh→en corpus, evaluate it, translate with it.

    python -m transformer_course.translate train            # train, save checkpoints/zh_en.pt
    python -m transformer_course.translate "咖哥 不 喜欢 他们"  # -> KaGe does not like them
    torchrun --standalone --nproc-per-node 2 -m transformer_course.translate train  # on 2 processes

The functions below are what the chapter, its playground widget and the command line use:
`train_translator` returns the model, its corpus and the training history; `evaluate` gives held-out exact
match and corpus BLEU; `translate_sentence` gives the tokens, their log-probability and the cross-attention
map. The command line itself (argparse, one-line errors, torchrun) is `transformer_course.cli.translate`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, TypeAlias

import torch

from . import checkpoint, data, datasets, decoding, model, training
from ._modes import evaluating
from ._validate import check_positive_int, named_list, shortened
from .attention import scaled_dot_product_attention
from .efficient import use_fused_attention
from .multihead import MultiHeadAttention


@dataclass
class TranslatorConfig:
    """Model size and training schedule.

    With the defaults the validation set reaches 100 % exact match after about 100 steps (a few seconds
    on one CPU thread). Dropout is off: the grammar has no noise to overfit.
    batch_size is the global batch of a step, however many processes share it and however many
    micro-batches (`accumulate`) it is computed in; precision is "fp32", "bf16" or "fp16" (see `fit`).
    """

    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 2
    d_ff: int = 128
    dropout: float = 0.0
    batch_size: int = 64
    warmup: int = 200
    lr_factor: float = 1.0
    smoothing: float = 0.1
    steps: int = 1000
    eval_every: int = 10
    target: float = 1.0
    accumulate: int = 1
    precision: str = "fp32"


@dataclass
class TrainResult:
    """What `train_translator` made: the model, its corpus (with the vocabularies), data and history."""

    model: model.Transformer
    corpus: data.ParallelCorpus
    dataset: datasets.TranslationDataset
    history: training.History
    config: TranslatorConfig = field(default_factory=TranslatorConfig)


@dataclass
class Evaluation:
    """Exact match (fraction of sentences translated word for word right) and sacrebleu's corpus BLEU."""

    exact_match: float
    bleu: float
    hypotheses: list[str]
    references: list[str]

    def errors(self, sources: Sequence[str]) -> list[tuple[str, str, str]]:
        """(source, hypothesis, reference) for every wrong translation."""
        return [(s, h, r) for s, h, r in zip(sources, self.hypotheses, self.references) if h != r]


@dataclass
class Translation:
    """A translated sentence.

    cross_attention (n_layers, n_heads, len(tokens) + 1, len(source)): row i is where the decoder looked
    while predicting output token i (the last row predicts <eos>).
    """

    source: list[str]
    tokens: list[str]
    log_prob: float
    cross_attention: torch.Tensor

    @property
    def text(self) -> str:
        return " ".join(self.tokens)


# What the functions below accept as the model's vocabularies: each of these carries the pair.
Vocabs: TypeAlias = "data.ParallelCorpus | checkpoint.Checkpoint | TrainResult | tuple[data.Vocab, data.Vocab]"


class UnknownWordsError(ValueError):
    """A sentence holds words the model has never seen; `.words` lists them."""

    def __init__(self, words: Sequence[str]) -> None:
        self.words = list(words)
        super().__init__(f"unknown word(s) {named_list(self.words)}: not in the source vocabulary")


def _vocabs(vocabs: Vocabs) -> tuple[data.Vocab, data.Vocab]:
    """(src_vocab, tgt_vocab) from a ParallelCorpus, a Checkpoint, a TrainResult or a pair of Vocabs."""
    if isinstance(vocabs, TrainResult):
        vocabs = vocabs.corpus
    if isinstance(vocabs, tuple) and len(vocabs) == 2:
        pair: tuple[object, object] = vocabs
    else:
        pair = getattr(vocabs, "src_vocab", None), getattr(vocabs, "tgt_vocab", None)
    src_vocab, tgt_vocab = pair
    if not (isinstance(src_vocab, data.Vocab) and isinstance(tgt_vocab, data.Vocab)):
        raise TypeError(
            "vocabs must be a ParallelCorpus, a Checkpoint or a (src_vocab, tgt_vocab) pair, "
            f"got {type(vocabs).__name__}"
        )
    return src_vocab, tgt_vocab


def segment(text: str, vocab: data.Vocab) -> list[str]:
    """Split `text` into words of `vocab`: on spaces, then each unknown piece by longest match.

    "咖哥不喜欢他们" -> ["咖哥", "不", "喜欢", "他们"]. Characters that start no known word are
    gathered into unknown words and raise an UnknownWordsError naming them.
    """
    if not isinstance(text, str):
        raise TypeError(f"sentence must be a str, got {type(text).__name__}")
    if not text.strip():
        raise ValueError("sentence is empty: give a Chinese sentence such as '咖哥 不 喜欢 他们'")
    known = set(vocab.itos) - {data.PAD, data.SOS, data.EOS}  # the special tokens are not words
    longest = max(len(w) for w in known)
    words, unknown = [], []
    for piece in text.split():
        if piece in known:
            words.append(piece)
            continue
        i, pending = 0, ""
        while i < len(piece):
            match = next((piece[i : i + n] for n in range(longest, 0, -1) if piece[i : i + n] in known), None)
            if match is None:
                pending += piece[i]
                i += 1
                continue
            if pending:
                unknown.append(pending)
                pending = ""
            words.append(match)
            i += len(match)
        if pending:
            unknown.append(pending)
    if unknown:
        raise UnknownWordsError(unknown)
    return words


def _translator(net: model.Transformer, vocabs: Vocabs) -> tuple[data.Vocab, data.Vocab]:
    """The (src_vocab, tgt_vocab) of `vocabs`, checked against the model `net` that will use them."""
    if not isinstance(net, model.Transformer):
        raise TypeError(f"net must be a transformer_course.Transformer, got {type(net).__name__}")
    src_vocab, tgt_vocab = _vocabs(vocabs)
    checkpoint.check_vocabularies(net.config, src_vocab, tgt_vocab)
    return src_vocab, tgt_vocab


def _source_rows(sentences: Sequence[str], src_vocab: data.Vocab, longest: int) -> list[list[int]]:
    """The source ids of each sentence (segmented by `segment`), or a ValueError naming the sentence's index."""
    if isinstance(sentences, str) or not isinstance(sentences, Sequence):
        raise TypeError(f"sentences must be a list of str, got {type(sentences).__name__}")
    rows = []
    for i, sentence in enumerate(sentences):
        try:
            words = segment(sentence, src_vocab)
        except TypeError as e:
            raise TypeError(f"sentences[{i}]: {e}") from None
        except ValueError as e:  # an empty sentence, unknown words
            raise ValueError(f"sentences[{i}]={shortened(sentence)}: {e}") from None
        if len(words) > longest:
            raise ValueError(f"sentences[{i}] has {len(words)} words; this model reads at most max_len={longest}")
        rows.append([src_vocab[word] for word in words])
    return rows


def build_model(corpus: data.ParallelCorpus, config: TranslatorConfig) -> model.Transformer:
    return model.Transformer(
        len(corpus.src_vocab),
        len(corpus.tgt_vocab),
        d_model=config.d_model,
        n_heads=config.n_heads,
        n_layers=config.n_layers,
        d_ff=config.d_ff,
        dropout=config.dropout,
        max_len=64,
    )


def default_max_len(src_length: int) -> int:
    """Decoding budget in tokens (with <sos> and <eos>): English here is at most source length + 2 words."""
    return 2 * src_length + 4


def one_pass_decode(net: model.Transformer, src: torch.Tensor, length: int, bos_id: int) -> torch.Tensor:
    """Post 1's inference, kept to show why it fails: src (B, S) -> argmax tokens (B, length).

    The decoder gets `<sos> <pad> ... <pad>` once. Padding is masked, so every position sees only
    <sos> and the source: each guesses a word without the words before it, and all guess the first
    one ("NLP NLP NLP NLP NLP"). `greedy_decode` feeds each prediction back in instead.
    """
    with evaluating(net):
        tgt_in = torch.full((src.shape[0], length), net.pad_id, dtype=torch.long, device=src.device)
        tgt_in[:, 0] = bos_id
        return net(src, tgt_in).argmax(dim=-1)


def translate_batch(
    net: model.Transformer, vocabs: Vocabs, sentences: Sequence[str], batch_size: int = 512
) -> list[str]:
    """Greedy translations of `sentences`, decoded `batch_size` at a time.

    Each sentence is segmented as in `translate_sentence`; an empty sentence or an unknown word raises a
    ValueError that names the sentence's index.
    """
    src_vocab, tgt_vocab = _translator(net, vocabs)
    rows = _source_rows(sentences, src_vocab, net.config.max_len)
    check_positive_int(batch_size, "batch_size")
    device = next(net.parameters()).device
    budget = [min(default_max_len(len(row)), net.config.max_len) for row in rows]
    out = []
    for i in range(0, len(rows), batch_size):
        src = data.pad_rows(rows[i : i + batch_size], src_vocab.pad_id).to(device)
        ys = decoding.greedy_decode(net, src, max(budget[i : i + batch_size]), tgt_vocab.sos_id, tgt_vocab.eos_id)
        # Each sentence gets its own budget, as in translate_sentence, whatever else shares its batch.
        out += [" ".join(tgt_vocab.decode(row[:n])) for row, n in zip(ys.tolist(), budget[i : i + batch_size])]
    return out


def exact_match(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """The fraction of hypotheses equal to their reference, word for word."""
    if len(hypotheses) != len(references) or not references:
        raise ValueError(f"need as many hypotheses as references (> 0), got {len(hypotheses)} and {len(references)}")
    return sum(h.split() == r.split() for h, r in zip(hypotheses, references)) / len(references)


def evaluate(net: model.Transformer, vocabs: Vocabs, pairs: Sequence[tuple[str, str]]) -> Evaluation:
    """Greedy-decode the sources of `pairs`; exact match and sacrebleu corpus BLEU (0-100) against the targets."""
    import sacrebleu  # a dependency of the chapter only: imported when needed

    if not pairs:
        raise ValueError("pairs is empty: nothing to evaluate")
    for i, pair in enumerate(pairs):
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2 and all(isinstance(t, str) for t in pair)):
            raise ValueError(f"pairs[{i}]={pair!r} must be a (source, reference) pair of strings")
    references = [t for _, t in pairs]
    hypotheses = translate_batch(net, vocabs, [s for s, _ in pairs])
    bleu = sacrebleu.corpus_bleu(hypotheses, [references]).score
    return Evaluation(exact_match(hypotheses, references), bleu, hypotheses, references)


def train_translator(
    dataset: datasets.TranslationDataset | None = None,
    seed: int = 0,
    config: TranslatorConfig | None = None,
    eval_split: str = "valid",
    progress: bool = True,
    device: torch.device | str | None = None,
    **overrides: Any,
) -> TrainResult:
    """Train a Transformer on the generated corpus with the Noam schedule and label smoothing.

    Every `config.eval_every` steps the greedy exact match on `eval_split` ("valid" or "test") is
    recorded in `history.evals`; training stops once it reaches `config.target`. Keyword overrides
    change single fields of the config, e.g. train_translator(steps=50, d_model=32).
    """
    config = TranslatorConfig(**{**asdict(config or TranslatorConfig()), **overrides})
    if eval_split not in ("valid", "test"):
        raise ValueError(f"eval_split={eval_split!r} must be 'valid' or 'test'")
    dataset = datasets.make_dataset(seed) if dataset is None else dataset
    training.set_seed(seed)
    device = training.get_device() if device is None else torch.device(device)
    corpus = data.ParallelCorpus(dataset.train_pairs)
    net = build_model(corpus, config).to(device)
    use_fused_attention(net, on=True)  # training does not need the weights: use the fused kernel
    optimizer = torch.optim.Adam(net.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    scheduler = training.noam_scheduler(optimizer, config.d_model, config.warmup, config.lr_factor)
    loss_fn = training.LabelSmoothingLoss(len(corpus.tgt_vocab), config.smoothing, corpus.tgt_vocab.pad_id)
    eval_pairs = dataset.valid_pairs if eval_split == "valid" else dataset.test_pairs
    sources, references = [s for s, _ in eval_pairs], [t for _, t in eval_pairs]

    def score() -> float:
        return exact_match(translate_batch(net, corpus, sources), references)

    try:
        history = training.fit(
            net,
            corpus.batches(config.batch_size, shuffle=True, seed=seed, device=device),
            config.steps,
            optimizer,
            loss_fn,
            scheduler=scheduler,
            evaluate=score,
            eval_every=config.eval_every,
            target=config.target,
            progress=progress,
            accumulate=config.accumulate,
            precision=config.precision,
        )
    finally:
        use_fused_attention(net, on=False)
    return TrainResult(net, corpus, dataset, history, config)


def translate_sentence(net: model.Transformer, vocabs: Vocabs, sentence: str, beam_size: int = 1) -> Translation:
    """Translate one sentence (greedy, or beam search with beam_size > 1) and return its cross-attention.

    Words may be separated by spaces or not ("咖哥不喜欢他们" is segmented by longest match).
    Unknown words raise an UnknownWordsError (a ValueError) that names them.
    """
    src_vocab, tgt_vocab = _translator(net, vocabs)
    words = segment(sentence, src_vocab)
    longest = net.config.max_len
    if len(words) > longest:
        raise ValueError(f"the sentence has {len(words)} words; this model reads at most max_len={longest}")
    device = next(net.parameters()).device
    src = torch.tensor([src_vocab.encode(" ".join(words))], device=device)
    max_len = min(default_max_len(len(words)), longest)
    if beam_size == 1:
        ys = decoding.greedy_decode(net, src, max_len, tgt_vocab.sos_id, tgt_vocab.eos_id)
    else:
        ys = decoding.beam_search(net, src, beam_size, max_len, tgt_vocab.sos_id, tgt_vocab.eos_id)
    # One teacher-forced pass over the chosen tokens records every row of the cross-attention at once
    # (while decoding with the KV cache each step only sees its own row).
    attention = [m for m in net.modules() if isinstance(m, MultiHeadAttention)]
    saved = [m.attention for m in attention]
    try:
        for m in attention:
            m.attention = scaled_dot_product_attention  # the teaching path, which keeps the weights
        log_prob = float(decoding.sequence_log_prob(net, src, ys)[0])
        cross = torch.stack([w[0] for w in net.decoder.cross_attn_weights if w is not None]).cpu()
    finally:
        for m, attend in zip(attention, saved):
            m.attention = attend
    # Keep every token after <sos> up to <eos>, so that row i of the map stays with token i.
    tokens = tgt_vocab.decode(ys[0, 1:].tolist(), strip=False)
    tokens = tokens[: tokens.index(data.EOS)] if data.EOS in tokens else tokens
    return Translation(words, tokens, log_prob, cross[:, :, : len(tokens) + 1])


if __name__ == "__main__":  # the command line lives in transformer_course.cli.translate
    from transformer_course.cli.translate import main

    raise SystemExit(main())
