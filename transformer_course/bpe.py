"""Chapter 17: byte-level byte-pair encoding (BPE), GPT-2's tokenizer, trained from scratch.

    tok = tc.BPETokenizer.train(text, vocab_size=1024, special_tokens=["<|endoftext|>"])
    ids = tok.encode("Attention is all you need. 注意力")  # list[int]
    tok.decode(ids)                                          # "Attention is all you need. 注意力" again

Text is first cut into pre-tokens by GPT-2's regular expression (``GPT2_PATTERN``: contractions, a letter run
with its leading space, a digit run, a punctuation run, spaces), so that no token ever spans two words. Each
pre-token is a sequence of UTF-8 bytes; the 256 bytes are the first 256 tokens, so every string encodes, and
training repeatedly merges the most frequent adjacent pair of tokens into a new one.

Ids: the 256 byte tokens first, in GPT-2's byte order (the 188 bytes GPT-2 treats as printable, ``!`` to ``~``,
``¡`` to ``¬`` and ``®`` to ``ÿ``, then the other 68; see ``BYTE_ORDER``), then the special tokens, then one
token per merge. Neither reference numbers them quite so: GPT-2 puts its one special token, ``<|endoftext|>``,
last (50256), and Hugging Face ``tokenizers`` puts special tokens first (from 0) and the bytes after them; a
merged token has the same id here as in ``tokenizers``. Training is deterministic: the pair with the highest
count wins, and a tie goes to the smallest pair of ids ``(a, b)``, the rule of ``tokenizers``' BpeTrainer, so
both learn the same merges from the same text.
"""

from __future__ import annotations

import heapq
import json
import operator
from collections import Counter, defaultdict
from collections.abc import Iterable
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING

import regex

if TYPE_CHECKING:  # a test and chapter dependency, not the package's
    from tokenizers import Tokenizer

# GPT-2's pre-tokenizer (``tokenizers.pre_tokenizers.ByteLevel(use_regex=True)`` uses the same one).
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
_PRETOKEN = regex.compile(GPT2_PATTERN)

# GPT-2's order of the 256 bytes: the printable ones, then the others (whitespace, control bytes, ...).
_PRINTABLE = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
BYTE_ORDER = _PRINTABLE + [b for b in range(256) if b not in _PRINTABLE]  # BYTE_ORDER[id] = byte value
FORMAT = "transformer_course.bpe/1"


def _utf8(text: str, name: str) -> bytes:
    """text as UTF-8 bytes; a surrogate code point (left by a broken decode) has no UTF-8 form, so it is refused.

    Python's str never joins a high and a low surrogate into one character: side by side they are refused too.
    """
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise ValueError(
            f"{name} holds a surrogate {text[err.start]!r} at position {err.start}: it is not valid Unicode "
            "text and has no UTF-8 bytes (decode bytes with errors='replace' before tokenizing)"
        ) from None


def pretokenize(text: str) -> list[str]:
    """Cut text into GPT-2's pre-tokens: ``"Hi there!!"`` -> ``["Hi", " there", "!!"]``. Merges never cross them."""
    return _PRETOKEN.findall(text)


def count_pairs(words: dict[tuple[int, ...], int]) -> Counter:
    """How often each adjacent pair of tokens occurs, inside words only, each word weighted by its count."""
    counts: Counter = Counter()
    for word, n in words.items():
        for pair in pairwise(word):
            counts[pair] += n
    return counts


