"""Chapters 14 and 15: a language whose limit is known (已知极限的语言).

A language model is trained to lower a cross-entropy, but on real text nobody knows how low it can go.
This module defines a language where the answer is exact: the English side of the translator's
grammar (`datasets.english`: agreement, do-support, reflexives, questions, the past tense), every
distinct sentence once, N = 2,816 sentences, each drawn with probability 1/N.

No model can give the sentences of a language more probability than the true distribution does, on
average: the cross-entropy is at least the entropy (Gibbs' inequality). For a uniform language the
entropy is log N nats per sentence. A language model predicts a sentence token by token, its words and
then <eos>, so over the whole language the floor per predicted token is

    floor = N · log N / (number of predicted tokens in all N sentences) = log N / (mean length + 1).

Measured on every sentence of the language once, a model's loss is exactly its cross-entropy against
the uniform distribution, and its distance to the floor is KL(uniform ‖ model) per token: zero only for
the perfect model. `Language.corrupt` makes near-misses (one word swapped for a similar one, the result
outside the language) for chapter 15's grammaticality task.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from . import datasets
from .data import Vocab, pad_rows, tokenize

PAD, BOS, EOS, CLS, SEP, MASK = "<pad>", "<bos>", "<eos>", "<cls>", "<sep>", "<mask>"
SPECIALS = (PAD, BOS, EOS, CLS, SEP, MASK)

# Words a careless speaker confuses: `corrupt` swaps a word for another of its group. Each swap keeps the
# sentence's shape, so only the relations between words (agreement, case, tense) tell the two apart.
CONFUSABLE = (
    ("I", "me"), ("he", "him"), ("she", "her"), ("we", "us"), ("they", "them"),
    ("myself", "yourself", "yourselves", "himself", "herself", "ourselves", "themselves"),
    ("do", "does", "did"),
    ("like", "likes"), ("hate", "hates"), ("love", "loves"), ("miss", "misses"), ("know", "knows"),
    ("trust", "trusts"), ("help", "helps", "helped"), ("see", "sees", "saw"), ("meet", "meets", "met"),
)  # fmt: skip


@functools.cache
def english_sentences() -> tuple[str, ...]:
    """Every distinct English sentence of the translator's grammar, sorted: the language's N sentences.

    Different Chinese sentences can share one English translation (你 and 你们 are both "you"), so the
    English language is smaller than the 4,224 sentence pairs.
    """
    triples = datasets.all_triples()
    return tuple(sorted({e.tgt for t in triples for e in datasets.examples_of(t)}))


@dataclass(frozen=True)
class Language:
    """A finite language sampled uniformly, with one vocabulary for GPT (<bos>, <eos>) and BERT (<cls>, <mask>).

    sentences: the N sentences (whitespace-tokenised); vocab: the specials then every word.
    """

    sentences: tuple[str, ...]
    vocab: Vocab

    @classmethod
    def english(cls) -> Language:
        """The English side of the translator's grammar (N = 2,816)."""
        sentences = english_sentences()
        return cls(sentences, Vocab.build(sentences, specials=SPECIALS))

    def __len__(self) -> int:
        return len(self.sentences)

    def __contains__(self, sentence: object) -> bool:
        return isinstance(sentence, str) and " ".join(sentence.split()) in self._members

    @functools.cached_property
    def _members(self) -> frozenset[str]:
        return frozenset(self.sentences)

    def __repr__(self) -> str:
        return f"Language({len(self)} sentences, {len(self.vocab)} tokens, floor {self.floor:.4f} nats/token)"

    # ------------------------------------------------------------------ the floor

    @property
    def entropy_per_sentence(self) -> float:
        """log N nats: the entropy of a sentence drawn uniformly."""
        return math.log(len(self))

    @property
    def tokens_per_sentence(self) -> float:
        """The mean number of tokens a language model predicts per sentence: its words and <eos>."""
        return sum(len(tokenize(s)) + 1 for s in self.sentences) / len(self)

    @property
    def floor(self) -> float:
        """The lowest loss per predicted token any model can reach over the language: log N / tokens per sentence."""
        return self.entropy_per_sentence / self.tokens_per_sentence

    # ------------------------------------------------------------------ sampling and encoding

    def sample(self, n: int, generator: torch.Generator | None = None) -> list[str]:
        """n sentences drawn uniformly with replacement (reproducible with a seeded `generator`)."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"n={n!r} must be a non-negative int")
        picks = torch.randint(len(self), (n,), generator=generator)
        return [self.sentences[i] for i in picks.tolist()]

    def encode_lm(self, sentences: Sequence[str]) -> torch.Tensor:
        """(B, 2 + longest) ids for a language model: <bos> words <eos>, right-padded with <pad>.

        The model reads ids[:, :-1] and predicts ids[:, 1:]: the same row shifted by one position.
        """
        rows = [[self.vocab[BOS], *self.vocab.encode(s), self.vocab[EOS]] for s in sentences]
        return pad_rows(rows, self.vocab.pad_id)

    def encode_mlm(self, sentences: Sequence[str]) -> torch.Tensor:
        """(B, 2 + longest) ids for BERT: <cls> words <sep>, right-padded with <pad>."""
        rows = [[self.vocab[CLS], *self.vocab.encode(s), self.vocab[SEP]] for s in sentences]
        return pad_rows(rows, self.vocab.pad_id)

    def decode(self, ids: Sequence[int] | torch.Tensor) -> str:
        """The words of one row of ids: specials dropped, cut at the first <eos> (or <sep>)."""
        words = []
        for i in ids.tolist() if isinstance(ids, torch.Tensor) else ids:
            token = self.vocab.itos[int(i)]
            if token in (EOS, SEP):
                break
            if token not in SPECIALS:
                words.append(token)
        return " ".join(words)

    @property
    def special_ids(self) -> tuple[int, ...]:
        return tuple(self.vocab[s] for s in SPECIALS)

    # ------------------------------------------------------------------ near-misses

    def corrupt(self, sentence: str, generator: torch.Generator | None = None) -> str:
        """`sentence` with one word swapped for a confusable one so that the result is *not* in the language.

        "he likes her" -> "he like her", "him likes her", "he likes she", ...; drawn uniformly among
        every such swap (reproducible with a seeded `generator`).
        """
        words = tokenize(sentence)
        options = []
        for position, word in enumerate(words):
            for group in CONFUSABLE:
                if word in group:
                    for other in group:
                        changed = " ".join([*words[:position], other, *words[position + 1 :]])
                        if other != word and changed not in self:
                            options.append(changed)
        if not options:
            raise ValueError(f"no one-word swap takes {sentence!r} out of the language")
        return options[int(torch.randint(len(options), (1,), generator=generator))]

    def labelled(
        self, sentences: Sequence[str], generator: torch.Generator | None = None
    ) -> tuple[list[str], list[int]]:
        """A balanced grammaticality task: sentence i is kept (label 1) when i is even, else corrupted (label 0)."""
        texts = [s if i % 2 == 0 else self.corrupt(s, generator) for i, s in enumerate(sentences)]
        return texts, [1 - i % 2 for i in range(len(sentences))]
