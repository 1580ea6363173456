"""Vocabularies and batches for whitespace-tokenised parallel text (post 1's TranslationCorpus, rebuilt).

A pair ("咖哥 喜欢 小冰", "KaGe likes XiaoBing") becomes three rows of ids:

    src     咖哥 喜欢 小冰                     (padded with <pad>)
    tgt_in  <sos> KaGe likes XiaoBing          the decoder's input: the target shifted right
    tgt_out KaGe likes XiaoBing <eos>          what each decoder position must predict

The source vocabulary starts with <pad> = 0 and the target one with <pad> = 0, <sos> = 1,
<eos> = 2, then the words in order of first appearance: the same ids as post 1's code.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import torch

from ._validate import check_positive_int, named_list

PAD, SOS, EOS = "<pad>", "<sos>", "<eos>"

# The five sentence pairs of post 1 (§4.1), in simplified characters; the post's stray leading
# space in " DL changed the world" is dropped (whitespace tokenisation ignores it anyway).
POST1_PAIRS = [
    ("咖哥 喜欢 小冰", "KaGe likes XiaoBing"),
    ("我 爱 学习 人工智能", "I love studying AI"),
    ("深度学习 改变 世界", "DL changed the world"),
    ("自然语言处理 很 强大", "NLP is powerful"),
    ("神经网络 非常 复杂", "Neural-networks are complex"),
]


def tokenize(sentence: str) -> list[str]:
    """Whitespace tokenisation: the corpora of this course are pre-segmented ("我 喜欢 你")."""
    if not isinstance(sentence, str):
        raise TypeError(f"sentence must be a str, got {type(sentence).__name__}")
    return sentence.split()


class Vocab:
    """A bijection between tokens and ids 0..len-1."""

    def __init__(self, tokens: Sequence[str]):
        if len(set(tokens)) != len(tokens):
            raise ValueError("tokens must be unique")
        self.itos = list(tokens)
        self.stoi = {token: i for i, token in enumerate(self.itos)}

    @classmethod
    def build(cls, sentences: Iterable[str], specials: Sequence[str] = (PAD,)) -> Vocab:
        """Specials first, then every word of `sentences` in order of first appearance."""
        tokens = list(specials)
        seen = set(tokens)
        for sentence in sentences:
            for word in tokenize(sentence):
                if word not in seen:
                    seen.add(word)
                    tokens.append(word)
        return cls(tokens)

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, token: str) -> bool:
        return token in self.stoi

    def __getitem__(self, token: str) -> int:
        return self.stoi[token]

    def __repr__(self) -> str:
        return f"Vocab({len(self)} tokens: {' '.join(self.itos[:8])}{' ...' if len(self) > 8 else ''})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocab) and self.itos == other.itos

    @property
    def pad_id(self) -> int:
        return self.stoi[PAD]

    @property
    def sos_id(self) -> int:
        return self.stoi[SOS]

    @property
    def eos_id(self) -> int:
        return self.stoi[EOS]

    def unknown(self, sentence: str) -> list[str]:
        """The words of `sentence` that are not in the vocabulary."""
        return [word for word in tokenize(sentence) if word not in self.stoi]

    def encode(self, sentence: str, add_sos: bool = False, add_eos: bool = False) -> list[int]:
        """Ids of the words of `sentence`; a ValueError lists any unknown words."""
        missing = self.unknown(sentence)
        if missing:
            raise ValueError(f"unknown word(s) {named_list(missing)}: not in the vocabulary")
        ids = [self.stoi[word] for word in tokenize(sentence)]
        if add_sos:
            ids.insert(0, self.sos_id)
        if add_eos:
            ids.append(self.eos_id)
        return ids

    def decode(self, ids: Iterable[int], strip: bool = True) -> list[str]:
        """Tokens of `ids`; with strip, <sos> and <pad> are dropped and decoding stops at <eos>."""
        words = []
        for i in ids:
            i = int(i)
            if not 0 <= i < len(self):
                raise ValueError(f"id {i} is outside the vocabulary [0, {len(self) - 1}]")
            word = self.itos[i]
            if strip and word == EOS:
                break
            if not (strip and word in (SOS, PAD)):
                words.append(word)
        return words


@dataclass
class Batch:
    """src (B, S), tgt_in (B, T) and tgt_out (B, T) token ids."""

    src: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor

    def to(self, device: torch.device | str) -> Batch:
        return Batch(self.src.to(device), self.tgt_in.to(device), self.tgt_out.to(device))


def pad_rows(rows: Sequence[Sequence[int]], pad_id: int, length: int | None = None) -> torch.Tensor:
    """(len(rows), length) LongTensor, each row right-padded with pad_id (length: the longest row)."""
    longest = max(len(r) for r in rows)
    length = longest if length is None else length
    if length < longest:
        raise ValueError(f"length={length} is shorter than the longest row ({longest} tokens)")
    return torch.tensor([list(r) + [pad_id] * (length - len(r)) for r in rows], dtype=torch.long)


def make_batch(
    pairs: Sequence[tuple[str, str]],
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    src_len: int | None = None,
    tgt_len: int | None = None,
) -> Batch:
    """Encode and pad `pairs`; src_len / tgt_len fix the padded lengths (default: the batch's longest)."""
    if not pairs:
        raise ValueError("pairs is empty: a batch needs at least one sentence pair")
    src = [src_vocab.encode(s) for s, _ in pairs]
    tgt = [tgt_vocab.encode(t, add_sos=True, add_eos=True) for _, t in pairs]
    return Batch(
        pad_rows(src, src_vocab.pad_id, src_len),
        pad_rows([t[:-1] for t in tgt], tgt_vocab.pad_id, tgt_len),
        pad_rows([t[1:] for t in tgt], tgt_vocab.pad_id, tgt_len),
    )


class BatchIterator:
    """Iterates over shuffled batches of a corpus; every new `iter()` reshuffles (deterministically from seed)."""

    def __init__(
        self,
        corpus: ParallelCorpus,
        batch_size: int,
        shuffle: bool = True,
        seed: int = 0,
        device: torch.device | str | None = None,
    ):
        self.corpus = corpus
        self.batch_size = check_positive_int(batch_size, "batch_size")
        self.shuffle = shuffle
        self.generator = torch.Generator().manual_seed(seed)
        self.device = device

    def __len__(self) -> int:
        return -(-len(self.corpus) // self.batch_size)

    def __iter__(self) -> Iterator[Batch]:
        n = len(self.corpus)
        order = torch.randperm(n, generator=self.generator).tolist() if self.shuffle else list(range(n))
        for i in range(0, n, self.batch_size):
            batch = self.corpus.batch(order[i : i + self.batch_size])
            yield batch if self.device is None else batch.to(self.device)


class ParallelCorpus:
    """Sentence pairs (source, target) with their vocabularies.

    shared_vocab=True builds one vocabulary for both sides (needed by share_embeddings=True).
    """

    def __init__(self, pairs: Sequence[tuple[str, str]], shared_vocab: bool = False):
        if not pairs:
            raise ValueError("pairs is empty: a corpus needs at least one sentence pair")
        for i, pair in enumerate(pairs):
            if len(pair) != 2 or not all(isinstance(s, str) and s.strip() for s in pair):
                raise ValueError(f"pairs[{i}]={pair!r} must be two non-empty strings (source, target)")
        self.pairs = [(src, tgt) for src, tgt in pairs]
        sources, targets = [s for s, _ in self.pairs], [t for _, t in self.pairs]
        if shared_vocab:
            self.src_vocab = self.tgt_vocab = Vocab.build(sources + targets, specials=(PAD, SOS, EOS))
        else:
            self.src_vocab = Vocab.build(sources, specials=(PAD,))
            self.tgt_vocab = Vocab.build(targets, specials=(PAD, SOS, EOS))

    def __len__(self) -> int:
        return len(self.pairs)

    @property
    def max_src_len(self) -> int:
        return max(len(tokenize(s)) for s, _ in self.pairs)

    @property
    def max_tgt_len(self) -> int:
        """The longest target in tokens, without <sos>/<eos>."""
        return max(len(tokenize(t)) for _, t in self.pairs)

    def batch(self, indices: Sequence[int] | None = None) -> Batch:
        """The pairs at `indices` (default: all) as one padded Batch."""
        indices = range(len(self)) if indices is None else indices
        return make_batch([self.pairs[i] for i in indices], self.src_vocab, self.tgt_vocab)

    def batches(
        self, batch_size: int, shuffle: bool = True, seed: int = 0, device: torch.device | str | None = None
    ) -> BatchIterator:
        return BatchIterator(self, batch_size, shuffle, seed, device)

    def encode_source(self, sentences: Sequence[str]) -> torch.Tensor:
        """(B, S) source ids for `sentences`, padded; unknown words raise a ValueError naming them."""
        return pad_rows([self.src_vocab.encode(s) for s in sentences], self.src_vocab.pad_id)