def merge(ids: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """Replace each occurrence of ``pair`` in ids by ``new_id``, left to right: (a a a) with (a a) -> (aa a)."""
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


class BPETokenizer:
    """A trained byte-level BPE: ``vocab[id]`` is the bytes of token id; ``merges`` in the order learned.

    Build one with ``BPETokenizer.train`` or ``BPETokenizer.load``, or from merges already learned,
    ``BPETokenizer(merges, special_tokens)`` (the first k merges of a training give its k-merge tokenizer).
    ``special_tokens`` maps each special token's text to its id; ``encode`` produces them only when called
    with ``allow_special=True``.
    """

    def __init__(self, merges: Iterable[tuple[int, int]] = (), special_tokens: Iterable[str] = ()):
        specials = _check_specials(special_tokens)
        self.vocab: list[bytes] = [bytes([b]) for b in BYTE_ORDER] + [s.encode("utf-8") for s in specials]
        self.special_tokens = {s: 256 + i for i, s in enumerate(specials)}
        self.merges: list[tuple[int, int]] = []
        self.ranks: dict[tuple[int, int], tuple[int, int]] = {}  # pair -> (rank, id of the merged token)
        self._ids = {b: i for i, b in enumerate(self.vocab[:256])}  # bytes -> id, for tokens made by merges
        self._byte_id = [0] * 256
        for i, b in enumerate(BYTE_ORDER):
            self._byte_id[b] = i
        self._cache: dict[str, list[int]] = {}
        for a, b in merges:
            self._add_merge(a, b)

    def _add_merge(self, a: int, b: int) -> int:
        """Record the merge (a, b); its token is new unless two earlier tokens already spell the same bytes."""
        for name, i in (("merge's first id", a), ("merge's second id", b)):
            if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < len(self.vocab):
                raise ValueError(f"{name} {i!r} is not a token id in [0, {len(self.vocab) - 1}]")
            if 256 <= i < 256 + len(self.special_tokens):
                raise ValueError(f"{name} {i} is a special token, which merges never touch")
        joined = self.vocab[a] + self.vocab[b]
        if joined not in self._ids:  # tokenizers' trainer does the same: ("a", "bc") after ("ab", "c")
            self._ids[joined] = len(self.vocab)
            self.vocab.append(joined)
        self.ranks[(a, b)] = (len(self.merges), self._ids[joined])
        self.merges.append((a, b))
        return self._ids[joined]

    def __len__(self) -> int:
        return len(self.vocab)

    def __repr__(self) -> str:
        specials = list(self.special_tokens)
        return f"BPETokenizer(vocab_size={len(self)}, merges={len(self.merges)}, special_tokens={specials})"

    @classmethod
    def train(cls, texts: str | Iterable[str], vocab_size: int, special_tokens: Iterable[str] = ()) -> BPETokenizer:
        """Learn merges from texts until the vocabulary holds vocab_size tokens (or no pair is left).

        Each pair's count is kept up to date after every merge, touching only the words that contain the
        merged pair, and a heap gives the best pair: (highest count, then smallest (a, b)).
        """
        tok = cls(special_tokens=special_tokens)
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int):
            raise TypeError(f"vocab_size must be an int, got {type(vocab_size).__name__}")
        if vocab_size < len(tok):
            raise ValueError(f"vocab_size={vocab_size} must be at least 256 bytes + {len(tok) - 256} special tokens")
        word_counts = Counter(w for text in _check_texts(texts) for w in pretokenize(text))
        words = [[tok._byte_id[b] for b in w.encode("utf-8")] for w in word_counts]
        freq = list(word_counts.values())
        counts: Counter = Counter()
        where = defaultdict(set)  # pair -> indices of the words holding it (a superset after merges)
        for w, (word, n) in enumerate(zip(words, freq)):
            for pair in pairwise(word):
                counts[pair] += n
                where[pair].add(w)
        heap = [(-n, pair) for pair, n in counts.items()]
        heapq.heapify(heap)
        while len(tok) < vocab_size and heap:
            n, pair = heapq.heappop(heap)
            if -n != counts[pair] or n == 0:  # a stale entry: the pair's count changed since it was pushed
                continue
            new_id = tok._add_merge(*pair)
            changed = set()
            for w in where.pop(pair):
                word = words[w]
                new_word = merge(word, pair, new_id)
                if len(new_word) == len(word):
                    continue
                for p in pairwise(word):  # take the old word's pairs out, put the new word's in
                    counts[p] -= freq[w]
                    changed.add(p)
                for p in pairwise(new_word):
                    counts[p] += freq[w]
                    where[p].add(w)
                    changed.add(p)
                words[w] = new_word
            for p in changed:
                if counts[p] > 0:
                    heapq.heappush(heap, (-counts[p], p))
        return tok

    def _encode_word(self, word: str) -> list[int]:
        """One pre-token: its bytes, then the learned merges, the earliest-learned pair first, until none applies."""
        ids = [self._byte_id[b] for b in word.encode("utf-8")]
        while len(ids) > 1:
            pair = min(pairwise(ids), key=lambda p: self.ranks.get(p, (len(self.ranks), 0)))
            if pair not in self.ranks:
                break
            ids = merge(ids, pair, self.ranks[pair][1])
        return ids

    def encode(self, text: str, allow_special: bool = False) -> list[int]:
        """Token ids of text. "<|endoftext|>" written in text is plain text unless allow_special=True."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        if not isinstance(allow_special, bool):
            raise TypeError(f"allow_special must be a bool, got {type(allow_special).__name__}")
        _utf8(text, "text")
        pieces = [text]
        if allow_special and self.special_tokens:
            # The capturing group keeps the special tokens in the split: odd positions are specials.
            names = sorted(self.special_tokens, key=len, reverse=True)  # longest first: "<a><b>" before "<a>"
            pieces = regex.split("(" + "|".join(regex.escape(s) for s in names) + ")", text)
        ids: list[int] = []
        for i, piece in enumerate(pieces):
            if i % 2:
                ids.append(self.special_tokens[piece])
                continue
            for word in pretokenize(piece):
                if word not in self._cache:
                    self._cache[word] = self._encode_word(word)
                ids.extend(self._cache[word])
        return ids

    def decode(self, ids: Iterable[int]) -> str:
        """The text of token ids: their bytes joined, then decoded once (a character may span two tokens)."""
        if isinstance(ids, str | bytes) or not isinstance(ids, Iterable):
            raise TypeError(f"ids must be an iterable of int token ids, got {type(ids).__name__}")
        data = bytearray()
        for i in ids:
            if isinstance(i, bool):
                raise TypeError("ids must hold int token ids, got a bool")
            try:
                i = operator.index(i)  # int, numpy integer, 0-d integer tensor
            except TypeError:
                raise TypeError(f"ids must hold int token ids, got {type(i).__name__}") from None
            if not 0 <= i < len(self.vocab):
                raise ValueError(f"ids holds {i}, not a token id in [0, {len(self.vocab) - 1}]")
            data += self.vocab[i]
        # Bytes cut in the middle of a character (a prefix of a model's output) show as U+FFFD, as in GPT-2.
        return data.decode("utf-8", errors="replace")

    def save(self, path: str | Path) -> None:
        """Write the tokenizer as plain JSON: its format, special tokens and merges (the vocabulary follows)."""
        merges = [[a, b] for a, b in self.merges]
        state = {
            "format": FORMAT,
            "pattern": GPT2_PATTERN,
            "special_tokens": list(self.special_tokens),
            "merges": merges,
        }
        Path(path).write_text(json.dumps(state, ensure_ascii=False), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> BPETokenizer:
        """Read a tokenizer written by save (never code: JSON only)."""
        state = json.loads(Path(path).read_text(encoding="utf-8"))
        if not isinstance(state, dict) or state.get("format") != FORMAT:
            raise ValueError(f"path={str(path)!r} is not a tokenizer saved by BPETokenizer.save ({FORMAT})")
        if state.get("pattern") != GPT2_PATTERN:
            raise ValueError(f"path={str(path)!r} was saved with another pre-tokenizer pattern")
        return cls(merges=[tuple(m) for m in state["merges"]], special_tokens=state["special_tokens"])


def _check_texts(texts: object) -> Iterable[str]:
    """texts as an iterable of str, each checked for surrogates as it is read."""
    if isinstance(texts, str):
        texts = [texts]
    if isinstance(texts, bytes) or not isinstance(texts, Iterable):
        raise TypeError(f"texts must be a str or an iterable of str, got {type(texts).__name__}")
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"texts must hold str, got {type(text).__name__} at position {i}")
        _utf8(text, f"texts[{i}]")
        yield text


def _check_specials(special_tokens: object) -> list[str]:
    if isinstance(special_tokens, str) or not isinstance(special_tokens, Iterable):
        raise TypeError(f"special_tokens must be an iterable of str, got {type(special_tokens).__name__}")
    specials = list(special_tokens)
    for s in specials:
        if not isinstance(s, str) or not s:
            raise ValueError(f"special_tokens must hold non-empty str, got {s!r}")
        _utf8(s, "special_tokens")
    if len(set(specials)) != len(specials):
        raise ValueError(f"special_tokens={specials} holds a token twice")
    return specials


def train_huggingface(texts: str | Iterable[str], vocab_size: int, special_tokens: Iterable[str] = ()) -> Tokenizer:
    """The reference: Hugging Face ``tokenizers``' byte-level BPE trained with BPETokenizer.train's settings.

    Needs the ``tokenizers`` package (a test and chapter dependency, not the package's); downloads nothing.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    hf = Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    hf.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(special_tokens),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # all 256 bytes, seen in the text or not
        min_frequency=0,
        show_progress=False,
    )
    hf.train_from_iterator([texts] if isinstance(texts, str) else texts, trainer)
    return hf


def huggingface_merges(hf: Tokenizer) -> list[tuple[bytes, bytes]]:
    """A trained ``tokenizers`` byte-level BPE's merges as pairs of bytes (it writes bytes as GPT-2's characters)."""
    char_to_byte = {chr(b): b for b in _PRINTABLE}
    char_to_byte.update({chr(256 + i): b for i, b in enumerate(BYTE_ORDER[len(_PRINTABLE) :])})
    merges = json.loads(hf.to_str())["model"]["merges"]
    pairs = [m.split(" ") if isinstance(m, str) else m for m in merges]
    return [(bytes(char_to_byte[c] for c in a), bytes(char_to_byte[c] for c in b)) for a, b in pairs]
